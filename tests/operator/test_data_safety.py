"""Issue 31, data safety, in the operator (pure parts): a database's refusals (an image older
than its schema, a database another SearchIndex owns) read as their own reasons in the status;
the Jobs that touch the data name their SearchIndex and fail at once on a refusal; the optional
CloudNativePG Backup before a migration."""

from __future__ import annotations

import pytest

from backscroll.errors import DatabaseOwnedElsewhere, SchemaNewerThanImage
from backscroll_operator import builders, rollout
from backscroll_operator.names import Owner
from backscroll_operator.spec import SpecError, parse
from backscroll_operator.status import EXIT_REASONS, DeploymentState, Facts, JobState, derive

OWNER = Owner(name="search", namespace="team", uid="uid-1")
CNPG = {"image": "backscroll:2", "database": {"cnpgClusterRef": {"name": "pg"}, "backupBeforeMigration": True}}
NOW = "2026-01-01T00:00:00Z"


def failed_job(message: str) -> dict:
    """A Job as the Job controller leaves it once a podFailurePolicy rule (or its backoff) failed it."""
    return {"status": {"failed": 1, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "PodFailurePolicy", "message": message},
        {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": message}]}}


def ready_reason(migration: JobState, backup=None) -> tuple[dict, dict]:
    spec = parse({"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}})
    facts = Facts(migration=migration, api=DeploymentState("search-api", 0, 0, False), backup=backup)
    status = derive(spec, facts, 1, None, NOW, rollout.plan(spec, rollout.Observed(migrated=False)))
    conds = {c["type"]: c for c in status["conditions"]}
    return conds["MigrationsApplied"], conds["Ready"]


def test_the_exit_codes_are_backscrolls():
    assert EXIT_REASONS == {SchemaNewerThanImage.exit_code: "SchemaNewerThanImage",
                            DatabaseOwnedElsewhere.exit_code: "DatabaseOwnedElsewhere"}


@pytest.mark.parametrize("code, reason, says", [
    (3, "SchemaNewerThanImage", "the database's schema is newer than spec.image"),
    (4, "DatabaseOwnedElsewhere", "the database belongs to another SearchIndex"),
])
def test_a_refused_migration_reads_as_its_reason_not_as_a_failed_migration(code, reason, says):
    job = JobState.of("search-migrate-x", failed_job(
        f"Container migrate for pod team/search-migrate-x-abcde failed with exit code {code} matching FailJob rule "
        "at index 1"))
    assert job == JobState("search-migrate-x", "failed", code)
    migrations, ready = ready_reason(job)
    assert (migrations["status"], migrations["reason"]) == ("False", reason)
    assert says in migrations["message"] and "search-migrate-x" in migrations["message"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", reason, migrations["message"])


def test_any_other_failure_is_still_a_failed_migration():
    job = JobState.of("search-migrate-x", failed_job("Job has reached the specified backoff limit"))
    assert job.exit_code is None
    assert ready_reason(job)[1]["reason"] == "MigrationFailed"


def test_the_jobs_that_touch_the_data_name_their_searchindex_and_fail_at_once_on_a_refusal():
    spec = parse({"image": "backscroll:1", "database": {"secretRef": {"name": "db"}},
                  "embeddings": {"model": "e5", "dimensions": 384}})
    for job in (builders.migration_job(OWNER, spec), builders.purge_job(OWNER, spec),
                builders.prune_job(OWNER, spec, "old-model")):
        (container,) = job["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["BACKSCROLL_OWNER_UID"] == "uid-1" and env["BACKSCROLL_OWNER_NAME"] == "team/search"
        rules = job["spec"]["podFailurePolicy"]["rules"]
        assert {"action": "FailJob", "onExitCodes": {"containerName": container["name"], "operator": "In",
                                                     "values": [3, 4]}} in rules, job["metadata"]["name"]
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # what a podFailurePolicy needs


def test_backup_before_migration_is_off_by_default_and_needs_a_cnpg_cluster():
    assert parse({"image": "b:1", "database": {"cnpgClusterRef": {"name": "pg"}}}).database.backup_before_migration is False
    with pytest.raises(SpecError, match="backupBeforeMigration backs up a CloudNativePG cluster"):
        parse({"image": "b:1", "database": {"secretRef": {"name": "db"}, "backupBeforeMigration": True}})


def test_the_backup_before_a_migration_is_one_per_migration_of_the_cluster():
    spec = parse(CNPG)
    identity = builders.migration_identity(spec, "CloudNativePG cluster pg (uid u1)")
    backup = builders.premigration_backup(OWNER, spec, identity)
    assert backup["apiVersion"] == "postgresql.cnpg.io/v1" and backup["kind"] == "Backup"
    assert backup["metadata"]["name"] == f"search-premigrate-{identity}"
    assert backup["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert backup["spec"] == {"cluster": {"name": "pg"}, "method": "barmanObjectStore"}
    snapshot = parse({**CNPG, "database": {**CNPG["database"], "backupMethod": "volumeSnapshot"}})
    assert builders.premigration_backup(OWNER, snapshot, identity)["spec"]["method"] == "volumeSnapshot"
    newer = builders.migration_identity(parse({**CNPG, "image": "backscroll:3"}), "CloudNativePG cluster pg (uid u1)")
    assert builders.backup_name(OWNER, newer) != backup["metadata"]["name"]  # a new image: a new backup


@pytest.mark.parametrize("reason", ["BackingUp", "BackupFailed"])
def test_a_migration_waiting_for_its_backup_says_so(reason):
    migrations, ready = ready_reason(JobState("search-migrate-x", "absent"), (reason, f"backup b: {reason}"))
    assert (migrations["reason"], migrations["message"]) == (reason, f"backup b: {reason}")
    assert (ready["status"], ready["reason"]) == ("False", reason)
