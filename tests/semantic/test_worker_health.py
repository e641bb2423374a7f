"""`backscroll worker`'s probes (BACKSCROLL_WORKER_HEALTH_PORT): /readyz says whether the worker can
work on this database, /healthz whether its loop goes on; and the worker, like `backscroll
backfill`, waits for the migrations instead of failing on a database that lacks them."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

import psycopg
import pytest

from backscroll.embeddings.health import HealthServer, Heartbeat, wait_until_ready
from backscroll.embeddings.vectors import register_model
from backscroll.embeddings.worker import Worker
from backscroll.errors import MigrationError
from backscroll.store.migrate import load_migrations, migrate
from tests.migrations import migrations_through
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL, fake_settings
from tests.semantic.test_worker import cli_env, messages

LATEST = load_migrations()[-1].version


def get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def worker_process(env: dict):
    """`backscroll worker` as a process of its own; stopped with SIGTERM at the end, which it must
    survive with exit status 0. Its stderr is `proc.said` afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "backscroll.cli", "worker"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        _, proc.said = proc.communicate(timeout=60)
    assert proc.returncode == 0, proc.said


def until_served(proc, call, seconds: float = 60):
    """`call()`'s first answer that is not None, retried while the worker's server is not up yet
    (a refused connection); fails at once with its stderr when the process has ended."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            answer = call()
            if answer is not None:
                return answer
        except (urllib.error.URLError, ConnectionError):
            pass
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
        time.sleep(0.2)


def serve(settings, url: str, heartbeat: Heartbeat, loop: threading.Thread) -> HealthServer:
    return HealthServer(settings, url, heartbeat, loop, "127.0.0.1", 0).start()


def test_ready_on_a_migrated_database_with_the_model_and_not_otherwise(pg_url, db_url, fake, empty_db_url, tmp_path):
    settings = fake_settings(db_url, fake)
    health = serve(settings, db_url, Heartbeat(), threading.current_thread())
    try:
        assert get(health.port, "/readyz") == (503, {"status": "unavailable",
                                                     "reason": f"model {FAKE_MODEL} is not registered"})
        register_model(db_url, FAKE_MODEL, FAKE_DIMS)
        assert get(health.port, "/readyz") == (200, {"status": "ok"})
        assert get(health.port, "/healthz") == (200, {"status": "ok"})
        assert get(health.port, "/other")[0] == 404

        # The database refusing connections (stopped, restarting): not ready, still alive.
        dbname = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"alter database {dbname} with allow_connections false")
            try:
                status, body = get(health.port, "/readyz")
                assert (status, body["status"]) == (503, "unavailable")
                assert body["reason"].startswith("the database is unreachable"), body
                assert db_url not in body["reason"]
                assert get(health.port, "/healthz") == (200, {"status": "ok"})
            finally:
                admin.execute(f"alter database {dbname} with allow_connections true")
        assert get(health.port, "/readyz") == (200, {"status": "ok"})
    finally:
        health.close()

    # An address nothing listens on.
    unreachable = psycopg.conninfo.make_conninfo(db_url, port=free_port())
    health = serve(fake_settings(unreachable, fake), unreachable, Heartbeat(), threading.current_thread())
    try:
        status, body = get(health.port, "/readyz")
        assert status == 503 and body["reason"].startswith("the database is unreachable")
    finally:
        health.close()

    # A schema short of this build's migrations: not ready, with where it stands.
    migrate(empty_db_url, directory=migrations_through(tmp_path, 20))
    health = serve(fake_settings(empty_db_url, fake), empty_db_url, Heartbeat(), threading.current_thread())
    try:
        assert get(health.port, "/readyz") == (503, {"status": "unavailable", "reason": f"schema 20, want {LATEST}"})
    finally:
        health.close()


def test_healthz_fails_when_the_loop_stops_or_stalls(db_url, world, fake, fake_model, gateway_factory):
    messages(world, "acme", 3)
    settings = fake_settings(db_url, fake, worker={"worker_poll_s": 0.05, "worker_health_stale_s": 2})
    heartbeat, stop = Heartbeat(), threading.Event()
    worker = Worker(settings, db_url, gateway=gateway_factory(settings), stop=stop, heartbeat=heartbeat)
    loop = threading.Thread(target=worker.run, name="loop")
    loop.start()
    health = serve(settings, db_url, heartbeat, loop)
    try:
        time.sleep(3)  # longer than the staleness bound: an idle loop still comes round
        assert get(health.port, "/healthz") == (200, {"status": "ok"})
        assert worker.queue()["pending"] == 0
        stop.set()
        loop.join(timeout=30)
        assert not loop.is_alive()
        assert get(health.port, "/healthz") == (503, {"status": "unavailable",
                                                      "reason": "the worker loop has stopped"})
    finally:
        stop.set()
        worker.close()
        health.close()

    # A loop alive but stuck (its heartbeat old) fails too.
    stuck = Heartbeat()
    stuck._at -= 10
    health = serve(settings, db_url, stuck, threading.current_thread())
    try:
        status, body = get(health.port, "/healthz")
        assert status == 503 and "has not come round for 10 s" in body["reason"]
    finally:
        health.close()


def test_the_wait_for_migrations_is_bounded_and_says_why(empty_db_url, fake, caplog):
    settings = fake_settings(empty_db_url, fake, database={"schema_wait_s": 1.5})
    beats = []
    with pytest.raises(MigrationError, match=f"waited 1.5 s for migrations \\(schema 0, want {LATEST}\\)"):
        wait_until_ready(empty_db_url, settings, threading.Event(), "backfill", tick=lambda: beats.append(1))
    assert len(beats) >= 2
    said = [r.getMessage() for r in caplog.records if "waiting for migrations" in r.getMessage()]
    assert said == [f"backfill: waiting for migrations (schema 0, want {LATEST})"]  # once, not per poll


def test_the_worker_waits_for_the_migration_job_then_works(empty_db_url, fake):
    """The operator starts the worker beside the migration Job: it waits, alive and not ready, and
    embeds once the schema and the model are there."""
    port = free_port()
    env = cli_env(empty_db_url, fake, BACKSCROLL_WORKER_HEALTH_PORT=port, BACKSCROLL_WORKER_POLL_S=0.1)
    with worker_process(env) as proc:
        ready = until_served(proc, lambda: get(port, "/readyz"))
        assert ready == (503, {"status": "unavailable", "reason": f"schema 0, want {LATEST}"})
        assert get(port, "/healthz") == (200, {"status": "ok"})

        migrate(empty_db_url)
        register_model(empty_db_url, FAKE_MODEL, FAKE_DIMS)
        from tests.world import open_world

        w = open_world(empty_db_url)
        try:
            messages(w, "acme", 2)
            deadline = time.monotonic() + 60
            while w.conn.execute("select count(*) as n from message_embeddings").fetchone()["n"] < 2:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        finally:
            w.conn.close()
        assert get(port, "/readyz") == (200, {"status": "ok"})
        assert get(port, "/healthz") == (200, {"status": "ok"})
    err = proc.said
    # Once per schema version seen, however many polls: a poll that lands while the migration Job
    # is half way through (a busy machine) sees one more version, and says so once too.
    waits = [line.partition("worker: ")[2] for line in err.splitlines() if "waiting for migrations (schema" in line]
    assert waits and len(waits) == len(set(waits)), err
    assert f"worker: waiting for migrations (schema 0, want {LATEST})" in err
    assert "2 embedded" in err
