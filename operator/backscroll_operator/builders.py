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

from .names import (HASH_ANNOTATION, MODEL_ANNOTATION, Owner, child_name, labels, model_slug, selector,
                    short_hash)
from .spec import DatabaseRef, Embeddings, SearchIndexSpec

API_PORT = 8080  # what the API container listens on; the Service maps spec.api.service.port to it


# --- names --------------------------------------------------------------------------------------

def api_name(owner: Owner) -> str:
    return child_name(owner.name, "api")


def worker_name(owner: Owner) -> str:
    return child_name(owner.name, "worker")


def embeddings_name(owner: Owner) -> str:
    return child_name(owner.name, "embeddings")


def migration_name(owner: Owner, spec: SearchIndexSpec) -> str:
    # Jobs cannot be changed once created, so what the migration depends on is in its name: a new
    # image (new migrations) or a new model (a new vector index) is a new Job.
    emb = spec.embeddings
    inputs = [spec.image, emb.model if emb else None, emb.dimensions if emb else None]
    return child_name(owner.name, "migrate", short_hash(inputs))


def backfill_name(owner: Owner, model: str) -> str:
    return child_name(owner.name, "backfill", model_slug(model))


def embeddings_url(owner: Owner, spec: SearchIndexSpec) -> str | None:
    emb = spec.embeddings
    if emb is None:
        return None
    if emb.external is not None:
        return emb.external.url.rstrip("/")
    return f"http://{embeddings_name(owner)}.{owner.namespace}.svc:{emb.server_or_default().port}/v1"


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


def _database_env(ref: DatabaseRef) -> list[dict]:
    return [_secret_env("BACKSCROLL_DATABASE_URL", ref)]


def _embeddings_env(owner: Owner, spec: SearchIndexSpec) -> list[dict]:
    """The gateway's settings (BACKSCROLL_EMBEDDINGS_*), key included: gateway callers only."""
    emb = spec.embeddings
    if emb is None:
        return []
    values = {
        "BACKSCROLL_EMBEDDINGS_MODEL": emb.model,
        "BACKSCROLL_EMBEDDINGS_URL": embeddings_url(owner, spec),
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


def _container(spec: SearchIndexSpec, name: str, args: list[str], env: list[dict],
               resources: dict | None = None, image: str | None = None) -> dict:
    return {"name": name, "image": image or spec.image, "imagePullPolicy": spec.image_pull_policy,
            "command": ["backscroll"], "args": args, "env": env,
            "resources": copy.deepcopy(resources or {}),
            "securityContext": copy.deepcopy(BACKSCROLL_CONTAINER_SECURITY),
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}


def _pod(containers: list[dict], restart: str = "Always", volumes: list[dict] | None = None,
         backscroll: bool = True) -> dict:
    # Backscroll's processes never talk to the Kubernetes API: no token in their pods.
    pod = {"restartPolicy": restart, "automountServiceAccountToken": False,
           "containers": containers, "volumes": volumes or []}
    if backscroll:
        pod["securityContext"] = copy.deepcopy(BACKSCROLL_POD_SECURITY)
        pod["volumes"] = [*pod["volumes"], copy.deepcopy(TMP_VOLUME)]
    return pod


def _deployment(name: str, owner: Owner, component: str, replicas: int, pod: dict,
                strategy: str = "RollingUpdate") -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(name, owner, component),
        "spec": {
            "replicas": replicas,
            "strategy": {"type": strategy},
            "selector": {"matchLabels": selector(owner.name, component)},
            "template": {"metadata": {"labels": labels(owner.name, component)}, "spec": pod},
        },
    }


def _job(name: str, owner: Owner, component: str, container: dict, backoff_limit: int,
         **annotations: str) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": _meta(name, owner, component, **annotations),
        # No ttlSecondsAfterFinished: a finished Job is the record that its work is done; if
        # Kubernetes removed it the operator would run it again.
        "spec": {"backoffLimit": backoff_limit,
                 "template": {"metadata": {"labels": labels(owner.name, component)},
                              "spec": _pod([container], restart="Never")}},
    }


def _service(name: str, owner: Owner, component: str, port: int, target: str, type_: str = "ClusterIP") -> dict:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(name, owner, component),
        "spec": {"type": type_, "selector": selector(owner.name, component),
                 "ports": [{"name": "http", "port": port, "targetPort": target, "protocol": "TCP"}]},
    }


# --- children ---------------------------------------------------------------------------------------

def migration_job(owner: Owner, spec: SearchIndexSpec) -> dict:
    args = ["migrate"]
    if spec.embeddings is not None:
        args += ["--model", spec.embeddings.model, "--dimensions", str(spec.embeddings.dimensions)]
    container = _container(spec, "migrate", args, _database_env(spec.database.secret_ref))
    return _finish(_job(migration_name(owner, spec), owner, "migrate", container, backoff_limit=3), owner)


def _ranking_env(spec: SearchIndexSpec) -> list[dict]:
    r = spec.ranking
    return [{"name": "BACKSCROLL_SEARCH_RANKING", "value": r.method},
            {"name": "BACKSCROLL_BM25_K1", "value": str(r.k1)},
            {"name": "BACKSCROLL_BM25_B", "value": str(r.b)},
            {"name": "BACKSCROLL_SEARCH_SPEAKER_WEIGHT", "value": str(r.speaker_weight)},
            {"name": "BACKSCROLL_SEARCH_CANDIDATE_POOL", "value": str(r.candidate_pool)}]


def api_deployment(owner: Owner, spec: SearchIndexSpec) -> dict:
    env = _database_env(spec.database.secret_ref) + [
        {"name": "BACKSCROLL_HOST", "value": "0.0.0.0"},
        {"name": "BACKSCROLL_PORT", "value": str(API_PORT)},
        # One serving process per pod: the Deployment scales by replicas, and each pod's /metrics
        # then counts all of its requests.
        {"name": "BACKSCROLL_API_WORKERS", "value": "1"},
        # The default configuration of workspaces created in these pods (`workspaces create`).
        {"name": "BACKSCROLL_TEXT_SEARCH_CONFIG", "value": spec.text_search_config},
        *_ranking_env(spec),
    ]
    if spec.database.read_replica_secret_ref is not None:
        # People's reads (session list, search, transcript) go to the replica; the rest to the primary.
        env.append(_secret_env("BACKSCROLL_DATABASE_READ_URL", spec.database.read_replica_secret_ref))
    env += _embeddings_env(owner, spec)
    container = _container(spec, "api", ["serve"], env, spec.api.resources, image=spec.api.image)
    container["ports"] = [{"name": "http", "containerPort": API_PORT, "protocol": "TCP"}]
    # The API's two public routes for probes. Readiness needs the database and every migration of
    # this image, so a new image gets traffic only once its migration Job has run; liveness never
    # touches the database, so an outage takes pods out of the Service without restarting them.
    container["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5}
    container["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 20,
                                  "failureThreshold": 3}
    return _finish(_deployment(api_name(owner), owner, "api", spec.api.replicas, _pod([container])), owner)


def api_service(owner: Owner, spec: SearchIndexSpec) -> dict:
    return _finish(_service(api_name(owner), owner, "api", spec.api.service.port, "http",
                            spec.api.service.type), owner)


def worker_deployment(owner: Owner, spec: SearchIndexSpec) -> dict | None:
    """None without embeddings: the worker only embeds, and `backscroll worker` exits at once
    when no model is configured (a Deployment would restart it forever)."""
    if spec.embeddings is None:
        return None
    # The backfill is the operator's Job (its status is BackfillComplete); a worker that also ran
    # owed backfills would race it for the model's backfill lock.
    env = _database_env(spec.database.secret_ref) + _embeddings_env(owner, spec) + [
        {"name": "BACKSCROLL_WORKER_BACKFILL", "value": "false"}]
    container = _container(spec, "worker", ["worker"], env, spec.worker.resources)
    return _finish(_deployment(worker_name(owner), owner, "worker", spec.worker.replicas, _pod([container])), owner)


def embeddings_deployment(owner: Owner, spec: SearchIndexSpec) -> dict | None:
    """The in-cluster embeddings server (TEI by default); None for an external endpoint or none."""
    emb = spec.embeddings
    if emb is None or not emb.in_cluster:
        return None
    server = emb.server_or_default()
    cache = server.model_cache
    volume = ({"name": "model-cache", "persistentVolumeClaim": {"claimName": cache.claim_name}}
              if cache.claim_name else {"name": "model-cache", "emptyDir": {"sizeLimit": cache.size_limit}})
    health = {"httpGet": {"path": "/health", "port": "http"}}
    container = {
        "name": "server", "image": server.image, "imagePullPolicy": spec.image_pull_policy,
        "args": ["--model-id", server.model_id or emb.model, "--port", str(server.port), *server.args],
        "ports": [{"name": "http", "containerPort": server.port, "protocol": "TCP"}],
        # TEI keeps downloaded weights under /data (its --huggingface-hub-cache default).
        "volumeMounts": [{"name": "model-cache", "mountPath": "/data"}],
        "resources": copy.deepcopy(server.resources),
        # Loading (and first downloading) the weights takes minutes: the startup probe allows
        # startupTimeoutSeconds before liveness may kill the container.
        "startupProbe": {**health, "periodSeconds": 10,
                         "failureThreshold": math.ceil(server.startup_timeout_seconds / 10)},
        "readinessProbe": {**health, "periodSeconds": 10},
        "livenessProbe": {**health, "periodSeconds": 20, "failureThreshold": 3},
    }
    # A ReadWriteOnce cache cannot be mounted by the old and the new pod at once.
    strategy = "Recreate" if cache.claim_name else "RollingUpdate"
    return _finish(_deployment(embeddings_name(owner), owner, "embeddings", server.replicas,
                               # The server's image decides its own user (TEI's writes its cache).
                               _pod([container], volumes=[volume], backscroll=False), strategy=strategy), owner)


def embeddings_service(owner: Owner, spec: SearchIndexSpec) -> dict | None:
    emb = spec.embeddings
    if emb is None or not emb.in_cluster:
        return None
    return _finish(_service(embeddings_name(owner), owner, "embeddings", emb.server_or_default().port, "http"),
                   owner)


def backfill_job(owner: Owner, spec: SearchIndexSpec) -> dict | None:
    """One Job per model, named from the model: a new model is a new Job, the same model the same."""
    emb: Embeddings | None = spec.embeddings
    if emb is None:
        return None
    args = ["backfill", "--model", emb.model, "--quiet", "--batch", str(emb.backfill.batch_size)]
    if emb.backfill.rate:
        args += ["--rate", f"{emb.backfill.rate:g}"]
    env = _database_env(spec.database.secret_ref) + _embeddings_env(owner, spec)
    container = _container(spec, "backfill", args, env, spec.worker.resources)
    job = _job(backfill_name(owner, emb.model), owner, "backfill", container, emb.backfill.backoff_limit,
               **{MODEL_ANNOTATION: emb.model})
    return _finish(job, owner)


def desired(owner: Owner, spec: SearchIndexSpec) -> list[tuple[str, str, dict | None]]:
    """Every long-lived child as (resource, name, manifest); a None manifest marks a child this
    spec does not want, to be removed if it exists.

    The Jobs are not here: the reconciler creates them in order (the backfill only after the
    migration succeeded).
    """
    return [
        ("deployments", api_name(owner), api_deployment(owner, spec)),
        ("services", api_name(owner), api_service(owner, spec)),
        ("deployments", worker_name(owner), worker_deployment(owner, spec)),
        ("deployments", embeddings_name(owner), embeddings_deployment(owner, spec)),
        ("services", embeddings_name(owner), embeddings_service(owner, spec)),
    ]
