"""Fixtures for the HTTP API suite: a world on a fresh database and a client on the same database."""

from __future__ import annotations

import pytest

from tests.world import client


@pytest.fixture
def http(db_url):
    with client(db_url) as c:
        yield c
