"""The alerts (issue 31, item 5): charts/backscroll/files/alerts.yaml is the one home of the rules.
The chart ships it as a PrometheusRule, docs/alerts.md has a runbook section per alert and its
runbook_url points there, tests/monitoring/alerts_test.yaml has a `promtool test rules` case per
alert, and promtool (pinned, built from the Go module proxy into a cache outside the repository
by tests/monitoring/build-promtool.sh, `make promtool-build`) checks and runs them. Every metric
an expression reads is one the code exports."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from backscroll_operator.metrics import Metrics
from tests.deploy.conftest import CHART, ROOT, of_kind

ALERTS = CHART / "files/alerts.yaml"
PROMTOOL_TESTS = ROOT / "tests/monitoring/alerts_test.yaml"
RUNBOOKS = ROOT / "docs/alerts.md"


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def alert_names() -> list[str]:
    """Each alert once, in the file's order (an alert may have more than one rule)."""
    return list(dict.fromkeys(r["alert"] for r in rules()))


@pytest.fixture(scope="session")
def promtool() -> str:
    done = subprocess.run(["bash", str(ROOT / "tests/monitoring/build-promtool.sh")], capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        pytest.fail(f"promtool could not be built (make promtool-build):\n{done.stderr[-3000:]}", pytrace=False)
    return done.stdout.strip().splitlines()[-1]


def test_the_issue_asks_for_these_alerts():
    assert set(alert_names()) == {
        "BackscrollIndexNotReady", "BackscrollMigrationFailing", "BackscrollRolloutStuck", "BackscrollCoverageFalling",
        "BackscrollBackfillStalled", "BackscrollWorkerLagging", "BackscrollApiErrors", "BackscrollApiLatency",
        "BackscrollOperatorPassesFailing", "BackscrollOperatorNoLeader"}


def test_every_alert_has_a_runbook_section_it_links_to():
    sections = re.findall(r"^## (\w+)$", RUNBOOKS.read_text(), re.M)
    assert sections == alert_names(), "docs/alerts.md: one section per alert, in the rule file's order"
    for rule in rules():
        assert rule["annotations"]["runbook_url"].endswith(f"/docs/alerts.md#{rule['alert'].lower()}")
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]


def test_every_alert_has_a_promtool_test():
    tests = yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
    assert [t["name"] for t in tests] == alert_names()
    for test in tests:
        fired = [case for case in test["alert_rule_test"] if case["exp_alerts"]]
        quiet = [case for case in test["alert_rule_test"] if not case["exp_alerts"]]
        assert fired and quiet and {c["alertname"] for c in test["alert_rule_test"]} == {test["name"]}
        # An alert of several rules tells them apart by `signal`, and its test fires each of them.
        signals = [r["labels"].get("signal") for r in rules() if r["alert"] == test["name"]]
        if len(signals) > 1:
            assert None not in signals and len(set(signals)) == len(signals), test["name"]
            assert {a["exp_labels"].get("signal") for case in fired for a in case["exp_alerts"]} == set(signals)


def _exported() -> set[str]:
    names = {m.name for m in Metrics().registry.collect()}
    # the API's, declared in backscroll/app.py and backscroll/api/deps.py, and the worker's, in
    # backscroll/embeddings/metrics.py (prometheus_client adds _total)
    for path in ("backscroll/app.py", "backscroll/api/deps.py", "backscroll/embeddings/metrics.py"):
        names |= set(re.findall(r'(?:Counter|Histogram|Gauge)\(\s*"(backscroll_\w+?)(?:_total)?"',
                                (ROOT / path).read_text()))
    return names


def test_every_metric_an_alert_reads_is_exported():
    exported = _exported()
    for rule in rules():
        for metric in re.findall(r"\b(backscroll_\w+)", rule["expr"]):
            base = re.sub(r"_(total|bucket|sum|count)$", "", metric)
            assert base in exported, f"{rule['alert']} reads {metric}, which nothing exports"


def test_the_condition_gauge_follows_each_conditions_status_and_reason():
    metrics = Metrics()
    value = metrics.registry.get_sample_value
    metrics.index("team", "search", {"conditions": [
        {"type": "Ready", "status": "False", "reason": "ApiNotReady"},
        {"type": "MigrationsApplied", "status": "True", "reason": "Succeeded"}]})
    labels = {"namespace": "team", "name": "search"}
    assert value("backscroll_searchindex_condition", {**labels, "type": "Ready", "reason": "ApiNotReady"}) == 0
    assert value("backscroll_searchindex_condition", {**labels, "type": "MigrationsApplied", "reason": "Succeeded"}) == 1
    metrics.index("team", "search", {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]})
    assert value("backscroll_searchindex_condition", {**labels, "type": "Ready", "reason": "ApiNotReady"}) is None
    assert value("backscroll_searchindex_condition", {**labels, "type": "Ready", "reason": "Ready"}) == 1
    metrics.forget("team", "search")
    assert not [s for m in metrics.registry.collect() for s in m.samples if s.name == "backscroll_searchindex_condition"]


def test_the_chart_ships_the_rule_file_as_a_prometheusrule(render):
    assert not of_kind(render(), "PrometheusRule"), "off by default: the CRD may not exist"
    (rule,) = of_kind(render(sets=("monitoring.prometheusRule.enabled=true",
                                   "monitoring.prometheusRule.labels.release=prom")), "PrometheusRule")
    assert rule["spec"] == {"groups": yaml.safe_load(ALERTS.read_text())["groups"]}
    assert rule["metadata"]["labels"]["release"] == "prom"


def test_promtool_checks_the_rules_and_runs_a_test_per_alert(promtool):
    check = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules())} rules found" in check.stdout + check.stderr
    done = subprocess.run([promtool, "test", "rules", str(PROMTOOL_TESTS)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("mutant", ["never fires", "no for"])
def test_each_rules_promtool_test_fails_on_a_broken_rule(promtool, tmp_path, mutant):
    """The tests bite: a rule that never fires, or that fires at once instead of after its `for`,
    fails its promtool test, rule by rule."""
    (tmp_path / "charts/backscroll/files").mkdir(parents=True)
    (tmp_path / "tests/monitoring").mkdir(parents=True)
    test_file = tmp_path / "tests/monitoring/alerts_test.yaml"
    test_file.write_text(PROMTOOL_TESTS.read_text())
    source = yaml.safe_load(ALERTS.read_text())
    survivors = []
    for g, group in enumerate(source["groups"]):
        for r, rule in enumerate(group["rules"]):
            broken = yaml.safe_load(ALERTS.read_text())
            if mutant == "never fires":
                broken["groups"][g]["rules"][r]["expr"] = "vector(0) > 1"
            else:
                del broken["groups"][g]["rules"][r]["for"]
            (tmp_path / "charts/backscroll/files/alerts.yaml").write_text(yaml.safe_dump(broken))
            done = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True,
                                  timeout=120)
            if done.returncode == 0:
                survivors.append(f"{rule['alert']} {rule.get('labels', {}).get('signal', '')}".strip())
    assert survivors == [], f"promtool tests pass with these rules broken ({mutant})"


DASHBOARD = CHART / "files/dashboard.json"


def test_the_dashboard_reads_only_exported_metrics_and_ships_for_the_sidecar(render):
    import json

    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "backscroll-overview"
    exported = _exported()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        for metric in re.findall(r"\b(backscroll_\w+)", expr):
            assert re.sub(r"_(total|bucket|sum|count)$", "", metric) in exported, metric
    assert not of_kind(render(), "ConfigMap")
    (configmap,) = of_kind(render(sets=("monitoring.grafanaDashboard.enabled=true",)), "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["backscroll.json"]) == dashboard


def test_the_api_podmonitor_scrapes_the_api_pods_with_an_admin_token(render, helm):
    from backscroll_operator import rollout
    from backscroll_operator.builders import api_deployment
    from backscroll_operator.names import Owner
    from backscroll_operator.spec import parse

    (monitor,) = of_kind(render(sets=("monitoring.apiPodMonitor.enabled=true",
                                      "monitoring.apiPodMonitor.tokenSecret.name=backscroll-admin")), "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": "backscroll-admin", "key": "token"}}
    # What the operator builds: the API pods carry the selected labels and name the scraped port.
    spec = parse({"image": "i", "database": {"secretRef": {"name": "db"}}})
    deployment = api_deployment(Owner("search", "team", "uid"), spec,
                                rollout.plan(spec, rollout.Observed(migrated=True, backfilled=frozenset())))
    pod = deployment["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert endpoint["port"] in [p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    from tests.deploy.conftest import run
    done = run(helm, "template", "rel", str(CHART), "--set", "monitoring.apiPodMonitor.enabled=true")
    assert done.returncode != 0 and "needs one" in done.stderr


def test_the_worker_podmonitor_scrapes_the_worker_pods_health_port_with_an_admin_token(render, helm):
    """The worker's /metrics is on its health port, behind an admin token like the API's."""
    from backscroll.embeddings.metrics import WorkerMetrics
    from backscroll_operator.builders import worker_deployment
    from tests.operator.test_builders import EXTERNAL, OWNER, parse, steady

    assert not of_kind(render(), "PodMonitor"), "off by default: the CRD may not exist"
    (monitor,) = of_kind(render(sets=("monitoring.workerPodMonitor.enabled=true",
                                      "monitoring.workerPodMonitor.tokenSecret.name=backscroll-admin",
                                      "monitoring.workerPodMonitor.interval=15s",
                                      "monitoring.workerPodMonitor.labels.release=prom")), "PodMonitor")
    assert monitor["metadata"]["name"].endswith("-worker") and monitor["metadata"]["labels"]["release"] == "prom"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["path"], endpoint["interval"]) == ("/metrics", "15s")
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": "backscroll-admin", "key": "token"}}
    # What the operator builds: the worker pods carry the selected labels and name the scraped port,
    # the one the health server (and so /metrics) listens on.
    spec = parse(EXTERNAL)
    deployment = worker_deployment(OWNER, spec, steady(spec))
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    (port,) = [p for p in container["ports"] if p["name"] == endpoint["port"]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert str(port["containerPort"]) == env["BACKSCROLL_WORKER_HEALTH_PORT"]
    # Series carry the SearchIndex's name (what BackscrollWorkerLagging groups by) from the pod's label.
    assert endpoint["relabelings"] == [{"sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
                                        "targetLabel": "name"}]
    assert labels["app.kubernetes.io/instance"] == OWNER.name
    # The lag rule reads a series the worker exports, by the labels it groups by.
    lag = [r for r in rules() if "backscroll_worker_outbox_oldest_due_seconds" in r["expr"]]
    assert lag and all("(namespace, name, model)" in r["expr"] for r in lag)
    assert "backscroll_worker_outbox_oldest_due_seconds" in {m.name for m in WorkerMetrics().registry.collect()}

    from tests.deploy.conftest import run
    done = run(helm, "template", "rel", str(CHART), "--set", "monitoring.workerPodMonitor.enabled=true")
    assert done.returncode != 0 and "workerPodMonitor.tokenSecret.name" in done.stderr
    done = run(helm, "template", "rel", str(CHART), "--set", "monitoring.workerPodMonitor.intervals=1m")
    assert done.returncode != 0, "the values schema refuses an unknown key"
