"""The children of a SearchIndex, as manifests (plain dicts) built from its spec alone.

Pure functions: no cluster, no clock, no randomness, so the same spec always builds the same
manifest, the reconciler can compare by hash, and tests call them directly. Each manifest carries
its owner reference and the hash of itself (`search.backscroll.dev/applied-hash`): the reconciler
writes a child only when that hash differs, so a second pass, or a restarted operator, writes
nothing.

Which process gets which setting (see docs/operator.md for the table):
- the migration Job gets the database URI and nothing else (it never calls the gateway);
- the API, the worker and the backfill Jobs get the embeddings settings, and they alone get the
  embeddings key, because they alone call the gateway.
"""

from __future__ import annotations

import copy
import math

import json

from .names import (EMBEDDINGS_ANNOTATION, HASH_ANNOTATION, IMAGE_ANNOTATION, MODEL_ANNOTATION,
                    SECRETS_ANNOTATION, TOKEN_ANNOTATION, Owner, child_name, labels, model_slug, selector, short_hash)
from .rollout import Plan
from .status import EXIT_REASONS
from .spec import Embeddings, PodSettings, ResourceRequirements, SearchIndexSpec, Server, TokenRef

API_PORT = 8080  # what the API container listens on; the Service maps spec.api.service.port to it
# What the embeddings server listens on: above 1024, so a non-root server binds it without
# NET_BIND_SERVICE; its Service maps spec.embeddings.server.port to it.
SERVER_PORT = 8080
# The embeddings server's user (TEI's image runs as any uid with HOME and HF_HOME writable).
SERVER_UID = 1000
MODEL_LABEL = "search.backscroll.dev/model"

# Requests and limits of each component when its `resources` is absent: Burstable pods, not
# BestEffort ones (the first to be evicted), sized for a small index. The worker's apply to the
# backfill, catch-up and the other Jobs too.
DEFAULT_RESOURCES = {
    "api": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
    "worker": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    "server": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
}


# --- names --------------------------------------------------------------------------------------

def api_name(owner: Owner) -> str:
    return child_name(owner.name, "api")


def worker_name(owner: Owner) -> str:
    return child_name(owner.name, "worker")


def embeddings_name(owner: Owner, model: str) -> str:
    # One server per model: during a rollout the old model's serves queries while the new one's
    # embeds the backfill.
    return child_name(owner.name, "embeddings", model_slug(model))


def status_token_name(owner: Owner) -> str:
    return child_name(owner.name, "status-token")


def migration_identity(spec: SearchIndexSpec, database: str) -> str:
    """What a migration depends on: a new image (new migrations), a new model (a new vector index)
    or another database (`database`: which Secret or CloudNativePG cluster, with its uid: a new
    one is empty) needs a migration of its own."""
    emb = spec.embeddings
    return short_hash([spec.image, emb.model if emb else None, emb.dimensions if emb else None, database])


def migration_name(owner: Owner, spec: SearchIndexSpec, database: str = "", attempt: int = 1) -> str:
    # Jobs cannot be changed once created, so what the migration depends on is in its name, and so
    # is the attempt: a failed Job is the record of that attempt, the next one is a new Job.
    return child_name(owner.name, "migrate", migration_identity(spec, database),
                      *([str(attempt)] if attempt > 1 else []))


def backup_name(owner: Owner, identity: str) -> str:
    # One per migration identity (migration_identity): the backup taken before that migration.
    return child_name(owner.name, "premigrate", identity)


def _database_part(database: str) -> list[str]:
    # A Job's record holds for one database (migration_identity's `database`): another one, or the
    # same name made again (a new uid), is empty and gets its own backfill and catch-up.
    return [short_hash([database])] if database else []


def backfill_name(owner: Owner, model: str, database: str = "") -> str:
    return child_name(owner.name, "backfill", model_slug(model), *_database_part(database))


def catchup_name(owner: Owner, model: str, database: str = "") -> str:
    return child_name(owner.name, "catchup", model_slug(model), *_database_part(database))


def prune_name(owner: Owner, model: str) -> str:
    return child_name(owner.name, "prune", model_slug(model))


def register_name(owner: Owner, secret_uid: str, migration: str) -> str:
    # A regenerated token Secret (a new uid) is a new Job: rotation registers the new digest. So
    # is a new migration: a registration that failed (an image without the `status` kind) is
    # tried again with the next image.
    return child_name(owner.name, "register", short_hash([secret_uid, migration]))


def purge_name(owner: Owner) -> str:
    return child_name(owner.name, "purge")


def embeddings_url(owner: Owner, emb: Embeddings) -> str:
    if emb.external is not None:
        return emb.external.url.rstrip("/")
    return f"http://{embeddings_name(owner, emb.model)}.{owner.namespace}.svc:{emb.server_or_default().port}/v1"


def status_url(owner: Owner, spec: SearchIndexSpec, template: str | None = None) -> str:
    """Where the API answers `GET /v1/status`: its Service, or `template` (an operator setting for
    running outside the cluster, e.g. through `kubectl port-forward`)."""
    if template:
        return template.format(namespace=owner.namespace, name=owner.name, service=api_name(owner),
                               port=spec.api.service.port)
    return f"http://{api_name(owner)}.{owner.namespace}.svc:{spec.api.service.port}/v1/status"


# --- pieces ---------------------------------------------------------------------------------------

def _finish(manifest: dict, owner: Owner) -> dict:
    manifest["metadata"]["namespace"] = owner.namespace
    manifest["metadata"]["ownerReferences"] = [owner.reference()]
    manifest["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = short_hash(manifest, 16)
    return manifest


def _meta(name: str, owner: Owner, component: str, **annotations: str) -> dict:
    meta = {"name": name, "labels": labels(owner.name, component)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _secret_env(name: str, ref) -> dict:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


def _database_env(spec: SearchIndexSpec) -> list[dict]:
    return [_secret_env("BACKSCROLL_DATABASE_URL", spec.database.primary)]


def _owner_env(owner: Owner) -> list[dict]:
    """Which SearchIndex a Job works for: `migrate` claims the database for it, and `migrate`,
    `purge` and `models drop` refuse a database another index claimed (sql/0030)."""
    return [{"name": "BACKSCROLL_OWNER_UID", "value": owner.uid},
            {"name": "BACKSCROLL_OWNER_NAME", "value": f"{owner.namespace}/{owner.name}"}]


def _read_env(owner: Owner, spec: SearchIndexSpec) -> list[dict]:
    """Where people's reads go: a replica Secret's URL, or a CloudNativePG cluster's read Service
    with the app user's credentials from its Secret (libpq takes the password from PGPASSWORD,
    so no hand-made Secret holds a second URL)."""
    db = spec.database
    if db.read_replica_secret_ref is not None:
        return [_secret_env("BACKSCROLL_DATABASE_READ_URL", db.read_replica_secret_ref)]
    cnpg = db.cnpg_cluster_ref
    if cnpg is None or cnpg.read_service == "rw":
        return []
    app = cnpg.app_secret.name
    return [
        {"name": "BACKSCROLL_CNPG_USER", "valueFrom": {"secretKeyRef": {"name": app, "key": "username"}}},
        {"name": "BACKSCROLL_CNPG_DBNAME", "valueFrom": {"secretKeyRef": {"name": app, "key": "dbname"}}},
        {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": app, "key": "password"}}},
        # $(VAR) is expanded by the kubelet from the variables above.
        {"name": "BACKSCROLL_DATABASE_READ_URL",
         "value": f"postgresql://$(BACKSCROLL_CNPG_USER)@{cnpg.name}-{cnpg.read_service}.{owner.namespace}.svc:"
                  f"{cnpg.port}/$(BACKSCROLL_CNPG_DBNAME)"},
    ]


def _embeddings_env(owner: Owner, emb: Embeddings | None) -> list[dict]:
    """The gateway's settings (BACKSCROLL_EMBEDDINGS_*) for one model, key included: gateway
    callers only."""
    if emb is None:
        return []
    values = {
        "BACKSCROLL_EMBEDDINGS_MODEL": emb.model,
        "BACKSCROLL_EMBEDDINGS_URL": embeddings_url(owner, emb),
        "BACKSCROLL_EMBEDDINGS_DIMENSIONS": str(emb.dimensions),
        "BACKSCROLL_EMBEDDINGS_QUERY_MODEL": emb.query_model,
        "BACKSCROLL_EMBEDDINGS_DOCUMENT_MODEL": emb.document_model,
        "BACKSCROLL_EMBEDDINGS_QUERY_PREFIX": emb.query_prefix or None,
        "BACKSCROLL_EMBEDDINGS_DOCUMENT_PREFIX": emb.document_prefix or None,
        "BACKSCROLL_EMBEDDINGS_SEND_INPUT_TYPE": "true" if emb.send_input_type else None,
        "BACKSCROLL_EMBEDDINGS_SEND_DIMENSIONS": "true" if emb.send_dimensions else None,
        "BACKSCROLL_EMBEDDINGS_BATCH_SIZE": str(emb.batch_size),
    }
    env = [{"name": k, "value": v} for k, v in values.items() if v is not None]
    if emb.external is not None and emb.external.api_key_secret_ref is not None:
        env.append(_secret_env("BACKSCROLL_EMBEDDINGS_API_KEY", emb.external.api_key_secret_ref))
    return env


# Backscroll's own processes run as the image's non-root user on a read-only root filesystem, with
# no capabilities; /tmp is the only writable path (an emptyDir), for Python's tempfile users.
BACKSCROLL_CONTAINER_SECURITY = {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                 "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
BACKSCROLL_POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                           "seccompProfile": {"type": "RuntimeDefault"}}
TMP_VOLUME = {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}


def _resources(given: ResourceRequirements | None, component: str) -> dict:
    if given is None:
        return copy.deepcopy(DEFAULT_RESOURCES[component])
    return given.model_dump(exclude_none=True)


def _container(spec: SearchIndexSpec, name: str, args: list[str], env: list[dict],
               resources: ResourceRequirements | None = None, image: str | None = None,
               component: str = "worker") -> dict:
    return {"name": name, "image": image or spec.image, "imagePullPolicy": spec.image_pull_policy,
            "command": ["backscroll"], "args": args, "env": env,
            "resources": _resources(resources, component),
            "securityContext": copy.deepcopy(BACKSCROLL_CONTAINER_SECURITY),
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}


# The embeddings server (TEI) under the `restricted` Pod Security profile: a fixed non-root user
# (its image has none of its own), no capabilities, no privilege escalation, RuntimeDefault seccomp;
# fsGroup makes the /data volume writable for that user.
SERVER_CONTAINER_SECURITY = {"runAsNonRoot": True, "runAsUser": SERVER_UID, "allowPrivilegeEscalation": False,
                             "capabilities": {"drop": ["ALL"]}}
SERVER_POD_SECURITY = {"runAsNonRoot": True, "runAsUser": SERVER_UID, "runAsGroup": SERVER_UID,
                       "fsGroup": SERVER_UID, "seccompProfile": {"type": "RuntimeDefault"}}


def _pod(containers: list[dict], restart: str = "Always", volumes: list[dict] | None = None,
         backscroll: bool = True) -> dict:
    # Backscroll's processes never talk to the Kubernetes API: no token in their pods.
    pod = {"restartPolicy": restart, "automountServiceAccountToken": False,
           "containers": containers, "volumes": volumes or []}
    if backscroll:
        pod["securityContext"] = copy.deepcopy(BACKSCROLL_POD_SECURITY)
        pod["volumes"] = [*pod["volumes"], copy.deepcopy(TMP_VOLUME)]
    else:
        pod["securityContext"] = copy.deepcopy(SERVER_POD_SECURITY)
    return pod


def pod_settings(*layers: PodSettings) -> PodSettings:
    """spec.pod and a component's pod settings as one: later maps win key by key, lists append."""
    merged: dict = {}
    for layer in layers:
        for key in ("node_selector", "annotations", "labels"):
            merged[key] = {**merged.get(key, {}), **getattr(layer, key)}
        for key in ("tolerations", "image_pull_secrets"):
            merged[key] = [*merged.get(key, []), *(v for v in getattr(layer, key) if v not in merged.get(key, []))]
        for key in ("affinity", "topology_spread_constraints", "priority_class_name"):
            if getattr(layer, key) is not None:
                merged[key] = getattr(layer, key)
    return PodSettings(**merged)


def _spread(owner: Owner, component: str, match: dict) -> list[dict]:
    # Across nodes first, then zones; ScheduleAnyway: a single-node or single-zone cluster still
    # schedules every pod.
    return [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": dict(match)}}
            for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")]


def _schedule(template: dict, settings: PodSettings, owner: Owner, component: str,
              match: dict | None = None) -> dict:
    """Puts `settings` on a pod template; `match` (a Deployment's pods' labels) adds the spread."""
    meta, pod = template["metadata"], template["spec"]
    # The operator's own labels win: they are what selectors, Services and policies match on.
    meta["labels"] = {**settings.labels, **meta["labels"]}
    if settings.annotations or meta.get("annotations"):
        meta["annotations"] = {**settings.annotations, **(meta.get("annotations") or {})}
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod["tolerations"] = copy.deepcopy(settings.tolerations)
    if settings.affinity:
        pod["affinity"] = copy.deepcopy(settings.affinity)
    if settings.priority_class_name:
        pod["priorityClassName"] = settings.priority_class_name
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in settings.image_pull_secrets]
    if match is not None:
        spread = settings.topology_spread_constraints
        constraints = _spread(owner, component, match) if spread is None else copy.deepcopy(spread)
        if constraints:
            pod["topologySpreadConstraints"] = constraints
    return template


def _deployment(name: str, owner: Owner, component: str, replicas: int | None, pod: dict,
                strategy: str = "RollingUpdate", annotations: dict | None = None,
                pod_annotations: dict | None = None, settings: PodSettings | None = None,
                pod_labels: dict | None = None) -> dict:
    template_labels = {**labels(owner.name, component), **(pod_labels or {})}
    spec = {
        "strategy": {"type": strategy},
        "selector": {"matchLabels": selector(owner.name, component)},
        "template": {"metadata": {"labels": template_labels}, "spec": pod},
    }
    if replicas is not None:  # None: someone else (an HPA) owns the field; the apply leaves it
        spec = {"replicas": replicas, **spec}
    if pod_annotations:
        spec["template"]["metadata"]["annotations"] = dict(pod_annotations)
    _schedule(spec["template"], settings or PodSettings(), owner, component,
              match={**selector(owner.name, component), **(pod_labels or {})})
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _meta(name, owner, component, **(annotations or {})), "spec": spec}


def _rollout_annotations(image: str, emb: Embeddings | None) -> dict:
    """What the Deployment's pods run, for the next pass to read back (rollout.Observed)."""
    values = {IMAGE_ANNOTATION: image}
    if emb is not None:
        values[EMBEDDINGS_ANNOTATION] = json.dumps(emb.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
                                                   sort_keys=True, separators=(",", ":"))
    return values


def read_embeddings(deployment: dict | None) -> Embeddings | None:
    """The model configuration a live Deployment was given (None: none, or an unreadable one)."""
    text = (((deployment or {}).get("metadata") or {}).get("annotations") or {}).get(EMBEDDINGS_ANNOTATION)
    if not text:
        return None
    try:
        return Embeddings.model_validate(json.loads(text))
    except ValueError:
        return None


def _job(name: str, owner: Owner, component: str, container: dict, backoff_limit: int,
         settings: PodSettings | None = None, **annotations: str) -> dict:
    template = {"metadata": {"labels": labels(owner.name, component)}, "spec": _pod([container], restart="Never")}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": _meta(name, owner, component, **annotations),
        # No ttlSecondsAfterFinished: a finished Job is the record that its work is done; if
        # Kubernetes removed it the operator would run it again.
        "spec": {"backoffLimit": backoff_limit,
                 "template": _schedule(template, settings or PodSettings(), owner, component)},
    }


def _service(name: str, owner: Owner, component: str, port: int, target: str, type_: str = "ClusterIP",
             extra_selector: dict | None = None) -> dict:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(name, owner, component),
        "spec": {"type": type_, "selector": {**selector(owner.name, component), **(extra_selector or {})},
                 "ports": [{"name": "http", "port": port, "targetPort": target, "protocol": "TCP"}]},
    }


# --- children ---------------------------------------------------------------------------------------

def migration_job(owner: Owner, spec: SearchIndexSpec, database: str = "", attempt: int = 1) -> dict:
    args = ["migrate"]
    if spec.embeddings is not None:
        args += ["--model", spec.embeddings.model, "--dimensions", str(spec.embeddings.dimensions)]
    container = _container(spec, "migrate", args, _database_env(spec) + _owner_env(owner))
    # The end of its log is the pod's termination message: the operator reads the error's first
    # line from there into the status (it never reads logs).
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    job = _job(migration_name(owner, spec, database, attempt), owner, "migrate", container, backoff_limit=0,
               settings=pod_settings(spec.pod))
    # One pod per attempt: `migrate` waits for its database itself, and the operator retries a
    # failed attempt with a backoff of its own, visible in the status and an Event each time. A
    # pod evicted by a drain is no failed attempt: the Job makes another.
    job["spec"]["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    # A refusal (an image older than the schema, a database another index owns) fails the Job with
    # its exit code in the Job's own Failed condition, which the status reads (EXIT_REASONS).
    job["spec"]["podFailurePolicy"]["rules"].append(refusals("migrate"))
    return _finish(job, owner)


def refusals(container: str) -> dict:
    return {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "In",
                                                 "values": sorted(EXIT_REASONS)}}


def premigration_backup(owner: Owner, spec: SearchIndexSpec, identity: str) -> dict:
    """A CloudNativePG Backup of the cluster, taken before the migration `identity` names starts.
    Owned by the SearchIndex like every child; deleting the Backup object leaves the backup's
    data where the cluster stores it (CloudNativePG's rule)."""
    db = spec.database
    return _finish({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Backup",
                    "metadata": _meta(backup_name(owner, identity), owner, "premigrate"),
                    "spec": {"cluster": {"name": db.cnpg_cluster_ref.name}, "method": db.backup_method}}, owner)


def status_token_secret(owner: Owner, token: str) -> dict:
    """The operator's own credential for GET /v1/status (a `status` token: it reads nothing else).
    `token` is generated by the reconciler (builders have no randomness); the Secret is created
    once and never rewritten, so deleting it is how it is rotated. Its applied-hash is of the
    manifest without the token: no annotation is computed from a secret value."""
    secret = _finish({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                      "metadata": _meta(status_token_name(owner), owner, "status-token")}, owner)
    secret["stringData"] = {"token": token}
    return secret


def register_job(owner: Owner, spec: SearchIndexSpec, secret_uid: str, migration: str | None = None) -> dict:
    name = register_name(owner, secret_uid, migration or migration_name(owner, spec))
    """Registers the digest of the operator's status token (the secret itself stays in its Secret):
    the step that would otherwise be `kubectl exec ... tokens create`."""
    ref = TokenRef(name=status_token_name(owner))
    env = _database_env(spec) + [_secret_env("BACKSCROLL_STATUS_TOKEN", ref)]
    container = _container(spec, "register", ["tokens", "register", "--kind", "status", "--name",
                                              f"operator:{owner.namespace}/{owner.name}",
                                              "--from-env", "BACKSCROLL_STATUS_TOKEN"], env)
    return _finish(_job(name, owner, "register", container, backoff_limit=6, settings=pod_settings(spec.pod),
                        **{TOKEN_ANNOTATION: secret_uid}), owner)


def _ranking_env(spec: SearchIndexSpec) -> list[dict]:
    r = spec.ranking
    return [{"name": "BACKSCROLL_SEARCH_RANKING", "value": r.method},
            {"name": "BACKSCROLL_BM25_K1", "value": str(r.k1)},
            {"name": "BACKSCROLL_BM25_B", "value": str(r.b)},
            {"name": "BACKSCROLL_SEARCH_SPEAKER_WEIGHT", "value": str(r.speaker_weight)},
            {"name": "BACKSCROLL_SEARCH_CANDIDATE_POOL", "value": str(r.candidate_pool)}]


def _pod_annotations(secret_versions: str) -> dict:
    """Which version of its Secrets a pod template was made with (reconcile.secret_versions:
    their names, uids and resourceVersions, nothing read from their values)."""
    return {SECRETS_ANNOTATION: secret_versions} if secret_versions else {}


def api_deployment(owner: Owner, spec: SearchIndexSpec, plan: Plan, secret_versions: str = "") -> dict | None:
    """None until the spec's image has been migrated once (rollout.py): an API never runs an
    image whose migrations have not run."""
    if plan.image is None:
        return None
    env = _database_env(spec) + [
        {"name": "BACKSCROLL_HOST", "value": "0.0.0.0"},
        {"name": "BACKSCROLL_PORT", "value": str(API_PORT)},
        # One serving process per pod: the Deployment scales by replicas, and each pod's /metrics
        # then counts all of its requests.
        {"name": "BACKSCROLL_API_WORKERS", "value": "1"},
        # The default configuration of workspaces created in these pods (`workspaces create`).
        {"name": "BACKSCROLL_TEXT_SEARCH_CONFIG", "value": spec.text_search_config},
        *_ranking_env(spec),
    ]
    # People's reads (session list, search, transcript) go to the replica; the rest to the primary.
    env += _read_env(owner, spec)
    env += _embeddings_env(owner, plan.api)
    # api.image overrides the image only once the spec's image is migrated: it is gated the same.
    image = spec.api.image if spec.api.image and plan.image == spec.image else plan.image
    container = _container(spec, "api", ["serve"], env, spec.api.resources, image=image, component="api")
    container["ports"] = [{"name": "http", "containerPort": API_PORT, "protocol": "TCP"}]
    # The API's two public routes for probes. Readiness needs the database and every migration of
    # this image; liveness never touches the database, so an outage takes pods out of the Service
    # without restarting them.
    container["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5}
    container["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 20,
                                  "failureThreshold": 3}
    # A slow first start (a cold node, a large image's imports) gets 2 minutes before liveness
    # may restart it.
    container["startupProbe"] = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5,
                                 "failureThreshold": 24}
    return _finish(_deployment(api_name(owner), owner, "api", api_replicas(spec), _pod([container]),
                               annotations=_rollout_annotations(plan.image, plan.api),
                               pod_annotations=_pod_annotations(secret_versions),
                               settings=pod_settings(spec.pod, spec.api.pod)), owner)


def api_replicas(spec: SearchIndexSpec) -> int | None:
    """The API Deployment's replicas; None leaves them to an HPA (autoscaling, manageReplicas: false)."""
    if spec.hibernate:
        return 0
    if spec.api.autoscaling is not None or not spec.api.manage_replicas:
        return None
    return spec.api.replicas


def worker_replicas(spec: SearchIndexSpec) -> int | None:
    if spec.hibernate:
        return 0
    return spec.worker.replicas if spec.worker.manage_replicas else None


def server_replicas(spec: SearchIndexSpec, server: Server) -> int:
    return 0 if spec.hibernate else server.replicas


def api_service(owner: Owner, spec: SearchIndexSpec) -> dict:
    return _finish(_service(api_name(owner), owner, "api", spec.api.service.port, "http",
                            spec.api.service.type), owner)


WORKER_HEALTH_PORT = 8081


def worker_deployment(owner: Owner, spec: SearchIndexSpec, plan: Plan, secret_versions: str = "") -> dict | None:
    """None without a model to embed with (`backscroll worker` exits at once without one: a
    Deployment would restart it forever), and until the image has been migrated."""
    if plan.worker is None or plan.image is None:
        return None
    # The backfill is the operator's Job (its status is BackfillComplete); a worker that also ran
    # owed backfills would race it for the model's backfill lock.
    env = _database_env(spec) + _embeddings_env(owner, plan.worker) + [
        {"name": "BACKSCROLL_WORKER_BACKFILL", "value": "false"},
        {"name": "BACKSCROLL_WORKER_HEALTH_PORT", "value": str(WORKER_HEALTH_PORT)},
        # The kubelet probes the pod's IP, not its loopback.
        {"name": "BACKSCROLL_WORKER_HEALTH_HOST", "value": "0.0.0.0"}]
    container = _container(spec, "worker", ["worker"], env, spec.worker.resources, image=plan.image,
                           component="worker")
    container["ports"] = [{"name": "health", "containerPort": WORKER_HEALTH_PORT, "protocol": "TCP"}]
    # Readiness: the database answers and the schema is migrated; liveness: the loop makes progress.
    container["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": "health"}, "periodSeconds": 10}
    container["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 30,
                                  "failureThreshold": 3}
    return _finish(_deployment(worker_name(owner), owner, "worker", worker_replicas(spec), _pod([container]),
                               annotations=_rollout_annotations(plan.image, plan.worker),
                               pod_annotations=_pod_annotations(secret_versions),
                               settings=pod_settings(spec.pod, spec.worker.pod)), owner)


def embeddings_deployment(owner: Owner, spec: SearchIndexSpec, emb: Embeddings) -> dict | None:
    """The in-cluster embeddings server (TEI by default) of one model; None for an external endpoint."""
    if not emb.in_cluster:
        return None
    server = emb.server_or_default()
    cache, source = server.model_cache, server.model_source
    env = [{"name": "HOME", "value": "/data"}, {"name": "HF_HOME", "value": "/data"}]
    mounts = [{"name": "model-cache", "mountPath": "/data"}, {"name": "tmp", "mountPath": "/tmp"}]
    if source.volume is not None:
        # Pre-populated weights, read-only and offline: nothing is downloaded, HOME is /tmp.
        volume = {"name": "model-cache", "persistentVolumeClaim": {"claimName": source.volume.claim_name,
                                                                    "readOnly": True}}
        mounts[0]["readOnly"] = True
        env = [{"name": "HOME", "value": "/tmp"}, {"name": "HF_HOME", "value": "/data"},
               {"name": "HF_HUB_OFFLINE", "value": "1"}]
    elif cache.claim_name:
        volume = {"name": "model-cache", "persistentVolumeClaim": {"claimName": cache.claim_name}}
    else:
        volume = {"name": "model-cache", "emptyDir": {"sizeLimit": cache.size_limit}}
    if source.mirror_url:
        env.append({"name": "HF_ENDPOINT", "value": source.mirror_url.rstrip("/")})
    if source.token_secret_ref is not None:
        env.append(_secret_env("HF_TOKEN", source.token_secret_ref))
    health = {"httpGet": {"path": "/health", "port": "http"}}
    container = {
        "name": "server", "image": server.image, "imagePullPolicy": spec.image_pull_policy,
        "args": ["--model-id", server.model_id or emb.model, "--port", str(SERVER_PORT), *server.args],
        "env": env,
        "ports": [{"name": "http", "containerPort": SERVER_PORT, "protocol": "TCP"}],
        # TEI keeps downloaded weights under /data (its --huggingface-hub-cache default).
        "volumeMounts": mounts,
        "resources": _resources(server.resources, "server"),
        "securityContext": copy.deepcopy(SERVER_CONTAINER_SECURITY),
        # Loading (and first downloading) the weights takes minutes: the startup probe allows
        # startupTimeoutSeconds before liveness may kill the container.
        "startupProbe": {**health, "periodSeconds": 10,
                         "failureThreshold": math.ceil(server.startup_timeout_seconds / 10)},
        "readinessProbe": {**health, "periodSeconds": 10},
        "livenessProbe": {**health, "periodSeconds": 20, "failureThreshold": 3},
    }
    # A ReadWriteOnce cache cannot be mounted by the old and the new pod at once.
    strategy = "Recreate" if cache.claim_name else "RollingUpdate"
    tmp = {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}
    return _finish(_deployment(embeddings_name(owner, emb.model), owner, "embeddings", server_replicas(spec, server),
                               _pod([container], volumes=[volume, tmp], backscroll=False), strategy=strategy,
                               annotations={MODEL_ANNOTATION: emb.model},
                               settings=pod_settings(spec.pod, server.pod),
                               pod_labels={MODEL_LABEL: model_slug(emb.model)}), owner)


def embeddings_service(owner: Owner, spec: SearchIndexSpec, emb: Embeddings) -> dict | None:
    if not emb.in_cluster:
        return None
    # Selected by model too: during a rollout two models' servers run side by side.
    return _finish(_service(embeddings_name(owner, emb.model), owner, "embeddings", emb.server_or_default().port,
                            "http", extra_selector={MODEL_LABEL: model_slug(emb.model)}), owner)


def _backfill_container(spec: SearchIndexSpec, name: str, emb: Embeddings, owner: Owner) -> dict:
    args = ["backfill", "--model", emb.model, "--quiet", "--batch", str(emb.backfill.batch_size)]
    if emb.backfill.rate:
        args += ["--rate", f"{emb.backfill.rate:g}"]
    env = _database_env(spec) + _embeddings_env(owner, emb)
    return _container(spec, name, args, env, spec.worker.resources, component="worker")


def backfill_job(owner: Owner, spec: SearchIndexSpec, emb: Embeddings, database: str = "") -> dict:
    """One Job per model and database, named from both: a new model or a new database is a new
    Job, the same ones the same."""
    job = _job(backfill_name(owner, emb.model, database), owner, "backfill", _backfill_container(spec, "backfill", emb, owner),
               emb.backfill.backoff_limit, settings=pod_settings(spec.pod, spec.worker.pod),
               **{MODEL_ANNOTATION: emb.model})
    return _finish(job, owner)


def catchup_job(owner: Owner, spec: SearchIndexSpec, emb: Embeddings, database: str = "") -> dict:
    """The same backfill run again once the worker embeds with the model: it embeds what arrived
    between the first backfill's pass and the worker's switch (it skips what has a vector)."""
    job = _job(catchup_name(owner, emb.model, database), owner, "catchup", _backfill_container(spec, "catchup", emb, owner),
               emb.backfill.backoff_limit, settings=pod_settings(spec.pod, spec.worker.pod),
               **{MODEL_ANNOTATION: emb.model})
    return _finish(job, owner)


def prune_job(owner: Owner, spec: SearchIndexSpec, model: str) -> dict:
    """Deletes a superseded model's vectors, index and registration (rollout.retainPrevious: false)."""
    container = _container(spec, "prune", ["models", "drop", model, "--yes", "--quiet"],
                           _database_env(spec) + _owner_env(owner))
    job = _job(prune_name(owner, model), owner, "prune", container, backoff_limit=3,
               settings=pod_settings(spec.pod), **{MODEL_ANNOTATION: model})
    job["spec"]["podFailurePolicy"] = {"rules": [refusals("prune")]}
    return _finish(job, owner)


def purge_job(owner: Owner, spec: SearchIndexSpec) -> dict:
    """Removes everything Backscroll stored (deletionPolicy: delete), before the finalizer goes."""
    container = _container(spec, "purge", ["purge", "--yes-delete-all-data"], _database_env(spec) + _owner_env(owner))
    job = _job(purge_name(owner), owner, "purge", container, backoff_limit=3, settings=pod_settings(spec.pod))
    job["spec"]["podFailurePolicy"] = {"rules": [refusals("purge")]}
    return _finish(job, owner)


def disruption_budget(owner: Owner, name: str, component: str, replicas: int | None,
                      pod_labels: dict | None = None) -> dict | None:
    """minAvailable 1 for a Deployment of 2+ replicas (a drain then takes its pods one by one);
    None below that, where a budget of 1 would block every drain, and for unknown replicas."""
    if replicas is None or replicas < 2:
        return None
    match = {**selector(owner.name, component), **(pod_labels or {})}
    return _finish({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(name, owner, component),
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": match}}}, owner)


def _budget_replicas(spec: SearchIndexSpec) -> int | None:
    if spec.hibernate:
        return 0
    if spec.api.autoscaling is not None:
        return spec.api.autoscaling.min_replicas
    return api_replicas(spec)


def api_autoscaler(owner: Owner, spec: SearchIndexSpec, plan: Plan) -> dict | None:
    """An autoscaling/v2 HPA on the API's CPU (spec.api.autoscaling); none while hibernating."""
    scaling = spec.api.autoscaling
    if scaling is None or spec.hibernate or plan.image is None:
        return None
    return _finish({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": _meta(api_name(owner), owner, "api"),
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": api_name(owner)},
                 "minReplicas": scaling.min_replicas, "maxReplicas": scaling.max_replicas,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": scaling.target_cpu_utilization_percentage}}}]},
    }, owner)


# The pods that may call an embeddings server: those that embed (BACKSCROLL_EMBEDDINGS_URL).
EMBEDDINGS_CLIENTS = ("api", "worker", "backfill", "catchup")


def api_network_policy(owner: Owner, spec: SearchIndexSpec) -> dict | None:
    """The API's pods accept connections on the port their Service targets, and on no other."""
    if not spec.network_policy.enabled:
        return None
    return _finish({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _meta(api_name(owner), owner, "api"),
        "spec": {"podSelector": {"matchLabels": selector(owner.name, "api")}, "policyTypes": ["Ingress"],
                 "ingress": [{"ports": [{"protocol": "TCP", "port": API_PORT}]}]},
    }, owner)


def embeddings_network_policy(owner: Owner, spec: SearchIndexSpec) -> dict | None:
    """Every embeddings server of this index (TEI has no authentication) is reachable only from
    this index's own API, worker, backfill and catch-up pods, on the server's port."""
    if not spec.network_policy.enabled or spec.embeddings is None or not spec.embeddings.in_cluster:
        return None
    clients = {"matchLabels": {"app.kubernetes.io/instance": owner.name},
               "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                     "values": list(EMBEDDINGS_CLIENTS)}]}
    return _finish({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": _meta(child_name(owner.name, "embeddings"), owner, "embeddings"),
        "spec": {"podSelector": {"matchLabels": selector(owner.name, "embeddings")}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": clients}],
                              "ports": [{"protocol": "TCP", "port": SERVER_PORT}]}]},
    }, owner)


def desired(owner: Owner, spec: SearchIndexSpec, plan: Plan,
            secret_versions: str = "") -> list[tuple[str, str, dict | None]]:
    """Every named long-lived child as (resource, name, manifest); a None manifest marks a child
    this plan does not want, to be removed if it exists. Embeddings servers are per model: those
    of models the plan no longer needs are found by label (reconcile.remove_others).

    The Jobs are not here: the reconciler creates them in order.
    """
    api = api_deployment(owner, spec, plan, secret_versions)
    worker = worker_deployment(owner, spec, plan, secret_versions)
    children = [
        ("deployments", api_name(owner), api),
        ("services", api_name(owner), api_service(owner, spec)),
        ("deployments", worker_name(owner), worker),
        ("horizontalpodautoscalers", api_name(owner), api_autoscaler(owner, spec, plan)),
        ("poddisruptionbudgets", api_name(owner),
         disruption_budget(owner, api_name(owner), "api", _budget_replicas(spec)) if api else None),
        ("poddisruptionbudgets", worker_name(owner),
         disruption_budget(owner, worker_name(owner), "worker", worker_replicas(spec)) if worker else None),
        ("networkpolicies", api_name(owner), api_network_policy(owner, spec)),
        ("networkpolicies", child_name(owner.name, "embeddings"), embeddings_network_policy(owner, spec)),
    ]
    for emb in plan.servers:
        name = embeddings_name(owner, emb.model)
        server = embeddings_deployment(owner, spec, emb)
        children += [("deployments", name, server),
                     ("services", name, embeddings_service(owner, spec, emb))]
        if server is not None:
            children.append(("poddisruptionbudgets", name, disruption_budget(
                owner, name, "embeddings", server_replicas(spec, emb.server_or_default()),
                {MODEL_LABEL: model_slug(emb.model)})))
    return children
