"""Forward-only migrations: ``sql/NNNN_name.sql`` applied in order under an advisory lock.

Each applied file is recorded with its SHA-256. Re-running is a no-op; an applied migration
whose file has since changed is refused, because the database no longer matches the source.
A file whose first line is ``-- backscroll: no-transaction`` runs outside a transaction
(``CREATE INDEX CONCURRENTLY`` needs that).

Migrations are expand/contract (docs/upgrades.md): the release before a migration keeps working
on the schema after it, because the old pods serve while the migration Job runs. A file that
removes or changes what an earlier release reads or writes says so in its header with
``-- backscroll: contract``; the ledger records it, and an image that does not know an applied
contract migration refuses to start (SchemaNewerThanImage), where an unknown expand-only
migration is no reason to (that image is the previous release, which must keep serving).

Functions and triggers are not migrations: each has its current definition once, in
``sql/definitions/NN_concern.sql`` (idempotent: ``create or replace``, ``drop trigger if exists``
then ``create trigger``). After the table migrations, in one transaction under the same lock,
``migrate`` applies each definitions file whose SHA-256 is not the one the ledger
``backscroll_definitions`` (migration 0032) records, in the order of the files' numbers. The
historical migrations keep the bodies of their time: a database at any earlier version replays
them, and their data steps fire the triggers as they then stood (docs/architecture.md).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import psycopg

from ..errors import MigrationError, SchemaNewerThanImage
from .owner import Owner, claim_owner, refuse_foreign_owner

log = logging.getLogger(__name__)

# Any constant works; this one spells "bkscroll" so it is recognisable in pg_locks.
ADVISORY_LOCK_ID = 0x626B7363726F6C6C

FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
DEFINITIONS = "definitions"
DEFINITION_NAME = re.compile(r"^\d{2}_[a-z0-9_]+\.sql$")
NO_TRANSACTION = "-- backscroll: no-transaction"
CONTRACT = "-- backscroll: contract"

CREATE_LEDGER = """
create table if not exists backscroll_migrations (
    version    integer primary key,
    name       text not null,
    checksum   text not null,
    applied_at timestamptz not null default now()
)
"""
SELECT_APPLIED = "select version, name, checksum from backscroll_migrations order by version"
# What 0001 creates, and what a superuser must create beforehand where the migrating role may not
# (CloudNativePG's application user owns its database but is no superuser; pgvector is not a
# trusted extension).
EXTENSIONS = ("vector", "pg_trgm", "btree_gin")
# The runner's own column, not a migration's: a contract migration must be recorded as one by
# the runner that applies it, and an older runner's rows (no column) read as expand-only.
LEDGER_HAS_CONTRACT = ("select 1 from pg_attribute where attrelid = 'backscroll_migrations'::regclass "
                       "and attname = 'contract' and not attisdropped")
LEDGER_CONTRACT = "alter table backscroll_migrations add column contract boolean not null default false"
RECORD_APPLIED = ("insert into backscroll_migrations (version, name, checksum, contract) "
                  "values (%s, %s, %s, %s)")
# Through to_jsonb: a ledger an older runner made has no `contract` column, and none of its rows
# is a contract.
SELECT_CONTRACTS = """
select version, name from backscroll_migrations m
 where coalesce((to_jsonb(m) ->> 'contract')::boolean, false)
 order by version
"""

DEFINITIONS_LEDGER_EXISTS = "select to_regclass('backscroll_definitions') is not null"
SELECT_DEFINITIONS = "select name, checksum from backscroll_definitions"
RECORD_DEFINITION = """
insert into backscroll_definitions (name, checksum) values (%s, %s)
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now()
"""
# A file renamed or folded into another leaves no row that would name a file no longer there.
FORGET_DEFINITIONS = "delete from backscroll_definitions where name <> all(%s::text[])"


class _Checksummed:
    """A file of SQL the runner records by its SHA-256."""

    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class Migration(_Checksummed):
    version: int
    name: str
    sql: str = field(repr=False)

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"

    @property
    def transactional(self) -> bool:
        return not self.sql.startswith(NO_TRANSACTION)

    @property
    def contract(self) -> bool:
        header = []
        for line in self.sql.splitlines():
            if not line.startswith("--"):
                break
            header.append(line.strip())
        return CONTRACT in header


@dataclass(frozen=True)
class Definition(_Checksummed):
    """One file of sql/definitions/: the current functions and triggers of one concern."""

    name: str
    sql: str = field(repr=False)

    @property
    def label(self) -> str:
        return f"{DEFINITIONS}/{self.name}"


class Applied(list):
    """The migrations `migrate` applied (a list of Migration, as ever), and in `definitions` the
    definitions files it (re-)applied after them."""

    def __init__(self, migrations=(), definitions=()):
        super().__init__(migrations)
        self.definitions: list[Definition] = list(definitions)

    def labels(self) -> list[str]:
        return [item.label for item in [*self, *self.definitions]]


def migrations_root() -> Path:
    """The checkout's sql/ when running from source, else the copy shipped in the wheel."""
    checkout = Path(__file__).resolve().parents[2] / "sql"
    if checkout.is_dir():
        return checkout
    # Through the regular package `backscroll`: `backscroll.sql` has no __init__.py, so
    # files("backscroll.sql") is a MultiplexedPath whose str() is no path at all.
    return Path(str(resources.files("backscroll") / "sql"))


def load_migrations(directory: Path | None = None) -> list[Migration]:
    root = directory if directory is not None else migrations_root()
    found: list[Migration] = []
    for entry in root.iterdir():
        m = FILE_NAME.match(entry.name)
        if m is None:
            continue
        found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migration files share a version number: {versions}")
    return found


def load_definitions(directory: Path | None = None) -> list[Definition]:
    """The definitions files under `directory`/definitions, in apply order (none when a folder of
    migrations has no such folder: an earlier release's, in the upgrade tests)."""
    root = (directory if directory is not None else migrations_root()) / DEFINITIONS
    if not root.is_dir():
        return []
    return sorted((Definition(entry.name, entry.read_text(encoding="utf-8"))
                   for entry in root.iterdir() if DEFINITION_NAME.match(entry.name)), key=lambda d: d.name)


def apply_definitions(conn: psycopg.Connection, definitions: list[Definition]) -> list[Definition]:
    """Apply, in one transaction, each definitions file whose checksum the ledger does not hold;
    return those applied. The caller holds the advisory lock."""
    if not definitions:
        return []
    if not _value(conn.execute(DEFINITIONS_LEDGER_EXISTS).fetchone()):
        raise MigrationError("sql/definitions/ needs its ledger, backscroll_definitions (migration 0032), "
                             "and the migrations applied do not create it")
    recorded = dict(_tuples(conn, SELECT_DEFINITIONS))
    changed = [d for d in definitions if recorded.get(d.name) != d.checksum]
    if not changed and recorded.keys() <= {d.name for d in definitions}:
        return []
    with conn.transaction():
        for definition in changed:
            log.info("applying %s", definition.label)
            try:
                conn.execute(definition.sql)
            except psycopg.Error as exc:
                raise MigrationError(f"{definition.label} failed: {exc}") from exc
            conn.execute(RECORD_DEFINITION, (definition.name, definition.checksum))
        conn.execute(FORGET_DEFINITIONS, ([d.name for d in definitions],))
    return changed


def applied_versions(conn: psycopg.Connection) -> dict[int, tuple[str, str]]:
    exists = conn.execute("select to_regclass('backscroll_migrations') is not null as e").fetchone()
    if not _value(exists):
        return {}
    return {row_version: (name, checksum) for row_version, name, checksum in _tuples(conn, SELECT_APPLIED)}


def check_compatible(conn: psycopg.Connection, migrations: list[Migration] | None = None) -> None:
    """Raise SchemaNewerThanImage when the database holds a contract migration this build does not
    know: its code would read or write what that migration removed or changed."""
    known = {mig.version for mig in (migrations if migrations is not None else load_migrations())}
    exists = conn.execute("select to_regclass('backscroll_migrations') is not null as e").fetchone()
    if not _value(exists):
        return
    unknown = [(version, name) for version, name in _tuples(conn, SELECT_CONTRACTS) if version not in known]
    if unknown:
        version, name = unknown[-1]
        raise SchemaNewerThanImage(
            f"the database's schema is newer than this image: it holds migration {version:04d}_{name}.sql, a "
            f"contract step of a later release (it removed or changed what older code uses), and this image "
            f"knows migrations up to {max(known, default=0):04d}; run an image that ships {version:04d}_{name}.sql "
            "or later (docs/upgrades.md, Rollback)")


def migrate(url: str, directory: Path | None = None, owner: Owner | None = None) -> Applied:
    """Apply every pending migration, then every changed definitions file; return what was applied
    (empty when up to date). With `owner`, the database must be unclaimed or already this owner's,
    before anything is applied, and is claimed for it after."""
    migrations = load_migrations(directory)
    definitions = load_definitions(directory)
    applied_now = Applied()
    with psycopg.connect(url, autocommit=True) as conn:
        # A migration says what it did to existing rows with RAISE NOTICE (0018: how many rows it
        # sealed): the person running it should read that.
        conn.add_notice_handler(lambda diag: log.warning("migration notice: %s", diag.message_primary))
        conn.execute("select pg_advisory_lock(%s)", (ADVISORY_LOCK_ID,))
        try:
            conn.execute(CREATE_LEDGER)
            # Only when missing: an ALTER locks the ledger every API readiness probe reads.
            if conn.execute(LEDGER_HAS_CONTRACT).fetchone() is None:
                conn.execute(LEDGER_CONTRACT)
            # Both before anything is applied: an older image must not migrate a newer schema, nor
            # one index migrate (and later purge) another's database.
            check_compatible(conn, migrations)
            if owner is not None:
                refuse_foreign_owner(conn, owner.uid)
            applied = applied_versions(conn)
            for mig in migrations:
                if mig.version in applied:
                    name, checksum = applied[mig.version]
                    if checksum != mig.checksum:
                        raise MigrationError(
                            f"migration {mig.version:04d}_{mig.name}.sql was changed after it was "
                            f"applied (recorded sha256 {checksum[:12]}, file {mig.checksum[:12]}); "
                            "migrations are forward-only: restore the file and add a new one"
                        )
                    continue
                log.info("applying migration %04d_%s", mig.version, mig.name)
                try:
                    if mig.transactional:
                        with conn.transaction():
                            conn.execute(mig.sql)
                            conn.execute(RECORD_APPLIED, (mig.version, mig.name, mig.checksum, mig.contract))
                    else:
                        conn.execute(mig.sql)
                        conn.execute(RECORD_APPLIED, (mig.version, mig.name, mig.checksum, mig.contract))
                except psycopg.errors.InsufficientPrivilege as exc:
                    advice = ""
                    if "extension" in (exc.diag.message_primary or ""):
                        statements = "; ".join(f"create extension if not exists {e}" for e in EXTENSIONS)
                        advice = (f"; the role {conn.info.user!r} may not create it: a superuser must first run, in "
                                  f"database {conn.info.dbname!r}: {statements}")
                    raise MigrationError(
                        f"migration {mig.version:04d}_{mig.name}.sql failed: {exc.diag.message_primary}{advice}"
                    ) from exc
                except psycopg.Error as exc:
                    raise MigrationError(
                        f"migration {mig.version:04d}_{mig.name}.sql failed: {exc}"
                    ) from exc
                applied_now.append(mig)
            unknown = set(applied) - {mig.version for mig in migrations}
            if unknown:
                # Expand-only (check_compatible refused the rest): the schema a later release
                # grew, which this one may serve; rolling forward again applies nothing.
                log.warning("database has expand-only migrations this build does not know: %s", sorted(unknown))
                # Their release's definitions stand: this build's are older, and would undo them.
                log.warning("definitions not applied: the database's are a later release's")
            else:
                applied_now.definitions = apply_definitions(conn, definitions)
            if owner is not None:
                claim_owner(conn, owner)
        finally:
            conn.execute("select pg_advisory_unlock(%s)", (ADVISORY_LOCK_ID,))
    return applied_now


def schema_version(conn: psycopg.Connection) -> int:
    applied = applied_versions(conn)
    return max(applied) if applied else 0


def _tuples(conn: psycopg.Connection, query: str):
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        return cur.execute(query).fetchall()


def _value(row) -> object:
    if row is None:
        return None
    if isinstance(row, dict):
        return next(iter(row.values()))
    return row[0]
