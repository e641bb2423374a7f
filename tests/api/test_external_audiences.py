"""Issue 16 over HTTP: a conversation shared with one external organisation never reaches another's.

Slack Connect: one workspace, one agent, one namespace, a channel shared with Globex and another
shared with Initech. Each external audience carries its readers (the other organisation's people,
as the connector knows them); text said to one reaches only a destination of the same kind and
namespace whose readers are a non-empty subset of its readers (seed 000: "a private conversation
... is retrievable only in a conversation whose readers could already read it"). Rows stored
before the fix, with no readers, are sealed to their own conversation until their readers are set.
"""

from __future__ import annotations

import pytest

from tests.api.support import assert_error
from tests.world import bearer

WS = "acme"
AGENT = "bot"
CONNECTOR = {"type": "slack", "name": "acme"}
NS = "slack:acme"


def _conversation(http, h, external_id: str, title: str, readers: list[str] | None) -> int:
    audience = {"kind": "external", **({"readers": readers} if readers is not None else {})}
    r = http.post("/v1/conversations", headers=h, json={"agent": AGENT, "connector": CONNECTOR,
                                                        "external_id": external_id, "title": title,
                                                        "audience": audience})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _message(http, h, conversation: int, speaker: str, body: str, **extra) -> int:
    r = http.post(f"/v1/conversations/{conversation}/messages", headers=h,
                  json={"role": "user", "speaker": {"external_id": speaker}, "body": body, **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _search(http, rt, conversation: int, requester: str, answering: int, query: str, **extra) -> dict:
    r = http.post("/v1/turns", headers=rt, json={"agent": AGENT, "conversation_id": conversation,
                                                  "requester": {"external_id": requester},
                                                  "answering_message_id": answering})
    assert r.status_code == 201, r.text
    turn = r.json()["id"]
    r = http.post("/v1/tools/search_history", headers=rt, json={"turn_id": turn, "query": query, **extra})
    assert r.status_code == 200, r.text
    return {"turn": turn, **r.json()}


@pytest.fixture
def tokens(world):
    world.workspace(WS)
    return bearer(world.token("ingest", WS)), bearer(world.token("runtime", WS))


@pytest.mark.privacy
def test_an_external_conversation_never_reaches_another_organisation_over_http(world, http, tokens):
    """The issue's repro: Initech's channel is not served Globex's pricing; Globex's own channel
    and an external destination whose readers are a subset of Globex's are."""
    h, rt = tokens
    # As the repro first wrote it, with no readers: refused, and nothing is stored.
    r = http.post("/v1/conversations", headers=h, json={"agent": AGENT, "connector": CONNECTOR,
                                                        "external_id": "C-GLOBEX", "title": "shared with Globex",
                                                        "audience": {"kind": "external"}})
    error = assert_error(r, 400, "invalid_request")
    assert "external audience needs at least one reader" in error["message"], error
    assert world.conn.execute("select count(*) as n from conversations").fetchone()["n"] == 0

    globex = _conversation(http, h, "C-GLOBEX", "shared with Globex", ["XGLOBEX", "XGLOBEX2"])
    initech = _conversation(http, h, "C-INITECH", "shared with Initech", ["XINITECH"])
    sales = _conversation(http, h, "C-GLOBEX-SALES", "Globex sales", ["XGLOBEX"])
    overlap = _conversation(http, h, "C-BOTH", "Globex and Initech", ["XGLOBEX", "XINITECH"])
    secret = _message(http, h, globex, "XGLOBEX", "globex pricing discount confidential")

    asked = _message(http, h, initech, "XINITECH", "what pricing did others get?")
    found = _search(http, rt, initech, "XINITECH", asked, "pricing discount")
    assert secret not in found["message_ids"] and found["hits"] == [], found

    # A destination shared with both organisations is read by Initech too: not a subset.
    shared = _message(http, h, overlap, "XINITECH", "any pricing discount news?")
    found = _search(http, rt, overlap, "XINITECH", shared, "pricing discount")
    assert secret not in found["message_ids"] and found["hits"] == [], found

    remind = _message(http, h, globex, "XGLOBEX2", "remind me of our pricing discount")
    found = _search(http, rt, globex, "XGLOBEX2", remind, "pricing discount")
    assert [hit["message_id"] for hit in found["hits"]] == [secret], found

    # Globex's sales channel ({XGLOBEX}) is a subset of Globex's channel and of the shared one;
    # Initech's question ({XINITECH}) is not.
    asked = _message(http, h, sales, "XGLOBEX", "what was the pricing discount?")
    found = _search(http, rt, sales, "XGLOBEX", asked, "pricing discount")
    assert {hit["message_id"] for hit in found["hits"]} == {secret, remind, shared}, found
    assert {hit["room"]["audience"] for hit in found["hits"]} == {"external"}
    # The pre-delivery recheck agrees: what the search added may reach Globex's sales channel.
    r = http.post(f"/v1/turns/{found['turn']}/recheck", headers=rt)
    assert r.status_code == 200 and r.json()["deliverable"] is True, r.text


def test_external_audiences_need_readers_on_every_ingest_path(world, http, tokens):
    h, _ = tokens
    room = _conversation(http, h, "C-1", "shared", ["X1"])
    cases = [
        ("/v1/conversations", {"agent": AGENT, "connector": CONNECTOR, "external_id": "C-2",
                               "audience": {"kind": "external", "readers": []}}, "at least one reader"),
        (f"/v1/conversations/{room}/messages", {"role": "user", "body": "x",
                                                "audience": {"kind": "external", "namespace": NS}},
         "at least one reader"),
        ("/v1/memories", {"agent": AGENT, "body": "x", "audience": {"kind": "external", "namespace": NS}},
         "at least one reader"),
        ("/v1/conversations", {"agent": AGENT, "connector": CONNECTOR, "external_id": "C-3",
                               "audience": {"kind": "workspace", "readers": ["X1"]}}, "only meaningful"),
        ("/v1/conversations", {"agent": AGENT, "connector": CONNECTOR, "external_id": "C-4",
                               "audience": {"kind": "external", "readers": [""]}}, "readers"),
    ]
    for path, body, says in cases:
        error = assert_error(http.post(path, headers=h, json=body), 400, "invalid_request")
        assert says in error["message"], (path, error)
    counts = world.conn.execute("select (select count(*) from conversations) as c, (select count(*) from messages) as m,"
                                " (select count(*) from memories) as k").fetchone()
    assert counts == {"c": 1, "m": 0, "k": 0}
    # With readers, every path takes them, sorted and without duplicates.
    r = http.post("/v1/memories", headers=h, json={"agent": AGENT, "body": "remembered",
                                                   "audience": {"kind": "external", "namespace": NS,
                                                                "readers": ["X2", "X1", "X2"]}})
    assert r.status_code == 201, r.text
    row = world.conn.execute("select audience_readers from memories where id = %s", (r.json()["id"],)).fetchone()
    assert row["audience_readers"] == ["X1", "X2"]


@pytest.mark.privacy
def test_empty_reader_sets_stored_before_the_fix_are_sealed_to_their_own_conversation(world, http, tokens):
    """Two external conversations stored with no readers (as before migration 0018): neither
    reaches the other, nor any conversation with readers; each is still found in itself; once
    the connector sets the readers, the subset rule applies."""
    h, rt = tokens
    globex = _conversation(http, h, "C-GLOBEX", "shared with Globex", ["XGLOBEX"])
    initech = _conversation(http, h, "C-INITECH", "shared with Initech", ["XINITECH"])
    sales = _conversation(http, h, "C-SALES", "Globex sales", ["XGLOBEX"])
    secret = _message(http, h, globex, "XGLOBEX", "globex pricing discount confidential")
    _message(http, h, initech, "XINITECH", "initech pricing discount internal")
    for conversation in (globex, initech):
        world.conn.execute("update conversations set audience_readers = '{}' where id = %s", (conversation,))
        world.conn.execute("update messages set audience_readers = '{}' where conversation_id = %s", (conversation,))

    # Into the other sealed conversation (two empty sets), and into one with readers: nothing.
    for destination, requester in ((initech, "XINITECH"), (sales, "XGLOBEX")):
        asked = _message(http, h, destination, requester, "what about the pricing discount?")
        found = _search(http, rt, destination, requester, asked, "globex pricing discount")
        assert secret not in found["message_ids"], (destination, found)
        # Refused by the audience rule itself, as the audit row counts it (not only by a later walk).
        audit = world.conn.execute("select exclusions from search_audit where turn_id = %s",
                                   (found["turn"],)).fetchone()["exclusions"]
        assert audit["audience"] >= 1 and audit["lineage"] == 0, audit
    # In its own conversation it is found, and a reply built from it is deliverable there.
    asked = _message(http, h, globex, "XGLOBEX", "our pricing discount again?")
    assert world.conn.execute("select audience_readers from messages where id = %s", (asked,)).fetchone() == {
        "audience_readers": []}  # a new message inherits the sealed audience
    found = _search(http, rt, globex, "XGLOBEX", asked, "pricing discount")
    assert [hit["message_id"] for hit in found["hits"]] == [secret], found
    r = http.post(f"/v1/turns/{found['turn']}/reply", headers=rt, json={"body": "The discount stands."})
    assert r.status_code == 201, r.text
    reply = r.json()["id"]
    r = http.post(f"/v1/turns/{found['turn']}/recheck", headers=rt)
    assert r.json()["deliverable"] is True, r.text
    # The sealed reply's lineage does not open Initech's channel either.
    asked = _message(http, h, initech, "XINITECH", "the discount stands?")
    found = _search(http, rt, initech, "XINITECH", asked, "discount stands")
    assert reply not in found["message_ids"] and secret not in found["message_ids"], found

    # The connector sets Globex's readers: the conversation and what it inherited take them.
    r = http.put(f"/v1/conversations/{globex}/readers", headers=h, json={"readers": ["XGLOBEX", "XGLOBEX2"]})
    assert r.status_code == 200, r.text
    assert r.json()["previous_readers"] == [] and r.json()["updated"]["messages"] == 3, r.json()
    asked = _message(http, h, sales, "XGLOBEX", "pricing discount for us?")
    found = _search(http, rt, sales, "XGLOBEX", asked, "globex pricing discount")
    assert secret in [hit["message_id"] for hit in found["hits"]], found
    asked = _message(http, h, initech, "XINITECH", "pricing discount for us?")
    found = _search(http, rt, initech, "XINITECH", asked, "globex pricing discount")
    assert secret not in found["message_ids"], found


def test_set_readers_answers_clear_errors(world, http, tokens):
    h, _ = tokens
    room = _conversation(http, h, "C-1", "shared", ["X1"])
    r = http.post("/v1/conversations", headers=h, json={"agent": AGENT, "connector": CONNECTOR,
                                                        "external_id": "C-PUB", "audience": {"kind": "public"}})
    public = r.json()["id"]
    assert_error(http.put(f"/v1/conversations/{public}/readers", headers=h, json={"readers": ["X1"]}), 400,
                 "no_readers_for_kind")
    assert_error(http.put(f"/v1/conversations/{room}/readers", headers=h, json={"readers": []}), 400,
                 "invalid_request")
    assert_error(http.put("/v1/conversations/999999/readers", headers=h, json={"readers": ["X1"]}), 404)
    assert_error(http.put(f"/v1/conversations/{room}/readers", json={"readers": ["X1"]}), 401)
    runtime = bearer(world.token("runtime", WS))
    assert http.put(f"/v1/conversations/{room}/readers", headers=runtime, json={"readers": ["X1"]}).status_code == 403
    assert world.conn.execute("select audience_readers from conversations where id = %s",
                              (room,)).fetchone()["audience_readers"] == ["X1"]
    paths = http.get("/v1/openapi.json", headers=h).json()["paths"]
    assert "put" in paths["/v1/conversations/{conversation_id}/readers"]
    assert "post" in paths["/v1/identity-links/{link_id}/verify"]


@pytest.mark.privacy
def test_an_unverified_identity_link_grants_nothing_over_http(world, http, tokens):
    """A link waiting for proof neither carries a DM into the person's other DM nor makes the
    other identity's words the requester's; verified, it does both; revoked, neither."""
    h, rt = tokens
    dm_slack = world.conversation(WS, AGENT, "D-slack", "Alice on Slack", connector=("slack", "acme"),
                                  audience={"kind": "members", "readers": ["U_A"]})
    dm_web = world.conversation(WS, AGENT, "D-web", "Alice on the web", connector=("web", "acme"),
                                audience={"kind": "members", "readers": ["alice"]})
    channel = world.conversation(WS, AGENT, "C-general", "general", connector=("slack", "acme"),
                                 audience={"kind": "public"})
    private = world.message(WS, dm_slack, "my rose garden plan", speaker="U_A", minute=1)
    world.actor_id(WS, "web:acme", "alice")
    said_elsewhere = world.message(WS, channel, "the rose garden opens friday", speaker="U_B", minute=2)
    said_by_her = world.message(WS, channel, "rose garden tickets are sold out", speaker="U_A", minute=2.5)
    r = http.post("/v1/identity-links", headers=h, json={
        "agent": AGENT, "a": {"namespace": NS, "external_id": "U_A"},
        "b": {"namespace": "web:acme", "external_id": "alice"}})
    assert r.status_code == 201 and r.json()["verified"] is False, r.text
    link = r.json()["id"]

    def from_web_dm(minute: float, **extra) -> dict:
        asked = world.message(WS, dm_web, "where is the rose garden?", speaker="alice", minute=minute)
        return _search(http, rt, dm_web, "alice", asked, "rose garden", **extra)

    found = from_web_dm(3)
    assert private not in found["message_ids"], found
    assert said_elsewhere in [hit["message_id"] for hit in found["hits"]]
    # Only what alice herself said (her question above), not what U_A said, even in public.
    only = from_web_dm(4, filters={"requester_only": True})
    assert only["hits"] and {private, said_by_her}.isdisjoint(h["message_id"] for h in only["hits"]), only
    # Recorded again without proof: still waiting.
    r = http.post("/v1/identity-links", headers=h, json={
        "agent": AGENT, "a": {"namespace": NS, "external_id": "U_A"},
        "b": {"namespace": "web:acme", "external_id": "alice"}})
    assert r.json() == {"id": link, "verified": False}

    assert_error(http.post(f"/v1/identity-links/{link}/verify", headers=h, json={}), 400, "invalid_request")
    r = http.post(f"/v1/identity-links/{link}/verify", headers=h, json={"proof": "otp-1234"})
    assert r.status_code == 200, r.text
    found = from_web_dm(5)
    assert private in [hit["message_id"] for hit in found["hits"]], found
    only = [hit["message_id"] for hit in from_web_dm(6, filters={"requester_only": True})["hits"]]
    assert private in only and said_by_her in only and said_elsewhere not in only, only
    # Recorded again without proof after verification: it stays verified.
    r = http.post("/v1/identity-links", headers=h, json={
        "agent": AGENT, "a": {"namespace": NS, "external_id": "U_A"},
        "b": {"namespace": "web:acme", "external_id": "alice"}})
    assert r.json() == {"id": link, "verified": True}

    assert http.post(f"/v1/identity-links/{link}/revoke", headers=h).status_code == 200
    assert private not in from_web_dm(7)["message_ids"]
    assert_error(http.post(f"/v1/identity-links/{link}/verify", headers=h, json={"proof": "late"}), 404)


def _dm(http, h, external_id: str, reader: str) -> int:
    r = http.post("/v1/conversations", headers=h, json={"agent": AGENT, "connector": CONNECTOR,
                                                        "external_id": external_id, "title": f"DM {reader}",
                                                        "audience": {"kind": "members", "readers": [reader]}})
    assert r.status_code == 201, r.text
    return r.json()["id"]


@pytest.mark.privacy
def test_a_shared_channel_reaches_its_own_members_dm(world, http, tokens):
    """Issue 29, item 6: a person asking in their own DM about a shared channel they read finds
    it (and the agent's reply built on it); a DM of someone outside the channel, a DM of another
    namespace, and a private room one of whose readers is outside the channel find nothing. The
    reverse stays closed: a private room never reaches a shared channel, even one whose readers
    all read the room."""
    h, rt = tokens
    channel = _conversation(http, h, "C-GLOBEX", "shared with Globex", ["UALICE", "XGLOBEX"])
    secret = _message(http, h, channel, "XGLOBEX", "globex renewal price agreed at nine percent")
    reply = _message(http, h, channel, "bot", "noted the renewal price", role="assistant",
                     history_message_ids=[secret])

    alice = _dm(http, h, "D-ALICE", "UALICE")
    asked = _message(http, h, alice, "UALICE", "what renewal price did globex agree?")
    found = _search(http, rt, alice, "UALICE", asked, "renewal price")
    assert {hit["message_id"] for hit in found["hits"]} == {secret, reply}, found
    r = http.post(f"/v1/turns/{found['turn']}/recheck", headers=rt)
    assert r.status_code == 200 and r.json()["deliverable"] is True, r.text

    bob = _dm(http, h, "D-BOB", "UBOB")
    asked = _message(http, h, bob, "UBOB", "what renewal price did globex agree?")
    found = _search(http, rt, bob, "UBOB", asked, "renewal price")
    assert found["hits"] == [] and secret not in found["message_ids"], found

    r = http.post("/v1/conversations", headers=h, json={
        "agent": AGENT, "connector": {"type": "slack", "name": "other"}, "external_id": "D-ALICE-OTHER",
        "title": "DM elsewhere", "audience": {"kind": "members", "readers": ["UALICE"]}})
    assert r.status_code == 201, r.text
    elsewhere = r.json()["id"]
    asked = _message(http, h, elsewhere, "UALICE", "what renewal price did globex agree?")
    found = _search(http, rt, elsewhere, "UALICE", asked, "renewal price")
    assert found["hits"] == [], found

    r = http.post("/v1/conversations", headers=h, json={
        "agent": AGENT, "connector": CONNECTOR, "external_id": "G-ROOM", "title": "room",
        "audience": {"kind": "members", "readers": ["UALICE", "UBOB"]}})
    room = r.json()["id"]
    asked = _message(http, h, room, "UALICE", "what renewal price did globex agree?")
    found = _search(http, rt, room, "UALICE", asked, "renewal price")
    assert found["hits"] == [], found

    r = http.post("/v1/conversations", headers=h, json={
        "agent": AGENT, "connector": CONNECTOR, "external_id": "G-WIDE", "title": "wide room",
        "audience": {"kind": "members", "readers": ["UALICE", "UBOB", "XGLOBEX"]}})
    wide = r.json()["id"]
    private = _message(http, h, wide, "UBOB", "the internal floor price is six percent")
    asked = _message(http, h, channel, "XGLOBEX", "what is the floor price?")
    found = _search(http, rt, channel, "XGLOBEX", asked, "floor price")
    assert private not in found["message_ids"] and found["hits"], found  # the channel's own "price" lines only
