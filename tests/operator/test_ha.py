"""Two operators against one emulator: only the Lease's holder writes; the other takes over when
the leader stops (it releases the Lease) or dies (the Lease expires), and reconciles what changed."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from backscroll_operator.config import OperatorConfig

from .conftest import NS, eventually
from .replicas import Replicas
from .test_scenarios import searchindex

LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


def holder(api) -> str | None:
    response = api.http.get(f"{LEASES}/backscroll-operator")
    return None if response.status_code == 404 else response.json()["spec"].get("holderIdentity")


def passes_run(replica) -> float:
    return sum(sample.value for metric in replica.passes.metrics.registry.collect()
               for sample in metric.samples if sample.name == "backscroll_operator_reconcile_passes_total")


def listed(replica) -> bool:
    return bool(replica.passes.metrics.registry.get_sample_value(
        "backscroll_operator_last_successful_list_timestamp_seconds"))


def spy_writes(replica) -> list[str]:
    """Every write request this replica's own client sends (kopf's bookkeeping aside)."""
    writes: list[str] = []
    replica.passes.kube.http.event_hooks["request"].append(
        lambda request: writes.append(f"{request.method} {request.url.path}") if request.method != "GET" else None)
    return writes


def test_only_the_leader_writes_and_the_follower_takes_over(api, status_server):
    with Replicas(status_server) as start:
        a = start("replica-a")
        eventually(lambda: holder(api) == "replica-a", timeout=30)
        b = start("replica-b")
        eventually(lambda: b.passes.leader is not None, timeout=30)
        writes_b = spy_writes(b)

        api.create("searchindexes", searchindex("first", embeddings=False))
        eventually(lambda: "first-api" in api.names("services"), timeout=30)
        api.complete_job(eventually(lambda: next(n for n in api.names("jobs") if n.startswith("first-migrate-"))))
        eventually(lambda: api.get("deployments", "first-api"), timeout=30)
        eventually(lambda: (api.get("searchindexes", "first").get("status") or {}).get("conditions"), timeout=30)
        # Several resyncs of the follower's: it lists, but runs no pass and writes only its Lease checks.
        eventually(lambda: listed(b), timeout=30)
        assert a.passes.leads() and not b.passes.leads()
        assert [w for w in writes_b if "/leases" not in w] == []
        assert passes_run(a) > 0 and passes_run(b) == 0, "the follower ran a pass"

        a.stop()  # its cleanup releases the Lease
        eventually(lambda: holder(api) == "replica-b", timeout=30)
        eventually(b.passes.leads, timeout=30)
        # Made after the leader went: the new leader applies it.
        api.create("searchindexes", searchindex("second", embeddings=False))
        eventually(lambda: "second-api" in api.names("services"), timeout=30)
        api.patch("searchindexes", "first", {"spec": {"api": {"replicas": 3}}})
        eventually(lambda: (api.get("deployments", "first-api") or {}).get("spec", {}).get("replicas") == 3,
                   timeout=30)
        assert any("/services" in w or "/deployments" in w for w in writes_b)


def test_a_dead_leader_is_taken_over_once_its_lease_expires(api, status_server):
    # A leader that died without releasing: its Lease stays, renewed by this thread until it "dies".
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api.http.post(LEASES, json={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": "backscroll-operator", "namespace": NS},
                                "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 2,
                                         "acquireTime": now, "renewTime": now}}).raise_for_status()
    alive = threading.Event()
    alive.set()
    renewals = []

    def renew():
        while alive.is_set():
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            api.http.patch(f"{LEASES}/backscroll-operator", json={"spec": {"renewTime": stamp}},
                           headers={"Content-Type": "application/merge-patch+json"})
            renewals.append(stamp)
            alive.wait(0.3)

    ghost = threading.Thread(target=renew, daemon=True)
    ghost.start()
    try:
        with Replicas(status_server) as start:
            b = start("replica-b")
            eventually(lambda: b.passes.leader is not None, timeout=30)
            api.create("searchindexes", searchindex("search", embeddings=False))
            # While the ghost renews, the follower lists (resyncs) but never reconciles.
            eventually(lambda: listed(b), timeout=30)
            seen = len(renewals)
            eventually(lambda: len(renewals) > seen + 3, timeout=30)
            assert holder(api) == "ghost" and not b.passes.leads()
            assert "search-api" not in api.names("services")

            alive.clear()  # the leader dies
            eventually(lambda: holder(api) == "replica-b", timeout=30)
            eventually(lambda: "search-api" in api.names("services"), timeout=30)
            lease = api.http.get(f"{LEASES}/backscroll-operator").json()["spec"]
            assert lease["leaseTransitions"] == 1 and lease["leaseDurationSeconds"] == 3
    finally:
        alive.clear()
        ghost.join(5)


def test_a_renewal_that_does_not_fit_the_lease_is_refused():
    with pytest.raises(ValidationError, match="two thirds"):
        OperatorConfig(lease_duration_s=15, lease_renew_s=10)
    assert OperatorConfig(lease_duration_s=15, lease_renew_s=10, leader_election=False).lease_renew_s == 10
