"""Health of `backscroll worker` for Kubernetes, and the wait for a migrated schema at start.

The worker serves no API; with BACKSCROLL_WORKER_HEALTH_PORT set it answers two probes and its
metrics from a thread of its own (the standard library's server: three fixed routes need no
framework):

- `GET /healthz` (liveness): 200 while the worker's loop comes round, whether it embedded
  something or waited as it should (an idle poll, a backoff, the database or the schema it waits
  for); 503 when the loop has stopped or has not come round for `worker_health_stale_s`. Only a
  restart mends either. It never touches the database: an outage must not restart the worker.
- `GET /readyz` (readiness): 200 when the database answers, every migration this build ships is
  applied and the configured model is registered, i.e. the worker can work; 503 with the reason
  otherwise (no secrets, no connection string).
- `GET /metrics`: the worker's Prometheus metrics (metrics.py), for an admin token only, like the
  API's /metrics. The check is injected (`authorize`, from the command line, which may import
  backscroll.access): it returns for an admin token and raises a BackscrollError otherwise (401
  without a token or with a bad one, 403 for another kind), answered as JSON. Without `authorize`
  /metrics is not served (404). The probes stay without a token: the kubelet sends none.

A worker or backfill started before the migration Job finished waits for it (`wait_until_ready`)
instead of failing on tables that are not there yet.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import psycopg

from ..config import Settings
from ..errors import BackscrollError, MigrationError
from ..store.migrate import applied_versions, check_compatible, load_migrations
from .metrics import WorkerMetrics
from .vectors import SELECT_MODEL

log = logging.getLogger(__name__)

# psycopg's shortest connect timeout: a probe's answer must come within the kubelet's (1 s by
# default, usually raised for a database check).
PROBE_CONNECT_TIMEOUT_S = 2
FIRST_POLL_S = 0.5
POLL_MAX_S = 10.0


@lru_cache(maxsize=1)
def wanted_versions() -> frozenset[int]:
    return frozenset(m.version for m in load_migrations())


def schema_reason(conn: psycopg.Connection) -> str | None:
    """Why the schema is not the one this build needs (None: it is)."""
    applied = set(applied_versions(conn))
    if wanted_versions() <= applied:
        return None
    return f"schema {max(applied, default=0)}, want {max(wanted_versions())}"


def not_ready(conn: psycopg.Connection, settings: Settings) -> str | None:
    """Why the worker cannot work on this database yet (None: it can)."""
    reason = schema_reason(conn)
    if reason is None and settings.embeddings.embeddings_model:
        if conn.execute(SELECT_MODEL, {"model": settings.embeddings.embeddings_model}).fetchone() is None:
            reason = f"model {settings.embeddings.embeddings_model} is not registered"
    return reason


def check(url: str, settings: Settings, connect_timeout: int = PROBE_CONNECT_TIMEOUT_S) -> str | None:
    try:
        with psycopg.connect(url, connect_timeout=connect_timeout, autocommit=True) as conn:
            return not_ready(conn, settings)
    except psycopg.Error as exc:
        return f"the database is unreachable ({type(exc).__name__})"


def _refuse_newer_schema(url: str) -> None:
    """Refused, not waited for: no migration of this image makes a newer schema older (a database
    that does not answer yet is `check`'s to report)."""
    try:
        conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.Error:
        return
    with conn:
        check_compatible(conn)


def wait_until_ready(url: str, settings: Settings, stop: threading.Event, what: str,
                     tick: Callable[[], None] | None = None) -> bool:
    """Block until the database answers with the schema this build needs (and the configured
    model registered), polling at 0.5 s, doubling to 10 s, for at most `schema_wait_s`; each
    reason for waiting is logged once. False when `stop` was set first; MigrationError when the
    wait ran out."""
    deadline = time.monotonic() + settings.database.schema_wait_s
    wait, said = FIRST_POLL_S, None
    while not stop.is_set():
        if tick is not None:
            tick()
        _refuse_newer_schema(url)
        reason = check(url, settings, connect_timeout=10)
        if reason is None:
            if said is not None:
                log.info("%s: the schema is ready", what)
            return True
        if reason != said:
            log.warning("%s: waiting for migrations (%s)", what, reason)
            said = reason
        left = deadline - time.monotonic()
        if left <= 0:
            raise MigrationError(f"{what}: waited {settings.database.schema_wait_s:g} s for migrations ({reason}); "
                                 "run `backscroll migrate` (with --model for the configured model), or raise "
                                 "BACKSCROLL_SCHEMA_WAIT_S")
        stop.wait(min(wait, left))
        wait = min(wait * 2, POLL_MAX_S)
    return False


class Heartbeat:
    """When the worker's loop last came round (monotonic)."""

    def __init__(self) -> None:
        self._at = time.monotonic()

    def beat(self) -> None:
        self._at = time.monotonic()

    @property
    def age_s(self) -> float:
        return time.monotonic() - self._at


# Checks the Authorization header of a /metrics request: returns for an admin token, raises a
# BackscrollError (Unauthenticated, Forbidden) otherwise.
Authorize = Callable[[str | None], None]


class HealthServer:
    """/healthz, /readyz (and, given `metrics` and `authorize`, /metrics) on (host, port) from a
    daemon thread; port 0 picks a free one."""

    def __init__(self, settings: Settings, url: str, heartbeat: Heartbeat, loop: threading.Thread,
                 host: str, port: int, *, metrics: WorkerMetrics | None = None,
                 authorize: Authorize | None = None):
        self.settings, self.url, self.heartbeat, self.loop = settings, url, heartbeat, loop
        self.metrics, self.authorize = metrics, authorize
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    status, body = health.liveness()
                elif path == "/readyz":
                    status, body = health.readiness()
                elif path == "/metrics" and health.metrics is not None and health.authorize is not None:
                    status, body = health.scrape(self.headers.get("Authorization"))
                    if isinstance(body, bytes):
                        self._send(status, body, health.metrics.content_type)
                        return
                else:
                    status, body = 404, {"status": "not_found"}
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, data: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                if status == 401:
                    self.send_header("WWW-Authenticate", "Bearer")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args) -> None:  # a probe every few seconds is no news
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="backscroll-worker-health",
                                        daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> "HealthServer":
        self._thread.start()
        log.info("worker health on %s:%d (/healthz, /readyz%s)", self.httpd.server_address[0], self.port,
                 ", /metrics" if self.metrics is not None and self.authorize is not None else "")
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def liveness(self) -> tuple[int, dict]:
        if not self.loop.is_alive():
            return 503, {"status": "unavailable", "reason": "the worker loop has stopped"}
        age = self.heartbeat.age_s
        if age > self.settings.worker.worker_health_stale_s:
            return 503, {"status": "unavailable", "reason": f"the worker loop has not come round for {age:.0f} s"}
        return 200, {"status": "ok"}

    def readiness(self) -> tuple[int, dict]:
        reason = check(self.url, self.settings)
        if reason is not None:
            return 503, {"status": "unavailable", "reason": reason}
        return 200, {"status": "ok"}

    def scrape(self, header: str | None) -> tuple[int, dict | bytes]:
        """The metrics for an admin token; the refusal (401, 403), or 503 when the token cannot be
        checked (the database unreachable), as JSON, never a traceback."""
        try:
            self.authorize(header)
        except BackscrollError as exc:
            return exc.status, exc.to_dict()
        except psycopg.Error as exc:
            return 503, {"error": {"code": "unavailable",
                                   "message": f"the token cannot be checked: the database is unreachable "
                                              f"({type(exc).__name__})"}}
        except Exception:
            log.exception("worker /metrics: the token check failed")
            return 500, {"error": {"code": "internal_error", "message": "the token check failed"}}
        return 200, self.metrics.exposition()
