"""Degradation says the truth (issue 16, item 5): whenever the searched scope's indexable messages
are not all embedded for the configured model (a model just registered, the outbox not drained,
a backfill owed or never started), both searches answer `degraded` / `backfilling` with the
scope's coverage, and so does search_history's audit row; once everything is embedded, `hybrid`
with no degradation. An outage is reported as the outage.

The coverage comes from counters kept by triggers (migration 0020), not from a count at search
time; they are checked against a direct count through every way a vector or a document comes
and goes.
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from backscroll.search import history, hybrid, maintenance, sessions
from backscroll import ingest
from backscroll.access.auth import Principal, TokenKind
from backscroll.embeddings.backfill import Backfill
from backscroll.search.cursor import CursorCodec
from backscroll.store.migrate import migrate
from backscroll.embeddings.vectors import register_model
from backscroll.embeddings.worker import Worker
from tests.audit import audited
from tests.migrations import migrations_through
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL, fake_settings
from tests.world import open_world

WS = "acme"
AGENT = "concierge"
SLACK = ("slack", "acme")
NS = "slack:acme"
LIMITS = sessions.Limits(default=20, maximum=100, query_max_chars=512, excerpt_words=24)

# What the counters must equal: per agent, its indexable documents and those with a vector of the
# model, counted from the rows themselves.
DIRECT = """
select a.id as agent_id,
       count(s.message_id) filter (where s.tsv <> ''::tsvector) as total,
       count(e.message_id) filter (where s.tsv <> ''::tsvector) as embedded
  from agents a
  left join message_search s on s.agent_id = a.id
  left join message_embeddings e on e.message_id = s.message_id and e.model = %(model)s
 group by a.id
 order by a.id
"""


def direct(conn, model: str) -> dict[int, tuple[int, int]]:
    return {r["agent_id"]: (r["embedded"], r["total"]) for r in conn.execute(DIRECT, {"model": model})}


def counted(conn, model: str) -> dict[int, tuple[int, int]]:
    agents = [r["id"] for r in conn.execute("select id from agents order by id")]
    return {a: hybrid.scope_coverage(conn, model, [a]) for a in agents}


# The same per (agent, audience key) (migration 0027: search_history's coverage is over the
# audience keys its destination may receive).
DIRECT_BY_AUDIENCE = """
select s.agent_id, s.audience_id,
       count(*) filter (where s.tsv <> ''::tsvector) as total,
       count(e.message_id) filter (where s.tsv <> ''::tsvector) as embedded
  from message_search s
  left join message_embeddings e on e.message_id = s.message_id and e.model = %(model)s
 group by 1, 2
"""


def assert_counts_exact(conn, *models: str) -> None:
    for model in models:
        assert counted(conn, model) == direct(conn, model), model
        by_audience = {(r["agent_id"], r["audience_id"]): (r["embedded"], r["total"])
                       for r in conn.execute(DIRECT_BY_AUDIENCE, {"model": model})}
        kept = {key: hybrid.scope_coverage(conn, model, [key[0]], [key[1]]) for key in by_audience}
        assert kept == by_audience, model


def add_vectors(conn, model: str, ids: list[int], dims: int = FAKE_DIMS) -> None:
    """Vectors for `ids`, in one statement (as the worker and the backfill store a batch)."""
    unit = "[" + ",".join(["1"] + ["0"] * (dims - 1)) + "]"
    conn.execute("insert into message_embeddings (message_id, model, embedding)"
                 " select i, %s, %s::vector from unnest(%s::bigint[]) as i", (model, unit, ids))


@pytest.fixture
def fake_gw(db_url, fake, gateway_factory):
    settings = fake_settings(db_url, fake)
    return settings, gateway_factory(settings)


def office(w) -> dict:
    """Four indexable messages of the concierge agent, and four it owes no vector: a tool result, a
    system message, a reply still streaming, and a blank message (a document with no words)."""
    for ext, name in (("U_A", "Alice"), ("U_B", "Bob")):
        w.actor_id(WS, NS, ext, name)
    general = w.conversation(WS, AGENT, "C-general", "General", creator="U_A", connector=SLACK,
                             audience={"kind": "public"}, created=1)
    msgs = {
        "booking": w.message(WS, general, "we sorted out the double booking for room 12", speaker="U_A", minute=10),
        "lunch": w.message(WS, general, "Lunch is pizza on Wednesday", speaker="U_B", minute=11),
        "printer": w.message(WS, general, "Printer on floor three is jammed", speaker="U_A", minute=12),
        "reply": w.message(WS, general, "I will tell the front desk about room 12", role="assistant", minute=13),
        "tool": w.message(WS, general, "tool output about room 12", role="tool", minute=14),
        "system": w.message(WS, general, "system prompt about room 12", role="system", minute=15),
        "streaming": w.message(WS, general, "half a reply about room", role="assistant", state="streaming",
                               minute=16),
        "blank": w.message(WS, general, "   ", role="assistant", minute=17),
    }
    return {"general": general, "msgs": msgs, "agent": w.agent_id(WS, AGENT)}


def search_history(w, conv: int, query: str, settings, gateway) -> tuple[dict, dict]:
    """The agent searches while answering Bob in `conv`: the answer and its audit row."""
    turn = w.turn(WS, AGENT, conv, requester="U_B", requester_namespace=NS)
    request = history.SearchRequest(turn_id=turn, query=query)
    result = audited(w.conn, turn, history.search_history(w.conn, w.workspace(WS), None, request, None,
                                                          settings=settings, gateway=gateway))
    row = w.conn.execute("select mode, degradation from search_audit where turn_id = %s", (turn,)).fetchone()
    return result, row


def search_sessions(w, query: str, settings, gateway) -> dict:
    """Alice's session search over the concierge agent."""
    alice = Principal(token_id=0, kind=TokenKind.reader, workspace_id=w.workspace(WS),
                      actor_id=w.actor_id(WS, NS, "U_A", "Alice"), agent_ids=(w.agent_id(WS, AGENT),))
    scope = sessions.resolve_scope(w.conn, alice, None)
    return sessions.search(w.conn, scope, CursorCodec(b"k" * 32), query, None, 20, LIMITS, settings=settings,
                           gateway=gateway)


def reported(answer: dict) -> tuple[str, dict | None]:
    return answer["mode"], answer["degradation"]


def backfilling(coverage: float) -> tuple[str, dict]:
    return "degraded", {"category": "backfilling", "coverage": coverage}


def test_an_agent_with_no_vector_and_no_backfill_is_reported_backfilling(world, fake_model, fake_gw):
    """The model was registered before the messages came: nothing owes a backfill, the outbox
    holds a job per message, and no message has a vector. That is coverage 0, not hybrid."""
    settings, gateway = fake_gw
    o = office(world)
    assert world.conn.execute("select count(*) as n from embedding_backfills").fetchone()["n"] == 0
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 4
    result, audit = search_history(world, o["general"], "double booking", settings, gateway)
    assert reported(result) == backfilling(0.0)
    assert (audit["mode"], audit["degradation"]) == ("degraded", "backfilling")
    assert result["hits"][0]["message_id"] == o["msgs"]["booking"]  # lexical over what has no vector
    assert result["hits"][0]["features"]["vector_rank"] is None
    body = search_sessions(world, "double booking", settings, gateway)
    assert reported(body) == backfilling(0.0)
    assert body["sessions"][0]["id"] == o["general"]


def test_worker_lag_is_reported_until_the_outbox_drains(db_url, world, fake_model, fake_gw):
    settings, gateway = fake_gw
    o = office(world)
    with Worker(settings, db_url, gateway=gateway) as worker:
        assert worker.run(once=True).embedded == 4
        # Everything indexable is embedded; the tool, system, streaming and blank messages are
        # owed nothing.
        result, audit = search_history(world, o["general"], "double booking", settings, gateway)
        assert reported(result) == ("hybrid", None)
        assert (audit["mode"], audit["degradation"]) == ("hybrid", None)
        assert reported(search_sessions(world, "double booking", settings, gateway)) == ("hybrid", None)

        late = world.message(WS, o["general"], "The projector in room 12 is broken", speaker="U_B", minute=20)
        assert set(r["message_id"] for r in world.conn.execute("select message_id from embedding_outbox")) == {late}
        result, audit = search_history(world, o["general"], "projector room", settings, gateway)
        assert reported(result) == backfilling(0.8)  # 4 of 5
        assert (audit["mode"], audit["degradation"]) == ("degraded", "backfilling")
        assert late in [h["message_id"] for h in result["hits"]]  # found by its words meanwhile
        assert reported(search_sessions(world, "projector room", settings, gateway)) == backfilling(0.8)

        assert worker.run(once=True).embedded == 5  # the worker's running total
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 0
    result, audit = search_history(world, o["general"], "projector room", settings, gateway)
    assert reported(result) == ("hybrid", None)
    assert (audit["mode"], audit["degradation"]) == ("hybrid", None)
    assert reported(search_sessions(world, "projector room", settings, gateway)) == ("hybrid", None)


def test_one_message_short_of_a_large_scope_is_not_rounded_to_full_coverage():
    qv = hybrid.QueryVector(hybrid.HYBRID, vector=[1.0], model=object())
    assert hybrid.with_coverage(qv, 99_999, 100_000).degradation == {"category": "backfilling", "coverage": 0.9999}
    assert hybrid.with_coverage(qv, 100_000, 100_000) is qv


def test_another_agents_gap_is_not_this_scopes(world, fake_model, fake_gw):
    """Coverage is the searched scope's: another agent's unembedded messages do not degrade it."""
    settings, gateway = fake_gw
    o = office(world)
    other = world.conversation(WS, "events", "C-events", "Events", creator="U_A", connector=SLACK,
                               audience={"kind": "public"}, created=2)
    world.message(WS, other, "The gala needs a vegetarian menu", speaker="U_A", minute=30)
    add_vectors(world.conn, fake_model, [o["msgs"][k] for k in ("booking", "lunch", "printer", "reply")])
    result, _ = search_history(world, o["general"], "double booking", settings, gateway)
    assert reported(result) == ("hybrid", None)
    assert hybrid.scope_coverage(world.conn, fake_model, [o["agent"], world.agent_id(WS, "events")]) == (4, 5)


@pytest.mark.parametrize("outage", ["unavailable", "timeout"])
def test_an_outage_is_reported_as_the_outage_not_as_backfilling(db_url, world, fake, fake_model, gateway_factory,
                                                                 outage):
    o = office(world)  # nothing embedded: coverage 0
    if outage == "timeout":
        settings = fake_settings(db_url, fake, embeddings={"embeddings_query_timeout_s": 0.3})
        fake.script.extend([("delay", 2.0), ("delay", 2.0)])
    else:
        settings = fake_settings(db_url, fake)
        fake.script.extend([(503, {"error": "down"}, {}), (503, {"error": "down"}, {})])
    gateway = gateway_factory(settings)
    result, audit = search_history(world, o["general"], "double booking", settings, gateway)
    assert reported(result) == ("degraded", {"category": outage})
    assert (audit["mode"], audit["degradation"]) == ("degraded", outage)
    assert reported(search_sessions(world, "double booking", settings, gateway)) == ("degraded", {"category": outage})


def test_a_model_not_registered_is_reported_as_such(db_url, world, fake, gateway_factory):
    o = office(world)
    settings = fake_settings(db_url, fake)
    result, audit = search_history(world, o["general"], "double booking", settings, gateway_factory(settings))
    assert reported(result) == ("degraded", {"category": "not_registered"})
    assert (audit["mode"], audit["degradation"]) == ("degraded", "not_registered")


def test_the_counters_equal_a_direct_count_through_every_change(db_url, world, fake_model, fake_gw):
    settings, gateway = fake_gw
    w = world
    conn = w.conn
    register_model(db_url, "other-4", 4)
    o = office(w)
    m = o["msgs"]
    events = w.conversation(WS, "events", "C-events", "Events", creator="U_A", connector=SLACK,
                            audience={"kind": "public"}, created=2)
    gala = [w.message(WS, events, f"The gala needs menu number {i}", speaker="U_A", minute=30 + i) for i in range(4)]
    models = (fake_model, "other-4")
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (0, 4)  # the blank, tool, system and streaming: not owed

    # Stored by the worker (one statement per batch), and by hand for the other model, including
    # a vector for the blank document and one for a tool message (which has no document).
    with Worker(settings, db_url, gateway=gateway) as worker:
        assert worker.run(once=True).embedded == 8
    add_vectors(conn, "other-4", [m["booking"], m["lunch"], gala[0], m["blank"], m["tool"]], dims=4)
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (4, 4)
    assert counted(conn, "other-4")[o["agent"]] == (2, 4)

    # A message's audience changes (made workspace-wide, then back): its document moves to the
    # new audience key and its vectors' coverage with it (migration 0027), two in one statement.
    conn.execute("update messages set audience_kind = 'workspace' where id = any(%s)", ([m["booking"], gala[0]],))
    assert_counts_exact(conn, *models)
    assert conn.execute("select count(distinct audience_id) as n from message_search where message_id = any(%s)",
                        ([m["booking"], m["lunch"]],)).fetchone()["n"] == 2
    conn.execute("update messages set audience_kind = 'public' where id = %s", (m["booking"],))
    assert_counts_exact(conn, *models)

    # The worker stores a vector again (a job queued again): an update, nothing more to count.
    conn.execute("insert into embedding_outbox (message_id) values (%s)", (m["lunch"],))
    with Worker(settings, db_url, gateway=gateway) as worker:
        assert worker.run(once=True).embedded == 1
    assert_counts_exact(conn, *models)

    # A message deleted (its document and vectors go by cascade), a conversation deleted.
    with conn.transaction():
        ingest.delete_message(conn, w.workspace(WS), m["booking"])
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (3, 3)
    with conn.transaction():
        ingest.delete_conversation(conn, w.workspace(WS), events)
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[w.agent_id(WS, "events")] == (0, 0)

    # New words: the vectors go, a job is queued, the worker embeds it again.
    conn.execute("update messages set body = 'Lunch is sushi on Thursday' where id = %s", (m["lunch"],))
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (2, 3)
    with Worker(settings, db_url, gateway=gateway) as worker:
        assert worker.run(once=True).embedded == 1
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (3, 3)

    # A document emptied (its vectors go, and it is owed nothing), and filled again. (The reply
    # has no speaker: a speaker's name would keep words in the document.)
    conn.execute("update messages set body = '  ' where id = %s", (m["reply"],))
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (2, 2)
    conn.execute("update messages set body = 'The front desk knows' where id = %s", (m["reply"],))
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (2, 3)

    # A message that stops being indexable loses its document and vectors; one that becomes
    # indexable with a vector already there (the tool message's, stored by hand) counts it.
    conn.execute("update messages set role = 'tool' where id = %s", (m["printer"],))
    assert_counts_exact(conn, *models)
    assert counted(conn, fake_model)[o["agent"]] == (1, 2)
    conn.execute("update messages set role = 'assistant' where id = %s", (m["tool"],))
    assert_counts_exact(conn, *models)
    assert counted(conn, "other-4")[o["agent"]] == (1, 3)

    # Several models' vectors deleted in one statement; a model deleted; an agent deleted.
    add_vectors(conn, "other-4", [m["reply"], m["lunch"]], dims=4)
    conn.execute("delete from message_embeddings where message_id = any(%s)", ([m["lunch"], m["tool"]],))
    assert_counts_exact(conn, *models)
    conn.execute("delete from embedding_models where model = 'other-4'")
    assert_counts_exact(conn, *models)
    assert counted(conn, "other-4")[o["agent"]] == (0, 3)
    doomed = w.conversation(WS, "doomed", "C-doomed", "Doomed", creator="U_A", connector=SLACK,
                            audience={"kind": "public"}, created=3)
    add_vectors(conn, fake_model, [w.message(WS, doomed, "soon gone", speaker="U_A", minute=40)])
    assert_counts_exact(conn, *models)
    conn.execute("delete from agents where slug = 'doomed'")
    assert_counts_exact(conn, *models)

    # Folded, the counts are the same and nothing is left pending.
    before = counted(conn, fake_model)
    maintenance.fold(conn)
    assert conn.execute("select count(*) as n from embedding_coverage_deltas").fetchone()["n"] == 0
    assert counted(conn, fake_model) == before
    assert_counts_exact(conn, *models)


def test_a_document_dropped_while_its_vector_is_being_stored_is_not_counted(db_url, world, fake, gateway_factory):
    """The backfill holds a key-share lock on the messages it embeds, across the call to the
    server. A message that stops being indexable meanwhile waits for the batch, then takes the
    new vector with it; were it not to wait, the vector would stay behind, counted, for a message
    with no document."""
    o = office(world)
    register_model(db_url, FAKE_MODEL, FAKE_DIMS)  # over existing messages: a backfill is owed
    settings = fake_settings(db_url, fake)
    fake.hold = threading.Event()
    backfill = Backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), quiet=True)
    runner = threading.Thread(target=backfill.run)
    other = psycopg.connect(db_url, autocommit=True)
    try:
        runner.start()
        assert fake.arrived.wait(5)
        change = threading.Thread(target=lambda: other.execute("update messages set role = 'tool' where id = %s",
                                                               (o["msgs"]["lunch"],)))
        change.start()
        change.join(0.5)
        assert change.is_alive()  # waiting for the batch
        fake.hold.set()
        runner.join(10)
        change.join(10)
        assert not runner.is_alive() and not change.is_alive()
    finally:
        fake.hold.set()
        other.close()
        backfill.close()
    vectors = {r["message_id"] for r in world.conn.execute("select message_id from message_embeddings")}
    assert o["msgs"]["lunch"] not in vectors
    assert_counts_exact(world.conn, FAKE_MODEL)
    assert counted(world.conn, FAKE_MODEL)[o["agent"]] == (3, 3)


def test_the_migration_counts_what_is_already_there(pg_url, tmp_path):
    """Upgrading a database that already holds documents and vectors: 0020 fills the counters."""
    before = migrations_through(tmp_path, 19)
    name = f"bs_coverage_upgrade_{tmp_path.name[-20:].replace('-', '_')}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {name} with (force)")
        admin.execute(f"create database {name}")
    url = psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    try:
        migrate(url, before)
        w = open_world(url)
        try:
            register_model(url, FAKE_MODEL, FAKE_DIMS)
            # Today's write path names the message's language (migration 0022): the column is lent
            # for the writes and taken away again before the real migrations run.
            w.conn.execute("alter table messages add column language regconfig")
            o = office(w)
            m = o["msgs"]
            add_vectors(w.conn, FAKE_MODEL, [m["booking"], m["lunch"], m["blank"], m["tool"]])
            w.conn.execute("alter table messages drop column language")
            migrate(url)
            assert_counts_exact(w.conn, FAKE_MODEL)
            assert counted(w.conn, FAKE_MODEL)[o["agent"]] == (2, 4)
        finally:
            w.conn.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"drop database if exists {name} with (force)")
