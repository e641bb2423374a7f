"""`backscroll migrate --model M --dimensions D`: one partial HNSW index per model, built
concurrently and idempotently; a different size for a registered model is a clear error; a
query reaches its model's index and, with the iterative scan, is not starved by its filters."""

from __future__ import annotations

import random

import psycopg

import pytest

from backscroll.embeddings import vectors
from backscroll.config import get_settings
from backscroll.embeddings.vectors import DimensionMismatch, index_name, register_model

INDEX_DEF = "select indexdef from pg_indexes where tablename = 'message_embeddings' and indexname = %s"


@pytest.fixture
def cli(db_url, monkeypatch, tmp_path, capsys):
    from backscroll.cli import main

    monkeypatch.setenv("BACKSCROLL_DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)

    def run(*argv) -> tuple[int, str, str]:
        get_settings.cache_clear()
        try:
            code = main(list(argv))
        finally:
            get_settings.cache_clear()
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_migrate_model_builds_the_index_and_is_idempotent(cli, world):
    code, out, _ = cli("migrate", "--model", "multilingual-e5-small", "--dimensions", "384")
    assert code == 0 and "registered" in out and "already" not in out
    name = index_name("multilingual-e5-small")
    [row] = world.conn.execute(INDEX_DEF, (name,)).fetchall()
    definition = row["indexdef"]
    assert "USING hnsw (((embedding)::vector(384)) vector_cosine_ops)" in definition
    assert "WHERE (model = 'multilingual-e5-small'::text)" in definition
    assert world.conn.execute("select indisvalid from pg_index where indexrelid = %s::regclass",
                              (name,)).fetchone()["indisvalid"]

    code, out, _ = cli("migrate", "--model", "multilingual-e5-small", "--dimensions", "384")
    assert code == 0 and "already registered" in out
    assert len(world.conn.execute(INDEX_DEF, (name,)).fetchall()) == 1
    assert [(r["model"], r["dimensions"]) for r in vectors.registered(world.conn)] == [("multilingual-e5-small", 384)]


def test_another_size_for_a_registered_model_is_a_clear_error(cli, world):
    assert cli("migrate", "--model", "arctic", "--dimensions", "1024")[0] == 0
    code, _, err = cli("migrate", "--model", "arctic", "--dimensions", "256")
    assert code == 1
    assert "registered with 1024 dimensions, not 256" in err and "arctic@256" in err
    assert world.conn.execute("select dimensions from embedding_models where model = 'arctic'").fetchone() == \
           {"dimensions": 1024}
    with pytest.raises(DimensionMismatch):
        register_model(world.url, "arctic", 256)


def test_bad_arguments(cli):
    assert "needs --dimensions" in str(pytest.raises(SystemExit, cli, "migrate", "--model", "m").value)
    code, _, err = cli("migrate", "--model", "m", "--dimensions", "4096")
    assert code == 1 and "between 1 and 2000" in err


def test_a_model_name_is_a_literal_never_sql(world):
    model = "o'brien/e5; drop table messages; --"
    created, fresh = register_model(world.url, model, 4)
    assert fresh
    [row] = world.conn.execute(INDEX_DEF, (created.index_name,)).fetchall()
    assert "WHERE (model = 'o''brien/e5; drop table messages; --'::text)" in row["indexdef"]
    assert world.conn.execute("select to_regclass('messages') is not null as ok").fetchone()["ok"]


def test_an_interrupted_index_build_is_rebuilt(world):
    model, _ = register_model(world.url, "m4", 4)
    # What a cancelled `create index concurrently` leaves behind (superuser in the embedded server).
    world.conn.execute("update pg_index set indisvalid = false where indexrelid = %s::regclass", (model.index_name,))
    register_model(world.url, "m4", 4)
    assert world.conn.execute("select indisvalid from pg_index where indexrelid = %s::regclass",
                              (model.index_name,)).fetchone()["indisvalid"]


def _seed(world, agents: int, per_agent: int, dims: int, model: str) -> list[int]:
    """`agents` agents with `per_agent` messages each, and random vectors of `model`."""
    rng = random.Random(7)
    ws = world.workspace("acme")
    ids = []
    for a in range(agents):
        c = world.conversation("acme", f"agent-{a}", f"c{a}")
        rows = world.conn.execute(
            "insert into messages (conversation_id, role, body, audience_kind, audience_namespace) "
            "select %s, 'user', 'message ' || g, 'workspace', 'web:demo' from generate_series(1, %s) g returning id",
            (c, per_agent)).fetchall()
        ids += [r["id"] for r in rows]
    world.conn.execute(
        "insert into message_embeddings (message_id, model, embedding) "
        "select u.id, %s, l2_normalize(u.v) from unnest(%s::bigint[], %s::vector[]) as u(id, v)",
        (model, ids, [vectors.param(world.conn, [rng.gauss(0, 1) for _ in range(dims)]) for _ in ids]))
    world.conn.execute("analyze message_embeddings")
    assert ws
    return ids


def _nearest(world, model: str, dims: int, agent: int | None, iterative: bool, k: int = 10) -> tuple[list, str]:
    from psycopg import sql

    query = sql.SQL("""
        select e.message_id from message_embeddings e
          join message_search s on s.message_id = e.message_id
         where e.model = %(model)s and (%(agent)s::bigint is null or s.agent_id = %(agent)s)
         order by {distance} limit %(k)s""").format(distance=vectors.distance(dims))
    params = {"model": model, "agent": agent, "k": k, "query_vector": vectors.param(world.conn, [1.0] + [0.0] * (dims - 1))}
    with world.conn.transaction():
        # A small table, where sorting everything is cheap: the point here is the index path.
        world.conn.execute("set local enable_seqscan = off")
        world.conn.execute("set local enable_sort = off")
        if iterative:
            vectors.use_iterative_scan(world.conn, ef_search=40, max_scan_tuples=20000)
        plan = "\n".join(r["QUERY PLAN"] for r in world.conn.execute(sql.SQL("explain ") + query, params))
        rows = [r["message_id"] for r in world.conn.execute(query, params)]
    return rows, plan


def test_a_query_uses_its_models_index_and_sees_only_its_models_vectors(world):
    small, _ = register_model(world.url, "small-4", 4)
    big, _ = register_model(world.url, "big-16", 16)
    ids = _seed(world, 2, 30, 4, "small-4")
    world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                       "select message_id, 'big-16', l2_normalize(array_fill(0.5, array[16])::vector) from message_embeddings")
    world.conn.execute("analyze message_embeddings")
    rows, plan = _nearest(world, "small-4", 4, None, iterative=False)
    assert small.index_name in plan and big.index_name not in plan
    assert len(rows) == 10 and set(rows) <= set(ids)
    rows16, plan16 = _nearest(world, "big-16", 16, None, iterative=False)
    assert big.index_name in plan16 and len(rows16) == 10


def test_the_iterative_scan_keeps_a_filtered_search_from_starving(world):
    register_model(world.url, "m8", 8)
    _seed(world, 50, 40, 8, "m8")  # 2,000 vectors; one agent holds 2% of them
    agent = world.agent_id("acme", "agent-17")
    starved, plan = _nearest(world, "m8", 8, agent, iterative=False)
    assert index_name("m8") in plan
    assert len(starved) < 10  # ef_search (40) nearest, of which about 2% are this agent's
    fed, _ = _nearest(world, "m8", 8, agent, iterative=True)
    assert len(fed) == 10


def test_a_vector_not_of_unit_length_is_refused(world, fake_model):
    """Exact scans rank by the inner product, which is the cosine distance for unit vectors only:
    the table takes no other (migration 0013)."""
    c = world.conversation("acme", "concierge", "t1")
    m = world.message("acme", c, "dinner in the Rose Room")
    with pytest.raises(psycopg.errors.CheckViolation, match="message_embeddings_unit_length"):
        world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                           "values (%s, %s, '[2,0,0,0,0,0,0,0]')", (m, fake_model))
    world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                       "values (%s, %s, '[0.6,0.8,0,0,0,0,0,0]')", (m, fake_model))


def test_the_exact_scans_distance_is_the_cosine_distance(world):
    from psycopg import sql

    register_model(world.url, "small-4", 4)
    _seed(world, 2, 30, 4, "small-4")
    query = vectors.param(world.conn, [0.5, -0.5, 0.5, 0.5])
    rows = world.conn.execute(sql.SQL(
        "select e.message_id, {cosine} as cosine, {exact} as exact from message_embeddings e"
        " where e.model = 'small-4' order by {exact}, e.message_id").format(
            cosine=vectors.distance(4), exact=vectors.exact_distance(4)), {"query_vector": query}).fetchall()
    assert len(rows) == 60
    assert all(abs(r["cosine"] - r["exact"]) < 1e-6 for r in rows)
    assert all(b["cosine"] >= a["cosine"] - 1e-6 for a, b in zip(rows, rows[1:]))  # ordered as by `<=>`


def test_a_vector_carries_its_messages_public_agent_and_follows_its_audience(world, fake_model):
    """search_history's public list reads an agent's public vectors by `public_agent_id`
    (migration 0014): it must name the agent exactly while the message is public, whoever writes
    the vector and whoever changes the audience, and nothing otherwise."""
    public = world.conversation("acme", "concierge", "t1", audience={"kind": "public", "namespace": "slack:acme"})
    said_in_public = world.message("acme", public, "the venue is confirmed")
    said_to_one = world.message("acme", public, "your deposit is refunded",
                                audience={"kind": "members", "namespace": "slack:acme", "readers": ["U1"]})
    elsewhere = world.message("acme", world.conversation("acme", "concierge", "t2"), "lunch at noon")
    for m in (said_in_public, said_to_one, elsewhere):
        world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                           "values (%s, %s, '[1,0,0,0,0,0,0,0]')", (m, fake_model))
    agent = world.agent_id("acme", "concierge")

    def public_agents() -> dict[int, int | None]:
        return {r["message_id"]: r["public_agent_id"]
                for r in world.conn.execute("select message_id, public_agent_id from message_embeddings")}

    assert public_agents() == {said_in_public: agent, said_to_one: None, elsewhere: None}
    world.conn.execute("update messages set audience_kind = 'workspace' where id = %s", (said_in_public,))
    world.conn.execute("update messages set audience_kind = 'public', audience_readers = '{}' where id = %s",
                       (said_to_one,))
    assert public_agents() == {said_in_public: None, said_to_one: agent, elsewhere: None}
    # The worker's upsert rewrites the vector, never the agent it carries.
    world.conn.execute("insert into message_embeddings (message_id, model, embedding) values (%s, %s, '[0,1,0,0,0,0,0,0]')"
                       " on conflict (message_id, model) do update set embedding = excluded.embedding",
                       (said_to_one, fake_model))
    assert public_agents()[said_to_one] == agent


def test_vectors_are_bound_in_binary_and_store_what_their_text_form_did(world, fake_model):
    """The worker's batch (`worker.STORE`, the backfill's alike) and a query vector reach
    PostgreSQL in pgvector's binary form (`vectors.param`, pgvector-python's adapter), and
    PostgreSQL holds the same float4s as from the text literal they replaced (each float's repr):
    what is stored and how it ranks are unchanged."""
    from pgvector import Vector
    from psycopg.adapt import PyFormat, Transformer
    from psycopg.pq import Format

    from backscroll.embeddings import worker
    from tests.semantic.conftest import FAKE_DIMS

    c = world.conversation("acme", "concierge", "t1")
    ids = [world.message("acme", c, f"message {i}") for i in range(40)]
    rng = random.Random(3)
    raw = [[rng.gauss(0, 1) for _ in range(FAKE_DIMS)] for _ in ids]
    units = [[x / sum(y * y for y in v) ** 0.5 for x in v] for v in raw]
    bound = [vectors.param(world.conn, v) for v in units]
    world.conn.execute(worker.STORE, {"model": fake_model, "ids": ids, "vectors": bound})
    texts = ["[" + ",".join(repr(float(x)) for x in v) + "]" for v in units]
    same = world.conn.execute(
        "select bool_and(e.embedding = u.t::vector) as same, count(*) as n from message_embeddings e"
        " join unnest(%s::bigint[], %s::text[]) as u(id, t) on u.id = e.message_id", (ids, texts)).fetchone()
    assert (same["same"], same["n"]) == (True, len(ids))
    tx = Transformer(world.conn)
    assert tx.get_dumper(bound[0], PyFormat.BINARY).format == Format.BINARY
    assert tx.get_dumper(bound, PyFormat.BINARY).oid == world.conn.adapters.types.get("vector").array_oid
    assert "%(vectors)b::vector[]" in worker.STORE and "%(query_vector)b" in vectors.distance(8).as_string(world.conn)
    back = world.conn.execute("select embedding from message_embeddings where message_id = %s", (ids[0],)).fetchone()
    assert isinstance(back["embedding"], Vector) and back["embedding"] == bound[0]  # read back: the adapter's type


def test_a_connection_opened_before_the_extension_learns_the_type_when_it_binds_a_vector(empty_db_url):
    """The pool teaches each connection the type when it opens it (`db.adapt_vectors`); one
    opened before the migrations created the extension (the worker's, waiting for them) learns
    it when it first binds a vector."""
    from backscroll.store import db

    with psycopg.connect(empty_db_url, autocommit=True) as early:
        db.adapt_vectors(early)
        assert early.adapters.types.get("vector") is None
        early.execute("create extension vector")
        v = vectors.param(early, [1, 0.5, -2])
        assert early.execute("select %s::text", (v,)).fetchone()[0] == "[1,0.5,-2]"


def test_the_pool_opens_connections_that_know_the_vector_type(db_url):
    from tests.semantic.conftest import settings_for
    from backscroll.store.db import make_pool

    with make_pool(db_url, settings_for(db_url).database) as pool, pool.connection() as conn:
        assert conn.adapters.types.get("vector") is not None
