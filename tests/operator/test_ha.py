"""Two operators against the real control plane, as the chart's ServiceAccount (its Lease Role):
only the Lease's holder writes; the other takes over when the leader stops (it releases the
Lease) or dies (the Lease expires), and reconciles what changed."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from backscroll_operator.config import OperatorConfig

from .conftest import eventually
from .test_scenarios import searchindex

HA = dict(lease_duration_s=3, lease_renew_s=0.5)


def holder(api) -> str | None:
    lease = api.get("leases", "backscroll-operator")
    return None if lease is None else lease["spec"].get("holderIdentity")


def listed(replica) -> bool:
    return bool(replica.sample("backscroll_operator_last_successful_list_timestamp_seconds"))


def spy_writes(replica) -> list[str]:
    """Every write request this replica's own client sends (kopf's bookkeeping aside)."""
    eventually(lambda: replica.passes.kube is not None)
    writes: list[str] = []
    replica.passes.kube.http.event_hooks["request"].append(
        lambda request: writes.append(f"{request.method} {request.url.path}") if request.method != "GET" else None)
    return writes


def test_only_the_leader_writes_and_the_follower_takes_over(api, operators):
    a = operators("replica-a", **HA)
    eventually(lambda: holder(api) == "replica-a")
    b = operators("replica-b", **HA)
    eventually(lambda: b.passes.leader is not None)
    writes_b = spy_writes(b)

    api.create("searchindexes", searchindex("first", embeddings=False))
    eventually(lambda: "first-api" in api.names("services"))
    eventually(lambda: api.get("deployments", "first-api"))
    eventually(lambda: (api.get("searchindexes", "first").get("status") or {}).get("conditions"))
    # Several resyncs of the follower's: it lists, but runs no pass and writes only its Lease checks.
    eventually(lambda: listed(b))
    assert a.passes.leads() and not b.passes.leads()
    assert [w for w in writes_b if "/leases" not in w] == []
    assert a.passes_run() > 0 and b.passes_run() == 0, "the follower ran a pass"

    a.stop()  # its cleanup releases the Lease
    eventually(lambda: holder(api) == "replica-b")
    eventually(b.passes.leads)
    # Made after the leader went: the new leader applies it.
    api.create("searchindexes", searchindex("second", embeddings=False))
    eventually(lambda: "second-api" in api.names("services"))
    api.patch("searchindexes", "first", {"spec": {"api": {"replicas": 3}}})
    eventually(lambda: (api.get("deployments", "first-api") or {}).get("spec", {}).get("replicas") == 3)
    assert any("/services" in w or "/deployments" in w for w in writes_b)


def test_a_dead_leader_is_taken_over_once_its_lease_expires(api, operators):
    # A leader that died without releasing: its Lease stays, renewed by this thread until it "dies".
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api.create("leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                          "metadata": {"name": "backscroll-operator"},
                          "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 2,
                                   "acquireTime": now, "renewTime": now}})
    alive = threading.Event()
    alive.set()
    renewals = []

    def renew():
        while alive.is_set():
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            api.patch("leases", "backscroll-operator", {"spec": {"renewTime": stamp}})
            renewals.append(stamp)
            alive.wait(0.3)

    ghost = threading.Thread(target=renew, daemon=True)
    ghost.start()
    try:
        b = operators("replica-b", **HA)
        eventually(lambda: b.passes.leader is not None)
        api.create("searchindexes", searchindex("search", embeddings=False))
        # While the ghost renews, the follower lists (resyncs) but never reconciles.
        eventually(lambda: listed(b))
        seen = len(renewals)
        eventually(lambda: len(renewals) > seen + 3)
        assert holder(api) == "ghost" and not b.passes.leads()
        assert "search-api" not in api.names("services")

        alive.clear()  # the leader dies
        eventually(lambda: holder(api) == "replica-b")
        eventually(lambda: "search-api" in api.names("services"))
        lease = api.get("leases", "backscroll-operator")["spec"]
        assert lease["leaseTransitions"] == 1 and lease["leaseDurationSeconds"] == 3
    finally:
        alive.clear()
        ghost.join(5)


def test_a_renewal_that_does_not_fit_the_lease_is_refused():
    with pytest.raises(ValidationError, match="two thirds"):
        OperatorConfig(lease_duration_s=15, lease_renew_s=10)
    assert OperatorConfig(lease_duration_s=15, lease_renew_s=10, leader_election=False).lease_renew_s == 10
