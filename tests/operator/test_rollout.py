"""The rollout decision, without a cluster: which image and model each process runs, phase by phase.

Written from issue 21's statement of blue/green: a new model is migrated and backfilled while
search keeps serving the old one; the API and the worker switch when the new model covers
minCoverage; a Backscroll image never runs before its migration succeeded.
"""

from __future__ import annotations

import pytest

from backscroll_operator import rollout
from backscroll_operator.rollout import Observed, plan
from backscroll_operator.spec import parse

OLD, NEW = "e5-small", "arctic-l"
BASE = {"image": "backscroll:2", "database": {"secretRef": {"name": "db"}}}


def spec(model: str | None = NEW, **rollout_spec):
    body = dict(BASE)
    if model:
        body["embeddings"] = {"model": model, "dimensions": 384, **({"rollout": rollout_spec} if rollout_spec else {})}
    return parse(body)


def emb(model: str):
    return spec(model).embeddings


def serving(model: str = OLD, **seen) -> Observed:
    """An index whose API and worker run `model` on backscroll:1, fully rolled out."""
    values = dict(migrated=True, api_exists=True, api_image="backscroll:1", api_embeddings=emb(model),
                  worker_exists=True, worker_embeddings=emb(model), worker_rolled_out=True,
                  backfilled=frozenset({model}), coverage={model: 1.0})
    values.update(seen)
    return Observed(**values)


def models(p: rollout.Plan) -> tuple:
    return (p.api.model if p.api else None, p.worker.model if p.worker else None)


def test_a_new_index_gets_no_deployment_before_its_first_migration():
    first = plan(spec(), Observed(migrated=False))
    assert first.phase == rollout.MIGRATING and first.image is None
    assert [s.model for s in first.servers] == [NEW], "the server loads its weights meanwhile"
    after = plan(spec(), Observed(migrated=True))
    assert after.image == "backscroll:2" and models(after) == (NEW, NEW) and after.phase == rollout.BACKFILLING


def test_a_new_image_waits_for_its_migration():
    seen = serving(NEW, migrated=False)
    waiting = plan(spec(), seen)
    assert waiting.image == "backscroll:1" and waiting.phase == rollout.MIGRATING
    assert plan(spec(), serving(NEW)).image == "backscroll:2"


def test_lexical_needs_no_worker_or_server():
    p = plan(spec(None), serving(OLD))
    assert p.phase == rollout.LEXICAL and models(p) == (None, None) and p.servers == ()


def test_blue_green_walks_migrate_backfill_catch_up_switch():
    target = spec(NEW)
    # Migrating: the old model serves, both servers run, only the old model's Job is kept.
    p = plan(target, serving(OLD, migrated=False))
    assert (p.phase, models(p)) == (rollout.MIGRATING, (OLD, OLD))
    assert {s.model for s in p.servers} == {OLD, NEW}
    # Backfilling: still the old model everywhere; both models' backfill Jobs are kept.
    p = plan(target, serving(OLD))
    assert (p.phase, models(p)) == (rollout.BACKFILLING, (OLD, OLD)) and set(p.backfills) == {OLD, NEW}
    assert p.catchup is None
    # Backfilled: the worker moves first; no catch-up until every worker pod runs the new model.
    p = plan(target, serving(OLD, backfilled=frozenset({OLD, NEW})))
    assert (p.phase, models(p)) == (rollout.CATCHING_UP, (OLD, NEW)) and p.catchup is None
    moved = dict(backfilled=frozenset({OLD, NEW}), worker_embeddings=emb(NEW), worker_rolled_out=False)
    assert plan(target, serving(OLD, **moved)).catchup is None
    moved["worker_rolled_out"] = True
    p = plan(target, serving(OLD, **moved))
    assert (p.phase, models(p)) == (rollout.CATCHING_UP, (OLD, NEW)) and p.catchup.model == NEW
    # Caught up but short of minCoverage: the API waits.
    p = plan(target, serving(OLD, **moved, caught_up=True, coverage={OLD: 0.97, NEW: 0.99}))
    assert (p.phase, models(p)) == (rollout.CATCHING_UP, (OLD, NEW)) and "minCoverage" in p.waiting
    # Covered: the API switches, and the old model is remembered for a later prune.
    p = plan(target, serving(OLD, **moved, caught_up=True, coverage={OLD: 0.97, NEW: 1.0}))
    assert (p.phase, models(p)) == (rollout.SWITCHING, (NEW, NEW)) and p.previous == OLD


def test_min_coverage_below_one_switches_earlier():
    moved = dict(backfilled=frozenset({OLD, NEW}), worker_embeddings=emb(NEW), caught_up=True)
    p = plan(spec(NEW, minCoverage=0.95), serving(OLD, **moved, coverage={NEW: 0.96}))
    assert p.phase == rollout.SWITCHING


def test_complete_once_the_api_serves_the_new_model_and_prunes_only_when_asked():
    done = serving(NEW, backfilled=frozenset({OLD, NEW}), previous=OLD)
    kept = plan(spec(NEW), done)
    assert (kept.phase, models(kept), kept.prune) == (rollout.COMPLETE, (NEW, NEW), None)
    assert [s.model for s in kept.servers] == [NEW], "the old model's server goes"
    assert set(kept.backfills) == {NEW, OLD}, "a retained model keeps its backfill record (a quick rollback)"
    assert kept.catchup is None
    pruned = plan(spec(NEW, retainPrevious=False), done)
    assert pruned.prune == OLD


def test_a_rollback_after_the_switch_is_the_same_walk_and_short_while_vectors_are_kept():
    # NEW serves; the spec goes back to OLD, whose vectors were retained (its backfill Job ran).
    back = serving(NEW, backfilled=frozenset({OLD, NEW}), previous=OLD, coverage={OLD: 0.99, NEW: 1.0})
    p = plan(spec(OLD), back)
    assert (p.phase, models(p)) == (rollout.CATCHING_UP, (NEW, OLD)), "no re-embedding: straight to catch-up"


def test_a_rollback_mid_catch_up_brings_the_worker_back_and_catches_its_model_up():
    # OLD still serves, the worker had moved to NEW, and the spec goes back to OLD.
    mid = serving(OLD, backfilled=frozenset({OLD, NEW}), worker_embeddings=emb(NEW))
    p = plan(spec(OLD), mid)
    assert (p.phase, models(p)) == (rollout.CATCHING_UP, (OLD, OLD)) and p.catchup is None
    assert p.catchup_owed == OLD and p.retain_servers == (NEW,), "old worker pods keep their server"
    # The worker's annotation is back, its pods not yet: still no catch-up, still owed.
    p = plan(spec(OLD), serving(OLD, catchup_owed=OLD, worker_rolled_out=False))
    assert p.catchup is None and p.catchup_owed == OLD
    p = plan(spec(OLD), serving(OLD, catchup_owed=OLD))
    assert p.phase == rollout.CATCHING_UP and p.catchup.model == OLD
    p = plan(spec(OLD), serving(OLD, catchup_owed=OLD, catchup_failed=True, catchup_pending=True))
    assert "failed" in p.waiting
    done = plan(spec(OLD), serving(OLD, catchup_owed=OLD, caught_up=True))
    assert done.phase == rollout.COMPLETE and done.catchup_owed is None


def test_the_switch_waits_for_the_apis_pods_before_the_old_server_goes_or_a_prune():
    just = serving(NEW, backfilled=frozenset({OLD, NEW}), previous=OLD, api_rolled_out=False)
    p = plan(spec(NEW, retainPrevious=False), just)
    assert p.phase == rollout.SWITCHING and p.retain_servers == (OLD,) and p.prune is None
    assert plan(spec(NEW, retainPrevious=False), serving(NEW, previous=OLD)).prune == OLD


def test_lexical_to_hybrid_waits_for_the_models_migration():
    lexical_api = Observed(migrated=False, api_exists=True, api_image="backscroll:1", api_embeddings=None)
    p = plan(spec(NEW), lexical_api)
    assert models(p) == (None, None) and p.image == "backscroll:1"
    p = plan(spec(NEW), Observed(migrated=True, api_exists=True, api_image="backscroll:1"))
    assert models(p) == (NEW, NEW)


@pytest.mark.parametrize("migrated", [True, False])
def test_an_api_without_the_annotation_is_taken_to_serve_the_spec(migrated):
    legacy = Observed(migrated=migrated, api_exists=True, api_image="backscroll:1", api_annotated=False,
                      worker_exists=True, worker_embeddings=None, backfilled=frozenset({NEW}))
    p = plan(spec(NEW), legacy)
    assert models(p) == (NEW, NEW)
