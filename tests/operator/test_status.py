"""Status derivation from facts: mode, conditions, transitions and their Events."""

from __future__ import annotations

from backscroll_operator import rollout
from backscroll_operator.spec import parse
from backscroll_operator.status import DeploymentState, Facts, JobState, failed, transitions
from backscroll_operator.status import derive as derive_with_plan

from .conftest import report

NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}
HYBRID = parse({**BASE, "embeddings": {"model": "e5", "dimensions": 384}})
LEXICAL = parse(BASE)


def steady(spec) -> rollout.Plan:
    return rollout.plan(spec, rollout.Observed(migrated=True, backfilled=frozenset(
        [spec.embeddings.model] if spec.embeddings else [])))


def derive(spec, facts, generation, old, now, plan=None):
    """The status of an index whose API serves the spec's model (no rollout) unless `plan` says."""
    return derive_with_plan(spec, facts, generation, old, now, plan or steady(spec))


def deployment(name: str, ready: bool = True, replicas: int = 1) -> DeploymentState:
    return DeploymentState(name, replicas, replicas if ready else 0, True)


def facts(**overrides) -> Facts:
    values = dict(migration=JobState("m", "succeeded"), api=deployment("api"), worker=deployment("worker"),
                  server=deployment("emb"), backfill=JobState("b", "succeeded"),
                  report=report("hybrid", "e5", embedded=10, total=10))
    values.update(overrides)
    return Facts(**values)


def conditions(status: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_hybrid_ready():
    status = derive(HYBRID, facts(), 3, None, NOW)
    assert status["mode"] == "hybrid" and status["observedGeneration"] == 3
    assert status["model"] == "e5" and status["coverage"] == "100%"
    assert conditions(status) == {"MigrationsApplied": ("True", "Succeeded"), "EmbeddingsAvailable": ("True", "Available"),
                                  "BackfillComplete": ("True", "Complete"), "Ready": ("True", "Ready")}


def test_lexical_ready_without_worker_or_server():
    status = derive(LEXICAL, facts(worker=None, server=None, backfill=None, report=report("lexical")), 1, None, NOW)
    assert status["mode"] == "lexical" and status["model"] is None and status["coverage"] is None
    assert conditions(status)["Ready"] == ("True", "Ready")
    # Not applicable reads Unknown, not False: a lexical index is not missing its embeddings.
    assert conditions(status)["EmbeddingsAvailable"] == ("Unknown", "NotApplicable")
    assert conditions(status)["BackfillComplete"] == ("Unknown", "NotApplicable")


def test_server_not_ready_is_degraded_even_if_the_api_still_says_hybrid():
    status = derive(HYBRID, facts(server=deployment("emb", ready=False)), 1, None, NOW)
    assert status["mode"] == "degraded"
    assert conditions(status)["EmbeddingsAvailable"] == ("False", "ServerNotReady")
    assert conditions(status)["Ready"] == ("False", "ServerNotReady")


def test_endpoint_down_is_degraded():
    down = report("degraded", "e5", embedded=10, total=10, endpoint="unavailable",
                  degradation={"category": "unavailable", "detail": "the embeddings endpoint does not answer"})
    status = derive(HYBRID, facts(report=down, server=None), 1, None, NOW)
    assert status["mode"] == "degraded"
    assert conditions(status)["EmbeddingsAvailable"] == ("False", "EndpointUnavailable")
    assert conditions(status)["Ready"] == ("False", "EndpointUnavailable")


def test_backfilling_reports_coverage():
    partial = report("degraded", "e5", embedded=1, total=3, degradation={"category": "backfilling", "detail": "d"})
    status = derive(HYBRID, facts(report=partial, backfill=JobState("b", "running")), 1, None, NOW)
    assert status["mode"] == "degraded" and status["coverage"] == "33.3%"
    assert conditions(status)["BackfillComplete"] == ("False", "Backfilling")
    assert "1 of 3" in next(c for c in status["conditions"] if c["type"] == "BackfillComplete")["message"]
    assert conditions(status)["Ready"] == ("False", "Backfilling")


def test_a_complete_backfill_before_the_api_says_hybrid_is_waiting_not_complete():
    """The backfill Job succeeded and the server answers, but the API's last report is older: Ready
    names that wait rather than copying BackfillComplete's reason onto a False."""
    lagging = report("lexical", "e5", embedded=10, total=10)
    status = derive(HYBRID, facts(report=lagging), 1, None, NOW)
    assert conditions(status)["BackfillComplete"] == ("True", "Complete")
    assert conditions(status)["Ready"] == ("False", "WaitingForHybrid")
    assert "last reported lexical" in next(c for c in status["conditions"] if c["type"] == "Ready")["message"]


def test_waiting_for_migrations_and_failures():
    status = derive(HYBRID, facts(migration=JobState("m", "running"), backfill=JobState("b", "absent")), 1, None, NOW)
    assert conditions(status)["Ready"] == ("False", "WaitingForMigrations")
    assert conditions(status)["BackfillComplete"] == ("False", "WaitingForMigrations")
    status = derive(HYBRID, facts(migration=JobState("m", "failed"), backfill=JobState("b", "absent")), 1, None, NOW)
    assert conditions(status)["Ready"] == ("False", "MigrationFailed")
    status = derive(HYBRID, facts(backfill=JobState("b", "failed")), 1, None, NOW)
    assert conditions(status)["BackfillComplete"] == ("False", "BackfillFailed")


def test_unreadable_status_is_not_ready_and_keeps_the_last_coverage():
    before = derive(HYBRID, facts(), 1, None, NOW)
    status = derive(HYBRID, facts(report=None, report_error="GET x timed out"), 1, before, LATER)
    assert conditions(status)["Ready"] == ("False", "StatusUnreadable")
    assert status["models"] == before["models"] and status["coverage"] == "100%"
    assert conditions(status)["EmbeddingsAvailable"] == ("Unknown", "StatusUnreadable")


def test_api_not_rolled_out_is_not_ready():
    rolling = DeploymentState("api", 2, 2, rolled_out=False)
    status = derive(HYBRID, facts(api=rolling), 1, None, NOW)
    assert conditions(status)["Ready"] == ("False", "ApiNotReady")
    assert "rolling out" in next(c for c in status["conditions"] if c["type"] == "Ready")["message"]


def test_transition_times_move_only_on_change():
    first = derive(HYBRID, facts(), 1, None, NOW)
    same = derive(HYBRID, facts(), 1, first, LATER)
    assert [c["lastTransitionTime"] for c in same["conditions"]] == [NOW] * 4
    degraded = derive(HYBRID, facts(server=deployment("emb", ready=False)), 1, same, LATER)
    times = {c["type"]: c["lastTransitionTime"] for c in degraded["conditions"]}
    assert times == {"MigrationsApplied": NOW, "BackfillComplete": NOW, "EmbeddingsAvailable": LATER, "Ready": LATER}


def test_events_only_for_transitions():
    first = derive(HYBRID, facts(), 1, None, NOW)
    assert transitions(first, derive(HYBRID, facts(), 1, first, LATER)) == []
    degraded = derive(HYBRID, facts(server=deployment("emb", ready=False)), 1, first, LATER)
    events = transitions(first, degraded)
    assert ("Warning", "ModeChanged", "search mode hybrid -> degraded") in events
    assert {reason for _, reason, _ in events} == {"ModeChanged", "ServerNotReady"}
    assert not any(reason == "ModeChanged" for _, reason, _ in transitions(None, first)), "a first mode is no change"


def test_every_condition_carries_the_generation_it_was_computed_for():
    first = derive(HYBRID, facts(), 1, None, NOW)
    assert {c["type"]: c["observedGeneration"] for c in first["conditions"]} == dict.fromkeys(
        ("MigrationsApplied", "EmbeddingsAvailable", "BackfillComplete", "Ready"), 1)
    # A new generation that changes nothing moves observedGeneration, not lastTransitionTime.
    second = derive(HYBRID, facts(), 2, first, LATER)
    assert {(c["observedGeneration"], c["lastTransitionTime"]) for c in second["conditions"]} == {(2, NOW)}
    # A spec the operator cannot act on: Ready describes generation 3, the others still generation 2.
    broken = failed(second, 3, "InvalidSpec", "spec.embeddings.dimensions: too big", LATER)
    assert {c["type"]: c["observedGeneration"] for c in broken["conditions"]} == {
        "MigrationsApplied": 2, "EmbeddingsAvailable": 2, "BackfillComplete": 2, "Ready": 3}


def test_failed_keeps_the_other_conditions():
    before = derive(HYBRID, facts(), 1, None, NOW)
    status = failed(before, 2, "InvalidSpec", "spec.embeddings.dimensions: too big", LATER)
    assert status["observedGeneration"] == 2 and status["mode"] == "hybrid"
    assert conditions(status)["Ready"] == ("False", "InvalidSpec")
    assert conditions(status)["MigrationsApplied"] == ("True", "Succeeded")
    (event,) = transitions(before, status)
    assert event == ("Warning", "InvalidSpec", "Ready=False: spec.embeddings.dimensions: too big")


def test_job_and_deployment_states_from_kubernetes_status():
    assert JobState.of("j", None).phase == "absent"
    assert JobState.of("j", {"status": {}}).phase == "running"
    assert JobState.of("j", {"status": {"succeeded": 1}}).phase == "succeeded"
    assert JobState.of("j", {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}).phase == "failed"
    live = {"metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "availableReplicas": 2, "updatedReplicas": 2}}
    assert not DeploymentState.of("d", live).ready, "the controller has not seen generation 2 yet"
    live["status"]["observedGeneration"] = 2
    assert DeploymentState.of("d", live).ready
    live["status"]["updatedReplicas"] = 1
    assert not DeploymentState.of("d", live).ready
