"""Paths with one rule (issue 29, item 4): every write path holds to the same limits, named once;
/v1/import authorizes a line's workspace before looking any name up; the token is checked from
the headers before a byte of the body is read; and only so many bodies are read at once."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from backscroll.ingest import workspaces
from backscroll.vocabulary import MAX_TITLE_CHARS
from tests.api.support import assert_error, snapshot
from tests.world import bearer, client

WS = "acme"
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture
def setup(world):
    """A conversation with a finished and a streaming message, a turn that loaded the finished
    one, and a token of each writing kind."""
    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="alice")
    said = world.message(WS, conv, "the offsite is in the Rose Room", minute=1)
    streaming = world.message(WS, conv, "partial", role="assistant", state="streaming", minute=2)
    return {"conv": conv, "said": said, "streaming": streaming,
            "ingest": bearer(world.token("ingest", WS)),
            "runtime": bearer(world.token("runtime", WS, agents=["concierge"])),
            "turn": lambda: world.turn(WS, "concierge", conv, loaded=[said])}


def _import_line(external_id: str, *, body: str = "hello", title: str = "", **extra) -> bytes:
    return json.dumps({"agent": "concierge", "connector": {"type": "slack", "name": "acme"},
                       "external_id": external_id, "title": title, "audience": {"kind": "workspace"},
                       "messages": [{"external_id": f"{external_id}-1", "role": "user", "body": body}],
                       **extra}).encode()


def _code(r) -> str | None:
    """The error code of a refused write, None for one that landed; an import's one line counts
    as the request (its rejection carries the code a request of its own would get)."""
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        return assert_error(r, r.status_code)["code"]
    rejected = r.json().get("rejected") if r.request.url.path == "/v1/import" else None
    return rejected[0]["code"] if rejected else None


def _every_body_write(http, s, body: str, n: int) -> dict[str, str | None]:
    """The body on every path that writes one, each with fresh keys (`n`); name -> error code."""
    ingest, runtime = s["ingest"], s["runtime"]
    reply_turn, memory_turn = s["turn"](), s["turn"]()
    sends = {
        "append": lambda: http.post(f"/v1/conversations/{s['conv']}/messages", headers=ingest,
                                    json={"role": "user", "body": body, "external_id": f"a-{n}"}),
        "patch body": lambda: http.patch(f"/v1/messages/{s['streaming']}", headers=ingest, json={"body": body}),
        "patch append": lambda: http.patch(f"/v1/messages/{s['streaming']}", headers=ingest, json={"append": body}),
        "import": lambda: http.post("/v1/import", headers={**ingest, **NDJSON},
                                    content=_import_line(f"i-{n}", body=body)),
        "memory": lambda: http.post("/v1/memories", headers=ingest, json={
            "agent": "concierge", "body": body, "audience": {"kind": "public"}}),
        "reply": lambda: http.post(f"/v1/turns/{reply_turn}/reply", headers=runtime, json={"body": body}),
        "turn memory": lambda: http.post(f"/v1/turns/{memory_turn}/memories", headers=runtime,
                                         json={"body": body, "source_message_ids": [s["said"]]}),
    }
    return {name: _code(send()) for name, send in sends.items()}


def test_a_3_000_000_character_body_is_refused_alike_on_every_write_path(db_url, world, setup, http):
    """Append refused it with `body_too_long`; /v1/import stored it, a memory and a reply answered
    `invalid_request` by lengths of their own (100,000 and 1,000,000)."""
    turns = [setup["turn"](), setup["turn"]()]
    before = snapshot(world.conn)
    codes = _every_body_write(http, {**setup, "turn": iter(turns).__next__}, "x" * 3_000_000, 1)
    assert codes == dict.fromkeys(codes, "body_too_long")
    assert snapshot(world.conn) == before


def test_the_body_limit_is_the_setting_on_every_write_path(db_url, world, setup):
    """The limit is one setting: at it every path accepts, one character over it every path
    refuses (a memory's old 100,000 and a reply's 1,000,000 let 101 through)."""
    with client(db_url, ingest={"body_max_chars": 100}) as http:
        over = _every_body_write(http, setup, "é" * 101, 1)
        assert over == dict.fromkeys(over, "body_too_long")
        # "patch append" grows the streaming message past the limit; "patch body" replaces it first.
        at = _every_body_write(http, setup, "é" * 100, 2)
        assert at == {**dict.fromkeys(at), "patch append": "body_too_long"}, at
        r = http.post("/v1/import", headers={**setup["ingest"], **NDJSON}, content=_import_line("i-3", body="é" * 101))
        assert r.json()["rejected"] == [{"line": 1, "code": "body_too_long",
                                         "error": "messages.0.body: 101 characters; the most accepted is 100"}]


def test_the_title_limit_is_the_same_on_every_path(db_url, world, setup, http):
    ingest = setup["ingest"]
    conversation = {"agent": "concierge", "connector": {"type": "slack", "name": "acme"}, "external_id": "t-1",
                    "audience": {"kind": "workspace"}}
    long = "t" * (MAX_TITLE_CHARS + 1)
    refused = assert_error(http.post("/v1/conversations", headers=ingest, json={**conversation, "title": long}),
                           400, "invalid_request")
    r = http.post("/v1/import", headers={**ingest, **NDJSON}, content=_import_line("t-2", title=long))
    assert r.status_code == 200, r.text
    assert r.json()["rejected"] == [{"line": 1, "code": "invalid_request", "error": refused["message"]}]
    fits = "t" * MAX_TITLE_CHARS
    assert http.post("/v1/conversations", headers=ingest, json={**conversation, "title": fits}).status_code == 201
    r = http.post("/v1/import", headers={**ingest, **NDJSON}, content=_import_line("t-2", title=fits))
    assert r.json()["rejected"] == [] and r.json()["conversations"] == 1, r.text


def test_import_answers_a_foreign_and_an_unknown_workspace_alike(db_url, world, setup, http, monkeypatch):
    """Slugs are customer names: an ingest token must not learn which exist. A line naming another
    workspace is refused before any name is looked up, with one answer for both."""
    world.workspace("b")
    looked_up = []
    real = workspaces.workspace_id_for
    monkeypatch.setattr(workspaces, "workspace_id_for",
                        lambda conn, slug, **kw: looked_up.append(slug) or real(conn, slug, **kw))
    before = snapshot(world.conn)
    answers = [http.post("/v1/import", headers={**setup["ingest"], **NDJSON},
                         content=_import_line("w-1", workspace=slug)) for slug in ("b", "nope")]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    assert answers[0].json()["rejected"][0]["code"] == "forbidden", answers[0].text
    assert looked_up == []
    assert snapshot(world.conn) == before
    # The token's own workspace, named, is its own.
    own = http.post("/v1/import", headers={**setup["ingest"], **NDJSON}, content=_import_line("w-1", workspace=WS))
    assert own.json()["conversations"] == 1, own.text


async def _answer_without_the_body(app, headers: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """POST a body that never ends; (status, body receives the app asked for before answering)."""
    asked, answered = [], asyncio.get_running_loop().create_future()

    async def receive():
        asked.append(1)
        if len(asked) == 1:
            return {"type": "http.request", "body": b'{"role": "user", "body": "', "more_body": True}
        await asyncio.Event().wait()  # the rest never comes

    async def send(message):
        if message["type"] == "http.response.start" and not answered.done():
            answered.set_result((message["status"], len(asked)))

    path = "/v1/import"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-type", b"application/x-ndjson"), *headers],
             "client": ("127.0.0.1", 50000), "server": ("test", 80)}
    served = asyncio.create_task(app(scope, receive, send))
    try:
        return await asyncio.wait_for(answered, 10)
    finally:
        served.cancel()
        await asyncio.gather(served, return_exceptions=True)


@pytest.mark.parametrize("framing", [[(b"content-length", b"4000000")], [(b"transfer-encoding", b"chunked")]],
                         ids=["length far over what is sent", "chunked"])
@pytest.mark.parametrize("token, status", [(None, 401), ("bks_not-a-token", 401), ("reader", 403)])
def test_the_token_is_checked_before_a_byte_of_the_body_is_read(world, setup, http, framing, token, status):
    """Before, the route read the whole body (up to 8 MiB) and only then looked at the token: a
    body that never ends was never answered."""
    if token == "reader":
        token = world.token("reader", WS, actor="alice")
    auth = [(b"authorization", f"Bearer {token}".encode())] if token else []
    answered, asked = asyncio.run(_answer_without_the_body(http.app, [*framing, *auth]))
    assert (answered, asked) == (status, 0)


def test_only_so_many_bodies_are_read_at_once(db_url, world, setup):
    """With one body read allowed: while a slow upload holds it, another write answers 503 `busy`
    at once, before its body is read; an unauthenticated one is still 401 (it never asks for a
    read); once the upload is done, writes go through again."""
    conv, ingest = setup["conv"], setup["ingest"]
    path = f"/v1/conversations/{conv}/messages"

    async def scenario(app):
        arrived, go_on = asyncio.Event(), asyncio.Event()

        async def slow():
            yield b'{"role": "user", '
            arrived.set()
            await go_on.wait()
            yield b'"body": "slow", "external_id": "slow"}'

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            upload = asyncio.create_task(http.post(path, content=slow(),
                                                   headers={**ingest, "content-type": "application/json"}))
            await arrived.wait()
            busy = await asyncio.wait_for(http.post(path, headers=ingest, json={"role": "user", "body": "b"}), 10)
            anonymous = await asyncio.wait_for(http.post(path, json={"role": "user", "body": "c"}), 10)
            go_on.set()
            slow_done = await upload
            after = await http.post(path, headers=ingest, json={"role": "user", "body": "d", "external_id": "d"})
        return busy, anonymous, slow_done, after

    with client(db_url, api={"request_body_reads_max": 1}) as http:
        busy, anonymous, slow_done, after = asyncio.run(scenario(http.app))
    error = assert_error(busy, 503, "busy")
    assert "retry" in error["message"], error
    assert_error(anonymous, 401, "unauthenticated")
    assert slow_done.status_code == 201, slow_done.text
    assert after.status_code == 201, after.text
    bodies = world.conn.execute("select body from messages where conversation_id = %s order by id", (conv,))
    assert [r["body"] for r in bodies] == ["the offsite is in the Rose Room", "partial", "slow", "d"]
