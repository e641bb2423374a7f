"""Fixtures for the database suites: a world on a fresh database and readers (tests/conftest.py has the empty one)."""

from __future__ import annotations

import pytest

from backscroll.access.auth import Principal, authenticate
from backscroll.config import get_settings
from backscroll.search.cursor import CursorCodec
from backscroll.search.sessions import Limits
from tests.world import World

LIMITS = Limits(default=20, maximum=100, query_max_chars=512, excerpt_words=24)


@pytest.fixture
def codec() -> CursorCodec:
    return CursorCodec(b"k" * 32)


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
