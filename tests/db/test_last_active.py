"""conversations.last_active_at, kept by the triggers on messages (insert, update, delete)."""

from __future__ import annotations

from datetime import datetime

import pytest

from backscroll import ingest
from backscroll.errors import Conflict
from tests.world import World, at

WS = "acme"


def _now(w: World) -> datetime:
    return w.conn.execute("select clock_timestamp() as t").fetchone()["t"]


def _created_at(w: World, conversation_id: int) -> datetime:
    return w.conn.execute("select created_at from conversations where id = %s",
                          (conversation_id,)).fetchone()["created_at"]


def _patch(w: World, message_id: int, **change) -> dict:
    with w.conn.transaction():
        return ingest.patch_message(w.conn, w.workspace(WS), message_id, ingest.MessagePatch(**change))


def test_new_conversation_starts_at_its_creation(world):
    c = world.conversation(WS, "concierge", "t1", created=5)
    assert world.last_active(c) == at(5) == _created_at(world, c)


def test_insert_moves_forward_never_backwards(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    world.message(WS, c, "first", minute=10)
    assert world.last_active(c) == at(10)
    world.message(WS, c, "later", minute=20)
    assert world.last_active(c) == at(20)
    world.message(WS, c, "an older message arrives late", minute=15)
    assert world.last_active(c) == at(20)
    world.message(WS, c, "older than the conversation itself", minute=-30)
    assert world.last_active(c) == at(20)


def test_message_older_than_the_conversation_does_not_move_it(world):
    c = world.conversation(WS, "concierge", "t1", created=30)
    world.message(WS, c, "imported history", minute=10)
    assert world.last_active(c) == at(30)


def test_bulk_multi_row_insert(world):
    a = world.conversation(WS, "concierge", "a", created=0)
    b = world.conversation(WS, "concierge", "b", created=0)
    untouched = world.conversation(WS, "concierge", "c", created=50)
    world.message(WS, b, "already there", minute=40)
    rows = [(a, 12), (a, 31), (a, 7), (b, 25), (b, 39), (untouched, 49)]
    values = ", ".join(["(%s, 'user', 'bulk', 'workspace', 'web:demo', %s, %s)"] * len(rows))
    params = [p for conv, minute in rows for p in (conv, at(minute), at(minute))]
    world.conn.execute(
        "insert into messages (conversation_id, role, body, audience_kind, audience_namespace, created_at, updated_at) "
        f"values {values}", params)
    assert world.last_active(a) == at(31)  # the newest of the batch, not the last row of it
    assert world.last_active(b) == at(40)  # every row of the batch is older than what it had
    assert world.last_active(untouched) == at(50)


def test_bulk_insert_into_one_conversation_takes_its_newest(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    world.conn.execute(
        "insert into messages (conversation_id, role, body, audience_kind, audience_namespace, created_at, updated_at) "
        "select %s, 'user', 'row ' || g, 'workspace', 'web:demo', t, t "
        "  from generate_series(1, 500) g, lateral (select %s::timestamptz + g * interval '1 second' * "
        "       (case when g = 137 then 1000 else 1 end) as t) s",
        (c, at(0)))
    assert world.last_active(c) == at(137 * 1000 / 60)


def test_streaming_fill_and_finish_move_it_to_now(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    world.message(WS, c, "question", minute=5)
    reply = world.message(WS, c, "", role="assistant", state="streaming", minute=6)
    assert world.last_active(c) == at(6)

    before = _now(world)
    _patch(world, reply, append="Hello")
    after = _now(world)
    filled = world.last_active(c)
    assert before <= filled <= after

    before = _now(world)
    _patch(world, reply, append=", world", state="finished")
    after = _now(world)
    finished = world.last_active(c)
    assert before <= finished <= after
    assert finished >= filled
    row = world.conn.execute("select body, state::text, updated_at from messages where id = %s", (reply,)).fetchone()
    assert row["body"] == "Hello, world" and row["state"] == "finished"
    assert row["updated_at"] == finished


def test_finishing_without_a_change_of_body_also_counts(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    reply = world.message(WS, c, "complete already", role="assistant", state="streaming", minute=6)
    before = _now(world)
    _patch(world, reply, state="finished")
    assert world.last_active(c) >= before


def test_finished_message_can_no_longer_change(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    m = world.message(WS, c, "final", minute=6)
    with pytest.raises(Conflict):
        _patch(world, m, append=" and more")
    assert world.last_active(c) == at(6)


def test_an_update_that_changes_nothing_visible_does_not_touch_it(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    m = world.message(WS, c, "hello", minute=6)
    world.conn.execute("update messages set audience_readers = '{}' where id = %s", (m,))
    world.conn.execute("update messages set body = body where id = %s", (m,))
    assert world.last_active(c) == at(6)


def test_deleting_the_newest_message_recomputes(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    world.message(WS, c, "one", minute=10)
    world.message(WS, c, "two", minute=30)
    newest = world.message(WS, c, "three", minute=50)
    assert world.last_active(c) == at(50)
    with world.conn.transaction():
        ingest.delete_message(world.conn, world.workspace(WS), newest)
    assert world.last_active(c) == at(30)


def test_deleting_an_older_message_keeps_it(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    old = world.message(WS, c, "one", minute=10)
    world.message(WS, c, "two", minute=30)
    world.conn.execute("delete from messages where id = %s", (old,))
    assert world.last_active(c) == at(30)


def test_deleting_all_messages_returns_to_created_at(world):
    c = world.conversation(WS, "concierge", "t1", created=3)
    other = world.conversation(WS, "concierge", "t2", created=0)
    for minute in (10, 20, 30):
        world.message(WS, c, f"m{minute}", minute=minute)
    world.message(WS, other, "stays", minute=25)
    world.conn.execute("delete from messages where conversation_id = %s", (c,))
    assert world.last_active(c) == at(3) == _created_at(world, c)
    assert world.last_active(other) == at(25)


def test_delete_never_drops_below_created_at(world):
    """Messages older than the conversation never pulled it back on insert; nor may a delete."""
    c = world.conversation(WS, "concierge", "t1", created=30)
    world.message(WS, c, "imported history", minute=10)
    newest = world.message(WS, c, "newest", minute=40)
    world.conn.execute("delete from messages where id = %s", (newest,))
    assert world.last_active(c) == at(30)


def test_bulk_delete_across_conversations(world):
    a = world.conversation(WS, "concierge", "a", created=0)
    b = world.conversation(WS, "concierge", "b", created=1)
    world.message(WS, a, "keep", minute=10)
    world.message(WS, a, "drop", minute=20)
    world.message(WS, b, "drop", minute=30)
    world.conn.execute("delete from messages where body = 'drop'")
    assert world.last_active(a) == at(10)
    assert world.last_active(b) == at(1)


def test_deleting_a_conversation_cascades_cleanly(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    keep = world.conversation(WS, "concierge", "t2", created=0)
    for minute in (10, 20):
        world.message(WS, c, f"rose {minute}", minute=minute)
    world.message(WS, c, "streaming", role="assistant", state="streaming", minute=21)
    world.message(WS, keep, "rose kept", minute=5)
    with world.conn.transaction():
        ingest.delete_conversation(world.conn, world.workspace(WS), c)
    count = world.conn.execute(
        "select (select count(*) from conversations where id = %(c)s) as conversations,"
        "       (select count(*) from messages where conversation_id = %(c)s) as messages,"
        "       (select count(*) from message_search where conversation_id = %(c)s) as documents",
        {"c": c}).fetchone()
    assert count == {"conversations": 0, "messages": 0, "documents": 0}
    assert world.last_active(keep) == at(5)
    assert world.conn.execute("select count(*) as n from message_search where conversation_id = %s",
                              (keep,)).fetchone()["n"] == 1


def test_deleting_a_workspace_cascades_cleanly(world):
    c = world.conversation(WS, "concierge", "t1", created=0)
    world.message(WS, c, "rose", minute=10)
    world.token("reader", WS, actor="bob", agents=["concierge"])
    other = world.conversation("globex", "concierge", "t1", created=0)
    world.message("globex", other, "rose", minute=10)
    world.conn.execute("delete from workspaces where slug = %s", (WS,))
    remaining = world.conn.execute(
        "select (select count(*) from conversations) as conversations, (select count(*) from messages) as messages,"
        "       (select count(*) from message_search) as documents, (select count(*) from api_tokens) as tokens"
    ).fetchone()
    assert remaining == {"conversations": 1, "messages": 1, "documents": 1, "tokens": 0}
    assert world.last_active(other) == at(10)
