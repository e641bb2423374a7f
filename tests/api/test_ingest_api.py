"""Ingestion over HTTP with an ingest token, checked by reading back as a reader."""

from __future__ import annotations

from datetime import datetime

from tests.api.support import assert_error, conversation_body, snapshot
from tests.world import bearer, client


def _count(world, table: str, where: str = "true", args: tuple = ()) -> int:
    return world.conn.execute(f"select count(*) as n from {table} where {where}", args).fetchone()["n"]


def _message(world, message_id: int) -> dict | None:
    return world.conn.execute("select body, state::text as state, role::text as role from messages where id = %s",
                              (message_id,)).fetchone()


def test_upsert_conversation_creates_then_is_idempotent_then_updates_title(db_url, world):
    ingest = world.token("ingest", "acme")
    world.workspace("acme")
    with client(db_url) as http:
        h = bearer(ingest)
        first = http.post("/v1/conversations", json=conversation_body("slack-1", "Dinner plans"), headers=h)
        assert first.status_code == 201, first.text
        assert first.json()["created"] is True
        conv = first.json()["id"]

        again = http.post("/v1/conversations", json=conversation_body("slack-1", "Dinner plans"), headers=h)
        assert again.status_code == 200, again.text
        assert again.json() == {"id": conv, "created": False}

        renamed = http.post("/v1/conversations", json=conversation_body("slack-1", "Rose Room dinner"), headers=h)
        assert renamed.status_code == 200, renamed.text
        assert renamed.json() == {"id": conv, "created": False}

        other = http.post("/v1/conversations", json=conversation_body("slack-2", "Something else"), headers=h)
        assert other.status_code == 201 and other.json()["id"] != conv

        reader = world.token("reader", "acme", actor="alice")
        seen = http.get(f"/v1/agent-sessions/{conv}", headers=bearer(reader))
    assert seen.status_code == 200, seen.text
    body = seen.json()
    assert body["title"] == "Rose Room dinner"
    assert body["external_id"] == "slack-1"
    assert body["agent"]["slug"] == "concierge"
    assert body["connector"] == "web:demo"
    assert body["creator"]["external_id"] == "alice"
    assert _count(world, "conversations") == 2


def test_append_messages_is_idempotent_on_external_id(db_url, world):
    ingest = world.token("ingest", "acme")
    with client(db_url) as http:
        h = bearer(ingest)
        conv = http.post("/v1/conversations", json=conversation_body("t1", "Booking"), headers=h).json()["id"]
        url = f"/v1/conversations/{conv}/messages"
        msg = {"external_id": "m1", "role": "user", "body": "Can we move dinner to the Rose Room?",
               "speaker": {"external_id": "alice", "display_name": "Alice"}}
        first = http.post(url, json=msg, headers=h)
        assert first.status_code == 201, first.text
        assert first.json()["created"] is True
        again = http.post(url, json=msg, headers=h)
        assert again.status_code == 200, again.text
        assert again.json() == {"id": first.json()["id"], "created": False}
        # Without an external id every post is a new message.
        anonymous = [http.post(url, json={"role": "assistant", "body": "Sure."}, headers=h) for _ in range(2)]
    assert [r.status_code for r in anonymous] == [201, 201]
    assert anonymous[0].json()["id"] != anonymous[1].json()["id"]
    assert _count(world, "messages", "conversation_id = %s", (conv,)) == 3
    assert _message(world, first.json()["id"])["body"] == msg["body"]


def test_streaming_message_becomes_searchable_when_finished(db_url, world):
    ingest = world.token("ingest", "acme")
    with client(db_url) as http:
        h = bearer(ingest)
        conv = http.post("/v1/conversations", json=conversation_body("t1", "Booking"), headers=h).json()["id"]
        reader = world.token("reader", "acme", actor="bob", agents=["concierge"])
        r = bearer(reader)

        def last_active() -> datetime:
            got = http.get(f"/v1/agent-sessions/{conv}", headers=r)
            assert got.status_code == 200, got.text
            return datetime.fromisoformat(got.json()["last_active_at"])

        def found(q: str) -> list[int]:
            got = http.get("/v1/agent-sessions", params={"q": q}, headers=r)
            assert got.status_code == 200, got.text
            return [s["id"] for s in got.json()["sessions"]]

        born = last_active()
        created = http.post(f"/v1/conversations/{conv}/messages",
                            json={"role": "assistant", "state": "streaming", "body": ""}, headers=h)
        assert created.status_code == 201, created.text
        msg = created.json()["id"]
        after_create = last_active()
        assert after_create >= born

        p1 = http.patch(f"/v1/messages/{msg}", json={"append": "The Rose Room "}, headers=h)
        assert p1.status_code == 200, p1.text
        assert p1.json()["state"] == "streaming"
        p2 = http.patch(f"/v1/messages/{msg}", json={"append": "is booked for Friday"}, headers=h)
        assert p2.status_code == 200, p2.text
        assert p2.json()["body_chars"] == len("The Rose Room is booked for Friday")
        assert found("friday") == [], "a streaming message must not be searchable"
        after_appends = last_active()
        assert after_appends > after_create

        done = http.patch(f"/v1/messages/{msg}", json={"state": "finished"}, headers=h)
        assert done.status_code == 200, done.text
        assert done.json()["state"] == "finished"
        assert last_active() > after_appends

        hits = http.get("/v1/agent-sessions", params={"q": "friday"}, headers=r).json()["sessions"]
        assert [s["id"] for s in hits] == [conv]
        assert hits[0]["match"]["message_id"] == msg
        assert "Friday" in hits[0]["match"]["excerpt"]

        # A finished message is final: no more appends, no new body, no going back to streaming.
        before = snapshot(world.conn)
        for change in ({"append": " and Saturday"}, {"body": "rewritten"}, {"state": "streaming"}):
            assert_error(http.patch(f"/v1/messages/{msg}", json=change, headers=h), 409, "message_finished")
        assert snapshot(world.conn) == before
    assert _message(world, msg) == {"body": "The Rose Room is booked for Friday", "state": "finished",
                                    "role": "assistant"}


def test_delete_message_then_conversation(db_url, world):
    ingest = world.token("ingest", "acme")
    reader = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        h = bearer(ingest)
        conv = http.post("/v1/conversations", json=conversation_body("t1", "Booking"), headers=h).json()["id"]
        url = f"/v1/conversations/{conv}/messages"
        keep = http.post(url, json={"role": "user", "body": "the aardvark question"}, headers=h).json()["id"]
        gone = http.post(url, json={"role": "assistant", "body": "the zebra answer"}, headers=h).json()["id"]

        def found(q: str) -> list[int]:
            return [s["id"] for s in
                    http.get("/v1/agent-sessions", params={"q": q}, headers=bearer(reader)).json()["sessions"]]

        assert found("zebra") == [conv]
        r = http.delete(f"/v1/messages/{gone}", headers=h)
        assert r.status_code == 204 and r.content == b""
        assert_error(http.delete(f"/v1/messages/{gone}", headers=h), 404, "not_found")
        assert_error(http.patch(f"/v1/messages/{gone}", json={"append": "x"}, headers=h), 404, "not_found")
        assert _message(world, gone) is None
        assert _message(world, keep) is not None
        assert found("zebra") == []
        assert found("aardvark") == [conv]

        r = http.delete(f"/v1/conversations/{conv}", headers=h)
        assert r.status_code == 204 and r.content == b""
        assert _count(world, "messages", "conversation_id = %s", (conv,)) == 0
        assert _count(world, "message_search", "conversation_id = %s", (conv,)) == 0
        assert_error(http.delete(f"/v1/conversations/{conv}", headers=h), 404, "not_found")
        assert_error(http.post(url, json={"role": "user", "body": "late"}, headers=h), 404, "not_found")
        assert_error(http.get(f"/v1/agent-sessions/{conv}", headers=bearer(reader)), 404, "not_found")
        assert found("aardvark") == []


def test_ingest_token_cannot_touch_another_workspace(db_url, world):
    """Workspace B's ingest token meets A's ids exactly as it meets ids that do not exist."""
    conv = world.conversation("alpha", "concierge", "t1", "Alpha's thread", creator="alice")
    msg = world.message("alpha", conv, "alpha streaming", role="assistant", state="streaming")
    alpha = world.token("ingest", "alpha")
    beta = world.token("ingest", "beta")
    attempts = [
        ("POST", f"/v1/conversations/{conv}/messages", {"role": "user", "body": "intrusion"}),
        ("PATCH", f"/v1/messages/{msg}", {"append": " intrusion"}),
        ("DELETE", f"/v1/messages/{msg}", None),
        ("DELETE", f"/v1/conversations/{conv}", None),
    ]
    with client(db_url) as http:
        before = snapshot(world.conn)
        foreign = []
        for method, path, body in attempts:
            r = http.request(method, path, json=body, headers=bearer(beta))
            foreign.append(assert_error(r, 404, "not_found"))
        assert snapshot(world.conn) == before
        # Upserting the same keys from B makes B's own conversation; A's is untouched.
        r = http.post("/v1/conversations", json=conversation_body("t1", "Beta's thread"), headers=bearer(beta))
        assert r.status_code == 201 and r.json()["id"] != conv
        assert world.conn.execute("select title from conversations where id = %s", (conv,)).fetchone()["title"] \
            == "Alpha's thread"
        # Now make the ids really not exist, and ask as their owner: the answers are the same bytes.
        assert http.delete(f"/v1/conversations/{conv}", headers=bearer(alpha)).status_code == 204
        absent = []
        for method, path, body in attempts:
            r = http.request(method, path, json=body, headers=bearer(alpha))
            absent.append(assert_error(r, 404, "not_found"))
    assert foreign == absent


def test_conversation_audience_defaults_and_members(db_url, world):
    ingest = world.token("ingest", "acme")
    with client(db_url) as http:
        h = bearer(ingest)
        r = http.post("/v1/conversations", headers=h, json=conversation_body(
            "t1", "Team", creator=None, audience={"kind": "members", "readers": ["alice", "bob"]}))
        assert r.status_code == 201, r.text
        d = http.post("/v1/conversations", headers=h, json=conversation_body("t2", "Private", creator="carol"))
        assert d.status_code == 201, d.text
    rows = world.conn.execute("select id, audience_kind::text as kind, audience_readers as readers"
                              " from conversations order by id").fetchall()
    assert [(x["kind"], x["readers"]) for x in rows] == [("members", ["alice", "bob"]), ("members", ["carol"])]


def _line(external_id: str, n: int, **extra) -> str:
    import json

    return json.dumps({
        "agent": "concierge", "connector": {"type": "slack", "name": "acme"}, "external_id": external_id,
        "title": f"Thread {external_id}", "audience": {"kind": "workspace"},
        "messages": [{"external_id": f"{external_id}-{i}", "role": "user", "body": f"invoice {i} of {external_id}",
                      "speaker": {"external_id": "alice"}} for i in range(n)], **extra})


def test_bulk_import_lands_each_line_whole_and_answers_each(db_url, world):
    """Issue 19: POST /v1/import takes NDJSON, one conversation per line; a bad line is answered
    with its number and reason, the others land; a retried request creates nothing twice."""
    ingest = world.token("ingest", "acme")
    world.workspace("other")
    body = "\n".join([_line("t1", 50), '{"agent": ', _line("t2", 3), _line("t3", 1, workspace="other"),
                      _line("t4", 2), ""])
    with client(db_url) as http:
        h = {**bearer(ingest), "content-type": "application/x-ndjson"}
        first = http.post("/v1/import", content=body.encode(), headers=h)
        assert first.status_code == 200, first.text
        result = first.json()
        assert (result["lines"], result["conversations"], result["messages_created"]) == (5, 3, 55)
        assert [a["line"] for a in result["accepted"]] == [1, 3, 5]
        assert [r["line"] for r in result["rejected"]] == [2, 4]
        assert "not valid JSON" in result["rejected"][0]["error"]
        assert "its own workspace" in result["rejected"][1]["error"]
        again = http.post("/v1/import", content=body.encode(), headers=h)
        assert again.status_code == 200 and again.json()["messages_created"] == 0
        assert [a["conversation_id"] for a in again.json()["accepted"]] == [a["conversation_id"]
                                                                          for a in result["accepted"]]
        reader = world.token("reader", "acme", actor="alice")
        found = http.get("/v1/agent-sessions", params={"q": "invoice"}, headers=bearer(reader)).json()
        # The wrong kind of token writes nothing.
        refused = http.post("/v1/import", content=_line("t9", 1).encode(), headers=bearer(reader))
    assert refused.status_code == 403
    assert {s["external_id"] for s in found["sessions"]} == {"t1", "t2", "t4"}
    assert _count(world, "messages") == 55
    assert _count(world, "conversations", "workspace_id = %s", (world.workspace("other"),)) == 0
