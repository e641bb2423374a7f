"""Session search over HTTP: the envelope, paging, limits, matches, and narrowing."""

from __future__ import annotations

import pytest

from tests.api.support import assert_error, assert_no_counts
from tests.world import bearer, client

SESSION_KEYS = {"id", "title", "agent", "connector", "external_id", "audience", "creator", "created_at",
                "last_active_at"}


def _page(http, token, **params) -> dict:
    r = http.get("/v1/agent-sessions", params=params, headers=bearer(token))
    assert r.status_code == 200, r.text
    body = r.json()
    # A search also says how it ranked: lexical, hybrid or degraded (and why).
    assert set(body) == ({"sessions", "next", "mode", "degradation", "ranking"} if params.get("q") else {"sessions", "next"}), body
    assert body["next"] is None or (isinstance(body["next"], str) and body["next"])
    for session in body["sessions"]:
        assert SESSION_KEYS <= set(session), session
    assert_no_counts(body)
    return body


def _ids(http, token, **params) -> list[int]:
    return [s["id"] for s in _page(http, token, **params)["sessions"]]


def _all_pages(http, token, **params) -> list[int]:
    seen, before, pages = [], None, 0
    while True:
        body = _page(http, token, **params, **({"before": before} if before else {}))
        seen += [s["id"] for s in body["sessions"]]
        pages += 1
        assert pages < 500, "paging does not end"
        if body["next"] is None:
            return seen
        assert body["sessions"], "a page with a next cursor must not be empty"
        before = body["next"]


# --- the recent list -------------------------------------------------------------------------

def test_recent_list_pages_cover_everything_once_in_order(db_url, world):
    expected = []
    for i in range(23):
        # Many share a creation minute, so id must break the ties; some have later activity.
        conv = world.conversation("acme", "concierge" if i % 2 else "planner", f"t{i}", f"Thread {i}",
                                  creator="alice", created=i // 4)
        if i % 5 == 0:
            world.message("acme", conv, f"message {i}", minute=30 + i)
        expected.append(conv)
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        everything = _page(http, token, limit=100)
        assert everything["next"] is None
        order = [s["id"] for s in everything["sessions"]]
        keys = [(s["last_active_at"], s["id"]) for s in everything["sessions"]]
        for limit in (1, 4, 7):
            assert _all_pages(http, token, limit=limit) == order
    assert sorted(order) == sorted(expected)
    assert keys == sorted(keys, reverse=True), "newest activity first, then highest id"


def test_page_limits_default_and_clamps(db_url, world):
    for i in range(105):
        world.conversation("acme", "concierge", f"t{i}", f"Thread {i}", creator="alice", created=i)
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        default = _page(http, token)
        assert len(default["sessions"]) == 20 and default["next"]
        for huge in (1_000_000_000, 101, 10**30):
            big = _page(http, token, limit=huge)
            assert len(big["sessions"]) == 100 and big["next"], huge
        assert len(_page(http, token, limit=100)["sessions"]) == 100
        assert len(_page(http, token, limit=37)["sessions"]) == 37
        for tiny in (0, -1, -1_000_000):
            small = _page(http, token, limit=tiny)
            assert len(small["sessions"]) == 1 and small["next"], tiny
        # The same clamps apply to a search.
        assert len(_page(http, token, q="thread")["sessions"]) == 20
        assert len(_page(http, token, q="thread", limit=1_000_000_000)["sessions"]) == 100
        assert len(_page(http, token, q="thread", limit=0)["sessions"]) == 1


# --- search: title and content hits ------------------------------------------------------------

def test_title_hit_and_content_hit(db_url, world):
    titled = world.conversation("acme", "concierge", "t1", "Rose Room booking", creator="alice", created=1)
    world.message("acme", titled, "nothing to see", minute=2)
    spoken = world.conversation("acme", "concierge", "t2", "Friday dinner", creator="alice", created=3)
    msg = world.message("acme", spoken, "Café Übersee 🌹 said the rose garden is free but the ROSE room is not",
                        minute=4, role="assistant")
    world.conversation("acme", "concierge", "t3", "Unrelated", creator="alice", created=5)
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        body = _page(http, token, q="rose")
    sessions = body["sessions"]
    assert [s["id"] for s in sessions] == [titled, spoken], "title hits rank above content-only hits"
    title_match = sessions[0]["match"]
    assert title_match["on"] == ["title"]
    assert "message_id" not in title_match and "excerpt" not in title_match
    content_match = sessions[1]["match"]
    assert content_match["on"] == ["content"]
    assert content_match["message_id"] == msg
    excerpt = content_match["excerpt"]
    assert "rose garden" in excerpt
    assert len(content_match["highlights"]) == 2
    for start, end in content_match["highlights"]:
        assert 0 <= start < end <= len(excerpt)
        assert excerpt[start:end].lower() == "rose", (excerpt, start, end)


def test_title_and_content_together_and_phrase_and_exclusion(db_url, world):
    both = world.conversation("acme", "concierge", "t1", "Acme migration", creator="alice", created=1)
    world.message("acme", both, "the migration of the billing database", minute=2)
    phrase = world.conversation("acme", "concierge", "t2", "Notes", creator="alice", created=3)
    world.message("acme", phrase, "we discussed the billing database move", minute=4)
    scattered = world.conversation("acme", "concierge", "t3", "Other notes", creator="alice", created=5)
    world.message("acme", scattered, "the database is fine; billing is separate", minute=6)
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        hit = _page(http, token, q="migration")["sessions"]
        assert [s["id"] for s in hit] == [both]
        assert hit[0]["match"]["on"] == ["title", "content"]
        assert set(_ids(http, token, q="billing database")) == {both, phrase, scattered}
        assert set(_ids(http, token, q='"billing database"')) == {both, phrase}
        assert set(_ids(http, token, q="billing -separate")) == {both, phrase}


def test_like_wildcards_typed_by_a_person_are_literal(db_url, world):
    pct = world.conversation("acme", "concierge", "t1", "50% off the suite", creator="alice", created=1)
    world.conversation("acme", "concierge", "t2", "500 off the suite", creator="alice", created=2)
    under = world.conversation("acme", "concierge", "t3", "file_name fix", creator="alice", created=3)
    world.conversation("acme", "concierge", "t4", "filename fix", creator="alice", created=4)
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        assert _ids(http, token, q="0%") == [pct]
        assert _ids(http, token, q="e_n") == [under]


def test_highlight_markers_in_a_body_cannot_forge_highlights(db_url, world):
    conv = world.conversation("acme", "concierge", "t1", "x", creator="alice")
    world.message("acme", conv, "\ue000fake\ue001 words then the rose appears", minute=2)
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        match = _page(http, token, q="rose")["sessions"][0]["match"]
    assert "\ue000" not in match["excerpt"] and "\ue001" not in match["excerpt"]
    assert [match["excerpt"][a:b] for a, b in match["highlights"]] == ["rose"]


def test_search_pages_cover_every_hit_once(db_url, world):
    expected = set()
    for i in range(17):
        title = "rose room" if i % 3 == 0 else f"thread {i}"
        conv = world.conversation("acme", "concierge", f"t{i}", title, creator="alice", created=i)
        # Identical bodies give identical scores: ties must be broken by id across pages.
        world.message("acme", conv, "rose" if i % 2 else "rose rose and a rose", minute=40 + i)
        expected.add(conv)
    world.conversation("acme", "concierge", "miss", "nothing", creator="alice")
    token = world.token("reader", "acme", actor="alice")
    with client(db_url) as http:
        one_page = _ids(http, token, q="rose", limit=100)
        for limit in (1, 2, 5):
            assert _all_pages(http, token, q="rose", limit=limit) == one_page
    assert set(one_page) == expected and len(one_page) == len(expected)


# --- reading one session --------------------------------------------------------------------

def test_get_one_visible_invisible_and_absent_look_the_same(db_url, world):
    mine = world.conversation("acme", "concierge", "t1", "Mine", creator="alice")
    theirs = world.conversation("acme", "planner", "t2", "Carol's", creator="carol")
    alice = world.token("reader", "acme", actor="alice", agents=["concierge"])
    carol = world.token("reader", "acme", actor="carol", agents=["planner"])
    with client(db_url) as http:
        ok = http.get(f"/v1/agent-sessions/{mine}", headers=bearer(alice))
        assert ok.status_code == 200, ok.text
        assert ok.json()["id"] == mine and ok.json()["title"] == "Mine"
        assert SESSION_KEYS <= set(ok.json())
        assert_no_counts(ok.json())
        invisible = http.get(f"/v1/agent-sessions/{theirs}", headers=bearer(alice))
        assert_error(invisible, 404, "not_found")
        assert http.get(f"/v1/agent-sessions/{theirs}", headers=bearer(carol)).status_code == 200
        # Delete it, and ask as the one who could see it: the very same answer.
        world.conn.execute("delete from conversations where id = %s", (theirs,))
        absent = http.get(f"/v1/agent-sessions/{theirs}", headers=bearer(carol))
        assert_error(absent, 404, "not_found")
        never = http.get("/v1/agent-sessions/987654321", headers=bearer(alice))
        assert_error(never, 404, "not_found")
    assert invisible.content == absent.content
    assert dict(invisible.headers) == dict(absent.headers)


# --- narrowing --------------------------------------------------------------------------------

@pytest.fixture
def narrowing(world):
    """Bob's token is scoped to the concierge agent. Alice talks to the planner; so does Bob."""
    w = world
    ids = {
        "alice_concierge": w.conversation("acme", "concierge", "t1", "Rose Room booking", creator="alice", created=1),
        "alice_planner": w.conversation("acme", "planner", "t2", "Rose garden plan", creator="alice", created=2),
        "bob_planner": w.conversation("acme", "planner", "t3", "Rose tour", creator="bob", created=3),
        "carol_concierge": w.conversation("acme", "concierge", "t4", "Lunch", creator="carol", created=4),
        "other_workspace": w.conversation("other", "concierge", "t5", "Rose elsewhere", creator="bob", created=5),
    }
    w.message("acme", ids["alice_concierge"], "dinner in the rose room", minute=10)
    w.message("acme", ids["alice_planner"], "the secret orchid garden plan", minute=11)
    w.message("acme", ids["bob_planner"], "bob asks about the orchid tour", minute=12)
    w.message("acme", ids["carol_concierge"], "carol wants an orchid on the table", minute=13)
    w.message("other", ids["other_workspace"], "orchid elsewhere", minute=14)
    w.conversation("acme", "archivist", "t6", "Rose archive", creator="alice", created=6)
    bob = w.token("reader", "acme", actor="bob", agents=["concierge"])
    return ids, bob


def test_narrowing_in_list_searches_and_get(db_url, narrowing):
    ids, bob = narrowing
    visible = {ids["alice_concierge"], ids["bob_planner"], ids["carol_concierge"]}
    with client(db_url) as http:
        assert set(_all_pages(http, bob, limit=2)) == visible
        # Title search: Alice's planner conversation and the other workspace's are not found.
        titled = _page(http, bob, q="rose")["sessions"]
        assert {s["id"] for s in titled} == {ids["alice_concierge"], ids["bob_planner"]}
        # Content search: "orchid" is said in four conversations; Bob may see two of them.
        assert set(_ids(http, bob, q="orchid")) == {ids["bob_planner"], ids["carol_concierge"]}
        assert _ids(http, bob, q="secret") == []
        assert _ids(http, bob, q="garden") == []
        for name, conv in ids.items():
            r = http.get(f"/v1/agent-sessions/{conv}", headers=bearer(bob))
            if conv in visible:
                assert r.status_code == 200, (name, r.text)
            else:
                assert_error(r, 404, "not_found")
        # The agent filter narrows further and never widens.
        assert set(_all_pages(http, bob, agent="planner")) == {ids["bob_planner"]}
        assert set(_all_pages(http, bob, agent="concierge")) == {ids["alice_concierge"], ids["carol_concierge"]}
        assert _ids(http, bob, agent="archivist") == []
        assert _ids(http, bob, agent="no-such-agent") == []
        assert set(_ids(http, bob, q="orchid", agent="planner")) == {ids["bob_planner"]}
        assert set(_ids(http, bob, q="rose", agent="concierge")) == {ids["alice_concierge"]}


def test_reader_scoped_to_no_agent_sees_only_their_own(db_url, world, narrowing):
    ids, _ = narrowing
    own_only = world.token("reader", "acme", actor="bob", agents=[])
    with client(db_url) as http:
        assert _all_pages(http, own_only) == [ids["bob_planner"]]
        assert _ids(http, own_only, q="orchid") == [ids["bob_planner"]]
        assert _ids(http, own_only, q="rose") == [ids["bob_planner"]]
        assert_error(http.get(f"/v1/agent-sessions/{ids['carol_concierge']}", headers=bearer(own_only)), 404)


def test_unscoped_reader_sees_the_workspace_and_nothing_else(db_url, world, narrowing):
    ids, _ = narrowing
    dave = world.token("reader", "acme", actor="dave")
    with client(db_url) as http:
        listed = set(_all_pages(http, dave, limit=3))
        assert ids["other_workspace"] not in listed
        assert {ids["alice_planner"], ids["carol_concierge"]} <= listed
        assert ids["other_workspace"] not in _ids(http, dave, q="orchid")
        assert_error(http.get(f"/v1/agent-sessions/{ids['other_workspace']}", headers=bearer(dave)), 404)


def test_workspace_bounds_hold_even_when_rows_disagree(db_url, world):
    """Defence in depth: a conversation of workspace A whose creator row belongs to workspace B's reader
    (which no ingestion path makes) is still not B's to read."""
    conv = world.conversation("alpha", "concierge", "t1", "Alpha secret", creator="alice")
    world.message("alpha", conv, "alpha secret words", minute=2)
    world.conversation("beta", "concierge", "t2", "Beta", creator="bob")
    bob = world.token("reader", "beta", actor="bob")
    bob_actor = world.actor_id("beta", "web:demo", "bob")
    world.conn.execute("update conversations set creator_actor_id = %s where id = %s", (bob_actor, conv))
    with client(db_url) as http:
        assert_error(http.get(f"/v1/agent-sessions/{conv}", headers=bearer(bob)), 404, "not_found")
        assert conv not in _all_pages(http, bob)
        assert _ids(http, bob, q="alpha") == []
        assert _ids(http, bob, q="secret") == []


def test_composed_and_decomposed_spellings_find_each_other(world, http):
    """`réservation` typed composed (U+00E9) or decomposed (e + U+0301), in the message or in the
    query, is one word (issue 20); case does not matter either."""
    from tests.world import bearer

    composed, decomposed = "r\u00e9servation", "re\u0301servation"
    nfd = world.conversation("acme", "concierge", "c-nfd", "Hotel booking", creator="U_A")
    nfc = world.conversation("acme", "concierge", "c-nfc", "Another booking", creator="U_A")
    ingest = bearer(world.token("ingest", "acme"))
    for conv, word in ((nfd, decomposed), (nfc, composed)):
        r = http.post(f"/v1/conversations/{conv}/messages", headers=ingest,
                      json={"role": "user", "body": f"the {word} for Friday"})
        assert r.status_code == 201, r.text
    streamed = world.conversation("acme", "concierge", "c-stream", "Streamed", creator="U_A")
    r = http.post(f"/v1/conversations/{streamed}/messages", headers=ingest,
                  json={"role": "assistant", "body": "your re", "state": "streaming"})
    assert r.status_code == 201, r.text
    # The accent arrives in the chunk after its letter.
    r = http.patch(f"/v1/messages/{r.json()['id']}", headers=ingest,
                   json={"append": "\u0301servation is booked", "state": "finished"})
    assert r.status_code == 200, r.text
    reader = bearer(world.token("reader", "acme", actor="U_A", agents=["concierge"]))
    for query in (composed, decomposed, composed.upper(), "R\u00c9SERVATION"):
        r = http.get("/v1/agent-sessions", params={"q": query}, headers=reader)
        assert r.status_code == 200, r.text
        assert {s["id"] for s in r.json()["sessions"]} == {nfd, nfc, streamed}, query
