"""Migrations that recover, on the real control plane (issue 31, item 1): a failed migration is
tried again under a new attempt after a backoff, with its error's first line in the status and an
Event each time; the Job's name carries the database's identity, so a new database is migrated;
with cnpgClusterRef the migration waits for the CloudNativePG cluster's Ready condition.

The Job controller is Kubernetes' own; a migration pod "fails" as a kubelet reports it (phase
Failed, the end of its log as the termination message) while a gate holds it Pending."""

from __future__ import annotations

from .conftest import cnpg_cluster, eventually, fail_pod, report
from .test_scenarios import backfill_jobs, bring_up, condition, migration_job, searchindex, succeeded

RETRY = dict(migration_retry_s=1.0, migration_retry_max_s=2.0)
ERROR = "backscroll: migration 0031_example.sql failed: deadlock detected"
LOG = f"applying migration 0031_example\n{ERROR}\nDETAIL:  Process 12 waits for ShareLock on transaction 7\n"


def migration(api, name: str = "search") -> dict:
    return (api.get("searchindexes", name).get("status") or {}).get("migration") or {}


def migrate_jobs(api, name: str = "search") -> set[str]:
    return {n for n in api.names("jobs") if n.startswith(f"{name}-migrate-")}


def test_a_failed_migration_is_retried_under_a_new_attempt(api, operator, gate, status_server):
    held = gate("migrate")
    status_server.reports["search"] = report("lexical")
    with operator(**RETRY):
        api.create("searchindexes", searchindex(embeddings=False, pod={"nodeSelector": held.selector}))
        first = migration_job(api)
        fail_pod(api, first, LOG)
        eventually(lambda: migration(api).get("failedAttempt") == 1)
        assert migration(api)["lastError"] == ERROR, "the error's first line, from the pod's termination message"
        assert "secret db (uid " in migration(api)["database"]
        # A new Job for attempt 2, after the backoff; the failed one goes.
        second = eventually(lambda: migration(api).get("attempt") == 2 and migration(api)["job"])
        assert second == f"{first}-2" and eventually(lambda: migrate_jobs(api) == {second})
        ready = condition(api, "search", "Ready")
        assert ready["status"] == "False" and ready["reason"] in ("WaitingForMigrations", "MigrationFailed")
        fail_pod(api, second, LOG)
        third = eventually(lambda: migration(api).get("attempt") == 3 and migration(api)["job"])
        warnings = eventually(lambda: [e for e in api.events("search") if e["reason"] == "MigrationFailed"
                                       and e["type"] == "Warning" and "attempt 2 failed" in e["message"]])
        attempts = {e["message"].split("attempt ")[1].split(" ")[0] for e in api.events("search")
                    if e["reason"] == "MigrationFailed" and e["involvedObject"]["kind"] == "SearchIndex"}
        assert {"1", "2"} <= attempts, "an Event for each failed attempt"
        assert ERROR in warnings[0]["message"]
        held.open()
        eventually(lambda: succeeded(api, third))
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        applied = condition(api, "search", "MigrationsApplied")
        assert applied["status"] == "True" and "(attempt 3)" in applied["message"]


def test_a_new_database_is_migrated(api, operator, status_server):
    status_server.reports["search"] = report("lexical")
    with operator():
        api.create("searchindexes", searchindex(embeddings=False))
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        (first,) = migrate_jobs(api)
        # Another Secret: another database.
        api.secret("db2", uri="postgresql://backscroll@db2/backscroll")
        api.patch("searchindexes", "search", {"spec": {"database": {"secretRef": {"name": "db2"}}}})
        second = eventually(lambda: migration(api).get("job") not in (None, first) and migration(api)["job"])
        eventually(lambda: succeeded(api, second))
        assert "secret db2 (uid " in migration(api)["database"]
        # The same Secret made again (a new uid): a database that may well be empty.
        api.delete("secrets", "db2")
        api.secret("db2", uri="postgresql://backscroll@db3/backscroll")
        third = eventually(lambda: migration(api).get("job") not in (None, first, second) and migration(api)["job"])
        eventually(lambda: succeeded(api, third))
        eventually(lambda: migrate_jobs(api) == {third})
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")


def test_a_new_database_is_backfilled(api, operator, status_server):
    """The backfill of the same model in another database is another Job: the last one's success
    was that database's, and the new one has no vectors yet."""
    with operator():
        bring_up(api, status_server)
        eventually(lambda: condition(api, "search", "BackfillComplete").get("reason") == "Complete")
        (first,) = backfill_jobs(api)
        api.secret("db2", uri="postgresql://backscroll@db2/backscroll")
        api.patch("searchindexes", "search", {"spec": {"database": {"secretRef": {"name": "db2"}}}})
        second = eventually(lambda: (backfill_jobs(api) - {first}) and (backfill_jobs(api) - {first}).pop())
        assert second.startswith(first.rsplit("-", 1)[0]), "the same model's backfill, for another database"
        eventually(lambda: succeeded(api, second))
        eventually(lambda: backfill_jobs(api) == {second})
        eventually(lambda: condition(api, "search", "BackfillComplete").get("reason") == "Complete"
                   and condition(api, "search", "Ready").get("status") == "True")


def test_a_migration_waits_for_the_cnpg_cluster_to_be_ready(api, operator, status_server, cnpg_crd):
    status_server.reports["search"] = report("lexical")
    api.secret("pg-app", uri="postgresql://app:pw@pg-rw:5432/app", username="app", password="pw", dbname="app")
    cnpg_cluster(api, "pg", ready=False)  # CloudNativePG wrote the -app Secret; the primary is not up yet
    with operator(interval_s=600):  # the resync 10 minutes away: the cluster's watch starts the migration
        api.create("searchindexes", searchindex(embeddings=False, database={"cnpgClusterRef": {"name": "pg"}}))
        applied = eventually(lambda: condition(api, "search", "MigrationsApplied").get("reason") == "WaitingForDatabase"
                             and condition(api, "search", "MigrationsApplied"))
        assert "CloudNativePG cluster pg is not Ready" in applied["message"]
        assert condition(api, "search", "Ready")["reason"] == "WaitingForDatabase"
        assert not migrate_jobs(api), "no migration before the cluster is Ready"
        uid = cnpg_cluster(api, "pg", ready=True)["metadata"]["uid"]
        job = eventually(lambda: migration(api).get("job") in migrate_jobs(api) and migration(api)["job"])
        assert migration(api)["database"] == f"CloudNativePG cluster pg (uid {uid})"
        eventually(lambda: succeeded(api, job))
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        # A failover: the cluster not Ready for a while does not hold what was migrated already.
        cnpg_cluster(api, "pg", ready=False)
        api.patch("searchindexes", "search", {"spec": {"api": {"replicas": 1}}})
        eventually(lambda: condition(api, "search", "Ready").get("observedGeneration") == 2
                   and condition(api, "search", "Ready")["status"] == "True")
        assert migrate_jobs(api) == {job}
