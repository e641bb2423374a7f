"""Fixtures: one embedded PostgreSQL per test run, a freshly migrated database per test."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import psycopg
import pytest

from backscroll.store.db import process_running, start_embedded

# One control plane per test session, shared by every suite that asks for it (tests/cluster,
# tests/operator, tests/images): a fixture imported in a suite's own conftest is a second one.
from tests.cluster.fixtures import cluster_namespace, control_plane  # noqa: E402,F401
from backscroll.store.migrate import migrate
from tests.world import open_world

TEMPLATE = "backscroll_template"
_counter = itertools.count()
# Each run's own base folder (unless --basetemp names one): pytest's default keeps the last three
# runs' folders under pytest-of-<user> and deletes older ones, and with them the embedded server's
# data of a run still going on the same machine.
RUN_FOLDER = "backscroll-pytest-"


def pytest_configure(config):
    if config.option.basetemp:
        return
    root = Path(tempfile.gettempdir())
    for old in root.glob(RUN_FOLDER + "*"):  # left by runs that are over
        pid = old.name.removeprefix(RUN_FOLDER)
        if pid.isdigit() and int(pid) != os.getpid() and not process_running(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    config.option.basetemp = str(root / f"{RUN_FOLDER}{os.getpid()}")


def _with_db(url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=name)


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory) -> str:
    """The embedded server's maintenance URL (or BACKSCROLL_TEST_DATABASE_URL's)."""
    external = os.environ.get("BACKSCROLL_TEST_DATABASE_URL")
    if external:
        return external
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return start_embedded(Path(tmp_path_factory.mktemp("pg")) / "data")


@pytest.fixture(scope="session")
def template_url(pg_url) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {TEMPLATE} with (force)")
        conn.execute(f"create database {TEMPLATE}")
    url = _with_db(pg_url, TEMPLATE)
    migrate(url)
    return url


@pytest.fixture
def db_url(pg_url, template_url) -> str:
    """A database of its own for each test, copied from the migrated template."""
    name = f"bs_test_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"create database {name} template {TEMPLATE} strategy file_copy")
    yield _with_db(pg_url, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


@pytest.fixture
def empty_db_url(pg_url) -> str:
    """A database with nothing in it: not even the migrations (migration and start-up tests)."""
    name = f"bs_empty_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"create database {name}")
    yield _with_db(pg_url, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


@pytest.fixture
def world(db_url):
    """Helpers that write this test's world (workspaces, conversations, messages, turns, tokens)."""
    w = open_world(db_url)
    yield w
    w.conn.close()
