"""The operator's own availability (issue 31, item 4): a readiness probe that holds a rolling
update until the new replica has reached the API server, and a PodDisruptionBudget whenever two or
more replicas run, in the chart and in the kustomize base alike."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from backscroll_operator.metrics import Metrics, Server
from tests.deploy.conftest import ROOT, of_kind
from tests.deploy.test_kustomize import build


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_operator_readyz_answers_503_until_searchindexes_were_listed():
    metrics = Metrics()
    server = Server(metrics, "127.0.0.1", 0, stale_s=120).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        # Alive from the start (a slow first list is not dead), but not ready: a rolling update
        # with maxUnavailable 0 must not stop the old replica for one that cannot reach the API.
        assert _get(base + "/healthz")[0] == 200
        status, body = _get(base + "/readyz")
        assert status == 503 and body["reason"] == "SearchIndexes not listed yet"
        metrics.listed()
        assert _get(base + "/readyz") == (200, {"ok": True, "lastSuccessfulListAgeSeconds": pytest.approx(0, abs=5),
                                                "boundSeconds": 120})
    finally:
        server.stop()


def _probes_and_budget(docs: list[dict]) -> tuple[dict, list[dict]]:
    (deployment,) = of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container, of_kind(docs, "PodDisruptionBudget")


def _assert_guarded(deployment: dict, container: dict, budgets: list[dict]) -> None:
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    (budget,) = budgets
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert budget["metadata"].get("namespace", deployment["metadata"].get("namespace")) == \
        deployment["metadata"].get("namespace")


def test_chart_operator_has_a_readiness_probe_and_a_budget_with_two_replicas(render):
    deployment, container, budgets = _probes_and_budget(render())
    assert deployment["spec"]["replicas"] == 2
    _assert_guarded(deployment, container, budgets)
    # One replica (or no leader election, which runs one): a budget would block every drain.
    for sets in (("operator.replicas=1",), ("operator.leaderElection.enabled=false",)):
        deployment, container, budgets = _probes_and_budget(render(sets=sets))
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert budgets == [], sets


def test_kustomize_operator_has_a_readiness_probe_and_a_budget(kubectl):
    deployment, container, budgets = _probes_and_budget(build(kubectl, ROOT / "k8s/base"))
    assert deployment["spec"]["replicas"] == 2
    _assert_guarded(deployment, container, budgets)
