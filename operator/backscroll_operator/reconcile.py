"""One reconcile pass: make the children match the plan, advance the Jobs, read the API's status.

Idempotent by construction: a child is applied (server-side apply, the operator as its field
manager) only when it is absent, its applied-hash differs from the manifest's, or the live object
no longer holds what the manifest says (someone scaled it, changed its image, removed a field);
otherwise it is left alone, so a second pass, or a restarted operator, writes nothing. A child
is only ever changed or removed when its controller owner reference names this SearchIndex's uid.
"""

from __future__ import annotations

import base64
import logging
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from . import apistatus, builders, rollout
from .config import OperatorConfig
from .kube import FIELD_MANAGER, Conflict, Kube
from .names import HANDOVER_MANAGER, HASH_ANNOTATION, IMAGE_ANNOTATION, MODEL_ANNOTATION, TOKEN_ANNOTATION, Owner
from .spec import SearchIndexSpec
from .status import EXIT_REASONS, DeploymentState, Facts, JobState

log = logging.getLogger(__name__)


class Blocked(Exception):
    """Something outside the spec stops the pass (a missing Secret, a name taken by an object the
    index does not own); `field` names the spec field that leads to it. Retried with a delay."""

    def __init__(self, reason: str, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.reason = reason
        self.field = field


def _owned(obj: dict, owner: Owner) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner.uid and r.get("controller") for r in refs)


def _hash(obj: dict | None) -> str | None:
    return ((obj or {}).get("metadata", {}).get("annotations") or {}).get(HASH_ANNOTATION)


def holds(live, wanted) -> bool:
    """Whether the live object still says everything the manifest says. Extra fields (defaults
    the API server filled in, status, fields other managers own) do not count; a changed or
    missing one does."""
    if isinstance(wanted, dict):
        return isinstance(live, dict) and all(k in live and holds(live[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(live, list) and len(live) == len(wanted) and all(map(holds, live, wanted))
    return live == wanted


def _not_owned(resource: str, name: str) -> Blocked:
    return Blocked("NameConflict", "metadata.name",
                   f"{resource}/{name} exists and is not owned by this SearchIndex: rename one of them")


def _stored(obj: dict) -> dict:
    """What an apply decides about an object: its spec and the metadata a manifest sets."""
    meta = obj.get("metadata") or {}
    return {"spec": obj.get("spec"), "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {}, "ownerReferences": meta.get("ownerReferences") or []}


def _owns_replicas(live: dict, manager: str = FIELD_MANAGER) -> bool:
    """Whether `manager` applied spec.replicas of the live object (its managedFields say so)."""
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("operation") == "Apply" and \
                "f:replicas" in ((entry.get("fieldsV1") or {}).get("f:spec") or {}):
            return True
    return False


def hand_over_replicas(kube: Kube, owner: Owner, resource: str, live: dict, manifest: dict) -> None:
    """Before a manifest that leaves `replicas` to someone else (an HPA, `manageReplicas: false`)
    is applied over one that set it: a real API server resets a field whose only manager stops
    applying it to its default (1 for a Deployment), which would drop the pods to one. As
    Kubernetes' documentation transfers replicas to an HPA, a second field manager first applies
    the current value alone, so the field keeps an owner and its value until the autoscaler (or
    whoever scales) changes it."""
    if "replicas" in manifest.get("spec", {}) or not _owns_replicas(live):
        return
    log.info("handing %s/%s's replicas (%s) over to %s", resource, manifest["metadata"]["name"],
             live["spec"].get("replicas"), HANDOVER_MANAGER)
    kube.apply(resource, owner.namespace, manifest["metadata"]["name"],
               {"apiVersion": manifest["apiVersion"], "kind": manifest["kind"],
                "metadata": {"name": manifest["metadata"]["name"]},
                "spec": {"replicas": live["spec"].get("replicas", 1)}}, field_manager=HANDOVER_MANAGER)


def ensure(kube: Kube, owner: Owner, resource: str, manifest: dict) -> dict:
    """The child as it now stands: applied if absent, changed or drifted; untouched otherwise.

    The live object is compared with the manifest as the server would store it: a server keeps
    quantities in its canonical forms (`cpu: 0.5` as 500m, `1024Mi` as 1Gi) and fills defaults, so
    where the live object does not hold the manifest's text, a dry-run apply says whether the
    difference is only that. Only a real difference is applied: an idle pass writes nothing."""
    name = manifest["metadata"]["name"]
    live = kube.get(resource, owner.namespace, name)
    if live is not None and not _owned(live, owner):
        raise _not_owned(resource, name)
    if live is not None and _hash(live) == _hash(manifest):
        if holds(live, manifest):
            return live
        if _stored(kube.apply(resource, owner.namespace, name, manifest, dry_run=True)) == _stored(live):
            return live
    if live is not None and "replicas" in (live.get("spec") or {}):
        hand_over_replicas(kube, owner, resource, live, manifest)
    log.info("%s %s/%s", "creating" if live is None else "applying", resource, name)
    return kube.apply(resource, owner.namespace, name, manifest)


def create_once(kube: Kube, owner: Owner, resource: str, manifest: dict) -> dict:
    """A child that is never changed once created (a Job, the token Secret)."""
    name = manifest["metadata"]["name"]
    live = kube.get(resource, owner.namespace, name)
    if live is None:
        try:
            log.info("creating %s/%s", resource, name)
            return kube.create(resource, owner.namespace, manifest)
        except Conflict:  # created meanwhile by a concurrent pass: take it from there
            live = kube.get(resource, owner.namespace, name)
    if live is None:
        raise Blocked("NameConflict", "metadata.name", f"{resource}/{name} could not be created or read")
    if not _owned(live, owner):
        raise _not_owned(resource, name)
    return live


def remove(kube: Kube, owner: Owner, resource: str, name: str) -> None:
    live = kube.get(resource, owner.namespace, name)
    if live is not None and _owned(live, owner):
        log.info("removing %s/%s", resource, name)
        kube.delete(resource, owner.namespace, name)


def remove_others(kube: Kube, owner: Owner, resource: str, component: str, keep) -> None:
    """Children of `component` from an earlier plan (another image, another model)."""
    labels = {"app.kubernetes.io/instance": owner.name, "app.kubernetes.io/component": component}
    for child in kube.list(resource, owner.namespace, labels):
        name = child["metadata"]["name"]
        if name not in keep and _owned(child, owner):
            log.info("removing %s/%s (superseded)", resource, name)
            kube.delete(resource, owner.namespace, name)


def _data(secret: dict) -> dict:
    return {**(secret.get("data") or {}), **(secret.get("stringData") or {})}


def check_secrets(kube: Kube, owner: Owner, spec: SearchIndexSpec, read: dict[str, dict] | None = None) -> str:
    """Every Secret the pods need exists and has its keys; otherwise Blocked naming the field.
    Returns which version of them the pods read (`secret_versions`): in the pod templates, it rolls
    the pods when one rotates.

    Checked here so a platform team reads "secret X not found" on the SearchIndex instead of
    finding pods stuck in CreateContainerConfigError.
    """
    db = spec.database
    refs = []
    if db.cnpg_cluster_ref is not None:
        keys = ["uri"] if db.cnpg_cluster_ref.read_service == "rw" else ["uri", "username", "password", "dbname"]
        refs.append(("spec.database.cnpgClusterRef", db.cnpg_cluster_ref.app_secret.name, keys))
    else:
        refs.append(("spec.database.secretRef", db.secret_ref.name, [db.secret_ref.key]))
    if db.read_replica_secret_ref is not None:
        refs.append(("spec.database.readReplicaSecretRef", db.read_replica_secret_ref.name,
                     [db.read_replica_secret_ref.key]))
    emb = spec.embeddings
    if emb is not None and emb.external is not None and emb.external.api_key_secret_ref is not None:
        ref = emb.external.api_key_secret_ref
        refs.append(("spec.embeddings.external.apiKeySecretRef", ref.name, [ref.key]))
    # The embeddings server's Hub token: checked too, but not in the versions (the Backscroll pods
    # do not read it, and its rotation must not roll them).
    unversioned = []
    if emb is not None and emb.in_cluster and emb.server is not None and emb.server.model_source.token_secret_ref:
        ref = emb.server.model_source.token_secret_ref
        unversioned.append(("spec.embeddings.server.modelSource.tokenSecretRef", ref.name, [ref.key]))
    read = {} if read is None else read  # the caller's, filled: the Secrets as read
    for field, name, keys in [*refs, *unversioned]:
        secret = read[name] if name in read else kube.get("secrets", owner.namespace, name)
        if secret is None:
            raise Blocked("SecretMissing", field, f"secret {name} not found in namespace {owner.namespace}")
        read[name] = secret
        data = _data(secret)
        for key in keys:
            if key not in data:
                raise Blocked("SecretMissing", field, f"secret {name} has no key {key!r}")
    return secret_versions([read[name] for name in dict.fromkeys(name for _, name, _ in refs)])


def secret_versions(secrets_read: list[dict]) -> str:
    """`NAME:UID:RESOURCEVERSION` of each Secret, comma-separated: what the pod templates carry.

    Only the Secrets' metadata, never their values. A digest of the values (it was once an
    unsalted, truncated sha256 of them) let anyone who can read Deployments test password guesses
    offline; an HMAC would need a key the operator keeps and shares between its replicas. The
    uid and resourceVersion change whenever the Secret is written (and a deleted and recreated
    Secret has a new uid), so a rotation still rolls the pods. The price: a write that changes
    only the Secret's metadata (a label, an annotation) rolls them too; a write that changes
    nothing does not (the API server does not store it). docs/operator.md says so.
    """
    parts = []
    for secret in secrets_read:
        meta = secret.get("metadata") or {}
        parts.append(f"{meta.get('name', '')}:{meta.get('uid', '')}:{meta.get('resourceVersion', '')}")
    return ",".join(parts)


def status_token(kube: Kube, owner: Owner, spec: SearchIndexSpec) -> tuple[dict | None, str | None]:
    """(the operator's own token Secret, None) or (None, a given Secret's token).

    By default the operator generates a `status` token into a Secret it owns and a Job registers
    its digest; `spec.api.statusTokenSecretRef` names a token made some other way instead.
    """
    ref = spec.api.status_token_secret_ref
    if ref is None:
        token = f"bks_status_{secrets.token_urlsafe(32)}"
        return create_once(kube, owner, "secrets", builders.status_token_secret(owner, token)), None
    return None, _secret_value(kube.get("secrets", owner.namespace, ref.name), ref.key)


def _secret_value(secret: dict | None, key: str) -> str | None:
    """A Secret's value as text: `data` is base64 (what an API server answers); `stringData`
    is plain (what a create sent, as the tests' in-memory clients keep it)."""
    if key in ((secret or {}).get("data") or {}):
        return base64.b64decode(secret["data"][key]).decode().strip()
    return ((secret or {}).get("stringData") or {}).get(key)


def read_report(owner: Owner, spec: SearchIndexSpec, config: OperatorConfig, token: str | None,
                why_not: str) -> tuple[dict | None, str | None]:
    if token is None:
        return None, why_not
    try:
        url = builders.status_url(owner, spec, config.status_url)
        return apistatus.read(url, token, config.status_timeout_s), None
    except apistatus.Unreadable as exc:
        return None, str(exc)


def database_identity(kube: Kube, owner: Owner, spec: SearchIndexSpec,
                      read: dict[str, dict]) -> tuple[str | None, str | None]:
    """(which database, with its uid; why a migration must wait for it, or None).

    The uid tells a new database from the old one under the same name: a Secret deleted and made
    again, a CloudNativePG cluster re-created, is an empty database that needs its migration. A
    CloudNativePG cluster writes its `-app` Secret before it has bootstrapped (and loses its
    primary for a moment in a failover): a migration waits for its Ready condition."""
    ref = spec.database.cnpg_cluster_ref
    if ref is None:
        secret = read[spec.database.secret_ref.name]
        return f"secret {spec.database.secret_ref.name} (uid {secret['metadata'].get('uid')})", None
    cluster = kube.get("clusters", owner.namespace, ref.name)
    if cluster is None:
        return None, f"CloudNativePG cluster {ref.name} not found in namespace {owner.namespace}"
    identity = f"CloudNativePG cluster {ref.name} (uid {cluster['metadata'].get('uid')})"
    status = cluster.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    if ready.get("status") != "True":
        said = ready.get("message") or status.get("phase") or "no Ready condition yet"
        return identity, f"CloudNativePG cluster {ref.name} is not Ready: {said}"
    return identity, None


def backup_before_migration(kube: Kube, owner: Owner, spec: SearchIndexSpec, database: str) -> tuple[str, str] | None:
    """(reason, message) while the migration of this identity must wait for its CloudNativePG
    Backup (spec.database.backupBeforeMigration), None once it completed. A failed one holds the
    migration until someone deletes it (the next pass takes another) or turns the option off."""
    manifest = builders.premigration_backup(owner, spec, builders.migration_identity(spec, database))
    name, cluster = manifest["metadata"]["name"], spec.database.cnpg_cluster_ref.name
    status = create_once(kube, owner, "backups", manifest).get("status") or {}
    phase = status.get("phase")
    if phase == "completed":
        return None
    if phase == "failed":
        return ("BackupFailed", f"backup {name} of CloudNativePG cluster {cluster} failed: "
                f"{status.get('error') or 'no error given'}; the migration waits: delete the Backup to take another, "
                "or set spec.database.backupBeforeMigration to false")
    return ("BackingUp", f"the migration waits for backup {name} of CloudNativePG cluster {cluster} "
            f"(phase {phase or 'not started'})")


# A pod's termination message holds the end of its log; the error is its last `backscroll:` line.
ERROR_PREFIX = "backscroll: "
ERROR_MAX = 300


def failure(kube: Kube, owner: Owner, job: str) -> str:
    """The first line of the error a failed migration pod ended with (its termination message)."""
    for pod in kube.list("pods", owner.namespace, {"batch.kubernetes.io/job-name": job}):
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            message = ((container.get("state") or {}).get("terminated") or {}).get("message") or ""
            lines = [line.strip() for line in message.splitlines() if line.strip()]
            said = [line for line in lines if line.startswith(ERROR_PREFIX)] or lines
            if said:
                return said[-1][:ERROR_MAX]
    return f"no error message: see `kubectl logs job/{job}`"


def _time(text: str | None) -> datetime | None:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if text else None


def migrate(kube: Kube, owner: Owner, spec: SearchIndexSpec, config: OperatorConfig, database: str | None,
            waiting: str | None, record: dict, now: datetime) -> tuple[JobState, dict]:
    """The migration Job of this image, model and database, one attempt at a time: a failed attempt
    is followed, after a backoff that doubles, by a new Job. Returns its state and the status'
    `migration` record (what the next pass remembers: the attempt, the last error)."""
    identity = builders.migration_identity(spec, database or "")
    if record.get("identity") != identity:
        record = {}  # another image, model or database: attempts start again
    attempt = record.get("attempt") or 1
    name = builders.migration_name(owner, spec, database or "", attempt)
    live = kube.get("jobs", owner.namespace, name)
    if live is None and database is not None and waiting is None:
        live = create_once(kube, owner, "jobs", builders.migration_job(owner, spec, database, attempt))
    state = JobState.of(name, live)
    if state.phase == "failed":
        if record.get("failedAttempt") != attempt:
            delay = min(config.migration_retry_s * 2 ** (attempt - 1), config.migration_retry_max_s)
            record = {**record, "failedAttempt": attempt, "lastError": failure(kube, owner, name),
                      "retryAt": (now + timedelta(seconds=delay)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        # A refusal (an image older than the schema, a database another index owns) is not
        # retried: only a new spec (a new Job) or a person (deleting this one) changes its answer.
        refused = state.exit_code in EXIT_REASONS
        if now >= (_time(record.get("retryAt")) or now) and waiting is None and not refused:
            attempt += 1
            name = builders.migration_name(owner, spec, database, attempt)
            state = JobState.of(name, create_once(kube, owner, "jobs",
                                                  builders.migration_job(owner, spec, database, attempt)))
            record = {**record, "retryAt": None}
    if database is not None:
        # Superseded: another image, model or database's, or this one's failed attempt before.
        remove_others(kube, owner, "jobs", "migrate", keep={name})
    return state, {**record, "identity": identity, "attempt": attempt, "job": name, "database": database}


@dataclass(frozen=True)
class Outcome:
    facts: Facts
    plan: rollout.Plan


def _annotation(obj: dict | None, key: str) -> str | None:
    return (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(key)


def _image(deployment: dict | None) -> str | None:
    if deployment is None:
        return None
    containers = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    return _annotation(deployment, IMAGE_ANNOTATION) or containers[0].get("image")


def _component(child: dict) -> str | None:
    # By label, not by name: a long index name cuts the `-backfill` out of the Job's name.
    return ((child.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component")


def _only_job(kube: Kube, owner: Owner, component: str, manifest: dict | None) -> None:
    """The one Job of `component` the plan wants (created once), or none; others removed."""
    keep = {create_once(kube, owner, "jobs", manifest)["metadata"]["name"]} if manifest is not None else set()
    remove_others(kube, owner, "jobs", component, keep=keep)


def converge(kube: Kube, owner: Owner, spec: SearchIndexSpec, config: OperatorConfig,
             remembered: dict | None = None, migration: dict | None = None) -> Outcome:
    """`remembered`: the status' rollout block of the last pass (previousModel, catchUpOwed);
    `migration`: its migration block (the attempt, the last error)."""
    remembered = remembered or {}
    previous = remembered.get("previousModel")
    read: dict[str, dict] = {}
    versions = check_secrets(kube, owner, spec, read)
    token_secret, given_token = status_token(kube, owner, spec)

    database, waiting = database_identity(kube, owner, spec, read)
    backup = None
    if waiting is None and database is not None and spec.database.backup_before_migration:
        backup = backup_before_migration(kube, owner, spec, database)
        waiting = backup[1] if backup is not None else None
    migration_state, migration_record = migrate(kube, owner, spec, config, database, waiting, migration or {},
                                                datetime.now(UTC))
    migrated = migration_state.phase == "succeeded"
    # Every Job of the index, read once: the registrations, backfills, catch-up and prune below.
    jobs = {j["metadata"]["name"]: j for j in kube.list("jobs", owner.namespace, {"app.kubernetes.io/instance": owner.name})
            if _owned(j, owner)}

    token, why_not = given_token, (f"spec.api.statusTokenSecretRef: secret {spec.api.status_token_secret_ref.name} "
                                   f"has no token" if spec.api.status_token_secret_ref else "")
    if token_secret is not None:
        # Registered once the schema (and its `status` token kind) exists; read only after that.
        register = builders.register_job(owner, spec, token_secret["metadata"]["uid"], migration_state.name)
        register_state = JobState.of(register["metadata"]["name"],
                                     create_once(kube, owner, "jobs", register) if migrated else
                                     kube.get("jobs", owner.namespace, register["metadata"]["name"]))
        uid = token_secret["metadata"]["uid"]
        registered = {n for n, j in jobs.items() if _component(j) == "register"
                      and _annotation(j, TOKEN_ANNOTATION) == uid and JobState.of(n, j).phase == "succeeded"}
        # The last registration of this Secret stands until the next one succeeded (a new image's).
        remove_others(kube, owner, "jobs", "register",
                      keep={register_state.name} | (set() if register_state.phase == "succeeded" else registered))
        if registered:
            token = _secret_value(token_secret, "token")
        else:
            why_not = f"the status token is registered by job {register_state.name} after the migration"

    live_api = kube.get("deployments", owner.namespace, builders.api_name(owner))
    live_worker = kube.get("deployments", owner.namespace, builders.worker_name(owner))
    report, error = read_report(owner, spec, config, token, why_not)
    target = spec.embeddings

    def state(name: str) -> JobState:
        return JobState.of(name, jobs.get(name))

    # A backfill or catch-up counts for the database it ran against only (its name holds both).
    db = database or ""
    backfilled = frozenset(model for n, j in jobs.items() if _component(j) == "backfill"
                           and (model := _annotation(j, MODEL_ANNOTATION)) is not None
                           and n == builders.backfill_name(owner, model, db) and JobState.of(n, j).phase == "succeeded")
    catchup = state(builders.catchup_name(owner, target.model, db)) if target else None
    prune = state(builders.prune_name(owner, previous)) if previous else None
    if prune is not None and prune.phase == "succeeded":
        previous = None  # its vectors are gone: nothing left to prune or to roll back to quickly
    coverage = {m["model"]: m.get("coverage") or 0.0 for m in (report or {}).get("models") or []}
    worker_state = DeploymentState.of(builders.worker_name(owner), live_worker)
    api_state = DeploymentState.of(builders.api_name(owner), live_api)
    seen = rollout.Observed(
        migrated=migrated, api_exists=live_api is not None, api_image=_image(live_api),
        api_embeddings=builders.read_embeddings(live_api),
        api_rolled_out=api_state.settled,
        api_annotated=_annotation(live_api, IMAGE_ANNOTATION) is not None,
        worker_exists=live_worker is not None,
        worker_embeddings=builders.read_embeddings(live_worker),
        worker_rolled_out=worker_state.settled,
        backfilled=backfilled, caught_up=catchup is not None and catchup.phase == "succeeded",
        catchup_pending=catchup is not None and catchup.phase in ("running", "failed"),
        catchup_failed=catchup is not None and catchup.phase == "failed",
        coverage=coverage, previous=previous, catchup_owed=remembered.get("catchUpOwed"))
    plan = rollout.plan(spec, seen)

    live: dict[str, dict] = {}
    for resource, name, manifest in builders.desired(owner, spec, plan, versions):
        if manifest is None:
            remove(kube, owner, resource, name)
        else:
            live[f"{resource}/{name}"] = ensure(kube, owner, resource, manifest)
    servers = {builders.embeddings_name(owner, emb.model) for emb in plan.servers}
    servers |= {builders.embeddings_name(owner, model) for model in plan.retain_servers}
    remove_others(kube, owner, "deployments", "embeddings", keep=servers)
    remove_others(kube, owner, "services", "embeddings", keep=servers)
    remove_others(kube, owner, "poddisruptionbudgets", "embeddings", keep=servers)

    # The backfill embeds rows the migration's vector index must already cover: it waits.
    backfill_state = None
    if target is not None:
        name = builders.backfill_name(owner, target.model, db)
        job = create_once(kube, owner, "jobs", builders.backfill_job(owner, spec, target, db)) if migrated else jobs.get(name)
        backfill_state = JobState.of(name, job)
    if database is not None:  # a database not found yet leaves the records of the one it was
        remove_others(kube, owner, "jobs", "backfill", keep={builders.backfill_name(owner, m, db) for m in plan.backfills})
        _only_job(kube, owner, "catchup",
                  builders.catchup_job(owner, spec, plan.catchup, db) if plan.catchup is not None else None)
    _only_job(kube, owner, "prune", builders.prune_job(owner, spec, plan.prune) if plan.prune is not None else None)

    def deployment(name: str) -> DeploymentState | None:
        key = f"deployments/{name}"
        return DeploymentState.of(name, live[key]) if key in live else None

    serving = plan.api if plan.api is not None and plan.api.in_cluster else None
    facts = Facts(migration=migration_state, migration_record=migration_record,
                  database_waiting=waiting if migration_state.phase == "absent" else None,
                  backup=backup if migration_state.phase == "absent" else None, api=deployment(builders.api_name(owner)) or
                  DeploymentState(builders.api_name(owner), 0, 0, False),
                  worker=deployment(builders.worker_name(owner)) if plan.worker is not None else None,
                  server=deployment(builders.embeddings_name(owner, serving.model)) if serving else None,
                  backfill=backfill_state, report=report, report_error=error)
    return Outcome(facts=facts, plan=plan)
