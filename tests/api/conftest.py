"""Fixtures for the HTTP API suite: a world on a fresh database and a client on the same database."""

from __future__ import annotations

import pytest

from tests.world import World, client, open_world


@pytest.fixture
def world(db_url) -> World:
    w = open_world(db_url)
    yield w
    w.conn.close()


@pytest.fixture
def http(db_url):
    with client(db_url) as c:
        yield c
