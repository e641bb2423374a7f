"""The fault suite (issue 20): the parts Backscroll depends on fail under it, and it neither
loses nor duplicates what it acknowledged, never widens what a reader sees, and recovers without
a restart. Each case is bounded: waits have deadlines that a busy machine meets, nothing is timed.

Cases elsewhere that belong to the same family: the worker and the backfill reconnecting after
an outage (tests/semantic/test_reconnect.py), a SIGKILLed worker or backfill (test_worker.py,
test_backfill.py), an embeddings server that stops, stalls or refuses (test_gateway.py,
test_hybrid_*.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from backscroll.embeddings.vectors import register_model
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL
from tests.semantic.fakes import FakeEmbeddings
from tests.world import bearer, client

WS = "acme"


def _cut(pg_url: str, db_url: str, refuse_s: float) -> threading.Thread:
    """Every connection to the test's database terminated, new ones refused for `refuse_s`: what
    a restart or a failover does to the API. Returns the thread that lets connections back in."""
    name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    ident = psycopg.sql.Identifier(name)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("alter database {} with allow_connections false").format(ident))
        admin.execute("select pg_terminate_backend(pid) from pg_stat_activity "
                      "where datname = %s and pid <> pg_backend_pid()", (name,))

    def restore():
        time.sleep(refuse_s)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("alter database {} with allow_connections true").format(ident))

    thread = threading.Thread(target=restore)
    thread.start()
    return thread


def test_the_api_rides_out_a_database_restart(pg_url, db_url, world):
    """Ingest and search through an outage: during it every answer is a 503 (never a 500), after it
    the same process answers again; every message acknowledged is stored once, the search still
    narrowed."""
    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="alice")
    hidden = world.conversation(WS, "billing", "c-2", "Elsewhere", creator="bob")
    world.message(WS, hidden, "the kestrelbrook invoice nobody else may see")
    ingest = bearer(world.token("ingest", WS))
    reader = bearer(world.token("reader", WS, actor="alice", agents=["concierge"]))
    world.conn.close()
    acknowledged, statuses = [], []
    with client(db_url, database={"pool_min_size": 1}) as http:
        def append(i: int) -> None:
            r = http.post(f"/v1/conversations/{conv}/messages", headers=ingest,
                          json={"role": "user", "body": f"kestrelbrook note {i}", "external_id": f"m-{i}"})
            statuses.append(r.status_code)
            if r.status_code in (200, 201):
                acknowledged.append(i)

        for i in range(5):
            append(i)
        restore = _cut(pg_url, db_url, refuse_s=1.0)
        during = [http.get("/v1/agent-sessions", params={"q": "kestrelbrook"}, headers=reader).status_code]
        append(5)
        restore.join(timeout=60)
        deadline = time.monotonic() + 120
        i = 6
        while time.monotonic() < deadline and len(acknowledged) < 8:
            append(i)
            i += 1
            time.sleep(0.1)
        after = http.get("/v1/agent-sessions", params={"q": "kestrelbrook"}, headers=reader)
    assert 500 not in statuses and all(s in (200, 201, 503) for s in statuses + during), (statuses, during)
    assert 503 in statuses[5:] + during  # the outage was met
    assert len(acknowledged) >= 8
    assert after.status_code == 200, after.text
    assert [s["id"] for s in after.json()["sessions"]] == [conv]  # narrowed: the other agent's never
    with psycopg.connect(db_url) as conn:
        stored = [r[0] for r in conn.execute("select external_id from messages where conversation_id = %s", (conv,))]
    # Every acknowledged message is there; one whose answer the outage cut may be there too.
    assert {f"m-{i}" for i in acknowledged} <= set(stored)
    assert len(stored) == len(set(stored))  # nothing twice


def test_a_killed_import_loses_and_duplicates_nothing_when_run_again(db_url, world, tmp_path):
    """`backscroll import` SIGKILLed mid-file, then run again on the same file: every line's
    messages are stored exactly once."""
    world.workspace(WS)
    lines = []
    for c in range(400):
        lines.append(json.dumps({
            "agent": "concierge", "connector": {"type": "web", "name": "demo"}, "external_id": f"thread-{c}",
            "title": f"Thread {c}", "creator": {"external_id": "alice"},
            "messages": [{"external_id": f"t{c}-m{m}", "role": "user", "body": f"message {m} of thread {c}"}
                         for m in range(5)]}))
    path = tmp_path / "history.ndjson"
    path.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKSCROLL_")}
    env["BACKSCROLL_DATABASE_URL"] = db_url
    command = [sys.executable, "-c", "from backscroll.cli import main; raise SystemExit(main())",
               "import", str(path), "--workspace", WS]

    def stored() -> int:
        with psycopg.connect(db_url) as conn:
            return conn.execute("select count(*) from messages").fetchone()[0]

    first = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while stored() == 0 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    partial = stored()
    assert 0 < partial < 400 * 5, f"the kill did not land mid-file ({partial} stored); nothing was tested"
    again = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("select external_id, count(*) from messages group by 1 having count(*) > 1").fetchall()
        total = conn.execute("select count(*) from messages").fetchone()[0]
    assert rows == [] and total == 400 * 5, (partial, total, rows[:3])


@pytest.mark.parametrize("garbage", [
    (500, {"error": "boom"}, {}),
    (200, {"data": [{"index": 0, "embedding": [0.1] * (FAKE_DIMS + 3)}], "model": FAKE_MODEL}, {}),
    (200, {"data": [{"index": 0, "embedding": [float("nan")] * FAKE_DIMS}], "model": FAKE_MODEL}, {}),
    (200, {"data": []}, {}),
    (200, {"unexpected": True}, {}),
], ids=["500", "wrong dimension", "NaN", "no vector", "not the protocol"])
def test_an_embeddings_server_answering_garbage_degrades_search_never_widens_it(db_url, world, garbage):
    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="alice")
    world.message(WS, conv, "the kestrelbrook offsite is booked")
    hidden = world.conversation(WS, "billing", "c-2", "Elsewhere", creator="bob")
    world.message(WS, hidden, "the kestrelbrook invoice nobody else may see")
    reader = bearer(world.token("reader", WS, actor="alice", agents=["concierge"]))
    register_model(db_url, FAKE_MODEL, FAKE_DIMS)
    fake = FakeEmbeddings(dims=FAKE_DIMS).start()
    try:
        embeddings = {"embeddings_model": FAKE_MODEL, "embeddings_url": fake.url,
                      "embeddings_dimensions": FAKE_DIMS, "embeddings_backoff_s": 0.0, "embeddings_retries": 0}
        with client(db_url, embeddings=embeddings) as http:
            for _ in range(3):
                fake.script.append(garbage)
            r = http.get("/v1/agent-sessions", params={"q": "kestrelbrook"}, headers=reader)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["mode"] != "hybrid" and body["degradation"], body
            assert [s["id"] for s in body["sessions"]] == [conv]  # lexical, and narrowed
            fake.script.clear()
            healthy = http.get("/v1/agent-sessions", params={"q": "kestrelbrook"}, headers=reader)
            assert healthy.status_code == 200 and [s["id"] for s in healthy.json()["sessions"]] == [conv]
    finally:
        fake.stop()
