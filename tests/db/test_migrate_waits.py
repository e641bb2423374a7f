"""`backscroll migrate` waits for what a migration Job may start before: a database that does not
exist yet (CloudNativePG writes its `-app` Secret before it bootstraps) and the extensions a
superuser creates a moment later. Each test starts the migration first and makes what it waits
for appear while it waits, as a cluster coming up does; before the wait, both failed at once."""

from __future__ import annotations

import itertools
import logging
import os
import threading

import psycopg
import pytest
from psycopg import sql

from backscroll import cli
from backscroll.config import get_settings
from backscroll.store.migrate import load_migrations, schema_version

_n = itertools.count()
# What appears "later": long enough that the migration has surely started waiting.
LATER_S = 1.5


@pytest.fixture
def migrate_cli(monkeypatch, tmp_path):
    """`backscroll migrate` against `url`, as the migration Job runs it (its wait: 120 s)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKSCROLL_SCHEMA_WAIT_S", "120")

    def run(url: str) -> int:
        monkeypatch.setenv("BACKSCROLL_DATABASE_URL", url)
        get_settings.cache_clear()
        try:
            return cli.main(["migrate"])
        finally:
            get_settings.cache_clear()

    return run


@pytest.fixture
def cleanup(pg_url):
    made: list[tuple[str, str | None]] = []
    yield made
    with psycopg.connect(pg_url, autocommit=True) as su:
        for db, role in made:
            su.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(db)))
            if role:
                su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


def later(action) -> threading.Thread:
    thread = threading.Timer(LATER_S, action)
    thread.start()
    return thread


def test_migrate_waits_for_a_database_that_is_created_after_it_started(pg_url, migrate_cli, cleanup, caplog):
    name = f"bs_later_{os.getpid()}_{next(_n)}"
    cleanup.append((name, None))

    def create() -> None:
        with psycopg.connect(pg_url, autocommit=True) as su:
            su.execute(sql.SQL("create database {}").format(sql.Identifier(name)))

    url = psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    creating = later(create)
    with caplog.at_level(logging.INFO):
        assert migrate_cli(url) == 0
    creating.join()
    assert any("the database is unreachable" in r.getMessage() and name in r.getMessage() for r in caplog.records), \
        "it says what it waits for"
    with psycopg.connect(url) as conn:
        assert schema_version(conn) == load_migrations()[-1].version


def test_migrate_waits_for_the_extensions_a_superuser_creates(pg_url, migrate_cli, cleanup, caplog):
    n = next(_n)
    role, name = f"bs_wait_{os.getpid()}_{n}", f"bs_wait_{os.getpid()}_{n}"
    cleanup.append((name, role))
    with psycopg.connect(pg_url, autocommit=True) as su:
        su.execute(sql.SQL("create role {} login password 'app' nosuperuser nocreatedb nocreaterole").format(
            sql.Identifier(role)))
        su.execute(sql.SQL("create database {} owner {}").format(sql.Identifier(name), sql.Identifier(role)))

    def create_vector() -> None:  # what CloudNativePG's Database resource does for the owner
        with psycopg.connect(psycopg.conninfo.make_conninfo(pg_url, dbname=name), autocommit=True) as su:
            su.execute("create extension vector")

    url = psycopg.conninfo.make_conninfo(pg_url, dbname=name, user=role, password="app")
    creating = later(create_vector)
    with caplog.at_level(logging.INFO):
        assert migrate_cli(url) == 0
    creating.join()
    waited = [r.getMessage() for r in caplog.records if "waiting for the extensions" in r.getMessage()]
    # pg_trgm and btree_gin are trusted: the owner creates them itself; vector it may not.
    assert waited and "extensions vector," in waited[0] and "create extension if not exists vector" in waited[0]
    with psycopg.connect(url) as conn:
        assert schema_version(conn) == load_migrations()[-1].version
        owners = {r[0] for r in conn.execute("select pg_get_userbyid(extowner) from pg_extension "
                                             "where extname in ('pg_trgm', 'btree_gin')")}
        assert owners == {role}
