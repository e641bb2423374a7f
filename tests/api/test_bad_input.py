"""Bad input is a 400 with a clear message (or is clamped), never a 500, and a bad write writes nothing."""

from __future__ import annotations

import base64
import json

import pytest

from tests.api.support import assert_error, conversation_body, snapshot
from tests.world import bearer, client

SEARCH_KEYS = {"sessions", "next", "mode", "degradation", "ranking"}  # a search also says how it ranked


@pytest.fixture
def setup(world):
    """A searchable world: a reader, an ingest token, a conversation with a streaming message."""
    conv = world.conversation("acme", "concierge", "t1", "Rose Room booking", creator="alice", created=1)
    for i in range(3):
        c = world.conversation("acme", "concierge", f"r{i}", f"rose thread {i}", creator="alice", created=2 + i)
        world.message("acme", c, f"the rose garden {i}", minute=10 + i)
    streaming = world.message("acme", conv, "partial", role="assistant", state="streaming", minute=20)
    return {
        "conv": conv,
        "streaming": streaming,
        "reader": world.token("reader", "acme", actor="alice"),
        "ingest": world.token("ingest", "acme"),
    }


def _get(http, token, **params):
    return http.get("/v1/agent-sessions", params=params, headers=bearer(token))


# --- cursors ----------------------------------------------------------------------------------

def test_bad_cursors_are_400(db_url, world, setup):
    reader = setup["reader"]
    with client(db_url) as http:
        recent_next = _get(http, reader, limit=1).json()["next"]
        search_a = _get(http, reader, q="rose", limit=1).json()["next"]
        search_other = _get(http, reader, q="garden", limit=1).json()["next"]
        assert recent_next and search_a and search_other
        # The genuine cursors work where they belong.
        assert _get(http, reader, limit=1, before=recent_next).status_code == 200
        assert _get(http, reader, q="rose", limit=1, before=search_a).status_code == 200

        body, tag = recent_next.split(".")
        flipped = body[:10] + ("B" if body[10] == "A" else "A") + body[11:]  # a middle character: all 6 bits count
        forged_payload = json.dumps({"v": 1, "k": "recent", "f": "x", "p": ["2020-01-01T00:00:00+00:00", 1]})
        forged = base64.urlsafe_b64encode(forged_payload.encode()).rstrip(b"=").decode() + "." + tag
        cases = {
            "garbage": "not-a-cursor",
            "one dot garbage": "abc.def",
            "tampered payload": f"{flipped}.{tag}",
            "forged payload, stolen tag": forged,
            "truncated": recent_next[:-3],
            "truncated to the payload": body,
            "two dots": recent_next + ".x",
            "overlong": "A" * 5000 + "." + tag,
            "non-ASCII": body + ".é",
            "NUL": body + "\x00." + tag,
        }
        for name, cursor in cases.items():
            for params in ({}, {"q": "rose"}):
                r = _get(http, reader, limit=1, before=cursor, **params)
                assert r.status_code == 400, (name, params, r.text)
                assert_error(r, 400, "invalid_cursor")
        # A cursor is only good for the query it pages.
        assert_error(_get(http, reader, q="rose", limit=1, before=recent_next), 400, "invalid_cursor")
        assert_error(_get(http, reader, limit=1, before=search_a), 400, "invalid_cursor")
        assert_error(_get(http, reader, q="garden", limit=1, before=search_a), 400, "invalid_cursor")
        assert_error(_get(http, reader, q="rose", limit=1, before=search_other), 400, "invalid_cursor")
        assert_error(_get(http, reader, limit=1, agent="concierge", before=recent_next), 400, "invalid_cursor")
        # An empty `before` is the first page.
        assert _get(http, reader, limit=1, before="").json() == _get(http, reader, limit=1).json()


# --- query parameters -------------------------------------------------------------------------

def test_bad_query_parameters(db_url, world, setup):
    reader = setup["reader"]
    with client(db_url) as http:
        for value in ("abc", "1.5", "1e3", "ten", "0x10", "\x00"):
            error = assert_error(_get(http, reader, limit=value), 400, "invalid_request")
            assert "limit" in error["message"], error
        long_q = "rose " * 2048
        error = assert_error(_get(http, reader, q=long_q), 400, "query_too_long")
        assert "512" in error["message"] and str(len(long_q)) in error["message"], error
        assert _get(http, reader, q="r" * 512).status_code == 200
        assert_error(_get(http, reader, q="r" * 513), 400, "query_too_long")
        error = assert_error(http.get("/v1/agent-sessions?q=rose%00room", headers=bearer(reader)), 400)
        assert "NUL" in error["message"], error
        for bad_agent in ("\x00", "concierge\x00", "Concierge", "../etc", "a" * 64, "-x"):
            error = assert_error(_get(http, reader, agent=bad_agent), 400, "invalid_request")
            assert "agent" in error["message"], (bad_agent, error)
            assert_error(_get(http, reader, agent=bad_agent, q="rose"), 400, "invalid_request")


def test_empty_and_blank_q_is_the_recent_list(db_url, world, setup):
    reader = setup["reader"]
    with client(db_url) as http:
        recent = _get(http, reader, limit=2).json()
        assert all("match" not in s for s in recent["sessions"])
        for q in ("", " ", "   \t\n  "):
            body = _get(http, reader, q=q, limit=2).json()
            assert body == recent, repr(q)
            # ... and its cursor pages the recent list.
            assert _get(http, reader, q=q, limit=2, before=recent["next"]).status_code == 200


ODD_QUERIES = ['"', '""', '"rose', "-", "--", "-rose", "or", "OR", "rose or", "or or or", "and", "not",
               "&|!():*", "rose & | !", "(rose", "rose:*", "'", "''", "\\", "\\\\", "%", "_", "%_%", "*",
               "<->", "rose <-> room", "!!rose", "é", "Ünïcödé", "日本語", "🌹", "🌹 rose", "rose 🌹🌹",
               "\u200b", "\ufeffrose", "a" * 511, "a b c d e f g h i j k l m n o p q r s t u v w x y z",
               "rose\tgarden", "\ue000rose\ue001", "SELECT * FROM messages; --", "' or 1=1 --",
               "\u202eesor", "\U0001F600" * 100, "0", "-1", "1e309", "NaN"]


# Raw query strings: bytes that are not UTF-8 (Starlette reads them as U+FFFD), an encoded surrogate.
ODD_RAW = ["q=%FF", "q=%ED%A0%80", "q=rose%ED%A0%80", "q=%C0%80", "q=%F0%9F%8C", "q=rose&q=garden", "q=%25",
           "q=%5C", "q=%22rose%22%20-garden"]


def test_odd_queries_never_fail(db_url, world, setup):
    reader = setup["reader"]
    world.message("acme", setup["conv"], "a rose by any other name", minute=21)
    with client(db_url) as http:
        for q in ODD_QUERIES:
            r = _get(http, reader, q=q)
            assert r.status_code == 200, (q, r.status_code, r.text)
            body = r.json()
            assert set(body) == SEARCH_KEYS or (not q.strip() and set(body) == {"sessions", "next"}), (q, body)
            for s in body["sessions"]:
                for a, b in s["match"].get("highlights", []):
                    assert 0 <= a < b <= len(s["match"]["excerpt"]), (q, s)
        for raw in ODD_RAW:
            r = http.get(f"/v1/agent-sessions?{raw}", headers=bearer(reader))
            assert r.status_code == 200 and set(r.json()) in (SEARCH_KEYS, {"sessions", "next"}), (raw, r.text)
        # They still find what they mean: three conversations say "rose garden", one says "a rose by any
        # other name" (a title matches only when it contains the whole text).
        def ids(q):
            return {s["id"] for s in _get(http, reader, q=q).json()["sessions"]}
        gardens = ids("garden")
        assert len(gardens) == 3
        assert ids("rose") == gardens | {setup["conv"]}
        assert ids("🌹 rose") == gardens | {setup["conv"]}  # an emoji is no word to the parser
        assert ids("tulip or garden") == gardens
        assert ids("tulip or name") == {setup["conv"]}
        assert ids('"rose garden"') == gardens
        assert ids("rose -garden") == {setup["conv"]}
        assert ids("-rose") == set()  # every finished message says rose


# --- path ids ---------------------------------------------------------------------------------

PATH_ROUTES = [
    ("GET", "/v1/agent-sessions/{}", "reader", None),
    ("POST", "/v1/conversations/{}/messages", "ingest", {"role": "user", "body": "hi"}),
    ("PATCH", "/v1/messages/{}", "ingest", {"append": "x"}),
    ("DELETE", "/v1/messages/{}", "ingest", None),
    ("DELETE", "/v1/conversations/{}", "ingest", None),
]


@pytest.mark.parametrize("ident", ["0", "-1", "99999999999999999999", "9223372036854775808", "abc",
                                   "1e3", "1.5", "%20", "0x10", "1%20", "%201", "+1", "1_0", "%EF%BC%91"])
def test_bad_path_ids_are_400(db_url, world, setup, ident):
    with client(db_url) as http:
        before = snapshot(world.conn)
        for method, template, kind, body in PATH_ROUTES:
            r = http.request(method, template.format(ident), json=body, headers=bearer(setup[kind]))
            error = assert_error(r, 400, "invalid_request")
            assert "_id" in error["message"], (method, template, error)
        assert snapshot(world.conn) == before


@pytest.mark.parametrize("decoration", ["{}%20", "%20{}", "+{}", "{}%0A", "{}%09"])
def test_an_id_near_a_real_one_acts_on_nothing(db_url, world, setup, decoration):
    """`DELETE /v1/conversations/1%20` once deleted conversation 1: an id is digits or a 400."""
    with client(db_url) as http:
        before = snapshot(world.conn)
        for method, template, kind, body in PATH_ROUTES:
            target = setup["streaming"] if "/messages/" in template else setup["conv"]
            r = http.request(method, template.format(decoration.format(target)), json=body,
                             headers=bearer(setup[kind]))
            assert_error(r, 400, "invalid_request")
        assert snapshot(world.conn) == before


def test_largest_id_is_a_404_not_an_error(db_url, world, setup):
    with client(db_url) as http:
        for method, template, kind, body in PATH_ROUTES:
            r = http.request(method, template.format(9223372036854775807), json=body, headers=bearer(setup[kind]))
            assert_error(r, 404, "not_found")


# --- bodies -----------------------------------------------------------------------------------

def _bad_writes(setup) -> list[tuple[str, str, str, dict, str]]:
    """(name, method, path, request kwargs, a word the message must contain)."""
    conv, streaming = setup["conv"], setup["streaming"]
    good = conversation_body("new-thread", "New")
    messages = f"/v1/conversations/{conv}/messages"
    patch = f"/v1/messages/{streaming}"
    raw = {"headers": {"content-type": "application/json"}}
    cases = [
        ("invalid JSON", "POST", "/v1/conversations", {"content": b"{not json", **raw}, "not valid JSON"),
        ("truncated JSON", "POST", "/v1/conversations", {"content": json.dumps(good)[:-5].encode(), **raw}, "JSON"),
        ("JSON array", "POST", "/v1/conversations", {"json": [good]}, "body"),
        ("JSON string", "POST", "/v1/conversations", {"json": "hello"}, "body"),
        ("JSON null", "POST", "/v1/conversations", {"content": b"null", **raw}, "body"),
        ("empty body", "POST", "/v1/conversations", {"content": b"", **raw}, "body"),
        ("no content type", "POST", "/v1/conversations", {"content": json.dumps(good).encode()}, "body"),
        ("invalid UTF-8", "POST", "/v1/conversations", {"content": b'{"agent": "\xff\xfe"}', **raw}, ""),
        ("lone surrogate in title", "POST", "/v1/conversations",
         {"content": json.dumps({**good, "title": "rose \ud800"}).encode(), **raw}, "title"),
        ("unknown field", "POST", "/v1/conversations", {"json": {**good, "owner": "mallory"}}, "owner"),
        ("unknown nested field", "POST", "/v1/conversations",
         {"json": {**good, "creator": {"external_id": "alice", "admin": True}}}, "admin"),
        ("missing field", "POST", "/v1/conversations", {"json": {k: v for k, v in good.items() if k != "agent"}},
         "agent"),
        ("title wrong type", "POST", "/v1/conversations", {"json": {**good, "title": 5}}, "title"),
        ("agent wrong type", "POST", "/v1/conversations", {"json": {**good, "agent": ["concierge"]}}, "agent"),
        ("connector as string", "POST", "/v1/conversations", {"json": {**good, "connector": "web:demo"}},
         "connector"),
        ("agent not a slug", "POST", "/v1/conversations", {"json": {**good, "agent": "Concierge Bot"}}, "agent"),
        ("title too long", "POST", "/v1/conversations", {"json": {**good, "title": "x" * 1001}}, "title"),
        ("NUL in title", "POST", "/v1/conversations", {"json": {**good, "title": "rose\u0000room"}}, "NUL"),
        ("NUL in external id", "POST", "/v1/conversations", {"json": {**good, "external_id": "a\u0000"}}, "NUL"),
        ("NUL in creator", "POST", "/v1/conversations",
         {"json": {**good, "creator": {"external_id": "al\u0000ice"}}}, "NUL"),
        ("members without readers", "POST", "/v1/conversations",
         {"json": {**good, "audience": {"kind": "members"}}}, "reader"),
        ("members with empty readers", "POST", "/v1/conversations",
         {"json": {**good, "creator": None, "audience": {"kind": "members", "readers": []}}}, "reader"),
        ("readers on a workspace audience", "POST", "/v1/conversations",
         {"json": {**good, "audience": {"kind": "workspace", "readers": ["bob"]}}}, "reader"),
        ("unknown audience kind", "POST", "/v1/conversations",
         {"json": {**good, "audience": {"kind": "everyone"}}}, "audience"),
        ("nobody can read it", "POST", "/v1/conversations", {"json": {**good, "creator": None}}, "audience"),
        ("future created_at", "POST", "/v1/conversations",
         {"json": {**good, "created_at": "2999-01-01T00:00:00Z"}}, "future"),
        ("naive created_at", "POST", "/v1/conversations",
         {"json": {**good, "created_at": "2026-01-01T00:00:00"}}, "created_at"),
        ("message unknown role", "POST", messages, {"json": {"role": "robot", "body": "x"}}, "role"),
        ("message body wrong type", "POST", messages, {"json": {"role": "user", "body": {"text": "x"}}}, "body"),
        ("message NUL body", "POST", messages, {"json": {"role": "user", "body": "a\u0000b"}}, "NUL"),
        ("message lone surrogate", "POST", messages,
         {"content": b'{"role": "user", "body": "half \\udc00 a pair"}', **raw}, "body"),
        ("message unknown field", "POST", messages, {"json": {"role": "user", "body": "x", "score": 1}}, "score"),
        ("message invalid JSON", "POST", messages, {"content": b'{"role": "user",', **raw}, "JSON"),
        ("message members without readers", "POST", messages,
         {"json": {"role": "user", "body": "x", "audience": {"kind": "members"}}}, "reader"),
        ("message state unknown", "POST", messages, {"json": {"role": "user", "state": "done"}}, "state"),
        ("patch nothing", "PATCH", patch, {"json": {}}, "nothing"),
        ("patch body and append", "PATCH", patch, {"json": {"body": "a", "append": "b"}}, "append"),
        ("patch NUL append", "PATCH", patch, {"json": {"append": "\u0000"}}, "NUL"),
        ("patch unknown field", "PATCH", patch, {"json": {"append": "x", "role": "user"}}, "role"),
        ("patch wrong type", "PATCH", patch, {"json": {"append": 7}}, "append"),
        ("patch invalid JSON", "PATCH", patch, {"content": b"[", **raw}, "JSON"),
    ]
    return cases


def test_bad_writes_are_400_and_write_nothing(db_url, world, setup):
    ingest = bearer(setup["ingest"])
    with client(db_url) as http:
        before = snapshot(world.conn)
        for name, method, path, kwargs, word in _bad_writes(setup):
            kwargs = dict(kwargs)
            headers = {**ingest, **kwargs.pop("headers", {})}
            r = http.request(method, path, headers=headers, **kwargs)
            error = assert_error(r, 400)
            assert word.lower() in error["message"].lower() or any(
                word.lower() in d.get("field", "").lower() + d.get("problem", "").lower()
                for d in error.get("details", [])), (name, error)
            assert "\x00" not in r.text and "mallory" not in r.text, (name, r.text)
            assert snapshot(world.conn) == before, f"{name} wrote something"


def test_oversized_bodies_are_refused_whole(db_url, world, setup):
    ingest = bearer(setup["ingest"])
    conv, streaming = setup["conv"], setup["streaming"]  # the streaming message holds "partial" (7)
    with client(db_url, ingest={"body_max_chars": 100}) as http:
        before = snapshot(world.conn)
        refused = [
            ("POST", f"/v1/conversations/{conv}/messages", {"role": "user", "body": "x" * 101}),
            ("POST", f"/v1/conversations/{conv}/messages", {"role": "user", "body": "🌹" * 101}),
            ("PATCH", f"/v1/messages/{streaming}", {"body": "x" * 101}),
            ("PATCH", f"/v1/messages/{streaming}", {"append": "x" * 101}),
            # Each piece fits; the message would not: nothing of it may land, the state change included.
            ("PATCH", f"/v1/messages/{streaming}", {"append": "x" * 94, "state": "finished"}),
        ]
        for method, path, body in refused:
            error = assert_error(http.request(method, path, json=body, headers=ingest), 400, "body_too_long")
            assert "100" in error["message"], error
            assert snapshot(world.conn) == before, (method, body)
        msg = world.conn.execute("select body, state::text as state from messages where id = %s",
                                 (streaming,)).fetchone()
        assert msg == {"body": "partial", "state": "streaming"}
        # Exactly at the limit is fine.
        ok = http.patch(f"/v1/messages/{streaming}", json={"append": "x" * 93}, headers=ingest)
        assert ok.status_code == 200 and ok.json()["body_chars"] == 100, ok.text
        ok = http.post(f"/v1/conversations/{conv}/messages", json={"role": "user", "body": "🌹" * 100},
                       headers=ingest)
        assert ok.status_code == 201, ok.text


def test_huge_request_bodies_are_413_even_without_a_length(db_url, world, setup):
    ingest = bearer(setup["ingest"])
    path = f"/v1/conversations/{setup['conv']}/messages"
    huge = json.dumps({"role": "user", "body": "x" * (9 * 1024 * 1024)}).encode()

    def chunks():
        for i in range(0, len(huge), 1 << 20):
            yield huge[i:i + (1 << 20)]

    with client(db_url) as http:
        before = snapshot(world.conn)
        headers = {**ingest, "content-type": "application/json"}
        assert_error(http.post(path, content=huge, headers=headers), 413, "too_large")
        chunked = http.post(path, content=chunks(), headers=headers)
        assert chunked.request.headers.get("transfer-encoding") == "chunked"
        assert_error(chunked, 413, "too_large")
        assert snapshot(world.conn) == before
