"""The demo corpus (`backscroll demo`, `make run`): it loads once, and what it prints really works.

The printed "what to try next" commands are rendered from `examples`; these tests replay
the same list against the API, so a printed command that finds nothing fails here.
"""

from __future__ import annotations

import os
import stat

import psycopg
import pytest

from backscroll.demo.corpus import build_corpus
from backscroll.demo.data import GH_SLACK, WORKSPACES
from backscroll.demo.guide import (Example, INGEST_CONVERSATION, INGEST_MESSAGE, INGEST_QUERY, curl, examples,
                                   what_to_try)
from backscroll.demo.loader import TOKENS, create_demo_tokens, load_demo, write_tokens_env
from backscroll.demo.runner import tokens_path
from backscroll.store.db import connect
from tests.conftest import TEMPLATE
from tests.world import bearer, client, settings_for

TABLES = ("workspaces", "agents", "connectors", "actors", "conversations", "messages", "message_search")


def counts(conn) -> dict[str, int]:
    return {t: conn.execute(f"select count(*) as n from {t}").fetchone()["n"] for t in TABLES}


@pytest.fixture(scope="module")
def loaded(pg_url, template_url):
    """One database for this module, made like `db_url` makes one per test: loading the corpus takes
    a couple of seconds, and every test here only adds to it (tokens, one ingested conversation)."""
    name = f"bs_test_demo_{os.getpid()}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"create database {name} template {TEMPLATE} strategy file_copy")
    url = psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    conn = connect(url, autocommit=True)
    info = load_demo(conn)
    yield conn, info, url
    conn.close()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {name} with (force)")


def test_corpus_is_deterministic_and_sized_for_a_demo():
    first, second = build_corpus(), build_corpus()
    assert [(ws, line.model_dump(exclude={"created_at"}, mode="json")["title"]) for ws, line in first] == \
           [(ws, line.model_dump(exclude={"created_at"}, mode="json")["title"]) for ws, line in second]
    bodies = lambda corpus: [m.body for _, line in corpus for m in line.messages]  # noqa: E731
    assert bodies(first) == bodies(second)
    assert 300 <= len(first) <= 700
    assert 2000 <= len(bodies(first)) <= 6000
    assert len({line.external_id for _, line in first}) == len(first)
    assert {ws for ws, _ in first} == set(WORKSPACES)


def test_load_is_idempotent(loaded):
    conn, info, url = loaded
    assert info.loaded and info.conversations_created == info.conversations
    assert info.messages_created == info.messages
    assert info.conversations >= 300 and info.messages >= 2000
    before = counts(conn)

    again = load_demo(conn)  # a second `make run`: the corpus is found and reused
    assert not again.loaded
    assert (again.conversations_created, again.messages_created) == (0, 0)
    assert again.ids == info.ids
    assert counts(conn) == before

    forced = load_demo(conn, force=True)  # the real ingest path again: upserts create nothing
    assert forced.loaded
    assert (forced.conversations_created, forced.messages_created) == (0, 0)
    assert counts(conn) == before


def test_corpus_shape(loaded):
    conn, info, url = loaded
    # Two different people named "Sam Taylor" on the hotel's Slack.
    sams = conn.execute("select external_id from actors where workspace_id = %s and namespace = %s "
                        "and display_name = 'Sam Taylor'",
                        (info.workspaces["grand-hotel"], GH_SLACK)).fetchall()
    assert len(sams) == 2
    kinds = {r["k"]: r["n"] for r in conn.execute(
        "select audience_kind::text || ':' || least(cardinality(audience_readers), 2) as k, count(*) as n "
        "from conversations group by 1")}
    assert kinds.get("members:1", 0) > 100, kinds   # DMs and guest chats
    assert kinds.get("members:2", 0) > 10, kinds    # private rooms
    assert kinds.get("workspace:0", 0) > 10, kinds  # channels
    roles = {r["role"]: r["n"] for r in conn.execute("select role::text, count(*) as n from messages group by 1")}
    assert roles.get("tool", 0) > 20 and roles.get("summary", 0) > 10, roles
    streaming = conn.execute("select m.id from messages m where m.state = 'streaming'").fetchall()
    assert len(streaming) == 2
    assert conn.execute("select count(*) as n from message_search where message_id = any(%s)",
                        ([r["id"] for r in streaming],)).fetchone()["n"] == 0
    # Spread over the last ~90 days, some threads recently re-activated.
    span = conn.execute("select extract(day from max(last_active_at) - min(created_at)) as days, "
                        "count(*) filter (where created_at < now() - interval '20 days' "
                        "and last_active_at > now() - interval '4 days') as revived from conversations").fetchone()
    assert span["days"] >= 60 and span["revived"] >= 5, span


def test_demo_tokens_replace_the_previous_ones(loaded, tmp_path):
    conn, _, url = loaded
    old = create_demo_tokens(conn)
    new = create_demo_tokens(conn)
    assert set(old) == set(new) == {t.env for t in TOKENS}
    active = conn.execute("select count(*) as n from api_tokens where name like 'demo-%%' and revoked_at is null"
                          ).fetchone()["n"]
    assert active == len(TOKENS)
    with client(url) as http:
        assert http.get("/v1/whoami", headers=bearer(old["BACKSCROLL_READER_TOKEN"])).status_code == 401
        me = http.get("/v1/whoami", headers=bearer(new["BACKSCROLL_READER_TOKEN"])).json()
        assert me["kind"] == "reader" and len(me["agent_ids"]) == 1  # narrowed to the concierge

    path = write_tokens_env(tmp_path / "demo-tokens.env", "http://127.0.0.1:8080", new)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert f"export BACKSCROLL_READER_TOKEN={new['BACKSCROLL_READER_TOKEN']}" in text
    assert "export BACKSCROLL_API_URL=http://127.0.0.1:8080" in text


def _check(http, tokens, info, ex: Example):
    r = http.get(ex.path, params=list(ex.params), headers=bearer(tokens[ex.token]))
    label = f"{ex.what!r} ({ex.path} {ex.params})"
    if ex.expect == "missing":
        assert r.status_code == 404, label
        return
    assert r.status_code == 200, f"{label}: {r.text}"
    body = r.json()
    if ex.expect == "found":
        assert body["id"] == info.ids[ex.finds], label
        return
    ids = [s["id"] for s in body["sessions"]]
    if ex.expect == "semantic":
        # Only semantic search finds it: lexically it must not, with vectors it must come first.
        if body["mode"] == "lexical":
            assert info.ids[ex.finds] not in ids, f"{label}: found lexically, so it shows nothing semantic"
        else:
            assert body["mode"] == "hybrid", f"{label}: {body['mode']} {body['degradation']}"
            assert ids and ids[0] == info.ids[ex.finds], f"{label} does not find {ex.finds} first: {body}"
            assert body["sessions"][0]["match"]["on"] == ["semantic"], label
        return
    if ex.expect == "none":
        assert body["sessions"] == [] and body["next"] is None, label
        return
    assert ids, f"{label} found nothing"
    if ex.expect == "excerpt":
        for s in body["sessions"]:
            if "content" in s["match"]["on"]:
                assert s["match"]["excerpt"] and s["match"]["highlights"], label
        assert any("content" in s["match"]["on"] for s in body["sessions"]), label
    if ex.finds:
        assert info.ids[ex.finds] in ids, f"{label} does not find {ex.finds}: {body}"
    if ex.avoids:
        assert info.ids[ex.avoids] not in ids, f"{label} finds {ex.avoids}"


def test_printed_examples_work(loaded):
    conn, info, url = loaded
    tokens = create_demo_tokens(conn)
    printed = what_to_try(info, "http://127.0.0.1:8080", tokens, tokens_path(settings_for(url)))
    with client(url) as http:
        for ex in examples(info):
            assert curl(ex) in printed
            _check(http, tokens, info, ex)


def test_what_the_examples_show(loaded):
    """The examples' claims, checked where a weaker assertion would let a regression through."""
    conn, info, url = loaded
    tokens = create_demo_tokens(conn)
    alice, bob = bearer(tokens["BACKSCROLL_READER_TOKEN"]), bearer(tokens["BACKSCROLL_READER_ALL_TOKEN"])
    with client(url) as http:
        def search(headers, **params):
            r = http.get("/v1/agent-sessions", params=params, headers=headers)
            assert r.status_code == 200, r.text
            return r.json()

        # The excerpt highlights the word that was searched.
        hit = next(s for s in search(alice, q="rose")["sessions"] if s["id"] == info.ids["rose_room"])
        start, end = hit["match"]["highlights"][0]
        assert hit["match"]["excerpt"][start:end].lower() == "rose"
        # Exclusion works per message: no excerpt of `booking -rose` mentions the Rose Room.
        for s in search(alice, q="booking -rose", limit=50)["sessions"]:
            assert "rose" not in s["match"].get("excerpt", "").lower()
        # Alice's list: the concierge's conversations and her own; never Bob's DM with the events agent.
        seen, cursor = [], None
        while True:
            page = search(alice, limit=100, **({"before": cursor} if cursor else {}))
            seen += page["sessions"]
            cursor = page["next"]
            if cursor is None:
                break
        agents = {s["agent"]["slug"] for s in seen}
        assert agents == {"concierge", "events"}
        assert all(s["agent"]["slug"] == "concierge" or s["creator"]["external_id"] == "U01ALICE" for s in seen)
        assert info.ids["surprise"] not in {s["id"] for s in seen}
        assert info.ids["alice_wedding"] in {s["id"] for s in seen}
        assert len(seen) == len({s["id"] for s in seen})
        # Bob reads every agent: more than Alice, the surprise included; the streaming reply is still unfindable.
        assert search(bob, q="surprise party")["sessions"][0]["id"] == info.ids["surprise"]
        assert search(bob, q="funicular")["sessions"] == []
        assert search(bob, q="shuttle")["sessions"] == []
        # The incident id is matched as a phrase, not as every INC-* id.
        acme = bearer(tokens["BACKSCROLL_ACME_READER_TOKEN"])
        inc = search(acme, q="INC-482913", limit=50)["sessions"]
        assert inc and all("482913" in (s["title"] + s["match"].get("excerpt", "")) for s in inc)
        assert search(acme, q="INC")["sessions"], "other incidents exist, so the phrase match is what narrows"
        # Workspaces do not mix: Alice finds nothing of Acme's.
        assert search(alice, q="INC-482913")["sessions"] == []


def test_printed_ingest_example(loaded):
    conn, info, url = loaded
    tokens = create_demo_tokens(conn)
    ingest_h = bearer(tokens["BACKSCROLL_INGEST_TOKEN"])
    with client(url) as http:
        before = http.get("/v1/agent-sessions", params={"q": INGEST_QUERY},
                          headers=bearer(tokens["BACKSCROLL_READER_TOKEN"])).json()
        assert before["sessions"] == []
        r = http.post("/v1/conversations", json=INGEST_CONVERSATION, headers=ingest_h)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        r = http.post(f"/v1/conversations/{cid}/messages", json=INGEST_MESSAGE, headers=ingest_h)
        assert r.status_code == 201, r.text
        found = http.get("/v1/agent-sessions", params={"q": INGEST_QUERY},
                         headers=bearer(tokens["BACKSCROLL_READER_TOKEN"])).json()
        assert [s["id"] for s in found["sessions"]] == [cid]
        assert found["sessions"][0]["match"]["excerpt"]
        # The paging example: the second page continues where the first stopped.
        first = http.get("/v1/agent-sessions", params={"limit": 5},
                         headers=bearer(tokens["BACKSCROLL_READER_TOKEN"])).json()
        assert first["sessions"][0]["id"] == cid  # the newest activity
        second = http.get("/v1/agent-sessions", params={"limit": 5, "before": first["next"]},
                          headers=bearer(tokens["BACKSCROLL_READER_TOKEN"])).json()
        assert len(second["sessions"]) == 5
        assert not {s["id"] for s in first["sessions"]} & {s["id"] for s in second["sessions"]}
        metrics = http.get("/metrics", headers=bearer(tokens["BACKSCROLL_ADMIN_TOKEN"]))
        assert metrics.status_code == 200 and "backscroll_http_requests_total" in metrics.text
