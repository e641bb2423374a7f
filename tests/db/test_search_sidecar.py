"""The search sidecar (message_search): finished user and assistant messages only, kept by triggers."""

from __future__ import annotations

from backscroll import ingest
from tests.world import World

WS = "acme"


def _documents(w: World) -> dict[int, dict]:
    rows = w.conn.execute(
        "select message_id, conversation_id, agent_id, workspace_id, tsv::text as tsv from message_search"
    ).fetchall()
    return {r["message_id"]: r for r in rows}


def _patch(w: World, message_id: int, **change) -> None:
    with w.conn.transaction():
        ingest.patch_message(w.conn, w.workspace(WS), message_id, ingest.MessagePatch(**change))


def _upsert(w: World, conversation_id: int, external_id: str, body: str, role: str = "user",
            state: str = "finished") -> int:
    msg = ingest.MessageIn(external_id=external_id, role=role, body=body, state=state)
    with w.conn.transaction():
        return ingest.append_message(w.conn, w.workspace(WS), conversation_id, msg)[0]


def test_only_finished_user_and_assistant_messages_are_indexed(world):
    c = world.conversation(WS, "concierge", "t1")
    indexed = {
        world.message(WS, c, "user words", role="user"),
        world.message(WS, c, "assistant words", role="assistant"),
    }
    for role in ("tool", "summary", "system"):
        world.message(WS, c, f"{role} words", role=role)
    world.message(WS, c, "streaming words", role="assistant", state="streaming")
    world.message(WS, c, "streaming question", role="user", state="streaming")
    assert set(_documents(world)) == indexed


def test_document_carries_the_conversation_agent_and_workspace(world):
    c = world.conversation(WS, "concierge", "t1")
    m = world.message(WS, c, "The Rose Room is booked")
    doc = _documents(world)[m]
    assert doc["conversation_id"] == c
    assert doc["agent_id"] == world.agent_id(WS, "concierge")
    assert doc["workspace_id"] == world.workspace(WS)
    # The words as written (weight D), then the English stems that differ from them (weight C).
    assert doc["tsv"] == "'book':10C 'booked':5 'is':4 'room':3 'rose':2 'the':1"


def test_document_uses_the_workspace_text_search_configuration(world):
    world.conn.execute("insert into workspaces (slug, name, ts_config) values ('en', 'En', 'english')")
    world.workspaces["en"] = world.conn.execute("select id from workspaces where slug = 'en'").fetchone()["id"]
    c = world.conversation("en", "concierge", "t1")
    m = world.message("en", c, "The rooms were booked")
    assert _documents(world)[m]["tsv"] == "'book':4 'room':2"


def test_finishing_a_streaming_message_indexes_its_final_body(world):
    c = world.conversation(WS, "concierge", "t1")
    reply = world.message(WS, c, "", role="assistant", state="streaming")
    _patch(world, reply, append="The Rose ")
    assert reply not in _documents(world)
    _patch(world, reply, append="Room", state="finished")
    assert _documents(world)[reply]["tsv"] == "'room':3 'rose':2 'the':1"


def test_editing_the_body_reindexes(world):
    c = world.conversation(WS, "concierge", "t1")
    m = _upsert(world, c, "m1", "lunch in the garden")
    assert "'garden'" in _documents(world)[m]["tsv"]
    # Finished messages are final through ingestion; the trigger must still follow any writer.
    world.conn.execute("update messages set body = 'dinner in the Rose Room' where id = %s", (m,))
    tsv = _documents(world)[m]["tsv"]
    assert "'rose'" in tsv and "'garden'" not in tsv
    world.conn.execute("update messages set body = 'breakfast on the terrace' where id = %s", (m,))
    tsv = _documents(world)[m]["tsv"]
    assert "'terrace'" in tsv and "'rose'" not in tsv
    assert len(_documents(world)) == 1


def test_a_message_that_stops_qualifying_leaves_the_index(world):
    c = world.conversation(WS, "concierge", "t1")
    m = _upsert(world, c, "m1", "rose")
    assert m in _documents(world)
    world.conn.execute("update messages set role = 'tool' where id = %s", (m,))
    assert m not in _documents(world)
    world.conn.execute("update messages set role = 'assistant' where id = %s", (m,))
    assert m in _documents(world)
    world.conn.execute("update messages set state = 'streaming' where id = %s", (m,))
    assert m not in _documents(world)


def test_finishing_a_non_conversational_message_does_not_index_it(world):
    c = world.conversation(WS, "concierge", "t1")
    for role in ("tool", "summary", "system"):
        m = world.message(WS, c, "partial", role=role, state="streaming")
        _patch(world, m, append=" rose", state="finished")
        assert world.conn.execute("select state::text from messages where id = %s", (m,)).fetchone()["state"] \
            == "finished"
    assert _documents(world) == {}


def test_deleting_a_message_removes_its_document(world):
    c = world.conversation(WS, "concierge", "t1")
    gone = world.message(WS, c, "rose one")
    kept = world.message(WS, c, "rose two")
    with world.conn.transaction():
        ingest.delete_message(world.conn, world.workspace(WS), gone)
    assert set(_documents(world)) == {kept}


def test_bulk_insert_indexes_every_qualifying_row(world):
    c = world.conversation(WS, "concierge", "t1")
    world.conn.execute(
        "insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace) "
        "select %s, (array['user','assistant','tool','summary','system'])[1 + g %% 5]::message_role, "
        "       'word' || g, case when g %% 7 = 0 then 'streaming' else 'finished' end::message_state, "
        "       'workspace', 'web:demo' from generate_series(1, 70) g", (c,))
    expected = {r["id"] for r in world.conn.execute(
        "select id from messages where role in ('user', 'assistant') and state = 'finished'")}
    assert len(expected) == len([g for g in range(1, 71) if g % 5 in (0, 1) and g % 7 != 0])
    assert set(_documents(world)) == expected


def test_only_the_searchable_prefix_of_a_long_body_is_indexed(world):
    c = world.conversation(WS, "concierge", "t1")
    body = "early " + "x " * 50_000 + "late"
    m = world.message(WS, c, body)
    tsv = _documents(world)[m]["tsv"]
    assert "'early'" in tsv and "'late'" not in tsv


def test_a_bulk_insert_indexes_in_one_statement_and_counts_once_per_lexeme(world):
    """Issue 19: a COPY of many messages writes one BM25 delta row per (agent, lexeme) for the
    whole statement, not one per message, and the statistics stay exact."""
    from tests.db.test_ranking import assert_statistics_exact

    c = world.conversation(WS, "concierge", "t1")
    world.conn.execute("select backscroll_fold_search_stats(1000000)")
    world.conn.execute("delete from search_term_deltas")
    rows = [(c, f"bulk-{i}", "user", f"the invoice for room {i % 7} is paid", "finished", "english")
            for i in range(200)]
    rows += [(c, "bulk-streaming", "user", "the invoice is half written", "streaming", "english"),
             (c, "bulk-tool", "tool", "the invoice tool output", "finished", "english")]
    with world.conn.transaction(), world.conn.cursor() as cur:
        with cur.copy("copy messages (conversation_id, external_id, role, body, state, language, audience_kind, "
                      "audience_namespace, audience_readers) from stdin") as copy:
            for r in rows:
                copy.write_row((*r, "workspace", "web:demo", "{}"))
    docs = _documents(world)
    assert len(docs) == 200  # finished user messages only
    deltas = world.conn.execute("select agent_id, lexeme, count(*) as n, sum(delta) as df from search_term_deltas "
                                "group by 1, 2").fetchall()
    assert deltas and all(d["n"] == 1 for d in deltas)
    assert {d["lexeme"]: d["df"] for d in deltas}["invoice"] == 200
    assert {d["lexeme"]: d["df"] for d in deltas}["paid"] == 200
    assert_statistics_exact(world)
