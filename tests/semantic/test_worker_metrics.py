"""`backscroll worker`'s Prometheus metrics (issue 31): counters that move where the worker counts
its Stats, the outbox gauges set from one query of the loop, and GET /metrics on the health port,
for an admin token only (401 without one or with a bad one, 403 for another kind), checked against
the database by the command line's authorizer, like the API's /metrics."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import psycopg

from backscroll.access.auth import digest
from backscroll.cli import admin_authorizer
from backscroll.embeddings.health import HealthServer, Heartbeat
from backscroll.embeddings.metrics import WorkerMetrics
from backscroll.embeddings.worker import Worker
from tests.semantic.conftest import FAKE_MODEL, fake_settings, settings_for
from tests.semantic.test_gateway import _closed_port_url
from tests.semantic.test_worker import cli_env, messages
from tests.semantic.test_worker_health import free_port, get, until_served, worker_process

M = {"model": FAKE_MODEL}


def scrape(port: int, token: str | None = None, header: str | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of GET /metrics."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if header or token:
        request.add_header("Authorization", header or f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def outbox(metrics: WorkerMetrics) -> dict:
    value = metrics.value
    return {**{s: value("backscroll_worker_outbox_jobs", {**M, "state": s}) for s in ("pending", "due", "parked")},
            "oldest_due_s": value("backscroll_worker_outbox_oldest_due_seconds", M)}


def test_counters_and_outbox_gauges_follow_real_batches(db_url, world, fake, fake_model, gateway_factory):
    good = messages(world, "acme", 3)
    [poison] = messages(world, "acme", 1, prefix="POISON")
    [later] = messages(world, "hotel", 1)
    fake.reject = "POISON"
    # Queued two minutes ago; one job not due for an hour (a backoff): pending, not due, not lag.
    world.conn.execute("update embedding_outbox set enqueued_at = now() - interval '120 seconds'")
    world.conn.execute("update embedding_outbox set next_attempt_at = now() + interval '1 hour', "
                       "enqueued_at = now() - interval '1 day' where message_id = %s", (later,))
    settings = fake_settings(db_url, fake, worker={"worker_max_attempts": 1, "worker_metrics_refresh_s": 3600})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        m = worker.metrics
        # Every series of the model is there at 0 before the first batch (rate() sees the first one).
        assert m.value("backscroll_worker_embedded_total", M) == 0
        assert m.value("backscroll_worker_batch_seconds_count", M) == 0
        assert outbox(m)["pending"] is None  # not counted yet

        row = worker.refresh_metrics()
        assert {k: row[k] for k in ("pending", "due", "parked")} == {"pending": 5, "due": 4, "parked": 0}
        gauges = outbox(m)
        assert (gauges["pending"], gauges["due"], gauges["parked"]) == (5, 4, 0)
        assert 120 <= gauges["oldest_due_s"] < 600, gauges  # the not-due job's day is not lag
        assert worker.refresh_metrics() is None  # at most every worker_metrics_refresh_s

        stats = worker.run(once=True)
        assert (stats.embedded, stats.failed, stats.parked) == (3, 1, 1)
        assert m.value("backscroll_worker_embedded_total", M) == 3
        assert m.value("backscroll_worker_failed_total", M) == 1
        assert m.value("backscroll_worker_parked_total", M) == 1
        assert m.value("backscroll_worker_postponed_total", M) == 0
        assert m.value("backscroll_worker_batch_seconds_count", M) == stats.batches >= 1
        assert m.value("backscroll_worker_batch_seconds_sum", M) > 0
        assert outbox(m)["pending"] == 5  # the loop refreshes at most every refresh_s (an hour here)

        worker.refresh_metrics(force=True)
        assert outbox(m) == {"pending": 1, "due": 0, "parked": 1, "oldest_due_s": 0}
        assert worker.queue() == {"pending": 1, "due": 0, "parked": 1}
        assert 0 <= m.value("backscroll_worker_loop_age_seconds") < 60
    assert world.conn.execute("select count(*) as n from message_embeddings").fetchone()["n"] == len(good)

    # The loop refreshes the gauges itself: at its first turn, then once refresh_s has passed.
    world.conn.execute("update embedding_outbox set next_attempt_at = now() where message_id = %s", (later,))
    settings = fake_settings(db_url, fake, worker={"worker_metrics_refresh_s": 3600})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        worker.run(once=True)
        gauges = outbox(worker.metrics)  # counted before the batch, not again within the hour
        assert (gauges["pending"], gauges["due"], gauges["parked"]) == (1, 1, 1)
        assert gauges["oldest_due_s"] >= 86400  # queued a day ago, due now: that is the lag
        assert worker.metrics.value("backscroll_worker_embedded_total", M) == 1
        worker._metrics_due = time.monotonic()  # the hour has passed
        worker.run(once=True)
        assert outbox(worker.metrics) == {"pending": 0, "due": 0, "parked": 1, "oldest_due_s": 0}

    # An unreachable server postpones: counted as postponed, not failed.
    [m2] = messages(world, "acme", 1, prefix="later")
    settings = settings_for(db_url, embeddings={"embeddings_model": FAKE_MODEL, "embeddings_url": _closed_port_url(),
                            "embeddings_retries": 0}, worker={"worker_backoff_s": 30})
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        worker.run(once=True)
        assert worker.metrics.value("backscroll_worker_postponed_total", M) == 1
        assert worker.metrics.value("backscroll_worker_failed_total", M) == 0


def test_metrics_answer_an_admin_token_only(db_url, world, fake, fake_model, gateway_factory):
    messages(world, "acme", 2)
    admin, ingest = world.token("admin"), world.token("ingest", "acme")
    revoked = world.token("admin")
    world.conn.execute("update api_tokens set revoked_at = now() where digest = %s", (digest(revoked),))
    settings = fake_settings(db_url, fake)
    heartbeat = Heartbeat()
    with Worker(settings, db_url, gateway=gateway_factory(settings), heartbeat=heartbeat) as worker:
        worker.run(once=True)
        health = HealthServer(settings, db_url, heartbeat, threading.current_thread(), "127.0.0.1", 0,
                              metrics=worker.metrics, authorize=admin_authorizer(db_url)).start()
        try:
            status, ctype, body = scrape(health.port, admin)
            assert status == 200 and ctype.startswith("text/plain"), (status, body)
            assert f'backscroll_worker_embedded_total{{model="{FAKE_MODEL}"}} 2.0' in body
            assert 'backscroll_worker_loop_age_seconds ' in body
            assert "backscroll_http_requests_total" not in body  # the worker's registry, not the process's

            for refused in ({}, {"token": "bks_admin_" + "x" * 43}, {"header": "Basic " + admin},
                            {"token": revoked}):
                status, ctype, body = scrape(health.port, **refused)
                assert (status, ctype) == (401, "application/json"), (refused, status, body)
                error = json.loads(body)["error"]
                assert error["code"] == "unauthenticated" and error["message"], body
                assert "Traceback" not in body and admin not in body
            status, ctype, body = scrape(health.port, ingest)
            assert (status, ctype) == (403, "application/json"), body
            assert json.loads(body)["error"]["code"] == "forbidden" and "this one is a ingest token" in body

            # The probes need no token.
            assert get(health.port, "/healthz") == (200, {"status": "ok"})
            assert get(health.port, "/readyz") == (200, {"status": "ok"})
        finally:
            health.close()

        # A token that cannot be checked (the database away): 503 with the reason, no traceback.
        unreachable = psycopg.conninfo.make_conninfo(db_url, port=free_port())
        health = HealthServer(settings, db_url, heartbeat, threading.current_thread(), "127.0.0.1", 0,
                              metrics=worker.metrics, authorize=admin_authorizer(unreachable)).start()
        try:
            status, ctype, body = scrape(health.port, admin)
            assert (status, ctype) == (503, "application/json") and "database is unreachable" in body, body
        finally:
            health.close()

        # Without an authorizer there is no /metrics (never served without a token check).
        health = HealthServer(settings, db_url, heartbeat, threading.current_thread(), "127.0.0.1", 0,
                              metrics=worker.metrics).start()
        try:
            assert scrape(health.port, admin)[0] == 404
        finally:
            health.close()


def test_backscroll_worker_serves_its_metrics(db_url, world, fake, fake_model):
    """The command wires it together: the health port serves /metrics for an admin token."""
    admin = world.token("admin")
    messages(world, "acme", 2)
    port = free_port()
    env = cli_env(db_url, fake, BACKSCROLL_WORKER_HEALTH_PORT=port, BACKSCROLL_WORKER_POLL_S=0.1,
                  BACKSCROLL_WORKER_METRICS_REFRESH_S=0.1)
    embedded = f'backscroll_worker_embedded_total{{model="{FAKE_MODEL}"}} 2.0'
    drained = f'backscroll_worker_outbox_jobs{{model="{FAKE_MODEL}",state="pending"}} 0.0'

    def both_counted():
        status, _, body = scrape(port, admin)
        return body if status == 200 and embedded in body and drained in body else None

    with worker_process(env) as proc:
        until_served(proc, both_counted)
        assert scrape(port)[0] == 401
