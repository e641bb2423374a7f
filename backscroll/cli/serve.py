"""`backscroll serve`: the HTTP API, in one process or several."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..config import Settings
from .common import url_of


def cmd_serve(args, settings: Settings) -> int:
    import uvicorn

    from ..app import create_app
    from ..store.migrate import migrate

    url = url_of(settings)
    if args.migrate:
        migrate(url)
    _refuse_newer_schema(url)
    workers = args.workers if args.workers is not None else (settings.api.api_workers or available_cpus())
    host, port = args.host or settings.api.host, args.port or settings.api.port
    if workers == 1:
        uvicorn.run(create_app(settings, url), host=host, port=port, log_level=settings.api.log_level, access_log=False)
        return 0
    # Each worker builds its own application (pools, maintenance thread) from the environment; the
    # database URL is handed down so that they all use the server this process found or started.
    os.environ["BACKSCROLL_DATABASE_URL"] = url
    # Each worker counts its own requests; /metrics, whichever worker answers it, adds up all of
    # theirs from the files prometheus_client's multiprocess mode keeps in this folder (one per
    # worker, made fresh for this server unless the environment names one).
    own_metrics = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    if own_metrics:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="backscroll-metrics-")
    connections = workers * settings.database.pool_max_size
    print(f"backscroll serve: {workers} worker processes, up to {connections} connections",
          file=sys.stderr)
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("backscroll.app:worker_app", factory=True, workers=workers, host=host, port=port,
                            log_level=settings.api.log_level, access_log=False)
    try:
        Multiprocess(config, sockets=[serving_socket(config)]).run()
    finally:
        if own_metrics:
            shutil.rmtree(os.environ.pop("PROMETHEUS_MULTIPROC_DIR"), ignore_errors=True)
    return 0


def _refuse_newer_schema(url: str) -> None:
    """An image older than the database's schema (a contract migration it does not know) does not
    serve: it would read what that migration removed. A database that does not answer yet is the
    readiness probe's to report, not a reason to exit."""
    import psycopg

    from ..store.migrate import check_compatible

    try:
        conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.OperationalError as exc:
        logging.getLogger("backscroll").warning("serve: the schema is not checked, the database does not answer "
                                                "(%s)", type(exc).__name__)
        return
    with conn:
        check_compatible(conn)


def available_cpus() -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup v2 quota (a container's
    limit, which os.cpu_count() does not see)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def serving_socket(config):
    """The listening socket `serve --workers N` hands its workers, with TCP_NODELAY. uvicorn's
    workers serve on a socket the parent made, which asyncio does not take for TCP (its protocol
    number is 0) and so never sets TCP_NODELAY on: every response then waited ~40 ms for a delayed
    ACK (measured: 44 ms for /healthz against 6 ms with one process). The accepted sockets inherit
    the option from the listening one."""
    import socket

    sock = config.bind_socket()
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="run the HTTP API")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--migrate", action="store_true", help="apply pending migrations first")
    p.add_argument("--workers", type=int, default=None,
                   help="processes to serve with (default BACKSCROLL_API_WORKERS; 0 there: one per CPU)")
    p.set_defaults(func=cmd_serve)
