"""Issue 22's children and hibernation through the real operator (kopf) against the emulator:
budgets and NetworkPolicies made, kept and removed; `spec.hibernate` to zero and back."""

from __future__ import annotations

from .conftest import NS, PATHS, eventually
from .test_scenarios import SERVER, bring_up, condition

# The test's own client reaches the new kinds too.
PATHS.setdefault("poddisruptionbudgets", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets")
PATHS.setdefault("networkpolicies", f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies")


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
        api.patch("searchindexes", "search", {"spec": {"worker": {"replicas": 2}, "networkPolicy": {"enabled": False}}})
        eventually(lambda: api.names("poddisruptionbudgets") == {"search-api", "search-worker"})
        eventually(lambda: not api.names("networkpolicies"))


def test_hibernate_scales_to_zero_reads_hibernated_and_wakes_up(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.patch("searchindexes", "search", {"spec": {"hibernate": True}})
        for name in ("search-api", "search-worker", SERVER):
            eventually(lambda: replicas(api, name) == 0)
        eventually(lambda: condition(api, "search", "Ready").get("reason") == "Hibernated")
        assert condition(api, "search", "Ready")["status"] == "False"
        assert api.get("searchindexes", "search")["status"]["mode"] == "hibernated"
        eventually(lambda: not api.names("poddisruptionbudgets"))
        assert not [e for e in api.events("search") if e["reason"] == "Hibernated" and e["type"] == "Warning"]
        api.patch("searchindexes", "search", {"spec": {"hibernate": False}})
        eventually(lambda: replicas(api, "search-api") == 2)
        for name in ("search-api", "search-worker", SERVER):
            # Played only once the operator scaled it back up: a rollout played at 0 replicas is
            # undone by the next generation.
            eventually(lambda: (replicas(api, name) or 0) > 0)
            api.roll_out(name)
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
