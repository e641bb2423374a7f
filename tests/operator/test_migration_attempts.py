"""The pure parts of migrations that recover (issue 31, item 1): the Job's name from the image,
model, database and attempt; one pod per attempt with its termination message; the conditions and
an Event per failed attempt. tests/operator/test_migrations.py runs them on the real control plane."""

from __future__ import annotations

from backscroll_operator import builders
from backscroll_operator.names import Owner
from backscroll_operator.spec import parse
from backscroll_operator.status import JobState, _migrations, transitions

from .test_status import facts

OWNER = Owner(name="search", namespace="team", uid="uid-1")
SPEC = parse({"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}})
DB = "secret db (uid u-1)"
FAILED = {"identity": "abcd1234", "attempt": 2, "job": "search-migrate-abcd1234-2", "database": DB,
          "failedAttempt": 2, "lastError": "backscroll: deadlock detected", "retryAt": "2026-01-01T00:01:00Z"}


def test_the_migration_name_follows_the_database_and_the_attempt():
    first = builders.migration_name(OWNER, SPEC, DB)
    assert first == builders.migration_name(OWNER, SPEC, DB, 1)
    assert builders.migration_name(OWNER, SPEC, DB, 2) == f"{first}-2"
    assert first != builders.migration_name(OWNER, SPEC, "secret db (uid u-2)"), "a Secret made again: a new database"
    assert first != builders.migration_name(OWNER, SPEC, "CloudNativePG cluster pg (uid u-1)")
    assert first != builders.migration_name(OWNER, parse({**SPEC.model_dump(by_alias=True), "image": "backscroll:2"}),
                                            DB)
    long = Owner(name="s" * 60, namespace="team", uid="uid-1")
    assert len(builders.migration_name(long, SPEC, DB, 12)) <= 63


def test_one_pod_per_attempt_whose_log_ends_in_its_termination_message():
    job = builders.migration_job(OWNER, SPEC, DB, 3)
    assert job["metadata"]["name"].endswith("-3") and job["spec"]["backoffLimit"] == 0
    assert job["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"
    ignored = [r for r in job["spec"]["podFailurePolicy"]["rules"] if r["action"] == "Ignore"]
    assert ignored == [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]


def test_the_conditions_say_which_attempt_and_why():
    failed = _migrations(facts(migration=JobState(FAILED["job"], "failed"), migration_record=FAILED))
    assert failed["reason"] == "MigrationFailed"
    assert failed["message"] == ("job search-migrate-abcd1234-2: attempt 2 failed: backscroll: deadlock detected; "
                                 "attempt 3 at 2026-01-01T00:01:00Z")
    running = {**FAILED, "attempt": 3, "job": "search-migrate-abcd1234-3", "retryAt": None}
    again = _migrations(facts(migration=JobState(running["job"], "running"), migration_record=running))
    assert again["reason"] == "Running" and "(attempt 3; attempt 2 failed: backscroll: deadlock detected)" in \
        again["message"]
    done = _migrations(facts(migration=JobState(running["job"], "succeeded"), migration_record=running))
    assert done["status"] == "True" and done["message"].endswith("(attempt 3)")
    waiting = _migrations(facts(migration=JobState("m", "absent"), database_waiting="CloudNativePG cluster pg is "
                                                                                      "not Ready: Setting up primary"))
    assert waiting["reason"] == "WaitingForDatabase" and "Setting up primary" in waiting["message"]


def test_each_failed_attempt_is_a_warning_event():
    first = {**FAILED, "attempt": 1, "failedAttempt": 1}
    events = transitions({"migration": {"attempt": 1}}, {"migration": first})
    assert events == [("Warning", "MigrationFailed", f"migration of {DB}: attempt 1 failed: backscroll: deadlock "
                                                     "detected; attempt 2 at 2026-01-01T00:01:00Z")]
    assert transitions({"migration": first}, {"migration": first}) == [], "the same failure is said once"
    assert [e[1] for e in transitions({"migration": first}, {"migration": FAILED})] == ["MigrationFailed"]
