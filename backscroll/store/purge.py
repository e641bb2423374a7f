"""`backscroll purge`: the opposite of `backscroll migrate`. Every table, type, function and text
search configuration the migrations created is dropped, with the data in them, so that a
following `migrate` starts from nothing.

What is dropped is read from the migration files themselves (their `create` statements), and
found in the catalog of the schema they were applied in: an object another application keeps in
the same schema is left alone, whatever it is called, and so are the extensions (pgvector,
pg_trgm, btree_gin), which a database owner often cannot create again (a superuser made them).
One transaction, under the migrations' lock: a purge is whole or did not happen.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from .migrate import ADVISORY_LOCK_ID, load_definitions, load_migrations

log = logging.getLogger(__name__)

LEDGERS = ("backscroll_migrations", "backscroll_definitions")
CREATED = re.compile(
    r"^\s*create\s+(?:or\s+replace\s+)?(table|type|function|text\s+search\s+configuration)\s+"
    r"(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_]*)\b", re.IGNORECASE | re.MULTILINE)
# A purge waits this long for the API, the worker or a backfill to let go of a table, then fails
# with nothing dropped, rather than queueing every other query of the database behind it.
LOCK_TIMEOUT = "set local lock_timeout = '30s'"

# Objects of the current schema by name, leaving out whatever belongs to an extension.
NOT_EXTENSION = """
not exists (select 1 from pg_depend d where d.classid = %(catalog)s::regclass and d.objid = x.oid
                                         and d.deptype = 'e')
"""
TABLES = """
select x.relname as name from pg_class x
 where x.relnamespace = current_schema()::regnamespace and x.relkind in ('r', 'p') and x.relname = any(%(names)s)
   and """ + NOT_EXTENSION
FUNCTIONS = """
select x.oid::regprocedure::text as name from pg_proc x
 where x.pronamespace = current_schema()::regnamespace and x.proname = any(%(names)s)
   and """ + NOT_EXTENSION
TYPES = """
select x.typname as name from pg_type x
 where x.typnamespace = current_schema()::regnamespace and x.typtype in ('e', 'c', 'd')
   and x.typrelid = 0 and x.typname = any(%(names)s)
   and """ + NOT_EXTENSION
CONFIGS = """
select x.cfgname as name from pg_ts_config x
 where x.cfgnamespace = current_schema()::regnamespace and x.cfgname = any(%(names)s)
   and """ + NOT_EXTENSION


@dataclass
class Purged:
    tables: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    configurations: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.tables) + len(self.functions) + len(self.types) + len(self.configurations)


def created_names(directory: Path | None = None) -> dict[str, set[str]]:
    """What the migrations and the definitions create, by kind: the names `create table|type|
    function|text search configuration` statements give."""
    names: dict[str, set[str]] = {"table": set(LEDGERS), "type": set(), "function": set(), "configuration": set()}
    for source in [*load_migrations(directory), *load_definitions(directory)]:
        for kind, name in CREATED.findall(source.sql):
            kind = "configuration" if kind.lower().startswith("text") else kind.lower()
            names[kind].add(name.lower())
    return names


def purge(url: str, directory: Path | None = None) -> Purged:
    names = created_names(directory)
    purged = Purged()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("select pg_advisory_lock(%s)", (ADVISORY_LOCK_ID,))
        try:
            with conn.transaction():
                conn.execute(LOCK_TIMEOUT)
                # Tables first (their triggers, indexes, the models' HNSW indexes and the row
                # types go with them), then the functions the triggers called, then the types
                # the tables' columns had.
                for name in _names(conn, TABLES, "pg_class", names["table"]):
                    conn.execute(sql.SQL("drop table if exists {} cascade").format(sql.Identifier(name)))
                    purged.tables.append(name)
                for signature in _names(conn, FUNCTIONS, "pg_proc", names["function"]):
                    # regprocedure's text is the quoted signature, made by the server itself.
                    conn.execute(sql.SQL("drop function if exists {} cascade").format(sql.SQL(signature)))
                    purged.functions.append(signature)
                for name in _names(conn, TYPES, "pg_type", names["type"]):
                    conn.execute(sql.SQL("drop type if exists {} cascade").format(sql.Identifier(name)))
                    purged.types.append(name)
                for name in _names(conn, CONFIGS, "pg_ts_config", names["configuration"]):
                    conn.execute(sql.SQL("drop text search configuration if exists {} cascade").format(
                        sql.Identifier(name)))
                    purged.configurations.append(name)
        finally:
            conn.execute("select pg_advisory_unlock(%s)", (ADVISORY_LOCK_ID,))
    log.warning("purged %d tables, %d functions, %d types, %d text search configurations", len(purged.tables),
                len(purged.functions), len(purged.types), len(purged.configurations))
    return purged


def _names(conn: psycopg.Connection, query: str, catalog: str, names: set[str]) -> list[str]:
    rows = conn.execute(query, {"names": sorted(names), "catalog": catalog}).fetchall()
    return sorted(r[0] for r in rows)
