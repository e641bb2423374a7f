"""What each child should run now: the image and the model of every process, as one decision.

A pure function of the spec and of what the pass observed, so the order of a rollout is written
(and tested) in one place. Two things gate a rollout:

- **The image.** A Backscroll image's migrations run (its migration Job succeeds) before any
  Deployment runs that image: until then the Deployments keep the image they run now, and a new
  index gets no API or worker at all.
- **The model (blue/green).** A new model is migrated and backfilled while the API and the worker
  keep the model they serve; then the worker moves to the new model (so new messages get its
  vectors) and a catch-up backfill embeds what arrived in between; then, once the new model
  covers `rollout.minCoverage` of the messages, the API moves too. Search stays hybrid over the
  old vectors the whole time. A rollback is the same walk back, short while the old vectors are
  kept (only the messages since need embedding).

What serves now is read from the live Deployments (their `search.backscroll.dev/embeddings`
annotation), not from the status: it is what the pods were given, and it survives a lost status.
"""

from __future__ import annotations

from dataclasses import dataclass

from .spec import Embeddings, SearchIndexSpec

# Phases, in the order a model rollout walks them.
MIGRATING = "Migrating"        # the spec's image or model is being migrated
BACKFILLING = "Backfilling"    # the new model's backfill Job runs; search serves the old model
CATCHING_UP = "CatchingUp"     # the worker embeds with the new model; the catch-up Job runs
SWITCHING = "Switching"        # the API moves to the new model
COMPLETE = "Complete"          # everything runs the spec's model, fully backfilled
LEXICAL = "Lexical"            # no embeddings in the spec


@dataclass(frozen=True)
class Observed:
    """What the pass saw, reduced to what the decision needs."""

    migrated: bool                        # the migration Job of (spec image, spec model) succeeded
    api_exists: bool = False
    api_image: str | None = None          # the image the live API Deployment runs
    api_embeddings: Embeddings | None = None   # the model configuration the live API serves
    api_rolled_out: bool = True           # every API pod runs the live API manifest
    api_annotated: bool = True            # written by this operator version (False: an older one)
    worker_exists: bool = False
    worker_embeddings: Embeddings | None = None
    worker_rolled_out: bool = False       # every worker pod runs the live worker manifest
    backfilled: frozenset[str] = frozenset()   # models whose backfill Job succeeded
    caught_up: bool = False               # the target model's catch-up Job succeeded
    catchup_pending: bool = False         # ... exists and has not succeeded (running or failed)
    coverage: dict[str, float] | None = None   # per model, from the API's status
    previous: str | None = None           # the model a finished rollout moved away from (status)
    catchup_owed: str | None = None       # a model the worker came back to, owed a catch-up (status)
    catchup_failed: bool = False          # the target's catch-up Job failed


@dataclass(frozen=True)
class Plan:
    phase: str
    image: str | None                     # None: no Backscroll Deployment yet (first migration)
    api: Embeddings | None                # what the API serves (None: lexical)
    worker: Embeddings | None             # what the worker embeds with (None: no worker)
    servers: tuple[Embeddings, ...] = ()  # models that need an in-cluster embeddings server
    backfills: tuple[str, ...] = ()       # models whose backfill Job is wanted (created or kept)
    catchup: Embeddings | None = None     # the catch-up backfill Job to run now
    prune: str | None = None              # a superseded model whose vectors are to be deleted
    previous: str | None = None           # recorded in the status for a later prune
    catchup_owed: str | None = None       # recorded in the status until the catch-up ran
    retain_servers: tuple[str, ...] = ()  # models whose live server stays as it is (old pods use it)
    waiting: str = ""                     # what the phase waits for, in words


def same_model(a: Embeddings | None, b: Embeddings | None) -> bool:
    return a is not None and b is not None and (a.model, a.dimensions) == (b.model, b.dimensions)


def _servers(*models: Embeddings | None) -> tuple[Embeddings, ...]:
    seen: dict[str, Embeddings] = {}
    for emb in models:
        if emb is not None and emb.in_cluster and emb.model not in seen:
            seen[emb.model] = emb
    return tuple(seen.values())


def plan(spec: SearchIndexSpec, seen: Observed) -> Plan:
    image = spec.image if seen.migrated else seen.api_image
    target = spec.embeddings
    if target is None:
        return Plan(LEXICAL if seen.migrated else MIGRATING, image, None, None,
                    waiting="" if seen.migrated else "the migration Job")

    # An API that predates the annotation (or a first model) is taken to serve the spec's model.
    serving = seen.api_embeddings if seen.api_exists and seen.api_embeddings is not None else None
    if serving is None and seen.api_exists and seen.api_annotated and not seen.migrated:
        # Lexical so far: the API and the worker take the model once it is registered.
        return Plan(MIGRATING, image, None, None, _servers(target), waiting="the migration Job")
    if serving is None or same_model(serving, target):
        return _toward(spec, seen, image, target)
    return _blue_green(spec, seen, image, serving, target)


def _toward(spec: SearchIndexSpec, seen: Observed, image: str | None, target: Embeddings) -> Plan:
    """The API serves (or starts with) the spec's model: no second model to keep serving."""
    worker = seen.worker_embeddings if seen.worker_exists else None
    # A retained previous model keeps its backfill record: a rollback then skips the backfill.
    retained = seen.previous if seen.previous and seen.previous != target.model and \
        target.rollout.retain_previous else None
    keep = (target.model, retained) if retained else (target.model,)
    if worker is not None and not same_model(worker, target):
        # A rollback after the worker had moved on: bring it back (its old pods keep their
        # server meanwhile) and owe its model a catch-up for what the other model alone embedded.
        return Plan(CATCHING_UP, image, target, target, _servers(target), keep, previous=seen.previous,
                    catchup_owed=target.model, retain_servers=(worker.model,), waiting="the worker's rollout")
    if seen.catchup_owed == target.model or seen.catchup_pending:
        if not seen.worker_rolled_out:
            return Plan(CATCHING_UP, image, target, target, _servers(target), keep,
                        previous=seen.previous, catchup_owed=target.model, waiting="the worker's rollout")
        if not seen.caught_up:
            return Plan(CATCHING_UP, image, target, target, _servers(target), keep, catchup=target,
                        previous=seen.previous, catchup_owed=target.model, waiting=_catchup_wait(seen))
    if not seen.api_rolled_out and seen.previous and seen.previous != target.model:
        # Just switched: old API pods still query the previous model's server.
        return Plan(SWITCHING, image, target, target, _servers(target), (target.model, seen.previous),
                    previous=seen.previous, retain_servers=(seen.previous,), waiting="the API's rollout")
    prune = None
    if not seen.migrated:
        phase, waiting = MIGRATING, "the migration Job"
    elif target.model not in seen.backfilled:
        phase, waiting = BACKFILLING, "the backfill Job"
    else:
        phase, waiting = COMPLETE, ""
        if not target.rollout.retain_previous and seen.previous and seen.previous != target.model:
            prune = seen.previous
    return Plan(phase, image, target, target, _servers(target), keep, prune=prune,
                previous=seen.previous, waiting=waiting)


def _catchup_wait(seen: Observed) -> str:
    if seen.catchup_failed:
        return "the catch-up Job, which failed: see its logs, and delete it to run it again"
    return "the catch-up Job"


def _blue_green(spec: SearchIndexSpec, seen: Observed, image: str | None, serving: Embeddings,
                target: Embeddings) -> Plan:
    keep = (serving.model, target.model)  # the serving model's own backfill may still be running
    worker = seen.worker_embeddings if seen.worker_exists else None
    if not seen.migrated:
        return Plan(MIGRATING, image, serving, serving, _servers(serving, target), keep,
                    previous=seen.previous, waiting="the migration Job")
    if target.model not in seen.backfilled:
        return Plan(BACKFILLING, image, serving, serving, _servers(serving, target), keep,
                    previous=seen.previous, waiting="the backfill Job")
    # Backfilled: the worker moves first, so that nothing ingested from now on lacks a new vector.
    if not (same_model(worker, target) and seen.worker_rolled_out):
        return Plan(CATCHING_UP, image, serving, target, _servers(serving, target), keep,
                    previous=seen.previous, waiting="the worker's rollout")
    if not seen.caught_up:
        return Plan(CATCHING_UP, image, serving, target, _servers(serving, target), keep, catchup=target,
                    previous=seen.previous, waiting=_catchup_wait(seen))
    coverage = (seen.coverage or {}).get(target.model, 0.0)
    if coverage < target.rollout.min_coverage:
        return Plan(CATCHING_UP, image, serving, target, _servers(serving, target), keep, catchup=target,
                    previous=seen.previous,
                    waiting=f"coverage {coverage:.2%} of {target.rollout.min_coverage:.2%} (minCoverage; "
                            f"messages that cannot be embedded hold a rollout at 1.0)")
    return Plan(SWITCHING, image, target, target, _servers(serving, target), keep, catchup=target,
                previous=serving.model, waiting="the API's rollout")
