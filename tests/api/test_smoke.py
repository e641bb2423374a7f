from tests.world import bearer, client, open_world


def test_search_finds_content_with_excerpt(db_url):
    w = open_world(db_url)
    c = w.conversation("acme", "concierge", "t1", "Booking", creator="alice")
    w.message("acme", c, "We moved the dinner to the Rose Room on Friday", minute=2)
    tok = w.token("reader", "acme", actor="bob", agents=["concierge"])
    with client(db_url) as http:
        r = http.get("/v1/agent-sessions", params={"q": "rose"}, headers=bearer(tok))
    assert r.status_code == 200, r.text
    body = r.json()
    assert [s["id"] for s in body["sessions"]] == [c]
    match = body["sessions"][0]["match"]
    assert match["on"] == ["content"]
    start, end = match["highlights"][0]
    assert match["excerpt"][start:end] == "Rose"
