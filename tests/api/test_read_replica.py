"""BACKSCROLL_DATABASE_READ_URL: people's reads (list, search, one session, transcript) run on the
replica; tokens are checked on the primary; writes, search_history and usage-ledger rows stay on
the primary.

The "replica" here is a second database holding the same world plus one conversation the primary
lacks (and the primary one the replica lacks), so every answer shows which database it came from.
"""

from __future__ import annotations

import os

import psycopg
import pytest

from backscroll.embeddings.vectors import register_model
from tests.conftest import TEMPLATE, _with_db
from tests.semantic.fakes import FakeEmbeddings
from tests.world import World, bearer, client, open_world

WS = "acme"


@pytest.fixture
def replica_url(pg_url, template_url):
    name = f"bs_test_replica_{os.getpid()}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
        conn.execute(f"create database {name} template {TEMPLATE} strategy file_copy")
    yield _with_db(pg_url, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


def _same_world(w: World) -> int:
    """What both databases hold, written in the same order so ids match (as on a real replica)."""
    return w.conversation(WS, "concierge", "C-shared", "Shared plans", creator="U_A")


@pytest.fixture
def pair(world, replica_url):
    replica = open_world(replica_url)
    try:
        shared = _same_world(world)
        assert _same_world(replica) == shared
        world.message(WS, shared, "the gala menu is settled", speaker="U_A", minute=1)
        replica.message(WS, shared, "the gala menu is settled", speaker="U_A", minute=1)
        world.conversation(WS, "concierge", "C-primary-0", "", creator="U_B")  # so ids differ from here on
        only_primary = world.conversation(WS, "concierge", "C-primary", "Only on the primary", creator="U_A")
        only_replica = replica.conversation(WS, "concierge", "C-replica", "Only on the replica", creator="U_A")
        replica.message(WS, only_replica, "a lagging replica may hold other rows", speaker="U_A", minute=2)
        yield {"primary": world, "replica": replica, "only_primary": only_primary, "only_replica": only_replica,
               "reader": world.token("reader", WS, actor="U_A", agents=["concierge"]),
               "ingest": world.token("ingest", WS)}
    finally:
        replica.conn.close()


def test_reads_come_from_the_replica(db_url, replica_url, pair):
    with client(db_url, database={"database_read_url": replica_url}) as http:
        auth = bearer(pair["reader"])
        titles = {s["title"] for s in http.get("/v1/agent-sessions", headers=auth).json()["sessions"]}
        assert titles == {"Shared plans", "Only on the replica"}
        found = http.get("/v1/agent-sessions", params={"q": "replica"}, headers=auth).json()["sessions"]
        assert [s["id"] for s in found] == [pair["only_replica"]]
        assert http.get(f"/v1/agent-sessions/{pair['only_replica']}", headers=auth).status_code == 200
        assert http.get(f"/v1/agent-sessions/{pair['only_primary']}", headers=auth).status_code == 404
        transcript = http.get(f"/v1/agent-sessions/{pair['only_replica']}/messages", headers=auth).json()
        assert [m["body"] for m in transcript["messages"]] == ["a lagging replica may hold other rows"]
    # Without a replica the same requests read the primary.
    with client(db_url) as http:
        titles = {s["title"] for s in http.get("/v1/agent-sessions", headers=bearer(pair["reader"])).json()["sessions"]}
        assert titles == {"Shared plans", "Only on the primary", ""}


def test_tokens_are_checked_on_the_primary(db_url, replica_url, pair):
    """The replica has no tokens at all here: reads still authenticate, and a revocation on the
    primary stops the next read at once."""
    assert pair["replica"].conn.execute("select count(*) as n from api_tokens").fetchone()["n"] == 0
    with client(db_url, database={"database_read_url": replica_url}) as http:
        auth = bearer(pair["reader"])
        assert http.get("/v1/agent-sessions", headers=auth).status_code == 200
        pair["primary"].conn.execute("update api_tokens set revoked_at = now()")
        assert http.get("/v1/agent-sessions", headers=auth).status_code == 401
        assert http.get("/v1/agent-sessions", params={"q": "gala"}, headers=auth).status_code == 401


def test_writes_stay_on_the_primary(db_url, replica_url, pair):
    with client(db_url, database={"database_read_url": replica_url}) as http:
        r = http.post("/v1/conversations", headers=bearer(pair["ingest"]),
                      json={"agent": "concierge", "connector": {"type": "web", "name": "demo"},
                            "external_id": "C-new", "title": "Written through the API",
                            "audience": {"kind": "workspace"}})
        assert r.status_code == 201, r.text
    count = "select count(*) as n from conversations where external_id = 'C-new'"
    assert pair["primary"].conn.execute(count).fetchone()["n"] == 1
    assert pair["replica"].conn.execute(count).fetchone()["n"] == 0


def test_a_hybrid_search_on_the_replica_writes_its_ledger_row_on_the_primary(db_url, replica_url, pair):
    """The replica's transaction is read-only: the query embedding's usage row must go elsewhere."""
    fake = FakeEmbeddings(dims=8).start()
    try:
        for url in (db_url, replica_url):
            register_model(url, "fake-8", 8)
        embeddings = {"embeddings_model": "fake-8", "embeddings_url": fake.url, "embeddings_dimensions": 8}
        with client(db_url, embeddings=embeddings, database={"database_read_url": replica_url}) as http:
            r = http.get("/v1/agent-sessions", params={"q": "gala"}, headers=bearer(pair["reader"]))
        assert r.status_code == 200, r.text
        assert r.json()["mode"] in ("hybrid", "degraded")  # degraded: backfilling, nothing embedded
        assert [s["id"] for s in r.json()["sessions"]] == [pair["primary"].conn.execute(
            "select id from conversations where external_id = 'C-shared'").fetchone()["id"]]
        usage = "select count(*) as n from embedding_usage where purpose = 'query'"
        assert pair["primary"].conn.execute(usage).fetchone()["n"] == 1
        assert pair["replica"].conn.execute(usage).fetchone()["n"] == 0
    finally:
        fake.stop()
