"""The sidebar's page and transcript endpoint over plain HTTP (no browser needed): the content
security policy, the page's own files, and the transcript's narrowing and paging."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib import resources

import pytest

from backscroll.web.routes import CSP
from tests.api.support import assert_error
from tests.world import bearer, client, open_world

STATIC = resources.files("backscroll.web") / "static"


@pytest.fixture
def world(db_url):
    w = open_world(db_url)
    yield w
    w.conn.close()


def _directives(policy: str) -> dict[str, list[str]]:
    out = {}
    for part in policy.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


@pytest.mark.parametrize("path", ["/", "/c/42", "/c/not-a-number", "/static/app.js", "/static/app.css"])
def test_page_responses_forbid_inline_script(db_url, path):
    with client(db_url) as http:
        r = http.get(path)
    assert r.status_code == 200, r.text
    policy = _directives(r.headers["content-security-policy"])
    assert policy["script-src"] == ["'self'"], policy
    assert policy["default-src"] == ["'none'"], policy
    assert policy["connect-src"] == ["'self'"], policy
    assert "'unsafe-inline'" not in r.headers["content-security-policy"]
    assert "'unsafe-eval'" not in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == CSP


def test_deep_links_get_the_same_page_whatever_the_id(db_url):
    with client(db_url) as http:
        pages = {http.get(p).content for p in ("/", "/c/1", "/c/999999", "/c/%3Cscript%3E")}
    assert len(pages) == 1, "a deep link's answer must not depend on what exists"


class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts: list[dict] = []
        self.inline: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.handlers += [f"{tag} {name}" for name in attrs if name.startswith("on")]
        if tag == "script":
            self.scripts.append(attrs)
            self._in_script = True

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline.append(data)


def test_the_page_has_no_inline_script_and_the_script_never_parses_server_html():
    page = _Scripts()
    page.feed((STATIC / "index.html").read_text())
    assert page.scripts == [{"src": "/static/app.js", "defer": None}]
    assert page.inline == [] and page.handlers == []
    # Comments may name what the code avoids; the code itself may not use it.
    script = re.sub(r"(^|\s)//.*$", "", (STATIC / "app.js").read_text(), flags=re.M)
    # Every server string goes through textContent or text nodes; these would parse it as HTML.
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "createContextualFragment", "srcdoc"):
        assert sink not in script, sink
    # Nothing is fetched from another origin: every URL the script builds is on its own origin.
    assert not re.search(r"https?://", script), "the script names another origin"
    assert "localStorage" not in script, "the token lives in sessionStorage only"


def test_transcript_is_the_readers_own_conversations_in_order_and_pages(db_url, world):
    conv = world.conversation("acme", "concierge", "t", "Transcript", creator="alice")
    ids = [world.message("acme", conv, f"message {i}", role="user" if i % 2 == 0 else "assistant", minute=i,
                         speaker="alice" if i % 2 == 0 else None)
           for i in range(7)]
    streaming = world.message("acme", conv, "still typ", role="assistant", state="streaming", minute=8)
    other = world.conversation("acme", "sre", "bob-dm", "Bob's DM", creator="bob")
    world.message("acme", other, "private")
    alice = world.token("reader", "acme", actor="alice", agents=["concierge"])
    ingest = world.token("ingest", "acme")
    with client(db_url) as http:
        first = http.get(f"/v1/agent-sessions/{conv}/messages", params={"limit": 3}, headers=bearer(alice))
        assert first.status_code == 200, first.text
        seen, body = [], first.json()
        while True:
            seen += body["messages"]
            if body["next"] is None:
                break
            r = http.get(f"/v1/agent-sessions/{conv}/messages", params={"limit": 3, "after": body["next"]},
                         headers=bearer(alice))
            assert r.status_code == 200, r.text
            body = r.json()
        assert [m["id"] for m in seen] == ids + [streaming]
        assert seen[0]["body"] == "message 0" and seen[0]["role"] == "user"
        assert seen[0]["speaker"]["external_id"] == "alice" and seen[1]["speaker"] is None
        assert seen[-1]["state"] == "streaming"

        # Another reader's DM is missing, exactly as one that does not exist.
        assert_error(http.get(f"/v1/agent-sessions/{other}/messages", headers=bearer(alice)), 404, "not_found")
        assert_error(http.get("/v1/agent-sessions/987654/messages", headers=bearer(alice)), 404, "not_found")
        # A cursor is bound to its conversation, and only a reader reads transcripts.
        bob = world.token("reader", "acme", actor="bob", agents=[])
        assert http.get(f"/v1/agent-sessions/{other}/messages", headers=bearer(bob)).status_code == 200
        r = http.get(f"/v1/agent-sessions/{other}/messages", params={"after": first.json()["next"]},
                     headers=bearer(bob))
        assert_error(r, 400, "invalid_cursor")
        assert_error(http.get(f"/v1/agent-sessions/{conv}/messages", params={"after": "x.y"}, headers=bearer(alice)),
                     400, "invalid_cursor")
        assert_error(http.get(f"/v1/agent-sessions/{conv}/messages", headers=bearer(ingest)), 403, "forbidden")
        assert_error(http.get(f"/v1/agent-sessions/{conv}/messages"), 401, "unauthenticated")


def test_transcript_query_narrows_by_itself(world):
    """The endpoint checks visibility first; the messages query must not depend on that check."""
    from backscroll.search.cursor import CursorCodec
    from backscroll.search.sessions import Scope
    from backscroll.web import transcript

    dm = world.conversation("acme", "sre", "bob-dm", "Bob's DM", creator="bob")
    world.message("acme", dm, "private")
    ws, codec = world.workspace("acme"), CursorCodec(b"k" * 32)
    alice = Scope(ws, world.actor_id("acme", "web:demo", "alice"), [], None, [], "simple")
    bob = Scope(ws, world.actor_id("acme", "web:demo", "bob"), [], None, [], "simple")
    sre = Scope(ws, alice.actor_id, [world.agent_id("acme", "sre")], None, [], "simple")
    other_ws = Scope(world.workspace("other"), bob.actor_id, [world.agent_id("acme", "sre")], None, [], "simple")
    assert transcript.messages(world.conn, alice, codec, dm, None, 10) == {"messages": [], "next": None}
    assert transcript.messages(world.conn, other_ws, codec, dm, None, 10) == {"messages": [], "next": None}
    assert [m["body"] for m in transcript.messages(world.conn, bob, codec, dm, None, 10)["messages"]] == ["private"]
    assert [m["body"] for m in transcript.messages(world.conn, sre, codec, dm, None, 10)["messages"]] == ["private"]
