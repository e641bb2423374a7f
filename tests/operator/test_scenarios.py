"""The operator end to end on the real control plane: kopf running for real, as the chart's
ServiceAccount, in a namespace that enforces the restricted Pod Security profile. The Deployment
and Job controllers are Kubernetes' own and KWOK runs the pods (a Job's pods complete); a Gate
holds pods Pending where a test needs a Job to be still running."""

from __future__ import annotations

import time

from backscroll_operator.builders import embeddings_name
from backscroll_operator.names import Owner

from .conftest import child_writes, eventually, report

MODEL = "multilingual-e5-small"
IMAGE = "ghcr.io/backscroll/backscroll:0.1.0"
SERVER = embeddings_name(Owner("search", "", ""), MODEL)  # search-embeddings-multilingual-e5-small-<hash>


def searchindex(name: str = "search", embeddings: bool = True, **spec) -> dict:
    body = {
        "apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
        "metadata": {"name": name},
        "spec": {"image": IMAGE, "database": {"secretRef": {"name": "db"}},
                 "api": {"replicas": 2, "statusTokenSecretRef": {"name": "status-token"}},
                 **spec},
    }
    if embeddings:
        body["spec"]["embeddings"] = {"model": MODEL, "dimensions": 384,
                                      "server": {"modelId": "intfloat/multilingual-e5-small"}}
    return body


def condition(api, name: str, type_: str) -> dict:
    return api.condition(name, type_)


def passes_after(replica, count: int = 2) -> None:
    """Until the operator has run `count` more passes (of any trigger): what it would have done by
    then, it has done."""
    start = replica.passes_run()
    eventually(lambda: replica.passes_run() >= start + count)


def listed_after(replica, count: int = 2) -> None:
    """Until the operator's resync has listed SearchIndexes `count` more times."""
    def stamp():
        return replica.sample("backscroll_operator_last_successful_list_timestamp_seconds") or 0.0
    for _ in range(count):
        seen = stamp()
        eventually(lambda: stamp() > seen)


def migration_job(api, name: str = "search") -> str:
    return eventually(lambda: next(n for n in api.names("jobs") if n.startswith(f"{name}-migrate-")))


def backfill_jobs(api, name: str = "search") -> set[str]:
    return {n for n in api.names("jobs") if n.startswith(f"{name}-backfill-")}


def succeeded(api, job: str) -> bool:
    return bool(((api.get("jobs", job) or {}).get("status") or {}).get("succeeded"))


def available(api, deployment: str) -> int:
    return ((api.get("deployments", deployment) or {}).get("status") or {}).get("availableReplicas") or 0


def bring_up(client, status_server, name: str = "search", embeddings: bool = True, **spec) -> None:
    """Create the index; the real controllers and KWOK do the rest, the API reports full coverage."""
    status_server.reports[name] = (report("hybrid", MODEL, embedded=120, total=120) if embeddings
                                   else report("lexical"))
    client.create("searchindexes", searchindex(name, embeddings=embeddings, **spec))
    eventually(lambda: condition(client, name, "Ready").get("status") == "True")


def test_create_makes_children_with_owner_references(api, operator, gate):
    held = gate("everything")
    with operator() as replica:
        created = api.create("searchindexes", searchindex(pod={"nodeSelector": held.selector}))
        uid = created["metadata"]["uid"]
        # Before the migration: the embeddings server (it loads its weights meanwhile) and the
        # Services, but no Deployment of the Backscroll image.
        eventually(lambda: {SERVER} <= api.names("deployments"))
        eventually(lambda: {"search-api", SERVER} <= api.names("services"))
        job = migration_job(api)
        passes_after(replica)
        assert not succeeded(api, job), "the gate holds the migration's pod"
        assert not {"search-api", "search-worker"} & api.names("deployments"), "a Deployment before its migration"
        held.open()
        eventually(lambda: {"search-api", "search-worker"} <= api.names("deployments"))
        children = [*api.list("deployments"), *api.list("services"), *api.list("jobs")]
        for child in children:
            refs = child["metadata"]["ownerReferences"]
            assert refs == [{"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
                             "name": "search", "uid": uid, "controller": True, "blockOwnerDeletion": True}]
        eventually(lambda: condition(api, "search", "MigrationsApplied").get("reason") == "Succeeded")
        # The pods the real ReplicaSets made passed the restricted profile and run on KWOK's nodes.
        eventually(lambda: available(api, "search-api") == 2)


def test_migration_success_starts_the_backfill(api, operator, gate):
    everything, backfill = gate("everything"), gate("backfill")
    with operator() as replica:
        api.create("searchindexes", searchindex(pod={"nodeSelector": everything.selector},
                                                worker={"pod": {"nodeSelector": backfill.selector}}))
        job = migration_job(api)
        migrate = api.get("jobs", job)["spec"]["template"]["spec"]["containers"][0]
        assert migrate["args"] == ["migrate", "--model", MODEL, "--dimensions", "384"]
        passes_after(replica)
        assert not backfill_jobs(api), "the backfill must wait for the migration"
        everything.open()
        (name,) = eventually(lambda: backfill_jobs(api))
        container = api.get("jobs", name)["spec"]["template"]["spec"]["containers"][0]
        assert container["args"][:3] == ["backfill", "--model", MODEL]
        eventually(lambda: condition(api, "search", "MigrationsApplied").get("status") == "True")
        eventually(lambda: condition(api, "search", "BackfillComplete").get("reason") == "Backfilling")
        backfill.open()
        eventually(lambda: condition(api, "search", "BackfillComplete").get("reason") == "Complete")


def test_ready_and_hybrid_with_full_coverage(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
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
        # The backfill Job's completion and the report reach the status in either order (a busy
        # machine): the verdict is read once both have.
        eventually(lambda: api.get("searchindexes", "search")["status"]["mode"] == "degraded" and
                   condition(api, "search", "BackfillComplete").get("status") == "True")
        status = api.get("searchindexes", "search")["status"]
        assert status["coverage"] == "50%"
        ready = condition(api, "search", "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Degraded") and "backfilling" in ready["message"], (ready, status.get("conditions"))


def test_embeddings_server_not_ready_is_degraded(api, operator, status_server, gate):
    server_gate = gate("server")
    server_gate.open()
    with operator():
        bring_up(api, status_server, embeddings=True)
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"server": {
            "pod": {"nodeSelector": server_gate.selector}}}}})
        eventually(lambda: available(api, SERVER) == 1 and
                   api.get("deployments", SERVER)["status"].get("updatedReplicas") == 1 and
                   condition(api, "search", "Ready").get("status") == "True" and
                   condition(api, "search", "Ready").get("observedGeneration") == 2)
        # The server's pod is evicted and its replacement cannot be scheduled.
        server_gate.close()
        for pod in api.list("pods", f"app.kubernetes.io/instance=search,app.kubernetes.io/component=embeddings"):
            api.delete("pods", pod["metadata"]["name"])
        eventually(lambda: api.get("searchindexes", "search")["status"]["mode"] == "degraded")
        ready_for = condition(api, "search", "EmbeddingsAvailable")
        assert (ready_for["status"], ready_for["reason"]) == ("False", "ServerNotReady")
        assert SERVER in ready_for["message"]
        eventually(lambda: condition(api, "search", "Ready")["reason"] == "ServerNotReady")
        eventually(lambda: [e for e in api.events("search") if e["reason"] == "ModeChanged"
                            and e["type"] == "Warning" and "hybrid -> degraded" in e["message"]])
        server_gate.open()
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")


def test_removing_embeddings_returns_to_lexical_and_removes_the_server(api, operator, status_server):
    with operator():
        bring_up(api, status_server)
        status_server.reports["search"] = report("lexical")
        api.patch("searchindexes", "search", {"spec": {"embeddings": None}})
        eventually(lambda: SERVER not in api.names("deployments"))
        eventually(lambda: SERVER not in api.names("services"))
        eventually(lambda: "search-worker" not in api.names("deployments"))
        eventually(lambda: not backfill_jobs(api))

        def api_env():
            return api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]["env"]
        env = eventually(lambda: not any(e["name"].startswith("BACKSCROLL_EMBEDDINGS") for e in api_env()) and api_env())
        assert {e["name"] for e in env} >= {"BACKSCROLL_DATABASE_URL", "BACKSCROLL_PORT"}
        # A new migration without the model (its image and model are in its name); the old one goes.
        migrations = eventually(lambda: {n for n in api.names("jobs") if n.startswith("search-migrate-")} == {
            n for n in api.names("jobs") if n.startswith("search-migrate-")
            and api.get("jobs", n)["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]}
            and {n for n in api.names("jobs") if n.startswith("search-migrate-")})
        assert len(migrations) == 1
        eventually(lambda: api.get("searchindexes", "search")["status"]["mode"] == "lexical")
        status = api.get("searchindexes", "search")["status"]
        assert "model" not in status and "coverage" not in status
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        available_ = condition(api, "search", "EmbeddingsAvailable")
        assert (available_["status"], available_["reason"]) == ("Unknown", "NotApplicable")


NEW = "arctic-embed-l-v2.0@256"
NEW_SERVER = embeddings_name(Owner("search", "", ""), NEW)


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


def jobs_for(api, prefix: str, model: str) -> list[str]:
    return [n for n in api.names("jobs") if n.startswith(prefix)
            and model in " ".join(api.get("jobs", n)["spec"]["template"]["spec"]["containers"][0]["args"])]


def walk_to(api, status_server, worker_gate, target: str, serving: str, dimensions: int, kept: bool = False,
            **embeddings) -> None:
    """Roll out from `serving` to `target`, checking that search keeps serving `serving` until the
    new model covers minCoverage. The worker's gate (worker.pod: the worker and the backfill and
    catch-up Jobs) is closed first, so the new model's backfill is held while the test looks.
    `kept`: the target's vectors and backfill record are there from before (a rollback): no
    backfill runs."""
    worker_gate.close()
    status_server.reports["search"] = two_models(serving, target, target_coverage=0.0 if not kept else 0.99)
    api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": target, "dimensions": dimensions,
                                                                   **embeddings}}})
    if not kept:
        eventually(lambda: jobs_for(api, "search-backfill-", target))
        eventually(lambda: rollout_of(api).get("phase") == "Backfilling")
        assert env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving
        assert env_of(api, "search-worker")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving
        ready = condition(api, "search", "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "ModelRollingOut") and target in ready["message"]
        assert api.get("searchindexes", "search")["status"]["mode"] == "hybrid", "search stays hybrid on the old model"
        status_server.reports["search"] = two_models(serving, target, target_coverage=0.99)
    else:
        eventually(lambda: rollout_of(api).get("phase") == "CatchingUp")
    worker_gate.open()
    # The worker moves first (the decision's order is tests/operator/test_rollout.py's), then a
    # catch-up embeds what arrived between the backfill and the worker's switch.
    eventually(lambda: env_of(api, "search-worker")["BACKSCROLL_EMBEDDINGS_MODEL"] == target)
    assert env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving
    catchup = eventually(lambda: jobs_for(api, "search-catchup-", target))
    eventually(lambda: all(succeeded(api, job) for job in catchup))
    eventually(lambda: "minCoverage" in (rollout_of(api).get("waitingFor") or ""))
    assert env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == serving, "99% is short of minCoverage 1.0"
    status_server.reports["search"] = two_models(serving, target, target_coverage=1.0)
    eventually(lambda: env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == target)
    status_server.reports["search"] = two_models(target, serving)
    eventually(lambda: condition(api, "search", "Ready").get("status") == "True")


def bring_up_gated(api, status_server, gate):
    worker_gate = gate("worker")
    worker_gate.open()
    bring_up(api, status_server, worker={"pod": {"nodeSelector": worker_gate.selector}})
    eventually(lambda: rollout_of(api).get("phase") == "Complete")
    return worker_gate


def test_a_new_model_rolls_out_blue_green(api, operator, status_server, gate):
    with operator():
        worker_gate = bring_up_gated(api, status_server, gate)
        (old,) = backfill_jobs(api)
        walk_to(api, status_server, worker_gate, NEW, MODEL, 256)
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


def test_a_rollback_while_the_old_vectors_are_kept(api, operator, status_server, gate):
    with operator():
        worker_gate = bring_up_gated(api, status_server, gate)
        walk_to(api, status_server, worker_gate, NEW, MODEL, 256)
        walk_to(api, status_server, worker_gate, MODEL, NEW, 384, kept=True)
        assert api.get("searchindexes", "search")["status"]["model"] == MODEL


def test_retain_previous_false_prunes_the_superseded_model(api, operator, status_server, gate):
    with operator():
        worker_gate = bring_up_gated(api, status_server, gate)
        walk_to(api, status_server, worker_gate, NEW, MODEL, 256, rollout={"retainPrevious": False})
        (prune,) = eventually(lambda: [n for n in api.names("jobs") if n.startswith("search-prune-")])
        args = api.get("jobs", prune)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args == ["models", "drop", MODEL, "--yes", "--quiet"]
        eventually(lambda: rollout_of(api).get("previousModel") is None)


def test_a_spec_the_server_cannot_refuse_but_the_operator_must_sets_a_condition_and_is_not_retried(
        api, operator, status_server, proxy):
    """The CRD refuses what it can (tests/operator/test_real_server.py); a model's dimensions changed
    under its name after another model was in between (A 384 -> B -> A 256) is seen only by the
    operator, which remembers each model's dimensions in the status."""
    with operator() as replica:
        bring_up(api, status_server)
        status_server.reports["search"] = two_models(MODEL, NEW, target_coverage=1.0)
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": NEW, "dimensions": 256}}})
        eventually(lambda: env_of(api, "search-api")["BACKSCROLL_EMBEDDINGS_MODEL"] == NEW)
        status_server.reports["search"] = two_models(NEW, MODEL)
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        assert {m["model"] for m in api.get("searchindexes", "search")["status"]["models"]} == {MODEL, NEW}
        passes_after(replica, 2)
        since = time.monotonic()
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": MODEL, "dimensions": 256}}})
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "InvalidSpec"
                           and condition(api, "search", "Ready"))
        assert ready["status"] == "False" and "spec.embeddings.dimensions" in ready["message"]
        events = eventually(lambda: [e for e in api.events("search") if e["reason"] == "InvalidSpec"])
        assert events[0]["type"] == "Warning" and "spec.embeddings.dimensions" in events[0]["message"]
        passes_after(replica, 4)
        assert len([e for e in api.events("search") if e["reason"] == "InvalidSpec"]) == 1
        assert child_writes(proxy, since) == [], "nothing is built from an invalid spec"
        # Fixing the spec is a new generation, and it is acted on.
        api.patch("searchindexes", "search", {"spec": {"embeddings": {"model": NEW, "dimensions": 256}}})
        eventually(lambda: condition(api, "search", "Ready").get("reason") not in (None, "InvalidSpec"))


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
        eventually(lambda: "search-api" in api.names("deployments"))
        env = api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "BACKSCROLL_DATABASE_URL",
                "valueFrom": {"secretKeyRef": {"name": "later", "key": "uri"}}} in env


def test_restarted_operator_creates_nothing_twice(api, operator, status_server, proxy):
    with operator() as first:
        bring_up(api, status_server)
        passes_after(first)
    before = api.versions("deployments", "services", "jobs", "poddisruptionbudgets", "networkpolicies", "secrets")
    since = time.monotonic()
    with operator() as second:
        passes_after(second, 4)
        assert condition(api, "search", "Ready")["status"] == "True"
    assert api.versions("deployments", "services", "jobs", "poddisruptionbudgets", "networkpolicies",
                        "secrets") == before
    assert child_writes(proxy, since) == [], "a restart rewrote children that were already right"


def test_deleting_the_searchindex_exits_cleanly(api, operator, status_server):
    with operator() as replica:
        bring_up(api, status_server)
        api.delete("searchindexes", "search")
        eventually(lambda: api.get("searchindexes", "search") is None)
        # The garbage collector removes the children through their owner references.
        eventually(lambda: not api.names("deployments") and not api.names("jobs"))
        listed_after(replica)
    assert "Traceback" not in replica.output
    assert "[ERROR" not in replica.output


def test_spec_changes_roll_out(api, operator, status_server, gate):
    api_gate = gate("api")
    api_gate.open()
    with operator():
        bring_up(api, status_server, api={"replicas": 2, "statusTokenSecretRef": {"name": "status-token"},
                                          "pod": {"nodeSelector": api_gate.selector}})
        api_gate.close()  # the new pods wait: the index is not Ready until they run
        api.patch("searchindexes", "search", {"spec": {"api": {"replicas": 5}, "worker": {"replicas": 3}}})
        eventually(lambda: api.get("deployments", "search-api")["spec"]["replicas"] == 5)
        eventually(lambda: api.get("deployments", "search-worker")["spec"]["replicas"] == 3)
        eventually(lambda: condition(api, "search", "Ready").get("reason") == "ApiNotReady")
        api_gate.open()
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        assert available(api, "search-api") == 5 and available(api, "search-worker") == 3
        status = api.get("searchindexes", "search")
        assert status["status"]["observedGeneration"] == status["metadata"]["generation"] == 2


def test_a_name_taken_by_another_object_is_never_overwritten(api, operator):
    labels = {"team": "other"}
    foreign = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "search-api", "labels": labels},
               "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                   "metadata": {"labels": labels},
                   "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                                "seccompProfile": {"type": "RuntimeDefault"}},
                            "containers": [{"name": "x", "image": "docker.io/library/other:1", "securityContext": {
                                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}}}
    api.create("deployments", foreign)
    with operator() as replica:
        api.create("searchindexes", searchindex())
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "NameConflict"
                           and condition(api, "search", "Ready"))
        assert "deployments/search-api" in ready["message"]
        passes_after(replica)
    live = api.get("deployments", "search-api")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "docker.io/library/other:1"
    assert "ownerReferences" not in live["metadata"]


def test_without_a_status_token_children_run_but_ready_says_why(api, operator, status_server):
    body = searchindex(embeddings=False)
    body["spec"]["api"]["statusTokenSecretRef"] = {"name": "not-yet"}
    with operator():
        api.create("searchindexes", body)
        eventually(lambda: available(api, "search-api") == 2)
        ready = eventually(lambda: condition(api, "search", "Ready").get("reason") == "StatusUnreadable"
                           and condition(api, "search", "Ready"))
        assert "not-yet" in ready["message"] and "spec.api.statusTokenSecretRef" in ready["message"]
        assert status_server.seen_tokens == []
        status_server.reports["search"] = report("lexical")
        api.secret("not-yet", token="bks_status_test")
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        assert api.get("searchindexes", "search")["status"]["mode"] == "lexical"


def test_idle_passes_write_nothing(api, operator, status_server, proxy):
    """Ten resync passes over a Ready index send no write: each child is compared with what the
    server stores (its own canonical forms), so nothing is applied again."""
    with operator(interval_s=1) as replica:
        bring_up(api, status_server)
        passes_after(replica, 2)
        time.sleep(1)
        before = api.versions("deployments", "services", "jobs", "poddisruptionbudgets", "networkpolicies",
                              "searchindexes")
        since, start = time.monotonic(), replica.passes_run("resync")
        eventually(lambda: replica.passes_run("resync") >= start + 10)
        assert child_writes(proxy, since) == []
        assert api.versions("deployments", "services", "jobs", "poddisruptionbudgets", "networkpolicies",
                            "searchindexes") == before
