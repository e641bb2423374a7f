"""A request authenticates once (issue 19, item 2), from its headers before its body is read
(issue 29): a request without a body works on the connection it authenticated on, in the same
transaction; one with a body hands that connection back while the body arrives, so a slow upload
holds no connection, and takes one for the work. The token's last use is touched at most once a
minute."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
import httpx
import psycopg

from backscroll.api import service as service_module
from tests.world import bearer

WS = "acme"


@contextmanager
def counted(http, monkeypatch):
    """Counts the request connections taken from the API's pool and the authentications."""
    svc = http.app.state.service
    counts = {"checkouts": 0, "returns": 0, "authentications": 0}
    getconn, putconn, authenticate = svc.pool.getconn, svc.pool.putconn, service_module.authenticate

    def counting_getconn(*args, **kwargs):
        counts["checkouts"] += 1
        return getconn(*args, **kwargs)

    def counting_putconn(*args, **kwargs):
        counts["returns"] += 1
        return putconn(*args, **kwargs)

    def counting_authenticate(*args, **kwargs):
        counts["authentications"] += 1
        return authenticate(*args, **kwargs)

    monkeypatch.setattr(svc.pool, "getconn", counting_getconn)
    monkeypatch.setattr(svc.pool, "putconn", counting_putconn)
    monkeypatch.setattr(service_module, "authenticate", counting_authenticate)
    yield counts


def test_a_session_search_takes_one_connection_and_authenticates_once(world, http, monkeypatch):
    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    world.message(WS, conv, "the kestrelbrook offsite is in May")
    reader = bearer(world.token("reader", WS, actor="U_A", agents=["concierge"]))
    with counted(http, monkeypatch) as counts:
        r = http.get("/v1/agent-sessions", params={"q": "kestrelbrook"}, headers=reader)
        assert r.status_code == 200, r.text
        assert [s["id"] for s in r.json()["sessions"]] == [conv]
    assert counts == {"checkouts": 1, "returns": 1, "authentications": 1}


def test_search_history_authenticates_once_and_holds_one_connection_at_a_time(world, http, monkeypatch):
    conv = world.conversation(WS, "concierge", "C-general", "general", creator="U_B",
                              connector=("slack", "acme"), audience={"kind": "public"})
    said = world.message(WS, conv, "The Rose Room is booked for the offsite", speaker="U_B", minute=5)
    asking = world.message(WS, conv, "Where is the offsite?", speaker="U_A", minute=10)
    h = bearer(world.token("runtime", WS, agents=["concierge"]))
    r = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": conv,
                                                 "requester": {"external_id": "U_A"},
                                                 "answering_message_id": asking})
    assert r.status_code == 201, r.text
    with counted(http, monkeypatch) as counts:
        r = http.post("/v1/tools/search_history", headers=h, json={"turn_id": r.json()["id"], "query": "Rose Room"})
        assert r.status_code == 200, r.text
        assert said in r.json()["message_ids"]
    # One connection to authenticate before the body is read, handed back; one for the work.
    assert counts == {"checkouts": 2, "returns": 2, "authentications": 1}


def test_work_that_fails_is_rolled_back_and_the_connection_goes_back(world, http, monkeypatch):
    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    ingest = bearer(world.token("ingest", WS))
    svc = http.app.state.service
    msg = http.post(f"/v1/conversations/{conv}/messages", headers=ingest,
                    json={"role": "user", "body": "short", "external_id": "m-1", "state": "streaming"})
    assert msg.status_code == 201, msg.text
    limit = svc.settings.ingest.body_max_chars
    with counted(http, monkeypatch) as counts:
        r = http.patch(f"/v1/messages/{msg.json()['id']}", headers=ingest, json={"append": "x" * limit})
        assert r.status_code == 400, r.text
    assert counts == {"checkouts": 2, "returns": 2, "authentications": 1}
    with psycopg.connect(world.url) as conn:
        assert conn.execute("select body from messages where id = %s", (msg.json()["id"],)).fetchone()[0] == "short"


def test_an_unknown_token_is_refused_and_its_connection_goes_back(http, monkeypatch):
    with counted(http, monkeypatch) as counts:
        for _ in range(3):
            r = http.get("/v1/agent-sessions", headers=bearer("bks_not-a-token"))
            assert r.status_code == 401, r.text
    assert counts == {"checkouts": 3, "returns": 3, "authentications": 3}


def test_a_token_is_touched_at_most_once_a_minute(world, http):
    world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    reader = world.token("reader", WS, actor="U_A", agents=["concierge"])

    def last_used():
        with psycopg.connect(world.url) as conn:
            return conn.execute("select last_used_at from api_tokens order by id desc limit 1").fetchone()[0]

    assert last_used() is None
    assert http.get("/v1/agent-sessions", headers=bearer(reader)).status_code == 200
    first = last_used()
    assert first is not None
    assert http.get("/v1/agent-sessions", headers=bearer(reader)).status_code == 200
    assert last_used() == first  # within the minute: not written again
    with psycopg.connect(world.url) as conn:
        conn.execute("update api_tokens set last_used_at = last_used_at - interval '2 minutes'")
    assert http.get("/v1/agent-sessions", headers=bearer(reader)).status_code == 200
    assert last_used() >= first


def test_a_slow_upload_holds_no_connection(world, http, monkeypatch):
    world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    h = bearer(world.token("runtime", WS, agents=["concierge"]))

    async def scenario(counts):
        arrived = asyncio.Event()
        go_on = asyncio.Event()

        async def body():
            yield b'{"turn_id": 1, '
            arrived.set()
            await go_on.wait()
            yield b'"query": "x"}'

        transport = httpx.ASGITransport(app=http.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            request = asyncio.create_task(client.post("/v1/tools/search_history", content=body(),
                                                      headers={**h, "content-type": "application/json"}))
            await arrived.wait()
            for _ in range(20):
                await asyncio.sleep(0.01)
            during = dict(counts)
            go_on.set()
            response = await request
        return during, response

    with counted(http, monkeypatch) as counts:
        during, response = asyncio.run(scenario(counts))
    assert during["authentications"] == 1, "the token was not checked before the body"
    assert during["checkouts"] == during["returns"], "a connection was held while the body arrived"
    assert response.status_code == 404, response.text  # no turn 1: the request did run, afterwards
    assert counts["checkouts"] == counts["returns"] == 2


def test_a_request_rolled_back_by_a_deadlock_runs_again(world, http, monkeypatch):
    """PostgreSQL rolls one of two deadlocked transactions back; the request runs again from a new
    transaction instead of answering 503 (issue 20), and what it writes is stored once."""
    from backscroll import ingest as writes

    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    ingest = bearer(world.token("ingest", WS))
    real, attempts = writes.append_message, []

    def deadlocking_twice(conn, *args, **kwargs):
        attempts.append(1)
        stored = real(conn, *args, **kwargs)  # written, then lost with the rolled-back transaction
        if len(attempts) <= 2:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return stored

    monkeypatch.setattr(writes, "append_message", deadlocking_twice)
    r = http.post(f"/v1/conversations/{conv}/messages", headers=ingest,
                  json={"role": "user", "body": "once", "external_id": "m-1"})
    assert r.status_code == 201, r.text
    assert len(attempts) == 3
    with psycopg.connect(world.url) as conn:
        assert conn.execute("select count(*) from messages where conversation_id = %s", (conv,)).fetchone()[0] == 1


def test_a_request_that_keeps_meeting_conflicts_is_a_503_that_stored_nothing(world, http, monkeypatch):
    from backscroll import ingest as writes

    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    ingest = bearer(world.token("ingest", WS))
    real, attempts = writes.append_message, []

    def always(conn, *args, **kwargs):
        attempts.append(1)
        real(conn, *args, **kwargs)
        raise psycopg.errors.SerializationFailure("could not serialize access")

    monkeypatch.setattr(writes, "append_message", always)
    r = http.post(f"/v1/conversations/{conv}/messages", headers=ingest,
                  json={"role": "user", "body": "never", "external_id": "m-1"})
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "conflict_retry_exhausted"
    assert len(attempts) == 1 + http.app.state.service.settings.api.request_retries
    with psycopg.connect(world.url) as conn:
        assert conn.execute("select count(*) from messages where conversation_id = %s", (conv,)).fetchone()[0] == 0


def test_api_queries_start_no_parallel_workers_unless_configured(db_url, http):
    with http.app.state.service.pool.connection() as conn:
        assert conn.execute("show max_parallel_workers_per_gather").fetchone()["max_parallel_workers_per_gather"] == "0"
    from tests.world import client

    with client(db_url, database={"query_parallel_workers": 2}) as other:
        with other.app.state.service.pool.connection() as conn:
            assert conn.execute("show max_parallel_workers_per_gather").fetchone()["max_parallel_workers_per_gather"] == "2"
