"""Issue 31, data safety, on the real control plane: a migration Job refused by the database (an
image older than its schema: exit 3; a database another SearchIndex owns: exit 4) fails at once
through its podFailurePolicy, read by Kubernetes' own Job controller, and the SearchIndex says
which refusal it was, without a retry and without an API or worker; with
backupBeforeMigration the migration waits for its CloudNativePG Backup to complete.

No container runs on KWOK's nodes: a migration pod "exits" as a kubelet reports it (phase Failed,
the exit code and the end of its log) while a gate holds it Pending; CloudNativePG's controller
does not run either, the test writes the Backup's status as it would."""

from __future__ import annotations

import time

from .conftest import cnpg_cluster, eventually, report
from .test_scenarios import condition, migration_job, searchindex, succeeded

REFUSED_SCHEMA = ("backscroll: the database's schema is newer than this image: it holds migration "
                  "0031_drop_legacy.sql, a contract step of a later release")
REFUSED_OWNER = "backscroll: this database belongs to SearchIndex ns/search (uid 1234), not to uid 5678"


def exit_pod(api, job: str, code: int, log: str) -> None:
    """What a kubelet reports when the Job's (gated, Pending) pod ran and exited with `code`."""
    pod = eventually(lambda: next(p for p in api.list("pods", f"batch.kubernetes.io/job-name={job}")
                                  if (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")))
    container = pod["spec"]["containers"][0]
    api.patch("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "containerStatuses": [{
        "name": container["name"], "image": container["image"], "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "reason": "Error", "message": log}}}]}}, subresource="status")


def job_failed(api, job: str) -> dict:
    conds = ((api.get("jobs", job) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Failed" and c["status"] == "True"), {})


def test_an_image_older_than_the_schema_is_refused_with_its_reason(api, operator, gate, status_server):
    held = gate("migrate")
    status_server.reports["search"] = report("lexical")
    with operator(migration_retry_s=1.0, migration_retry_max_s=1.0):
        api.create("searchindexes", searchindex(embeddings=False, pod={"nodeSelector": held.selector}))
        job = migration_job(api)
        exit_pod(api, job, 3, REFUSED_SCHEMA)
        failed = eventually(lambda: job_failed(api, job))
        assert failed["reason"] == "PodFailurePolicy" and "exit code 3" in failed["message"], failed
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "SchemaNewerThanImage"
                           and condition(api, "search", "Ready"))
        assert ready["status"] == "False" and "newer than spec.image" in ready["message"]
        assert eventually(lambda: [e for e in api.events("search")
                                   if e["reason"] == "SchemaNewerThanImage" and e["type"] == "Warning"])
        # Not retried (a retry would get the same answer), and no API runs the refused image.
        held.open()
        for _ in range(3):
            assert {n for n in api.names("jobs") if n.startswith("search-migrate-")} == {job}
            assert "search-api" not in api.names("deployments")
            assert condition(api, "search", "Ready")["reason"] == "SchemaNewerThanImage"
            time.sleep(1.5)  # a few passes of the operator (retry delay 1 s)


def test_a_second_searchindex_on_the_same_database_is_refused(api, operator, gate, status_server):
    held = gate("migrate")
    status_server.reports["search"] = report("lexical")
    status_server.reports["other"] = report("lexical")
    with operator():
        api.create("searchindexes", searchindex(embeddings=False))
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        first = api.get("jobs", migration_job(api))["spec"]["template"]["spec"]["containers"][0]["env"]
        uid = api.get("searchindexes", "search")["metadata"]["uid"]
        assert {"name": "BACKSCROLL_OWNER_UID", "value": uid} in first
        api.create("searchindexes", searchindex("other", embeddings=False, pod={"nodeSelector": held.selector}))
        job = migration_job(api, "other")
        exit_pod(api, job, 4, REFUSED_OWNER)
        ready = eventually(lambda: condition(api, "other", "Ready").get("reason") == "DatabaseOwnedElsewhere"
                           and condition(api, "other", "Ready"))
        assert ready["status"] == "False" and "belongs to another SearchIndex" in ready["message"]
        assert condition(api, "other", "MigrationsApplied")["reason"] == "DatabaseOwnedElsewhere"
        assert "other-api" not in api.names("deployments")
        assert condition(api, "search", "Ready")["status"] == "True"  # the owner is untouched


def test_a_migration_waits_for_its_cnpg_backup(api, operator, status_server, cnpg_backup_crd):
    status_server.reports["search"] = report("lexical")
    api.secret("pg-app", uri="postgresql://app:pw@pg-rw:5432/app", username="app", password="pw", dbname="app")
    cnpg_cluster(api, "pg", ready=True)
    with operator():
        api.create("searchindexes", searchindex(embeddings=False, database={
            "cnpgClusterRef": {"name": "pg", "readService": "rw"}, "backupBeforeMigration": True}))
        backup = eventually(lambda: next(b for b in api.list("backups") if b["metadata"]["name"].startswith(
            "search-premigrate-")))
        assert backup["spec"] == {"cluster": {"name": "pg"}, "method": "barmanObjectStore"}
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "BackingUp"
                           and condition(api, "search", "Ready"))
        assert backup["metadata"]["name"] in ready["message"]
        assert not [n for n in api.names("jobs") if n.startswith("search-migrate-")], "no migration before it"
        api.patch("backups", backup["metadata"]["name"], {"status": {"phase": "failed", "error": "no object store"}},
                  subresource="status")
        failed = eventually(lambda: condition(api, "search", "Ready").get("reason") == "BackupFailed"
                            and condition(api, "search", "Ready"))
        assert "no object store" in failed["message"]
        assert not [n for n in api.names("jobs") if n.startswith("search-migrate-")]
        api.patch("backups", backup["metadata"]["name"], {"status": {"phase": "completed"}}, subresource="status")
        eventually(lambda: succeeded(api, migration_job(api)))
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
