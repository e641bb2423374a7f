"""Issue 22's children and hibernation through the real operator on the real control plane:
budgets and NetworkPolicies made, kept and removed; `spec.hibernate` to zero and back, the
ReplicaSets and KWOK's pods following."""

from __future__ import annotations

from .conftest import eventually
from .test_scenarios import SERVER, available, bring_up, condition


def replicas(api, name: str):
    return (api.get("deployments", name) or {}).get("spec", {}).get("replicas")


def test_budgets_and_network_policies_follow_the_spec(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        # api.replicas 2: a budget; the worker and the server have one replica: none.
        eventually(lambda: api.names("poddisruptionbudgets") == {"search-api"})
        eventually(lambda: api.names("networkpolicies") == {"search-api", "search-embeddings"})
        budget = api.get("poddisruptionbudgets", "search-api")
        assert budget["spec"]["minAvailable"] == 1
        assert budget["metadata"]["ownerReferences"][0]["kind"] == "SearchIndex"
        # The disruption controller counts the API's pods against it.
        eventually(lambda: (api.get("poddisruptionbudgets", "search-api").get("status") or {}).get("currentHealthy") == 2)
        api.patch("searchindexes", "search", {"spec": {"worker": {"replicas": 2}, "networkPolicy": {"enabled": False}}})
        eventually(lambda: api.names("poddisruptionbudgets") == {"search-api", "search-worker"})
        eventually(lambda: not api.names("networkpolicies"))


def test_hibernate_scales_to_zero_reads_hibernated_and_wakes_up(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.patch("searchindexes", "search", {"spec": {"hibernate": True}})
        for name in ("search-api", "search-worker", SERVER):
            eventually(lambda: replicas(api, name) == 0)
        eventually(lambda: not api.list("pods", "app.kubernetes.io/instance=search,app.kubernetes.io/component=api"))
        eventually(lambda: condition(api, "search", "Ready").get("reason") == "Hibernated")
        assert condition(api, "search", "Ready")["status"] == "False"
        assert api.get("searchindexes", "search")["status"]["mode"] == "hibernated"
        eventually(lambda: not api.names("poddisruptionbudgets"))
        assert not [e for e in api.events("search") if e["reason"] == "Hibernated" and e["type"] == "Warning"]
        api.patch("searchindexes", "search", {"spec": {"hibernate": False}})
        eventually(lambda: replicas(api, "search-api") == 2)
        for name in ("search-api", "search-worker", SERVER):
            eventually(lambda: available(api, name) > 0)
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
