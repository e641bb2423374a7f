"""What deleting a SearchIndex does: `spec.deletionPolicy`.

retain (the default): no finalizer; Kubernetes' garbage collector removes the children (their
owner references) and the database keeps every row, so re-creating the SearchIndex resumes.

delete: the operator keeps its finalizer on the SearchIndex; on deletion it removes the API and
the worker (nothing writes any more), runs `backscroll purge` as a Job, and drops the finalizer
once the Job succeeded. A failed purge keeps the finalizer (and says so in an Event): the rows are
not gone, and a deletion that looks done must mean they are. docs/operator.md says how to remove
the finalizer by hand when the database is gone anyway.
"""

from __future__ import annotations

import logging
from . import builders
from .kube import Kube
from .names import PURGE_FINALIZER, Owner
from .reconcile import create_once, remove, remove_others
from .spec import SearchIndexSpec
from .status import JobState

log = logging.getLogger(__name__)


def _set_finalizers(kube: Kube, owner: Owner, body: dict, finalizers: list[str]) -> None:
    # A JSON patch with a resourceVersion test: another writer's finalizer is never lost.
    kube.patch("searchindexes", owner.namespace, owner.name, [
        {"op": "test", "path": "/metadata/resourceVersion", "value": body["metadata"]["resourceVersion"]},
        {"op": "add", "path": "/metadata/finalizers", "value": finalizers}],
        content_type="application/json-patch+json")


def sync_finalizer(kube: Kube, owner: Owner, body: dict, spec: SearchIndexSpec) -> None:
    """The purge finalizer present exactly when the policy is delete."""
    current = list(body["metadata"].get("finalizers") or [])
    wanted = spec.deletion_policy == "delete"
    if wanted and PURGE_FINALIZER not in current:
        _set_finalizers(kube, owner, body, [*current, PURGE_FINALIZER])
    elif not wanted and PURGE_FINALIZER in current:
        _set_finalizers(kube, owner, body, [f for f in current if f != PURGE_FINALIZER])


def finalize(kube: Kube, owner: Owner, body: dict, spec: SearchIndexSpec) -> tuple[str, str] | None:
    """One step of a deletion under our finalizer (each pass advances it). Returns (reason,
    message) for the Ready condition while the deletion is held up."""
    finalizers = list(body["metadata"].get("finalizers") or [])
    if PURGE_FINALIZER not in finalizers:
        return None  # retain: Kubernetes removes the object and its children by itself
    if spec.deletion_policy == "retain":  # switched back after the deletion began: keep the rows
        _set_finalizers(kube, owner, body, [f for f in finalizers if f != PURGE_FINALIZER])
        return None
    # Nothing may write while the rows go: no API, no worker, no migration or backfill Job.
    remove(kube, owner, "deployments", builders.api_name(owner))
    remove(kube, owner, "deployments", builders.worker_name(owner))
    for component in ("migrate", "register", "backfill", "catchup", "prune"):
        remove_others(kube, owner, "jobs", component, keep=set())
    job = builders.purge_job(owner, spec)
    state = JobState.of(job["metadata"]["name"], create_once(kube, owner, "jobs", job))
    if state.phase == "running":
        return "Purging", f"job {state.name} removes the database rows before the SearchIndex goes"
    if state.phase == "failed":
        return ("PurgeFailed", f"job {state.name} failed: the database rows are still there; see "
                f"`kubectl logs job/{state.name}`, delete the job to try again, or remove the finalizer "
                f"{PURGE_FINALIZER} to keep the rows (docs/operator.md, Deletion)")
    log.info("database purged for %s/%s: removing the finalizer", owner.namespace, owner.name)
    _set_finalizers(kube, owner, body, [f for f in finalizers if f != PURGE_FINALIZER])
    return None
