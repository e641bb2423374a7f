"""Issue 16: no empty, null or unknown set widens a verdict, and rows stored with none are sealed.

The truth table below is written from the rule as the disclosure specification (seed 000) states it ("members
reaches only a members destination, external a members or external one, of the same namespace
whose readers are a non-empty subset of theirs": issue 29 item 6, seed 000's "retrievable only
in a conversation whose readers could already read it"; "an empty or unknown reader set matches
nothing but its own conversation"), not from sql/, and every cell is asked of the database.
"""

from __future__ import annotations

import io
import itertools
import json
import logging

import pytest

from backscroll.search import history, turns
from backscroll import ingest
from backscroll.ingest import importer
from backscroll.store.migrate import migrate
from tests.migrations import migrations_through
from tests.world import DECLARED, open_world

KINDS = ["public", "workspace", "members", "external"]
NAMESPACES = ["slack:acme", "web:acme", "", None]
READER_SETS = [(), ("a",), ("a", "b"), ("b",), ("a", "c"), None, (None,)]


def spec_allows(o, d) -> bool:
    """The rule, from the spec, with every unknown (None) failing closed."""
    (ok, ons, ordr), (dk, dns, drdr) = o, d
    if ok == "public":
        return True
    if ok is None or dk is None or ons in (None, "") or dns != ons:
        return False
    if ok == "workspace":
        return dk in ("workspace", "members")
    if ordr is None or drdr is None or None in drdr or None in ordr:
        return False
    receivers = {"members": ("members",), "external": ("members", "external")}[ok]
    return dk in receivers and len(drdr) > 0 and set(drdr) <= set(ordr)


@pytest.mark.privacy
def test_the_audience_predicate_fails_closed_on_every_empty_or_unknown_set(world):
    audiences = list(itertools.product(KINDS, NAMESPACES, READER_SETS))
    pairs = [(o, d) for o in audiences for d in audiences]
    rows = world.conn.execute(
        """select backscroll_audience_allows(o.kind::audience_kind, o.ns, o.readers::text[],
                                             d.kind::audience_kind, d.ns, d.readers::text[]) as allowed
             from unnest(%s::text[], %s::text[], %s::text[]) with ordinality as o(kind, ns, readers, i)
             join unnest(%s::text[], %s::text[], %s::text[]) with ordinality as d(kind, ns, readers, i) using (i)
            order by i""",
        ([o[0] for o, _ in pairs], [o[1] for o, _ in pairs], [_array(o[2]) for o, _ in pairs],
         [d[0] for _, d in pairs], [d[1] for _, d in pairs], [_array(d[2]) for _, d in pairs])).fetchall()
    wrong = [(o, d, r["allowed"]) for (o, d), r in zip(pairs, rows) if r["allowed"] is not spec_allows(o, d)]
    assert not wrong, f"{len(wrong)} of {len(pairs)} verdicts differ from the spec, e.g. {wrong[:5]}"
    # The cases of the issue, spelled out: two empty external sets, an empty destination.
    assert not spec_allows(("external", "slack:acme", ()), ("external", "slack:acme", ()))
    assert not spec_allows(("external", "slack:acme", ("a",)), ("external", "slack:acme", ()))


def _array(readers):
    if readers is None:
        return None
    return "{" + ",".join("NULL" if r is None else r for r in readers) + "}"


def _legacy(world, ws: str, external_id: str, readers: list[str]) -> int:
    """An external conversation as stored before 0018: its readers emptied behind ingest's back."""
    conv = world.conversation(ws, "bot", external_id, external_id, connector=("slack", "acme"),
                              audience={"kind": "external", "readers": readers})
    return conv


def _seal(world, conv: int) -> None:
    world.conn.execute("update conversations set audience_readers = '{}' where id = %s", (conv,))
    world.conn.execute("update messages set audience_readers = '{}' where conversation_id = %s", (conv,))


@pytest.mark.privacy
def test_a_memory_formed_in_an_empty_reader_conversation_stays_in_it(world):
    """A memory takes its turn's destination audience: formed in a sealed conversation, it is
    sealed to that conversation, through the lineage of a reply built on it."""
    ws = "acme"
    globex = _legacy(world, ws, "C-GLOBEX", ["XGLOBEX"])
    sales = world.conversation(ws, "bot", "C-SALES", "sales", connector=("slack", "acme"),
                               audience={"kind": "external", "readers": ["XGLOBEX"]})
    said = world.message(ws, globex, "the falcon price is final", speaker="XGLOBEX", minute=1)
    _seal(world, globex)
    asked = world.message(ws, globex, "is the falcon price final?", speaker="XGLOBEX", minute=2)
    turn = world.turn(ws, "bot", globex, requester="XGLOBEX", answering=asked, loaded=[said])
    memory = turns.form_memory(world.conn, world.workspace(ws), None, turn,
                               turns.MemoryIn(body="falcon price final", source_message_ids=[said]))
    assert memory["audience"] == {"kind": "external", "namespace": "slack:acme", "readers": []}
    reply = turns.store_reply(world.conn, world.workspace(ws), None, turn,
                              turns.ReplyIn(body="Yes, the falcon price is final.", memory_ids=[memory["id"]]))
    assert turns.recheck(world.conn, world.workspace(ws), None, turn)["deliverable"] is True
    # From Globex's sales channel (readers {XGLOBEX}): the sealed reply, its memory and its
    # sources are not disclosable there.
    asked = world.message(ws, sales, "falcon price?", speaker="XGLOBEX", minute=3)
    there = world.turn(ws, "bot", sales, requester="XGLOBEX", answering=asked)
    found = history.search_history(world.conn, world.workspace(ws), None,
                                   history.SearchRequest(turn_id=there, query="falcon price final"), None,
                                       settings=DECLARED)
    assert found["message_ids"] == [], found
    # Readers set: the conversation, its messages and the memory follow, and the reply's
    # lineage now reaches the subset destination.
    result = ingest.set_readers(world.conn, world.workspace(ws), globex, ingest.ReadersIn(readers=["XGLOBEX"]))
    assert result["updated"] == {"messages": 3, "memories": 1}, result
    again = world.turn(ws, "bot", sales, requester="XGLOBEX", answering=asked)
    found = history.search_history(world.conn, world.workspace(ws), None,
                                   history.SearchRequest(turn_id=again, query="falcon price final"), None,
                                       settings=DECLARED)
    assert reply["id"] in [h["message_id"] for h in found["hits"]] and said in found["message_ids"], found


def test_external_rows_stored_before_0018_stay_sealed_on_upgrade(empty_db_url, tmp_path, caplog):
    before = migrations_through(tmp_path, 17)
    migrate(empty_db_url, directory=before)
    w = open_world(empty_db_url)
    ws = w.workspace("acme")
    agent = None
    convs = []
    for ext in ("C-GLOBEX", "C-INITECH"):
        # The ingest of the time stored external audiences with no readers.
        conv = w.conversation("acme", "bot", ext, ext, connector=("slack", "acme"),
                              audience={"kind": "external", "readers": ["placeholder"]})
        w.conn.execute("update conversations set audience_readers = '{}' where id = %s", (conv,))
        convs.append(conv)
        agent = w.agent_id("acme", "bot")
    w.conn.execute("insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace,"
                   " audience_readers) values (%s, 'user', 'globex pricing', 'finished', 'external', 'slack:acme',"
                   " '{}')", (convs[0],))
    with caplog.at_level(logging.WARNING, logger="backscroll.store.migrate"):
        applied = [m.version for m in migrate(empty_db_url)]
    assert 18 in applied
    assert "sealed to their own conversation until their readers are set: 2 conversation(s), 1 message(s)" in caplog.text
    rows = w.conn.execute("select audience_readers from conversations order by id").fetchall()
    assert [r["audience_readers"] for r in rows] == [[], []]  # left as they were
    verdicts = w.conn.execute(
        "select backscroll_disclosable(%(agent)s, %(o)s, 'external', 'slack:acme', '{}', %(d)s, 'external',"
        " 'slack:acme', '{}') as into_other,"
        " backscroll_disclosable(%(agent)s, %(o)s, 'external', 'slack:acme', '{}', %(o)s, 'external',"
        " 'slack:acme', '{}') as into_itself",
        {"agent": agent, "o": convs[0], "d": convs[1]}).fetchone()
    assert verdicts == {"into_other": False, "into_itself": True}
    sealed = ingest.sealed_conversations(w.conn, ws)
    assert [(r["id"], r["messages"]) for r in sealed] == [(convs[0], 1), (convs[1], 0)]
    w.conn.close()


def test_the_import_format_needs_readers_for_an_external_audience(world):
    world.workspace("acme")
    line = {"workspace": "acme", "agent": "bot", "connector": {"type": "slack", "name": "acme"},
            "external_id": "C-1", "audience": {"kind": "external"},
            "messages": [{"external_id": "m1", "role": "user", "body": "hello"}]}
    good = {**line, "external_id": "C-2", "audience": {"kind": "external", "readers": ["X1"]},
            "messages": [{"external_id": "m1", "role": "user", "body": "hello",
                          "audience": {"kind": "external", "namespace": "slack:acme"}}]}
    fine = {**line, "external_id": "C-3", "audience": {"kind": "external", "readers": ["X1"]}}
    stream = io.BytesIO(b"\n".join(json.dumps(x).encode() for x in (line, good, fine)) + b"\n")
    report = importer.import_stream(world.conn, stream)
    reasons = dict(report.rejected)
    assert sorted(reasons) == [1, 2], report
    assert all("external audience needs at least one reader" in r for r in reasons.values()), reasons
    rows = world.conn.execute("select external_id, audience_readers from conversations").fetchall()
    assert rows == [{"external_id": "C-3", "audience_readers": ["X1"]}]


def test_cli_lists_sealed_conversations_and_sets_their_readers(cli_env, world, capsys):
    from backscroll import cli

    conv = _legacy(world, "acme", "C-GLOBEX", ["XGLOBEX"])
    world.message("acme", conv, "globex pricing", speaker="XGLOBEX")
    _seal(world, conv)
    assert cli.main(["conversations", "sealed", "--workspace", "acme"]) == 0
    out, err = capsys.readouterr()
    assert f"{conv:>10}  external" in out and "1 messages" in out and "1 conversation(s) sealed" in err
    assert cli.main(["conversations", "set-readers", str(conv), "--workspace", "acme",
                     "--reader", "XGLOBEX", "--reader", "XGLOBEX2", "--reader", "XGLOBEX"]) == 0
    out, _ = capsys.readouterr()
    assert "readers XGLOBEX, XGLOBEX2 (were: none, sealed to itself); 1 message(s)" in out
    assert world.conn.execute("select audience_readers from messages").fetchone()["audience_readers"] == [
        "XGLOBEX", "XGLOBEX2"]
    assert cli.main(["conversations", "sealed", "--workspace", "acme"]) == 0
    assert "0 conversation(s) sealed" in capsys.readouterr().err
    assert cli.main(["conversations", "set-readers", str(conv), "--workspace", "acme", "--reader", ""]) == 2
    assert "--reader 0: Value should have at least 1 item" in capsys.readouterr().err
    assert cli.main(["conversations", "set-readers", str(conv), "--workspace", "acme", "--reader", "x" * 300]) == 2
    assert "--reader 0: Value should have at most 256" in capsys.readouterr().err
    assert cli.main(["conversations", "set-readers", "999999", "--workspace", "acme", "--reader", "X"]) == 1
    assert "no conversation 999999" in capsys.readouterr().err


def test_a_repost_with_other_readers_carries_them_and_a_change_of_kind_carries_nothing(world):
    def post(audience: dict) -> int:
        return world.conversation("acme", "bot", "C-room", "room", connector=("slack", "acme"), audience=audience)

    room = post({"kind": "members", "readers": ["A", "B"]})
    inherited = world.message("acme", room, "said to the room", speaker="A")
    own = world.message("acme", room, "said to A alone", speaker="B",
                        audience={"kind": "members", "namespace": "slack:acme", "readers": ["A"]})

    def readers() -> dict:
        rows = world.conn.execute("select id, audience_kind::text as kind, audience_readers from messages").fetchall()
        return {r["id"]: (r["kind"], r["audience_readers"]) for r in rows}

    assert post({"kind": "members", "readers": ["C", "B", "A"]}) == room
    assert readers() == {inherited: ("members", ["A", "B", "C"]), own: ("members", ["A"])}
    # Made public: what was said to the members stays said to them.
    assert post({"kind": "public"}) == room
    assert readers() == {inherited: ("members", ["A", "B", "C"]), own: ("members", ["A"])}


@pytest.mark.privacy
def test_the_recheck_names_the_audience_when_a_found_row_has_an_empty_reader_set(world):
    """Evidence found while its conversation had readers, then stored with none (as before
    0018): the pre-delivery recheck refuses it by the audience rule, naming it."""
    ws = "acme"
    globex = _legacy(world, ws, "C-GLOBEX", ["XGLOBEX"])
    sales = world.conversation(ws, "bot", "C-SALES", "sales", connector=("slack", "acme"),
                               audience={"kind": "external", "readers": ["XGLOBEX"]})
    said = world.message(ws, globex, "the falcon price is final", speaker="XGLOBEX", minute=1)
    asked = world.message(ws, sales, "falcon price?", speaker="XGLOBEX", minute=2)
    turn = world.turn(ws, "bot", sales, requester="XGLOBEX", answering=asked)
    found = history.search_history(world.conn, world.workspace(ws), None,
                                   history.SearchRequest(turn_id=turn, query="falcon price"), None, settings=DECLARED)
    assert said in found["message_ids"]
    assert turns.recheck(world.conn, world.workspace(ws), None, turn)["deliverable"] is True
    _seal(world, globex)
    verdict = turns.recheck(world.conn, world.workspace(ws), None, turn)
    assert (verdict["deliverable"], verdict["reason"], verdict.get("message_id")) == (False, "audience", said)


@pytest.mark.privacy
def test_a_message_with_its_own_audience_never_follows_the_conversations_readers(world):
    """A whisper to alice in a room of alice and bob; the room down to alice alone (its audience
    now equals the whisper's); carol joins: the whisper stays alice's (review of issue 16)."""
    def post(readers: list[str]) -> int:
        return world.conversation("acme", "bot", "G1", "room", connector=("slack", "acme"),
                                  audience={"kind": "members", "readers": readers})

    room = post(["alice", "bob"])
    said = world.message("acme", room, "the zebra budget is agreed", speaker="bob")
    whisper = world.message("acme", room, "alice only: zebra salary figure", speaker="bob",
                            audience={"kind": "members", "namespace": "slack:acme", "readers": ["alice"]})
    carol = world.conversation("acme", "bot", "D-carol", "carol", connector=("slack", "acme"),
                               audience={"kind": "members", "readers": ["carol"]})
    post(["alice"])
    result = ingest.set_readers(world.conn, world.workspace("acme"), room,
                                ingest.ReadersIn(readers=["alice", "carol"]))
    assert result["updated"]["messages"] == 1, result
    rows = {r["id"]: r["audience_readers"] for r in world.conn.execute("select id, audience_readers from messages")}
    assert rows[said] == ["alice", "carol"] and rows[whisper] == ["alice"], rows
    asked = world.message("acme", carol, "zebra?", speaker="carol", minute=5)
    turn = world.turn("acme", "bot", carol, requester="carol", answering=asked)
    found = history.search_history(world.conn, world.workspace("acme"), None,
                                   history.SearchRequest(turn_id=turn, query="zebra salary budget"), None,
                                       settings=DECLARED)
    assert whisper not in found["message_ids"] and said in found["message_ids"], found


@pytest.mark.privacy
def test_the_previous_lineage_signature_denies_a_sealed_row(world):
    """An API pod of the release before 0018, serving while it migrates, walks lineage without a
    destination conversation: a sealed row is denied there even in its own conversation, and a
    row with readers is judged as by the new walk."""
    sealed = _legacy(world, "acme", "C-GLOBEX", ["XGLOBEX"])
    sealed_msg = world.message("acme", sealed, "globex pricing", speaker="XGLOBEX")
    _seal(world, sealed)
    shared = world.conversation("acme", "bot", "C-SALES", "sales", connector=("slack", "acme"),
                                audience={"kind": "external", "readers": ["XGLOBEX"]})
    shared_msg = world.message("acme", shared, "sales pricing", speaker="XGLOBEX")
    agent = world.agent_id("acme", "bot")
    row = world.conn.execute(
        "select backscroll_lineage_allows(array[%(s)s::bigint], %(agent)s, 'external', 'slack:acme', '{}') as old_sealed,"
        " backscroll_lineage_allows(array[%(s)s::bigint], %(agent)s, %(c)s::bigint, 'external', 'slack:acme', '{}')"
        " as new_sealed_in_itself,"
        " backscroll_lineage_allows(array[%(m)s::bigint], %(agent)s, 'external', 'slack:acme', '{XGLOBEX}')"
        " as old_with_readers,"
        " backscroll_lineage_allows(array[%(m)s::bigint], %(agent)s, 'external', 'slack:acme', '{XINITECH}')"
        " as old_into_another",
        {"s": sealed_msg, "m": shared_msg, "c": sealed, "agent": agent}).fetchone()
    assert row == {"old_sealed": False, "new_sealed_in_itself": True, "old_with_readers": True,
                   "old_into_another": False}
