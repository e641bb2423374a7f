"""Fixtures for the database suites: a world on a fresh database, readers, an empty database."""

from __future__ import annotations

import itertools
import os

import psycopg
import pytest

from backscroll.access.auth import Principal, authenticate
from backscroll.config import get_settings
from backscroll.search.cursor import CursorCodec
from backscroll.search.sessions import Limits
from tests.world import World

_empty = itertools.count()

LIMITS = Limits(default=20, maximum=100, query_max_chars=512, excerpt_words=24)


@pytest.fixture
def codec() -> CursorCodec:
    return CursorCodec(b"k" * 32)


@pytest.fixture
def empty_db_url(pg_url) -> str:
    """A database with nothing in it: not even the migrations (for the migration tests)."""
    name = f"bs_empty_{os.getpid()}_{next(_empty)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"create database {name}")
    yield psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


def reader(w: World, ws: str, actor: str, agents: list[str] | None = None) -> Principal:
    """A reader principal, made the way the API makes one: a stored token, then authentication."""
    secret = w.token("reader", ws, actor=actor, agents=agents)
    return authenticate(w.conn, f"Bearer {secret}")


@pytest.fixture
def cli_env(db_url, monkeypatch, tmp_path) -> str:
    """`backscroll ...` pointed at this test's database (and away from any stray .env)."""
    monkeypatch.setenv("BACKSCROLL_DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield db_url
    get_settings.cache_clear()
