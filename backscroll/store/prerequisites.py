"""What `backscroll migrate` waits for before it migrates: the database, and the extensions it
cannot create itself.

A migration Job often starts before its database can take it: CloudNativePG writes the `-app`
Secret before the cluster has bootstrapped, a `Database` resource creates the extensions a moment
later, a failover leaves no primary for a few seconds. Failing at once made each of these a
failed Job; waiting (with the worker's own backoff, store.db.wait_for_database) and saying what
for lets the same Job succeed once the database is there.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

from ..errors import MigrationError
from .db import wait_for_database
from .migrate import EXTENSIONS

log = logging.getLogger(__name__)

# The longest pause between two looks: short enough that a migration starts soon after a
# superuser created the extensions, long enough not to poll a cluster that is still bootstrapping.
POLL_MAX_S = 10.0
FIRST_POLL_S = 0.5

# The extensions 0001 needs that are missing and that this role cannot create: neither a
# superuser, nor allowed to create a trusted one (CREATE on the database and the extension's
# default version marked trusted; pg_trgm and btree_gin are, pgvector is not).
SELECT_MISSING_EXTENSIONS = """
select wanted.name
from unnest(%(names)s::text[]) as wanted(name)
where not exists (select 1 from pg_extension x where x.extname = wanted.name)
  and not (select rolsuper from pg_roles where rolname = current_user)
  and not (has_database_privilege(current_database(), 'CREATE') and exists (
        select 1 from pg_available_extension_versions v
        join pg_available_extensions a on a.name = v.name and a.default_version = v.version
        where v.name = wanted.name and v.trusted))
order by wanted.name
"""


def missing_extensions(conn: psycopg.Connection) -> list[str]:
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        return [row[0] for row in cur.execute(SELECT_MISSING_EXTENSIONS, {"names": list(EXTENSIONS)}).fetchall()]


def wait_for_prerequisites(url: str, wait_s: float, what: str = "migrate") -> None:
    """Return once the database answers and has (or may create) every extension 0001 needs;
    MigrationError naming what is still missing after `wait_s` seconds. 0: do not wait (the
    migration itself then says what is missing)."""
    if wait_s <= 0:
        return
    deadline = time.monotonic() + wait_s
    stop = threading.Event()
    timer = threading.Timer(wait_s, stop.set)
    timer.daemon = True
    timer.start()
    try:
        pause, said = FIRST_POLL_S, None
        while True:
            if not _answers(url) and not wait_for_database(url, stop, POLL_MAX_S, what):
                raise MigrationError(f"{what}: the database did not answer within {wait_s:g} s "
                                     "(BACKSCROLL_SCHEMA_WAIT_S); is it running, and do the role and database exist?")
            with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
                missing = missing_extensions(conn)
                role, database = conn.info.user, conn.info.dbname
            if not missing:
                if said is not None:
                    log.info("%s: the extensions are there", what)
                return
            statements = "; ".join(f"create extension if not exists {name}" for name in missing)
            if said != missing:
                log.warning("%s: waiting for the extensions %s, which the role %r may not create: a superuser must "
                            "run, in database %r: %s (CloudNativePG: a Database resource's extensions, or "
                            "postInitApplicationSQL)", what, ", ".join(missing), role, database, statements)
                said = missing
            left = deadline - time.monotonic()
            if left <= 0:
                raise MigrationError(f"{what}: waited {wait_s:g} s for the extensions {', '.join(missing)}; the role "
                                     f"{role!r} may not create them: a superuser must first run, in database "
                                     f"{database!r}: {statements}")
            stop.wait(min(pause, left))
            pause = min(pause * 2, POLL_MAX_S)
    finally:
        timer.cancel()


def _answers(url: str) -> bool:
    """One quiet attempt first: the usual case (the database is there) logs nothing."""
    try:
        with psycopg.connect(url, connect_timeout=10):
            return True
    except psycopg.OperationalError:
        return False
