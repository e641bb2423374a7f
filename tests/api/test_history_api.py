"""search_history and turns over HTTP: the runtime's whole loop, scoping, and bad input."""

from __future__ import annotations

import hashlib
import hmac

from backscroll.access.audit import normalize
from backscroll.access.keys import derive
from tests.api.support import assert_error, snapshot
from tests.world import bearer, client

WS = "acme"
SLACK = ("slack", "acme")
NS = "slack:acme"


def _world(world):
    dm = world.conversation(WS, "concierge", "D-alice", "Alice DM", creator="U_A", connector=SLACK,
                            audience={"kind": "members", "readers": ["U_A"]})
    channel = world.conversation(WS, "concierge", "C-general", "general", creator="U_B", connector=SLACK,
                                 audience={"kind": "public"})
    said = world.message(WS, channel, "The Rose Room is booked for the offsite", speaker="U_B", minute=5)
    private = world.message(WS, dm, "Keep the Rose Room surprise between us", speaker="U_A", minute=6)
    asking = world.message(WS, channel, "Where is the offsite?", speaker="U_A", minute=10)
    return dm, channel, said, private, asking


def test_the_runtime_loop_over_http(db_url, world, http):
    dm, channel, said, private, asking = _world(world)
    runtime = world.token("runtime", WS, agents=["concierge"])
    h = bearer(runtime)
    r = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": channel,
                                                 "requester": {"external_id": "U_A"},
                                                 "answering_message_id": asking})
    assert r.status_code == 201, r.text
    turn = r.json()["id"]
    r = http.post("/v1/tools/search_history", headers=h, json={"turn_id": turn, "query": "Rose Room offsite"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body)[0] == "message_ids"  # first, so a truncated observation still lists them all
    assert [hit["message_id"] for hit in body["hits"]] == [said]
    assert private not in body["message_ids"] and asking not in body["message_ids"]
    assert body["mode"] == "lexical" and body["status"] == "ok"
    r = http.post(f"/v1/turns/{turn}/reply", headers=h, json={"body": "It is in the Rose Room."})
    assert r.status_code == 201, r.text
    assert set(body["message_ids"]) <= set(r.json()["history_message_ids"])
    r = http.post(f"/v1/turns/{turn}/recheck", headers=h)
    assert r.status_code == 200 and r.json()["deliverable"] is True, r.text
    r = http.get(f"/v1/turns/{turn}/trace", headers=h)
    assert r.status_code == 200, r.text
    trace = r.json()
    assert {e["message_id"] for e in trace["evidence"] if e["via"] == "search"} == set(body["message_ids"])
    assert len(trace["search_audit"]) == 1
    assert "Rose" not in r.text.replace("Rose Room is booked", "")  # the query never lands in the audit row
    # A runtime's trace counts nothing it may not see (issue 29): no exclusion counts, no scores.
    audit = trace["search_audit"][0]
    assert "exclusions" not in audit and [s["message_id"] for s in audit["selected"]] == [said]
    assert not any({"score", "features"} & set(s) for s in audit["selected"])
    r = http.get(f"/v1/turns/{turn}/trace", headers=bearer(world.token("admin")))
    whole = r.json()["search_audit"][0]
    assert r.status_code == 200 and whole["exclusions"]["audience"] >= 1, whole  # the DM's match
    assert {"score", "features"} <= set(whole["selected"][0])


def test_a_runtime_scoped_to_another_agent_sees_no_turns(world, http):
    dm, channel, said, private, asking = _world(world)
    world.conversation(WS, "events", "C-events", "events", creator="U_B", connector=SLACK, audience={"kind": "public"})
    own = world.token("runtime", WS, agents=["concierge"])
    other = world.token("runtime", WS, agents=["events"])
    r = http.post("/v1/turns", headers=bearer(other), json={"agent": "concierge", "conversation_id": channel})
    assert_error(r, 404, "not_found")
    turn = http.post("/v1/turns", headers=bearer(own), json={"agent": "concierge", "conversation_id": channel}).json()["id"]
    for path, body in (("/v1/tools/search_history", {"turn_id": turn, "query": "rose"}),
                       (f"/v1/turns/{turn}/reply", {"body": "x"}), (f"/v1/turns/{turn}/recheck", None)):
        assert_error(http.post(path, headers=bearer(other), json=body), 404, "not_found")
    assert_error(http.get(f"/v1/turns/{turn}/trace", headers=bearer(other)), 404, "not_found")


def test_search_history_takes_no_perspective_or_audience(world, http):
    dm, channel, *_ = _world(world)
    h = bearer(world.token("runtime", WS))
    turn = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": channel}).json()["id"]
    before = snapshot(world.conn)
    for extra in ({"perspective": "concierge"}, {"audience": {"kind": "public"}}, {"agent": "events"},
                  {"destination": dm}):
        r = http.post("/v1/tools/search_history", headers=h, json={"turn_id": turn, "query": "rose", **extra})
        assert_error(r, 400, "invalid_request")
    assert snapshot(world.conn) == before


def test_bad_search_input_is_a_400_and_writes_nothing(world, http):
    dm, channel, said, private, asking = _world(world)
    h = bearer(world.token("runtime", WS))
    turn = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": channel}).json()["id"]
    before = snapshot(world.conn)
    for body in ({"turn_id": turn, "query": ""}, {"turn_id": turn, "query": "a\u0000b"},
                 {"turn_id": turn, "query": "x" * 10_000}, {"turn_id": "abc", "query": "rose"},
                 {"turn_id": turn, "query": "rose", "limit": "many"},
                 {"turn_id": turn, "query": "rose", "filters": {"actor": {"id": 1}}},
                 {"turn_id": turn, "query": "rose", "filters": {"since": "yesterday"}}):
        assert_error(http.post("/v1/tools/search_history", headers=h, json=body), 400)
    r = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": channel,
                                                 "loaded_message_ids": [private]})
    assert_error(r, 400, "foreign_message")
    assert snapshot(world.conn) == before
    # A limit past the cap is clamped, not refused; odd query syntax is just words.
    r = http.post("/v1/tools/search_history", headers=h,
                  json={"turn_id": turn, "query": "rose & | ! ( ) : * \\ \" -room", "limit": 10**9})
    assert r.status_code == 200, r.text
    audit = world.conn.execute("select effective_limit from search_audit where turn_id = %s", (turn,)).fetchone()
    assert audit["effective_limit"] == 20


def test_the_audit_digest_is_keyed_and_never_the_text(db_url, world):
    dm, channel, *_ = _world(world)
    h = bearer(world.token("runtime", WS))
    with client(db_url, access={"master_key": "a master key for tests"}) as http:
        turn = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": channel}).json()["id"]
        assert http.post("/v1/tools/search_history", headers=h,
                         json={"turn_id": turn, "query": "  Rose   ROOM "}).status_code == 200
    row = world.conn.execute("select query_digest, filters from search_audit where turn_id = %s", (turn,)).fetchone()
    key = derive(b"a master key for tests", "search-audit")
    assert bytes(row["query_digest"]) == hmac.new(key, normalize("rose room").encode(), hashlib.sha256).digest()
    assert bytes(row["query_digest"]) != hashlib.sha256(b"rose room").digest()


def test_identity_links_and_memories_through_ingestion(world, http):
    dm, channel, said, private, asking = _world(world)
    world.actor_id(WS, "web:acme", "alice")
    h = bearer(world.token("ingest", WS))
    r = http.post("/v1/identity-links", headers=h, json={
        "agent": "concierge", "a": {"namespace": NS, "external_id": "U_A"},
        "b": {"namespace": "web:acme", "external_id": "alice"}, "proof": "email-otp-1234"})
    assert r.status_code == 201, r.text
    link = r.json()["id"]
    assert http.post(f"/v1/identity-links/{link}/revoke", headers=h).status_code == 200
    assert_error(http.post(f"/v1/identity-links/{link}/revoke", headers=h), 404)
    r = http.post("/v1/identity-links", headers=h, json={
        "agent": "concierge", "a": {"namespace": NS, "external_id": "U_A"},
        "b": {"namespace": NS, "external_id": "nobody"}, "proof": "x"})
    assert_error(r, 400, "unknown_actor")
    r = http.post("/v1/memories", headers=h, json={"agent": "concierge", "body": "Alice likes surprises",
                                                   "audience": {"kind": "members", "namespace": NS, "readers": ["U_A"]},
                                                   "source_message_ids": [private]})
    assert r.status_code == 201, r.text
    r = http.post("/v1/memories", headers=h, json={"agent": "concierge", "body": "x", "audience": {"kind": "public"},
                                                   "source_message_ids": [10**12]})
    assert_error(r, 400, "unknown_provenance")
    # A message can arrive with provenance and without evidence.
    r = http.post(f"/v1/conversations/{channel}/messages", headers=h, json={
        "role": "assistant", "body": "Noted.", "history_message_ids": [said], "evidence": None})
    assert r.status_code == 201, r.text
    row = world.conn.execute(
        "select history_message_ids, exists(select 1 from message_source_evidence e where e.message_id = m.id) as ev"
        " from messages m where id = %s", (r.json()["id"],)).fetchone()
    assert row["history_message_ids"] == [said] and row["ev"] is False
