"""The sessions sidebar in a real browser: sign-in, paging by scrolling, server search, deep links,
narrowing, and markup that must stay text."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from backscroll.access.auth import digest, revoke_token
from tests.browser.support import item_ids, scroll_sidebar_to_end, search, settled, sign_in


def _recent_order(world) -> list[int]:
    rows = world.conn.execute("select id from conversations order by last_active_at desc, id desc").fetchall()
    return [r["id"] for r in rows]


def _fillers(world, n: int, *, start: float = 1000, agent: str = "concierge", creator: str = "alice") -> list[int]:
    """n ordinary conversations, newer than anything created at minute < start."""
    ids = []
    for i in range(n):
        conv = world.conversation("acme", agent, f"filler-{i}", f"Filler conversation {i}", creator=creator,
                                  created=start + i)
        world.message("acme", conv, f"An ordinary message number {i}", minute=start + i)
        ids.append(conv)
    return ids


def test_sign_in_keeps_the_token_in_this_tab_only(world, server, page, shot):
    conv = world.conversation("acme", "concierge", "t1", "Rose Room dinner", creator="alice")
    world.message("acme", conv, "Dinner for six in the Rose Room on Friday")
    reader = world.token("reader", "acme", actor="alice")
    ingest = world.token("ingest", "acme")

    page.goto(server + "/")
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    shot(page, "signin")

    page.fill("#token", "bks_reader_" + "Q" * 43)
    page.click("#signin-button")
    expect(page.locator("#signin-error")).to_contain_text("not accepted")
    page.fill("#token", ingest)
    page.click("#signin-button")
    expect(page.locator("#signin-error")).to_contain_text("ingest token")
    expect(page.locator("#app")).to_be_hidden()

    page.fill("#token", reader)
    page.click("#signin-button")
    expect(page.locator("#list li.item")).to_have_count(1)
    expect(page.locator("#list li.item .item-title")).to_have_text("Rose Room dinner")
    assert page.evaluate("sessionStorage.getItem('backscroll.readerToken')") == reader
    assert page.evaluate("localStorage.length") == 0
    assert reader not in page.url and page.context.cookies() == []
    shot(page, "signed-in")

    page.reload()  # the same tab keeps its session
    expect(page.locator("#list li.item")).to_have_count(1)

    # A token revoked while the page is open sends the person back to sign in, with a reason.
    row = world.conn.execute("select id from api_tokens where digest = %s", (digest(reader),)).fetchone()
    assert revoke_token(world.conn, row["id"])
    search_box = page.locator("#q")
    search_box.fill("rose")
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#signin-error")).to_contain_text("no longer accepts")
    assert page.evaluate("sessionStorage.getItem('backscroll.readerToken')") is None


def test_scrolling_loads_the_next_pages_until_there_are_no_more(world, server, page, shot):
    _fillers(world, 55)
    expected = _recent_order(world)
    token = world.token("reader", "acme", actor="alice")
    cursors: list[str | None] = []
    page.on("request", lambda r: "/v1/agent-sessions?" in r.url and cursors.append(
        dict(re.findall(r"[?&]([^=&]+)=([^&]*)", r.url)).get("before")))

    sign_in(page, server, token)
    expect(page.locator("#list li.item")).to_have_count(25)
    expect(page.locator("#list-state")).to_have_attribute("data-state", "more")
    assert cursors == [None], "the first screen reads one page, not everything"

    scroll_sidebar_to_end(page)
    expect(page.locator("#list li.item")).to_have_count(50)
    shot(page, "second-page")
    scroll_sidebar_to_end(page)
    expect(page.locator("#list li.item")).to_have_count(55)
    expect(page.locator("#list-state")).to_have_attribute("data-state", "end")
    expect(page.locator("#list-state")).to_have_text("No more conversations.")
    shot(page, "no-more")

    assert item_ids(page) == expected, "by last activity, each conversation once"
    assert len(cursors) == 3 and cursors[0] is None and all(cursors[1:]), cursors
    assert len(set(cursors)) == 3, "each page asked for with the previous page's cursor"
    scroll_sidebar_to_end(page)
    page.wait_for_timeout(300)
    assert len(cursors) == 3, "nothing more is asked for after the last page"

    # A search pages the same way, with the search's own cursor.
    search(page, "Filler conversation")
    expect(page.locator("#list li.item")).to_have_count(25)
    scroll_sidebar_to_end(page)
    expect(page.locator("#list li.item")).to_have_count(50)
    scroll_sidebar_to_end(page)
    expect(page.locator("#list li.item")).to_have_count(55)
    expect(page.locator("#list-state")).to_have_text("No more matches.")
    assert sorted(item_ids(page)) == sorted(expected)

    # Semantic search went away between two pages: the server refuses the old cursor, and the
    # way on is the first page again, not a retry of the same cursor.
    changed = {"error": {"code": "cursor_mode_changed", "message": "this cursor pages a search that used "
                         "semantic matches, which are unavailable now; search again from the first page"}}
    page.route(re.compile(r".*/v1/agent-sessions\?.*before=.*"), lambda route: route.fulfill(
        status=400, content_type="application/json", body=json.dumps(changed)))
    search(page, "Filler")
    scroll_sidebar_to_end(page)
    expect(page.locator("#list-state")).to_have_attribute("data-state", "error")
    expect(page.locator("#list-state button")).to_have_text("Search again")
    page.unroute(re.compile(r".*/v1/agent-sessions\?.*before=.*"))
    page.locator("#list-state button").click()
    settled(page)
    expect(page.locator("#list li.item")).to_have_count(25)


def test_search_asks_the_server_and_opens_the_hit(world, server, page, shot):
    old = world.conversation("acme", "concierge", "old", "Room change", creator="alice", created=1)
    world.message("acme", old, "Hello, is everything fine with room 412?", minute=1)
    hit = world.message("acme", old, "We sorted 🌹 out the 🌹 double booking for room 412 yesterday.",
                        role="assistant", minute=2)
    world.message("acme", old, "Thank you!", minute=3)
    rose = world.conversation("acme", "concierge", "rose", "Rose Room dinner", creator="alice", created=4)
    world.message("acme", rose, "A table for six, please.", minute=4)
    _fillers(world, 30)  # both are older than the first page
    token = world.token("reader", "acme", actor="alice")
    queries: list[str] = []
    page.on("request", lambda r: "/v1/agent-sessions?" in r.url and "q=" in r.url and queries.append(r.url))

    sign_in(page, server, token)
    assert old not in item_ids(page) and rose not in item_ids(page)

    page.click("#q")
    page.keyboard.type("double booking", delay=20)
    page.wait_for_function("() => document.getElementById('list-state').dataset.query === 'double booking'"
                           " && document.getElementById('list-state').dataset.state !== 'loading'")
    assert len(queries) <= 2, f"debounced: not one request per key: {queries}"
    assert item_ids(page) == [old]
    row = page.locator(f"#list li.item[data-id='{old}']")
    expect(row.locator(".reason")).to_have_text(["Content match"])
    # Marks come from the server's offsets, counted in code points: the emoji before the words
    # must not shift them.
    expect(row.locator(".excerpt mark")).to_have_text(["double", "booking"])
    expect(row.locator(".excerpt")).to_contain_text("🌹 double booking for room 412")
    shot(page, "search-content-hit")

    search(page, "Rose Room")
    expect(page.locator(f"#list li.item[data-id='{rose}'] .reason")).to_have_text(["Title match"])

    search(page, '"double booking"')  # a phrase in quotes
    assert item_ids(page) == [old]
    row.click()
    expect(page).to_have_url(f"{server}/c/{old}#m{hit}")
    expect(page.locator("#conv-title")).to_have_text("Room change")
    expect(page.locator("#messages li.message")).to_have_count(3)
    matched = page.locator("#messages li.message.matched")
    expect(matched).to_have_count(1)
    expect(matched).to_have_attribute("data-id", str(hit))
    expect(matched.locator(".body")).to_have_text("We sorted 🌹 out the 🌹 double booking for room 412 yesterday.")
    expect(page.locator(f"#list li.item[data-id='{old}']")).to_have_class(re.compile(r"\bselected\b"))
    shot(page, "transcript-of-hit")

    search(page, "nothing-like-this-anywhere")
    expect(page.locator("#list-state")).to_have_attribute("data-state", "empty")
    expect(page.locator("#list-state")).to_contain_text("Nothing you can see matches")
    shot(page, "search-empty")


def test_a_stale_search_is_cancelled_and_never_shown(world, server, page):
    conv = world.conversation("acme", "concierge", "d", "Dinner plans", creator="alice")
    world.message("acme", conv, "Dinner at eight")
    token = world.token("reader", "acme", actor="alice")
    held = []

    def hold(route):
        held.append(route)  # answered later, after a newer search has been typed

    sign_in(page, server, token)
    page.route(re.compile(r".*/v1/agent-sessions\?.*q=slow.*"), hold)
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.fill("#q", "slow")
    page.wait_for_function("() => document.getElementById('list-state').dataset.query === 'slow'")
    expect(page.locator("#list-state")).to_have_attribute("data-state", "loading")
    assert len(held) == 1
    search(page, "dinner")
    assert item_ids(page) == [conv]
    assert any("q=slow" in url for url in failed), "the stale request was aborted"
    stale = {"sessions": [{"id": 999, "title": "STALE ANSWER", "agent": {"slug": "x", "name": "X"},
                           "connector": "web:demo", "last_active_at": "2026-01-01T00:00:00+00:00"}], "next": None}
    try:
        held[0].fulfill(status=200, content_type="application/json", body=json.dumps(stale))
    except Exception:  # noqa: BLE001 - the page already aborted it, which is the point
        pass
    page.wait_for_timeout(200)
    expect(page.locator("#list")).not_to_contain_text("STALE ANSWER")
    assert item_ids(page) == [conv]


def test_deep_link_to_an_old_conversation_is_read_on_its_own(world, server, page, shot):
    old = world.conversation("acme", "concierge", "old", "Budget review from last year", creator="alice", created=1)
    world.message("acme", old, "Can we go over last year's budget?", minute=1)
    world.message("acme", old, "Here is the summary of the budget.", role="assistant", minute=2)
    _fillers(world, 30)
    token = world.token("reader", "acme", actor="alice")

    sign_in(page, server, token)
    page.goto(f"{server}/c/{old}")  # same tab: still signed in
    expect(page.locator("#conv-title")).to_have_text("Budget review from last year")
    expect(page.locator("#messages li.message .body")).to_have_text(
        ["Can we go over last year's budget?", "Here is the summary of the budget."])
    settled(page)
    assert old not in item_ids(page), "no loaded page reached it: it was read on its own"
    shot(page, "deep-link")

    # A deep link opened before signing in opens after it.
    page.evaluate("sessionStorage.clear()")
    sign_in(page, server, token, path=f"/c/{old}")
    expect(page.locator("#conv-title")).to_have_text("Budget review from last year")

    page.goto(f"{server}/c/987654321")
    expect(page.locator("#reader-state")).to_have_attribute("data-state", "not-found")
    expect(page.locator("#conv-title")).to_have_text("Not found")
    shot(page, "deep-link-not-found")

    page.goto(f"{server}/c/abc")
    expect(page.locator("#reader-state")).to_have_attribute("data-state", "bad")
    expect(page.locator("#reader-state")).to_contain_text("not a conversation link")

    # Anything but the server's 404 is an error to retry, never "not found".
    page.route(re.compile(rf".*/v1/agent-sessions/{old}$"), lambda route: route.fulfill(
        status=500, content_type="application/json",
        body=json.dumps({"error": {"code": "internal_error", "message": "the database is restarting"}})))
    page.goto(f"{server}/c/{old}")
    expect(page.locator("#reader-state")).to_have_attribute("data-state", "error")
    expect(page.locator("#reader-state")).to_contain_text("the database is restarting")
    expect(page.locator("#conv-title")).not_to_have_text("Not found")
    shot(page, "deep-link-error")
    page.unroute(re.compile(rf".*/v1/agent-sessions/{old}$"))
    page.route(re.compile(rf".*/v1/agent-sessions/{old}$"), lambda route: route.abort("connectionrefused"))
    page.locator("#reader-state button").click()
    expect(page.locator("#reader-state")).to_contain_text("could not be reached")
    page.unroute(re.compile(rf".*/v1/agent-sessions/{old}$"))
    page.locator("#reader-state button").click()
    expect(page.locator("#conv-title")).to_have_text("Budget review from last year")


def test_another_readers_dm_never_appears(world, server, page, shot):
    mine = world.conversation("acme", "concierge", "mine", "Lunch order", creator="alice")
    world.message("acme", mine, "Sandwiches for the team", minute=1)
    own_sre = world.conversation("acme", "sre", "alice-sre", "Disk alert", creator="alice")
    world.message("acme", own_sre, "The disk on db-2 is filling up", minute=2)
    dm = world.conversation("acme", "sre", "bob-dm", "Surprise party for Alice", creator="bob",
                            connector=("slack", "acme"))
    world.message("acme", dm, "Keep the surprise party a secret from Alice", speaker="bob", minute=3)
    # Alice reads the concierge's conversations, and her own with any agent; not Bob's DM with sre.
    token = world.token("reader", "acme", actor="alice", agents=["concierge"])

    sign_in(page, server, token)
    settled(page)
    assert sorted(item_ids(page)) == sorted([mine, own_sre])
    for q in ("surprise", "Surprise party", "secret"):
        search(page, q)
        assert dm not in item_ids(page), q
        expect(page.locator("#list")).not_to_contain_text("Surprise")
    expect(page.locator("#list-state")).to_have_attribute("data-state", "empty")
    shot(page, "narrowed-search")

    page.goto(f"{server}/c/{dm}")
    expect(page.locator("#reader-state")).to_have_attribute("data-state", "not-found")
    expect(page.locator("#messages li")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("secret from Alice")


def test_markup_in_titles_and_messages_renders_as_text(world, server, page, shot):
    title = "<img src=x onerror=\"window.__pwned='title'\">Plan <b>bold</b>"
    body = "<script>window.__pwned='body'</script> hello there <img src=x onerror=\"window.__pwned='img'\">"
    conv = world.conversation("acme", "concierge", "x", title, creator="alice")
    world.message("acme", conv, body)
    token = world.token("reader", "acme", actor="alice")

    sign_in(page, server, token)
    expect(page.locator("#list .item-title")).to_have_text(title)
    search(page, "hello")
    expect(page.locator("#list .excerpt mark")).to_have_text(["hello"])
    page.locator("#list a.item-link").first.click()
    expect(page.locator("#messages .body")).to_have_text(body)
    expect(page.locator("#conv-title")).to_have_text(title)
    shot(page, "markup-as-text")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#app img, #app b, #app script").count() == 0

    # PostgreSQL's headline drops tags from excerpts; a server that ever sends them raw (another
    # ranking, a semantic excerpt) must still get text, with the marks where the offsets say.
    excerpt = "<script>window.__pwned='excerpt'</script> hello <img src=x onerror=\"window.__pwned='x'\">"
    start = excerpt.index("hello")
    forged = {"sessions": [{"id": conv, "title": title, "agent": {"slug": "a", "name": "<i>agent</i>"},
                            "connector": "<u>web</u>", "last_active_at": "2026-01-01T00:00:00+00:00",
                            "match": {"on": ["content", "<b>kind</b>"], "message_id": 1, "excerpt": excerpt,
                                      "highlights": [[start, start + 5]]}}], "next": None}
    page.route(re.compile(r".*/v1/agent-sessions\?.*q=forged.*"), lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(forged)))
    search(page, "forged")
    expect(page.locator("#list .excerpt")).to_have_text(excerpt)
    expect(page.locator("#list .excerpt mark")).to_have_text(["hello"])
    expect(page.locator("#list .reason")).to_have_text(["Content match", "<b>kind</b> match"])
    expect(page.locator("#list .item-meta")).to_contain_text("<i>agent</i> · <u>web</u>")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#app img, #app b, #app i, #app u, #app script").count() == 0
    # The only script on the page is the page's own file.
    assert page.evaluate("Array.from(document.scripts).map(s => new URL(s.src).pathname)") == ["/static/app.js"]


def test_keyboard_moves_opens_and_clears(world, server, page):
    convs = [world.conversation("acme", "concierge", f"k{i}", f"Keyboard {i}", creator="alice", created=i)
             for i in range(5)]
    for i, conv in enumerate(convs):
        world.message("acme", conv, f"message {i}", minute=i)
    token = world.token("reader", "acme", actor="alice")
    sign_in(page, server, token)
    order = item_ids(page)
    assert order == list(reversed(convs))

    page.locator("body").click(position={"x": 900, "y": 400})
    page.keyboard.press("/")
    expect(page.locator("#q")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.locator(f"#list li[data-id='{order[0]}'] a")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.locator(f"#list li[data-id='{order[1]}'] a")).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{server}/c/{order[1]}")
    expect(page.locator("#conv-title")).to_have_text("Keyboard 3")

    page.keyboard.press("/")
    page.keyboard.type("Keyboard 2")
    page.wait_for_function("() => document.getElementById('list-state').dataset.query === 'Keyboard 2'"
                           " && document.getElementById('list-state').dataset.state !== 'loading'")
    assert item_ids(page)[0] == convs[2]
    page.keyboard.press("Escape")
    expect(page.locator("#q")).to_have_value("")
    page.wait_for_function("() => document.getElementById('list-state').dataset.query === ''"
                           " && document.getElementById('list-state').dataset.state !== 'loading'")
    assert item_ids(page) == order
    page.keyboard.press("Enter")  # from the empty search box: opens the first conversation
    expect(page).to_have_url(f"{server}/c/{order[0]}")


def test_empty_loading_error_and_degraded_states(world, server, page, shot):
    token = world.token("reader", "acme", actor="alice")
    sign_in(page, server, token)
    expect(page.locator("#list-state")).to_have_attribute("data-state", "empty")
    expect(page.locator("#list-state")).to_contain_text("No conversations yet")
    shot(page, "empty")

    conv = world.conversation("acme", "concierge", "s", "Statuses", creator="alice")
    world.message("acme", conv, "status report")
    held = []
    pattern = re.compile(r".*/v1/agent-sessions\?.*")
    page.route(pattern, lambda route: held.append(route))
    page.reload()
    expect(page.locator("#list-state")).to_have_attribute("data-state", "loading")
    expect(page.locator("#list-state")).to_contain_text("Loading conversations")
    shot(page, "loading")
    page.unroute(pattern)
    page.route(pattern, lambda route: route.fulfill(
        status=500, content_type="application/json",
        body=json.dumps({"error": {"code": "internal_error", "message": "the database is restarting"}})))
    page.reload()  # the held request dies with the page it belonged to
    expect(page.locator("#list-state")).to_have_attribute("data-state", "error")
    expect(page.locator("#list-state")).to_contain_text("the database is restarting")
    shot(page, "error")
    page.unroute(pattern)
    page.locator("#list-state button").click()
    expect(page.locator("#list li.item")).to_have_count(1)

    # A search whose semantic half could not run: word matches, and a calm note saying so.
    degraded = {
        "sessions": [{"id": conv, "title": "Statuses", "agent": {"slug": "concierge", "name": "Concierge"},
                      "connector": "web:demo", "last_active_at": "2026-01-01T00:00:00+00:00",
                      "match": {"on": ["content", "semantic"], "message_id": 1, "excerpt": "status report",
                                "highlights": [[0, 6]]}}],
        "next": None, "mode": "degraded", "degradation": {"category": "timeout"},
    }
    page.route(re.compile(r".*/v1/agent-sessions\?.*q=.*"), lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(degraded)))
    search(page, "status")
    expect(page.locator("#notice")).to_be_visible()
    expect(page.locator("#notice")).to_contain_text("Search by meaning is unavailable (it took too long)")
    expect(page.locator("#list .reason")).to_have_text(["Content match", "Semantic match"])
    expect(page.locator("#list .excerpt mark")).to_have_text(["status"])
    shot(page, "degraded")
    page.keyboard.press("Escape")
    expect(page.locator("#notice")).to_be_hidden()


@pytest.mark.parametrize("context", [{"width": 390, "height": 844}], indirect=True)
def test_narrow_screen_shows_the_list_or_the_conversation(world, server, page, shot):
    convs = [world.conversation("acme", "concierge", f"n{i}", f"Narrow {i}", creator="alice", created=i)
             for i in range(3)]
    for i, conv in enumerate(convs):
        world.message("acme", conv, "A long line of text that has to wrap on a phone screen " * 3, minute=i)
    token = world.token("reader", "acme", actor="alice")
    sign_in(page, server, token)
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator("#reader")).to_be_hidden()
    shot(page, "narrow-list")
    page.locator(f"#list li[data-id='{convs[0]}'] a").click()
    expect(page.locator("#reader")).to_be_visible()
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#conv-title")).to_have_text("Narrow 0")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "nothing wider than the screen"
    shot(page, "narrow-transcript")
    page.click("#back")
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page).to_have_url(f"{server}/")
