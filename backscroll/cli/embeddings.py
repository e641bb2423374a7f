"""Embeddings: the outbox `worker`, the `backfill`, and the registered `models`."""

from __future__ import annotations

import logging
import signal
import sys

from ..config import Settings
from .common import connection, guard_owner, positive, url_of


def _stop_on_signals():
    """A threading.Event set by SIGTERM or SIGINT: the current batch finishes, then the command exits."""
    import threading

    stop = threading.Event()

    def handle(signum, frame):
        if stop.is_set():  # a second signal: stop now
            raise SystemExit(128 + signum)
        logging.getLogger("backscroll").info("stopping after the current batch (signal %d)", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


def admin_authorizer(url: str):
    """The worker's /metrics check (embeddings may not import access; the command line holds both):
    an admin bearer token, looked up in the database like the API does. Returns for one; raises
    Unauthenticated (401) or Forbidden (403) otherwise, psycopg.Error when the database does not
    answer."""
    import psycopg
    from psycopg.rows import dict_row

    from ..access.auth import TokenKind, authenticate
    from ..embeddings.health import PROBE_CONNECT_TIMEOUT_S
    from ..errors import Unauthenticated

    def authorize(header: str | None) -> None:
        if not header:  # no round trip to refuse what carries no token
            raise Unauthenticated("missing bearer token: send `Authorization: Bearer <token>`")
        with psycopg.connect(url, connect_timeout=PROBE_CONNECT_TIMEOUT_S, autocommit=True,
                             row_factory=dict_row, options="-c statement_timeout=5000") as conn:
            authenticate(conn, header).require(TokenKind.admin, installation=True)

    return authorize


def cmd_worker(args, settings: Settings) -> int:
    import threading

    from ..embeddings.health import HealthServer, Heartbeat, wait_until_ready
    from ..embeddings.metrics import WorkerMetrics
    from ..embeddings.worker import run_worker

    if not settings.embeddings.enabled:
        print("embeddings are off (BACKSCROLL_EMBEDDINGS_MODEL is not set): nothing to do", file=sys.stderr)
        return 0
    url, stop, heartbeat = url_of(settings), _stop_on_signals(), Heartbeat()
    metrics = WorkerMetrics(lambda: heartbeat.age_s)
    health = None
    if settings.worker.worker_health_port:
        # Up before the wait for migrations: the probes say the worker is alive and not ready yet.
        health = HealthServer(settings, url, heartbeat, threading.current_thread(),
                              settings.worker.worker_health_host or settings.api.host,
                              settings.worker.worker_health_port,
                              metrics=metrics, authorize=admin_authorizer(url)).start()
    try:
        if not wait_until_ready(url, settings, stop, "worker", tick=heartbeat.beat):
            return 0
        stats = run_worker(settings, url, once=args.once, stop=stop, batch_size=args.batch, heartbeat=heartbeat,
                           metrics=metrics)
    finally:
        if health is not None:
            health.close()
    print(f"worker stopped: {stats.embedded} embedded, {stats.failed} failed ({stats.parked} parked), "
          f"{stats.postponed} postponed, {stats.batches} batches", file=sys.stderr)
    return 0


def cmd_backfill(args, settings: Settings) -> int:
    from ..embeddings.backfill import run_backfill

    if not settings.embeddings.enabled:
        raise SystemExit("embeddings are off: set BACKSCROLL_EMBEDDINGS_MODEL (and _URL) first")
    from ..embeddings.health import wait_until_ready

    url, stop = url_of(settings), _stop_on_signals()
    if not wait_until_ready(url, settings, stop, "backfill"):
        return 1
    result = run_backfill(settings, url, args.model or settings.embeddings.embeddings_model, rate=args.rate,
                          batch_size=args.batch, quiet=args.quiet, stop=stop)
    print(f"backfill {result.state}: {result.embedded} embedded by this run, {result.failed} handed to the outbox; "
          f"{result.covered} of {result.total} messages have a {result.model} vector ({result.seconds:.1f} s)")
    return 0 if result.state == "finished" else 1


def _confirmed(args, what: str, answer: str) -> bool:
    """--yes, or the person at a terminal typing `answer`; never a default yes in a script."""
    if getattr(args, "yes", False):
        return True
    if not sys.stdin.isatty():
        return False
    reply = input(f"{what}\ntype {answer!r} to go on: ")
    return reply.strip() == answer


def cmd_models_list(args, settings: Settings) -> int:
    from ..embeddings.models import list_models

    with connection(settings) as conn:
        rows = list_models(conn)
    if not rows:
        print("no model is registered (`backscroll migrate --model M --dimensions D` registers one)", file=sys.stderr)
    for r in rows:
        current = "  (configured)" if r["model"] == settings.embeddings.embeddings_model else ""
        print(f"{r['model']:<40} {r['dimensions']:>5} dims {r['embedded']:>10} of {r['total']:<10} embedded "
              f"{r['coverage']:>7.2%}{current}")
    return 0


def cmd_models_drop(args, settings: Settings) -> int:
    from ..embeddings.models import ModelInUse, drop_model

    if args.model == settings.embeddings.embeddings_model and not args.force:
        raise ModelInUse(f"model {args.model!r} is the configured one (BACKSCROLL_EMBEDDINGS_MODEL): search and the "
                         "worker use it. Configure another first, or pass --force")
    if not _confirmed(args, f"this deletes every vector of {args.model}, its index and its registration",
                      args.model):
        print("backscroll: not dropped: pass --yes to drop without asking", file=sys.stderr)
        return 1
    guard_owner(settings)
    dropped = drop_model(url_of(settings), args.model, quiet=args.quiet)
    jobs = f", {dropped.jobs} outbox jobs (no model is left)" if dropped.jobs else ""
    print(f"dropped model {dropped.model}: {dropped.vectors} vectors, index {dropped.index or '(none)'}{jobs}")
    return 0


def add_worker(sub) -> None:
    p = sub.add_parser("worker", help="embed new messages: drain the embedding outbox")
    p.add_argument("--once", action="store_true", help="drain what is due, then exit")
    p.add_argument("--batch", type=positive, help="jobs per transaction (default BACKSCROLL_WORKER_BATCH_SIZE)")
    p.set_defaults(func=cmd_worker)


def add_backfill(sub) -> None:
    p = sub.add_parser("backfill", help="embed every indexable message that has no vector of a model (resumable)")
    p.add_argument("--model", help="the model (default and only allowed: BACKSCROLL_EMBEDDINGS_MODEL)")
    p.add_argument("--rate", type=float,
                   help="at most this many messages per second (default BACKSCROLL_BACKFILL_RATE)")
    p.add_argument("--batch", type=positive,
                   help="messages per request and transaction (default BACKSCROLL_BACKFILL_BATCH_SIZE)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_backfill)


def add_models(sub) -> None:
    md = sub.add_parser("models", help="list registered embedding models, or drop one").add_subparsers(
        dest="action", required=True)
    p = md.add_parser("list", help="registered models: dimensions, vectors stored, coverage")
    p.set_defaults(func=cmd_models_list)
    p = md.add_parser("drop", help="delete a model's vectors (in batches), its HNSW index, registration and backfill")
    p.add_argument("model")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="drop it even if it is BACKSCROLL_EMBEDDINGS_MODEL")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_models_drop)
