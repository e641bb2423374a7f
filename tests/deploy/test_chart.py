"""charts/backscroll through the real helm: lint, render, validate what it renders, and refuse bad values."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.deploy.conftest import CHART, EXAMPLES, OLDEST_KUBERNETES, of_kind, run
from tests.deploy.manifests import problems

CASES = [None, *EXAMPLES]
IDS = ["defaults", *(p.stem for p in EXAMPLES)]


@pytest.mark.parametrize("values", CASES, ids=IDS)
def test_lint_is_clean(helm, values):
    args = [helm, "lint", "--strict", str(CHART)] + (["-f", str(values)] if values else [])
    done = run(*args)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("values", CASES, ids=IDS)
def test_rendered_manifests_are_valid_for_the_oldest_supported_kubernetes(render, crd_schema, values):
    docs = render(*([values] if values else []), include_crds=True)
    assert of_kind(docs, "Deployment") and of_kind(docs, "CustomResourceDefinition")
    assert problems(docs, crd_schema, OLDEST_KUBERNETES) == []


def test_examples_cover_each_optional_part(render):
    kinds = {p.stem: {d["kind"] for d in render(p)} for p in EXAMPLES}
    assert "SearchIndex" not in {d["kind"] for d in render()}, "no SearchIndex unless asked for"
    assert "StatefulSet" in kinds["quickstart"], "the quickstart example runs its PostgreSQL"
    assert {"Role", "RoleBinding"} <= kinds["namespaced"]
    assert all("SearchIndex" in k for k in kinds.values())


def test_the_searchindex_takes_its_spec_from_values_and_an_image_by_default(render):
    (index,) = of_kind(render(CHART / "examples/hybrid-external.yaml"), "SearchIndex")
    assert index["metadata"] == {**index["metadata"], "name": "search-openai", "namespace": "backscroll"}
    assert index["spec"]["image"] == "ghcr.io/backscroll/backscroll:0.1.0", "spec.image defaults to the chart's appVersion"
    assert index["spec"]["embeddings"]["external"]["apiKeySecretRef"] == {"name": "openai", "key": "api-key"}
    (index,) = of_kind(render(CHART / "examples/hybrid-in-cluster.yaml"), "SearchIndex")
    assert index["spec"]["image"] == "registry.example.com/backscroll:0.1.0", "an explicit image wins"


def test_quickstart_postgresql_is_off_by_default_and_labelled_as_not_for_production(render):
    assert not of_kind(render(), "StatefulSet") and not of_kind(render(), "Secret")
    docs = render(CHART / "examples/quickstart.yaml")
    (database,) = of_kind(docs, "StatefulSet")
    (index,) = of_kind(docs, "SearchIndex")
    assert "not-for-production" in " ".join(database["metadata"]["annotations"])
    assert database["spec"]["template"]["spec"]["containers"][0]["image"].startswith("docker.io/pgvector/pgvector:")
    # Its Job writes the very Secret the SearchIndex reads, so the quickstart needs no manual step
    # there (tests/operator/test_chart_jobs.py runs it); the chart renders no password.
    assert not of_kind(docs, "Secret")
    (job,) = [j for j in of_kind(docs, "Job") if j["metadata"]["labels"]["app.kubernetes.io/component"]
              == "quickstart-password"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--secret") + 1] == index["spec"]["database"]["secretRef"]["name"]


def test_operator_pod_is_locked_down(render):
    (deployment,) = of_kind(render(), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert container["image"] == "ghcr.io/backscroll/backscroll-operator:0.1.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def test_operator_runs_two_replicas_with_a_lease_and_serves_metrics(render):
    docs = render()
    (deployment,) = of_kind(docs, "Deployment")
    env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
    assert env["BACKSCROLL_OPERATOR_METRICS_PORT"] == "9090" and env["BACKSCROLL_OPERATOR_LEADER_ELECTION"] == "true"
    assert env["BACKSCROLL_OPERATOR_LEASE_NAME"] == "rel-backscroll-operator"
    assert env["BACKSCROLL_OPERATOR_LEASE_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == "9090"
    (service,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "rel-backscroll-operator-metrics"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    assert not of_kind(docs, "ServiceMonitor")
    (monitor,) = of_kind(render(sets=("operator.metrics.serviceMonitor.enabled=true",
                                      "operator.metrics.serviceMonitor.labels.release=prom")), "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert monitor["metadata"]["labels"]["release"] == "prom" and monitor["spec"]["endpoints"][0]["port"] == "metrics"
    # Without leader election: one replica at a time, as before.
    (single,) = of_kind(render(sets=("operator.leaderElection.enabled=false",)), "Deployment")
    assert single["spec"]["replicas"] == 1 and single["spec"]["strategy"] == {"type": "Recreate"}


def test_watch_namespaces_reach_the_operator_as_json(render):
    (deployment,) = of_kind(render(CHART / "examples/namespaced.yaml"), "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["BACKSCROLL_OPERATOR_NAMESPACES"]) == ["team-a", "team-b"]
    assert env["BACKSCROLL_OPERATOR_INTERVAL_S"] == "60"


# Each must make `helm template` fail on values.schema.json, naming the offending key.
BAD_VALUES = {
    "wrong type": ("operator.intervalSeconds=soon", "intervalSeconds"),
    "boolean as string": ("postgresql.enabled=yes", "enabled"),
    "unknown top-level key": ("operatr.image.tag=1", "operatr"),
    "unknown nested key": ("operator.image.tga=1", "tga"),
    "misspelt SearchIndex field": ("searchIndex.spec.database.secretRef.nmae=db", "nmae"),
    "SearchIndex field of the wrong type": ("searchIndex.spec.embeddings.dimensions=many", "dimensions"),
    "SearchIndex value out of the CRD's range": ("searchIndex.spec.embeddings.dimensions=4096", "dimensions"),
    "not a namespace name": ("operator.watchNamespaces[0]=Team_A", "watchNamespaces"),
    "pull policy not in the enum": ("operator.image.pullPolicy=Sometimes", "pullPolicy"),
}


@pytest.mark.parametrize("pair,key", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_schema_refuses_bad_values(helm, pair, key):
    done = run(helm, "template", "rel", str(CHART), "--set", pair)
    assert done.returncode != 0, f"{pair} was accepted"
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert key in done.stderr, done.stderr


def _leaves(lines: list[str]):
    """(path, documented) for every key of values.yaml: documented when a `# --` comment block
    sits right above it or above one of its parents (helm-docs reads them the same way)."""
    stack: list[tuple[int, str, bool]] = []
    comment = False
    keys = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("# --"):
            comment = True
            continue
        if not stripped or stripped.startswith("#"):
            if not stripped:
                comment = False
            continue
        match = re.match(r"^(\s*)([A-Za-z0-9_-]+):", line)
        if not match or stripped.startswith("- "):
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = comment or any(d for _, _, d in stack)
        stack.append((indent, match.group(2), documented))
        keys.append((".".join(k for _, k, _ in stack), documented))
        comment = False
    return keys


def test_every_value_has_a_doc_comment():
    keys = _leaves((CHART / "values.yaml").read_text().splitlines())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def is_leaf(path: str) -> bool:
        node = values
        for part in path.split("."):
            node = node[part]
        return not isinstance(node, dict) or not node
    assert len(keys) > 20
    assert [path for path, documented in keys if is_leaf(path) and not documented] == []


def test_the_cnpg_example_names_the_cluster_and_no_secret(render):
    (index,) = of_kind(render(CHART / "examples/cnpg.yaml"), "SearchIndex")
    assert index["spec"]["database"] == {"cnpgClusterRef": {"name": "backscroll-pg", "readService": "ro"}}
    assert "statusTokenSecretRef" not in (index["spec"].get("api") or {}), "the operator makes its own token"


def test_quickstart_renders_the_same_manifests_every_time(helm):
    # Argo CD runs `helm template` on every sync, where `lookup` finds nothing: anything random in
    # the output (a password) would be a new one each time.
    args = (helm, "template", "rel", str(CHART), "--namespace", "backscroll", "-f", str(CHART / "examples/quickstart.yaml"))
    first, second = run(*args), run(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout


def test_the_chart_jobs_role_grants_only_what_they_do(render):
    docs = render(CHART / "examples/quickstart.yaml")
    (role,) = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] == "rel-backscroll-jobs"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["backscroll-db"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": ["search.backscroll.dev"], "resources": ["searchindexes"], "resourceNames": ["search"],
         "verbs": ["get", "delete"]}]
    assert not [r for r in of_kind(render(), "Role") if r["metadata"]["name"] == "rel-backscroll-jobs"], \
        "no Jobs, no Role: neither the quickstart database nor a SearchIndex"
