"""The migrations as a database owner that is no superuser, as CloudNativePG runs them: its
application user owns the database but may not `create extension vector`; a superuser created the
extensions beforehand. 0001's `create extension if not exists` then finds them and asks for no
privilege, and nothing after it needs one. Without the extensions the migration fails with a
message that says what to do, not a stack trace."""

from __future__ import annotations

import itertools
import os

import psycopg
import pytest
from psycopg import sql

from backscroll import cli
from backscroll.config import get_settings
from backscroll.embeddings.vectors import register_model
from backscroll.errors import MigrationError
from backscroll.store.migrate import load_migrations, migrate, schema_version
from backscroll.store.purge import purge

EXTENSIONS = ("vector", "pg_trgm", "btree_gin")
_n = itertools.count()


@pytest.fixture
def owned(pg_url):
    """(make a database owned by a fresh non-superuser role, with or without the extensions) -> its URL."""
    made: list[tuple[str, str]] = []

    def make(with_extensions: bool) -> str:
        n = next(_n)
        role, db = f"bs_app_{os.getpid()}_{n}", f"bs_owned_{os.getpid()}_{n}"
        with psycopg.connect(pg_url, autocommit=True) as su:
            su.execute(sql.SQL("create role {} login password 'app' nosuperuser nocreatedb nocreaterole").format(
                sql.Identifier(role)))
            su.execute(sql.SQL("create database {} owner {}").format(sql.Identifier(db), sql.Identifier(role)))
        made.append((role, db))
        if with_extensions:
            with psycopg.connect(psycopg.conninfo.make_conninfo(pg_url, dbname=db), autocommit=True) as su:
                for ext in EXTENSIONS:
                    su.execute(sql.SQL("create extension {}").format(sql.Identifier(ext)))
        return psycopg.conninfo.make_conninfo(pg_url, dbname=db, user=role, password="app")

    yield make
    with psycopg.connect(pg_url, autocommit=True) as su:
        for role, db in made:
            su.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(db)))
            su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


def test_every_migration_runs_as_the_database_owner_once_a_superuser_made_the_extensions(owned):
    url = owned(with_extensions=True)
    with psycopg.connect(url) as conn:
        row = conn.execute("select rolsuper, rolcreaterole from pg_roles where rolname = current_user").fetchone()
        assert row == (False, False)
    applied = migrate(url)
    assert [m.version for m in applied] == [m.version for m in load_migrations()]
    register_model(url, "fake-8", 8)  # the model's HNSW index, concurrently, as the owner too
    with psycopg.connect(url) as conn:
        assert schema_version(conn) == load_migrations()[-1].version
        owners = conn.execute("select distinct pg_get_userbyid(relowner) from pg_class "
                              "where relnamespace = 'public'::regnamespace and relname like 'message%'").fetchall()
        assert owners == [(psycopg.conninfo.conninfo_to_dict(url)["user"],)]
    # The owner can also take it all away and start again (the extensions stay: it could not remake them).
    purge(url)
    assert migrate(url)
    with psycopg.connect(url) as conn:
        assert {r[0] for r in conn.execute("select extname from pg_extension")} >= set(EXTENSIONS)


def test_without_the_extensions_the_owner_is_told_what_to_do(owned, monkeypatch, tmp_path, capsys):
    url = owned(with_extensions=False)
    with pytest.raises(MigrationError) as info:
        migrate(url)
    message = info.value.message
    assert "0001_foundation.sql" in message and "superuser" in message
    assert 'create extension if not exists vector' in message
    with psycopg.connect(url) as conn:
        assert schema_version(conn) == 0  # nothing half-applied

    monkeypatch.setenv("BACKSCROLL_DATABASE_URL", url)
    monkeypatch.setenv("BACKSCROLL_SCHEMA_WAIT_S", "0")  # look once: no superuser is coming
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    try:
        assert cli.main(["migrate"]) == 1
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("backscroll: migration 0001_foundation.sql failed") and "Traceback" not in err
    assert "superuser must first run" in err and url not in err and "password" not in err
