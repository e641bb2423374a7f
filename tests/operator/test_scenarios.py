"""The operator end to end: kopf running for real against the Kubernetes emulator."""

from __future__ import annotations


from backscroll_operator.builders import embeddings_name
from backscroll_operator.names import Owner

from .conftest import NS, eventually, report

MODEL = "multilingual-e5-small"
SERVER = embeddings_name(Owner("search", NS, ""), MODEL)  # search-embeddings-multilingual-e5-small-<hash>


def searchindex(name: str = "search", embeddings: bool = True, **spec) -> dict:
    body = {
        "apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": "backscroll:0.1.0", "database": {"secretRef": {"name": "db"}},
                 "api": {"replicas": 2, "statusTokenSecretRef": {"name": "status-token"}},
                 **spec},
    }
    if embeddings:
        body["spec"]["embeddings"] = {"model": MODEL, "dimensions": 384,
                                      "server": {"modelId": "intfloat/multilingual-e5-small"}}
    return body


def condition(api, name: str, type_: str) -> dict:
    status = (api.get("searchindexes", name) or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), {})


def test_create_makes_children_with_owner_references(api, operator):
    with operator():
        created = api.create("searchindexes", searchindex())
        uid = created["metadata"]["uid"]
        # Before the migration: the embeddings server (it loads its weights meanwhile) and the
        # Services, but no Deployment of the Backscroll image.
        eventually(lambda: {SERVER} <= api.names("deployments"))
        eventually(lambda: {"search-api", SERVER} <= api.names("services"))
        jobs = eventually(lambda: [j for j in api.list("jobs") if j["metadata"]["name"].startswith("search-migrate-")])
        time_for_two_passes()
        assert not {"search-api", "search-worker"} & api.names("deployments"), "a Deployment before its migration"
        api.complete_job(jobs[0]["metadata"]["name"])
        eventually(lambda: {"search-api", "search-worker"} <= api.names("deployments"))
        children = [*api.list("deployments"), *api.list("services"), *jobs]
        for child in children:
            refs = child["metadata"]["ownerReferences"]
            assert refs == [{"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
                             "name": "search", "uid": uid, "controller": True, "blockOwnerDeletion": True}]
        eventually(lambda: condition(api, "search", "MigrationsApplied")["reason"] == "Succeeded")


def migration_job(api, name: str = "search") -> str:
    return eventually(lambda: next(n for n in api.names("jobs") if n.startswith(f"{name}-migrate-")))


def backfill_jobs(api, name: str = "search") -> set[str]:
    return {n for n in api.names("jobs") if n.startswith(f"{name}-backfill-")}


def bring_up(api, status_server, name: str = "search", embeddings: bool = True) -> None:
    """Create the index and play the controllers and the API until it is Ready."""
    api.create("searchindexes", searchindex(name, embeddings=embeddings))
    api.complete_job(migration_job(api, name))
    if embeddings:
        backfill = eventually(lambda: next(iter(backfill_jobs(api, name))))
        api.complete_job(backfill)
    names = [f"{name}-api", f"{name}-worker", embeddings_name(Owner(name, NS, ""), MODEL)] if embeddings \
        else [f"{name}-api"]
    for child in names:
        eventually(lambda: api.get("deployments", child))
        api.roll_out(child)
    status_server.reports[name] = (report("hybrid", MODEL, embedded=120, total=120) if embeddings
                                   else report("lexical"))
    eventually(lambda: condition(api, name, "Ready").get("status") == "True")


def test_migration_success_starts_the_backfill(api, operator):
    with operator():
        api.create("searchindexes", searchindex())
        job = migration_job(api)
        migrate = api.get("jobs", job)["spec"]["template"]["spec"]["containers"][0]
        assert migrate["args"] == ["migrate", "--model", MODEL, "--dimensions", "384"]
        time_for_two_passes()
        assert not backfill_jobs(api), "the backfill must wait for the migration"
        api.complete_job(job)
        backfill = eventually(lambda: backfill_jobs(api))
        (name,) = backfill
        container = api.get("jobs", name)["spec"]["template"]["spec"]["containers"][0]
        assert container["args"][:3] == ["backfill", "--model", MODEL]
        eventually(lambda: condition(api, "search", "MigrationsApplied")["status"] == "True")
        eventually(lambda: condition(api, "search", "BackfillComplete")["reason"] == "Backfilling")


def time_for_two_passes() -> None:
    import time
    time.sleep(0.8)  # the timer runs every 0.3 s in tests


def test_ready_and_hybrid_with_full_coverage(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        # The rollout's phase follows the backfill Job's completion, which a loaded machine can
        # deliver one pass after the status report that made the index Ready: wait for the settled state.
        eventually(lambda: api.get("searchindexes", "search")["status"].get("rollout", {}).get("phase") == "Complete")
        body = api.get("searchindexes", "search")
        status = body["status"]
        assert status["mode"] == "hybrid"
        assert status["model"] == MODEL and status["coverage"] == "100%"
        assert status["observedGeneration"] == body["metadata"]["generation"]
        assert status["models"] == [{"model": MODEL, "dimensions": 384, "embedded": 120, "total": 120,
                                     "coverage": 1.0, "current": True, "role": "serving"}]
        assert status["rollout"]["phase"] == "Complete" and status["rollout"]["servingModel"] == MODEL
        kinds = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert kinds == {"MigrationsApplied": ("True", "Succeeded"), "EmbeddingsAvailable": ("True", "Available"),
                         "BackfillComplete": ("True", "Complete"), "Ready": ("True", "Ready")}
        # The operator read the status with the status token from the Secret.
        assert status_server.seen_tokens and set(status_server.seen_tokens) == {"Bearer bks_status_test"}
        events = eventually(lambda: [e for e in api.events("search") if e["reason"] == "Ready"])
        assert events[0]["type"] == "Normal" and "hybrid" in events[0]["message"]


def test_backfilling_is_degraded_not_ready(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        status_server.reports["search"] = report(
            "degraded", MODEL, embedded=60, total=120,
            degradation={"category": "backfilling", "coverage": 0.5, "detail": "hybrid over embedded messages"})
        eventually(lambda: api.get("searchindexes", "search")["status"]["mode"] == "degraded")
        status = api.get("searchindexes", "search")["status"]
        assert status["coverage"] == "50%"
        ready = condition(api, "search", "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Degraded") and "backfilling" in ready["message"]


def test_embeddings_server_not_ready_is_degraded(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.roll_out(SERVER, available=0)  # e.g. the pod was evicted, weights reloading
        eventually(lambda: api.get("searchindexes", "search")["status"]["mode"] == "degraded")
        available = condition(api, "search", "EmbeddingsAvailable")
        assert (available["status"], available["reason"]) == ("False", "ServerNotReady")
        assert SERVER in available["message"]
        assert condition(api, "search", "Ready")["reason"] == "ServerNotReady"
        eventually(lambda: [e for e in api.events("search") if e["reason"] == "ModeChanged"
                            and e["type"] == "Warning" and "hybrid -> degraded" in e["message"]])


def test_removing_embeddings_returns_to_lexical_and_removes_the_server(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.patch("searchindexes", "search", {"spec": {"embeddings": None}})
        eventually(lambda: SERVER not in api.names("deployments"))
        eventually(lambda: SERVER not in api.names("services"))
        eventually(lambda: "search-worker" not in api.names("deployments"))
        eventually(lambda: not backfill_jobs(api))
        env = eventually(lambda: api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]["env"]
                         if not any(e["name"].startswith("BACKSCROLL_EMBEDDINGS") for e in
                                    api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]["env"])
                         else None)
        assert {e["name"] for e in env} >= {"BACKSCROLL_DATABASE_URL", "BACKSCROLL_PORT"}
        # A new migration without the model (its image and model are in its name); the old one goes.
        (migration,) = eventually(lambda: [n for n in api.names("jobs") if n.startswith("search-migrate-")
                                           and api.get("jobs", n)["spec"]["template"]["spec"]["containers"][0]["args"]
                                           == ["migrate"]])
        eventually(lambda: {n for n in api.names("jobs") if n.startswith("search-migrate-")} == {migration})
        api.complete_job(migration)
        api.roll_out("search-api")
        status_server.reports["search"] = report("lexical")
        eventually(lambda: api.get("searchindexes", "search")["status"]["mode"] == "lexical")
        status = api.get("searchindexes", "search")["status"]
        assert "model" not in status and "coverage" not in status
        eventually(lambda: condition(api, "search", "Ready")["status"] == "True")
        assert (condition(api, "search", "EmbeddingsAvailable")["status"],
                condition(api, "search", "EmbeddingsAvailable")["reason"]) == ("Unknown", "NotApplicable")


NEW = "arctic-embed-l-v2.0@256"
NEW_SERVER = embeddings_name(Owner("search", NS, ""), NEW)


def two_models(serving: str, target: str, serving_coverage: float = 1.0, target_coverage: float = 0.0) -> dict:
    """A /v1/status body of an API configured with `serving` whose database holds both models."""
    def dimensions(model: str) -> int:
        return 256 if model == NEW else 384

    body = report("hybrid" if serving_coverage >= 1 else "degraded", serving, dimensions=dimensions(serving),
                  embedded=int(100 * serving_coverage), total=100)
    other = report("hybrid", target, dimensions=dimensions(target),
                   embedded=int(100 * target_coverage), total=100)["models"][0]
    body["models"].append({**other, "current": False})
    return body


def env_of(api, deployment: str) -> dict[str, str]:
    live = api.get("deployments", deployment)
    return {e["name"]: e.get("value") for e in live["spec"]["template"]["spec"]["containers"][0]["env"]}


def rollout_of(api) -> dict:
    return (api.get("searchindexes", "search").get("status") or {}).get("rollout") or {}


def job_named(api, prefix: str, model: str) -> str:
    return eventually(lambda: next(n for n in api.names("jobs") if n.startswith(prefix)
                                   and model in " ".join(api.get("jobs", n)["spec"]["template"]["spec"]
                                                         ["containers"][0]["args"])))


def walk_to(api, status_server, target: str, serving: str, kept: bool = False) -> None:
    """Play a rollout from `serving` to `target` through each phase, checking that search keeps
    serving `serving` until the end. `kept`: the target's vectors and backfill record are there
    from before (a rollback), so no backfill runs."""
    api.complete_job(job_named(api, "search-migrate-", target))
    if kept:
        eventually(lambda: rollout_of(api).get("phase") == "CatchingUp")
        status_server.reports["search"] = two_models(serving, target, target_coverage=0.99)
    else:
        backfill = job_named(api, "search-backfill-", target)
        eventually(lambda: rollout_of(api).get("phase") == "Backfilling")
        assert env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving
        assert env_of(api, "search-worker")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving
        ready = condition(api, "search", "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "ModelRollingOut") and target in ready["message"]
        assert api.get("searchindexes", "search")["status"]["mode"] == "hybrid", "search stays hybrid on the old model"
        status_server.reports["search"] = two_models(serving, target, target_coverage=0.99)
        api.complete_job(backfill)
    # The worker moves first; the catch-up waits for its pods.
    eventually(lambda: env_of(api, "search-worker")["BACKSCROLL_EMBEDDINGS_MODEL"] == target)
    assert env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving
    assert not [n for n in api.names("jobs") if n.startswith("search-catchup-")]
    api.roll_out("search-worker")
    catchup = job_named(api, "search-catchup-", target)
    api.complete_job(catchup)
    time_for_two_passes()
    assert env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving, "99% is short of minCoverage 1.0"
    assert "minCoverage" in rollout_of(api)["waitingFor"]
    status_server.reports["search"] = two_models(serving, target, target_coverage=1.0)
    eventually(lambda: env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == target)
    api.roll_out("search-api")
    status_server.reports["search"] = two_models(target, serving)
    eventually(lambda: condition(api, "search", "Ready").get("status") == "True")


def test_a_new_model_rolls_out_blue_green(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        (old,) = backfill_jobs(api)
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": NEW, "dimensions": 256}}})
        eventually(lambda: {SERVER, NEW_SERVER} <= api.names("deployments"))
        api.roll_out(NEW_SERVER)
        walk_to(api, status_server, NEW, MODEL)
        status = api.get("searchindexes", "search")["status"]
        assert status["model"] == NEW and status["rollout"]["phase"] == "Complete"
        assert status["rollout"]["previousModel"] == MODEL
        assert {m["model"]: m["role"] for m in status["models"]} == {NEW: "serving", MODEL: "previous"}
        # The old model's server and the catch-up go; its vectors stay, and so does its backfill
        # record (a rollback then needs only a catch-up).
        eventually(lambda: SERVER not in api.names("deployments"))
        assert old in api.names("jobs")
        eventually(lambda: not [n for n in api.names("jobs") if n.startswith("search-catchup-")])
        assert not [n for n in api.names("jobs") if n.startswith("search-prune-")], "retainPrevious defaults to true"


def test_a_rollback_while_the_old_vectors_are_kept(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": NEW, "dimensions": 256}}})
        eventually(lambda: NEW_SERVER in api.names("deployments"))
        api.roll_out(NEW_SERVER)
        walk_to(api, status_server, NEW, MODEL)
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": MODEL, "dimensions": 384}}})
        eventually(lambda: SERVER in api.names("deployments"))
        api.roll_out(SERVER)
        walk_to(api, status_server, MODEL, NEW, kept=True)
        assert api.get("searchindexes", "search")["status"]["model"] == MODEL


def test_retain_previous_false_prunes_the_superseded_model(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.patch("searchindexes", "search", {"spec": {"embeddings": {
            "model": NEW, "dimensions": 256, "rollout": {"retainPrevious": False}}}})
        eventually(lambda: NEW_SERVER in api.names("deployments"))
        api.roll_out(NEW_SERVER)
        walk_to(api, status_server, NEW, MODEL)
        prune = job_named(api, "search-prune-", MODEL)
        args = api.get("jobs", prune)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args == ["models", "drop", MODEL, "--yes", "--quiet"]
        api.complete_job(prune)
        eventually(lambda: rollout_of(api).get("previousModel") is None)


def test_invalid_spec_sets_a_condition_and_an_event_and_is_not_retried(api, operator):
    with operator():
        body = searchindex()
        body["spec"]["embeddings"]["dimensions"] = 4096
        api.create("searchindexes", body)
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "InvalidSpec"
                           and condition(api, "search", "Ready"))
        assert ready["status"] == "False" and "spec.embeddings.dimensions" in ready["message"]
        events = eventually(lambda: [e for e in api.events("search") if e["reason"] == "InvalidSpec"])
        assert events[0]["type"] == "Warning" and "spec.embeddings.dimensions" in events[0]["message"]
        time_for_two_passes()
        time_for_two_passes()
        assert len([e for e in api.events("search") if e["reason"] == "InvalidSpec"]) == 1
        assert api.writes_to_children() == [], "nothing is built from an invalid spec"
        # Fixing the spec is a new generation, and it is acted on.
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"dimensions": 384}}})
        api.complete_job(migration_job(api))
        eventually(lambda: "search-api" in api.names("deployments"))


def test_missing_secret_is_retried_until_it_exists(api, operator):
    with operator():
        body = searchindex()
        body["spec"]["database"]["secretRef"] = {"name": "later", "key": "uri"}
        api.create("searchindexes", body)
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "SecretMissing"
                           and condition(api, "search", "Ready"))
        assert "spec.database.secretRef" in ready["message"] and "later" in ready["message"]
        assert "search-api" not in api.names("deployments")
        api.secret("later", uri="postgresql://backscroll@db/backscroll")
        api.complete_job(migration_job(api))
        eventually(lambda: "search-api" in api.names("deployments"))
        env = api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "BACKSCROLL_DATABASE_URL",
                "valueFrom": {"secretKeyRef": {"name": "later", "key": "uri"}}} in env


def test_restarted_operator_creates_nothing_twice(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        time_for_two_passes()
    before = {r: api.names(r) for r in ("deployments", "services", "jobs")}
    writes = len(api.writes_to_children())
    with operator():
        time_for_two_passes()
        time_for_two_passes()
        assert condition(api, "search", "Ready")["status"] == "True"
    assert {r: api.names(r) for r in ("deployments", "services", "jobs")} == before
    assert api.writes_to_children()[writes:] == [], "a restart rewrote children that were already right"


def test_deleting_the_searchindex_exits_cleanly(api, operator, status_server):
    with operator() as runner:
        bring_up(api, status_server)
        api.delete("searchindexes", "search")
        eventually(lambda: api.get("searchindexes", "search") is None)
        time_for_two_passes()
    # The operator fixture asserts exit code 0 and no exception; here: nothing failed on the way.
    assert "Traceback" not in runner.output
    assert "[ERROR" not in runner.output and "did not exit in time" not in runner.output


def test_spec_changes_roll_out(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        api.patch("searchindexes", "search", {"spec": {"api": {"replicas": 5}, "worker": {"replicas": 3}}})
        eventually(lambda: api.get("deployments", "search-api")["spec"]["replicas"] == 5)
        eventually(lambda: api.get("deployments", "search-worker")["spec"]["replicas"] == 3)
        # Until the (played) controller has rolled the new pods out, the index is not Ready.
        eventually(lambda: condition(api, "search", "Ready")["reason"] == "ApiNotReady")
        api.roll_out("search-api")
        api.roll_out("search-worker")
        eventually(lambda: condition(api, "search", "Ready")["status"] == "True")
        status = api.get("searchindexes", "search")
        assert status["status"]["observedGeneration"] == status["metadata"]["generation"] == 2


def test_a_name_taken_by_another_object_is_never_overwritten(api, operator):
    foreign = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "search-api", "namespace": NS, "labels": {"team": "other"}},
               "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "x", "image": "other"}]}}}}
    api.create("deployments", foreign)
    with operator():
        api.create("searchindexes", searchindex())
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "NameConflict"
                           and condition(api, "search", "Ready"))
        assert "deployments/search-api" in ready["message"]
        time_for_two_passes()
    live = api.get("deployments", "search-api")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "other"
    assert "ownerReferences" not in live["metadata"]


def test_without_a_status_token_children_run_but_ready_says_why(api, operator, status_server):
    body = searchindex(embeddings=False)
    body["spec"]["api"]["statusTokenSecretRef"] = {"name": "not-yet"}
    with operator():
        api.create("searchindexes", body)
        api.complete_job(migration_job(api))
        eventually(lambda: api.get("deployments", "search-api"))
        api.roll_out("search-api")
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "StatusUnreadable"
                           and condition(api, "search", "Ready"))
        assert "not-yet" in ready["message"] and "spec.api.statusTokenSecretRef" in ready["message"]
        assert status_server.seen_tokens == []
        status_server.reports["search"] = report("lexical")
        api.secret("not-yet", token="bks_status_test")
        eventually(lambda: condition(api, "search", "Ready")["status"] == "True")
        assert api.get("searchindexes", "search")["status"]["mode"] == "lexical"
