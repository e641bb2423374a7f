"""One reconcile pass: make the children match the spec, advance the Jobs, read the API's status.

Idempotent by construction: a child is created when absent, patched only when its applied-hash
differs from the manifest's, and left alone otherwise, so a second pass (or a restarted
operator) writes nothing. A child is only ever changed or removed when its controller owner
reference names this SearchIndex's uid.
"""

from __future__ import annotations

import base64
import logging

from . import apistatus, builders
from .config import OperatorConfig
from .kube import Conflict, Kube
from .names import HASH_ANNOTATION, Owner
from .spec import SearchIndexSpec
from .status import DeploymentState, Facts, JobState

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


def ensure(kube: Kube, owner: Owner, resource: str, manifest: dict, mutable: bool = True) -> dict:
    """The child as it now stands: created if absent, patched if its hash differs (unless
    immutable, a Job), untouched if it already matches."""
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
        raise Blocked("NameConflict", "metadata.name",
                      f"{resource}/{name} exists and is not owned by this SearchIndex: rename one of them")
    if mutable and _hash(live) != _hash(manifest):
        log.info("updating %s/%s", resource, name)
        return kube.patch(resource, owner.namespace, name, manifest)
    return live


def remove(kube: Kube, owner: Owner, resource: str, name: str) -> None:
    live = kube.get(resource, owner.namespace, name)
    if live is not None and _owned(live, owner):
        log.info("removing %s/%s", resource, name)
        kube.delete(resource, owner.namespace, name)


def remove_other_jobs(kube: Kube, owner: Owner, component: str, keep: str | None) -> None:
    """Jobs of `component` from an earlier spec (another image, another model)."""
    labels = {"app.kubernetes.io/instance": owner.name, "app.kubernetes.io/component": component}
    for job in kube.list("jobs", owner.namespace, labels):
        name = job["metadata"]["name"]
        if name != keep and _owned(job, owner):
            log.info("removing jobs/%s (superseded)", name)
            kube.delete("jobs", owner.namespace, name)


def check_secrets(kube: Kube, owner: Owner, spec: SearchIndexSpec) -> None:
    """Every Secret the pods need exists and has its key; otherwise Blocked naming the field.

    Checked here so a platform team reads "secret X not found" on the SearchIndex instead of
    finding pods stuck in CreateContainerConfigError.
    """
    refs = [("spec.database.secretRef", spec.database.secret_ref),
            ("spec.database.readReplicaSecretRef", spec.database.read_replica_secret_ref)]
    if spec.embeddings is not None and spec.embeddings.external is not None:
        refs.append(("spec.embeddings.external.apiKeySecretRef", spec.embeddings.external.api_key_secret_ref))
    for field, ref in refs:
        if ref is None:
            continue
        secret = kube.get("secrets", owner.namespace, ref.name)
        if secret is None:
            raise Blocked("SecretMissing", field, f"secret {ref.name} not found in namespace {owner.namespace}")
        if ref.key not in (secret.get("data") or {}) and ref.key not in (secret.get("stringData") or {}):
            raise Blocked("SecretMissing", field, f"secret {ref.name} has no key {ref.key!r}")


def _status_token(kube: Kube, owner: Owner, spec: SearchIndexSpec) -> str:
    ref = spec.api.status_token_secret_ref
    if ref is None:
        raise apistatus.Unreadable(
            "spec.api.statusTokenSecretRef is not set: create an admin token (`backscroll tokens create "
            "--kind admin`), store it in a Secret and name that Secret there")
    secret = kube.get("secrets", owner.namespace, ref.name)
    data = (secret or {}).get("data") or {}
    if secret is None or ref.key not in data:
        raise apistatus.Unreadable(f"spec.api.statusTokenSecretRef: secret {ref.name} with key {ref.key!r} "
                                   f"not found in namespace {owner.namespace}")
    return base64.b64decode(data[ref.key]).decode().strip()


def read_report(kube: Kube, owner: Owner, spec: SearchIndexSpec, config: OperatorConfig) -> tuple[dict | None, str | None]:
    try:
        token = _status_token(kube, owner, spec)
        url = builders.status_url(owner, spec, config.status_url)
        return apistatus.read(url, token, config.status_timeout_s), None
    except apistatus.Unreadable as exc:
        return None, str(exc)


def converge(kube: Kube, owner: Owner, spec: SearchIndexSpec, config: OperatorConfig) -> Facts:
    check_secrets(kube, owner, spec)
    live: dict[str, dict] = {}
    for resource, name, manifest in builders.desired(owner, spec):
        if manifest is None:
            remove(kube, owner, resource, name)
        else:
            live[f"{resource}/{name}"] = ensure(kube, owner, resource, manifest)

    migration = builders.migration_job(owner, spec)
    migration_state = JobState.of(migration["metadata"]["name"], ensure(kube, owner, "jobs", migration, mutable=False))
    remove_other_jobs(kube, owner, "migrate", keep=migration["metadata"]["name"])

    backfill_state = None
    backfill = builders.backfill_job(owner, spec)
    if backfill is not None:
        name = backfill["metadata"]["name"]
        # The backfill embeds rows the migration's vector index must already cover: it waits.
        job = (ensure(kube, owner, "jobs", backfill, mutable=False) if migration_state.phase == "succeeded"
               else kube.get("jobs", owner.namespace, name))
        backfill_state = JobState.of(name, job)
    remove_other_jobs(kube, owner, "backfill", keep=backfill["metadata"]["name"] if backfill else None)

    def deployment(name: str) -> DeploymentState | None:
        key = f"deployments/{name}"
        return DeploymentState.of(name, live[key]) if key in live else None

    report, error = read_report(kube, owner, spec, config)
    return Facts(migration=migration_state, api=deployment(builders.api_name(owner)),
                 worker=deployment(builders.worker_name(owner)),
                 server=deployment(builders.embeddings_name(owner)),
                 backfill=backfill_state, report=report, report_error=error)
