"""Session search at the module level: recent list, title and content search, reading one session.

Worlds are built through the production ingest code (tests/world.py); readers are principals
made from stored tokens. Expected results are derived from how each world was built, never
from the queries under test.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest

from backscroll import ingest
from backscroll.search import sessions, sessions_sql
from backscroll.access.auth import Principal, TokenKind
from backscroll.search.cursor import CursorCodec
from backscroll.errors import BadRequest, NotFound
from tests.db.conftest import LIMITS, reader
from tests.world import DECLARED, World, at

WS = "acme"


# ---------------------------------------------------------------------------------------------
# helpers


def scope_of(w: World, principal: Principal, agent: str | None = None) -> sessions.Scope:
    return sessions.resolve_scope(w.conn, principal, agent)


def recent_pages(w: World, scope: sessions.Scope, codec: CursorCodec, limit: int) -> list[list[int]]:
    pages, cursor = [], None
    while True:
        page = sessions.recent(w.conn, scope, codec, cursor, limit)
        pages.append([s["id"] for s in page["sessions"]])
        cursor = page["next"]
        if cursor is None:
            return pages
        assert len(pages) < 1000, "paging does not end"


def recent_ids(w: World, scope: sessions.Scope, codec: CursorCodec, limit: int = 100) -> list[int]:
    return [i for page in recent_pages(w, scope, codec, limit) for i in page]


def search(w: World, scope: sessions.Scope, codec: CursorCodec, q: str, limit: int = 100,
           before: str | None = None) -> dict:
    return sessions.search(w.conn, scope, codec, q, before, limit, LIMITS, settings=DECLARED)


def search_ids(w: World, scope: sessions.Scope, codec: CursorCodec, q: str, limit: int = 100) -> list[int]:
    ids, cursor = [], None
    while True:
        page = search(w, scope, codec, q, limit, cursor)
        ids += [s["id"] for s in page["sessions"]]
        cursor = page["next"]
        if cursor is None:
            return ids
        assert len(ids) < 10_000, "paging does not end"


def by_recency(last_active: dict[int, float]) -> list[int]:
    """The recent-list order, computed from the world's construction: newest first, id breaks ties."""
    return [i for i, _ in sorted(last_active.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


# ---------------------------------------------------------------------------------------------
# narrowing: agents in scope, plus the reader's own conversations; never another workspace


@dataclass
class Narrowing:
    w: World
    convs: dict[str, int]       # name -> id, in workspace acme
    foreign: dict[str, int]     # name -> id, in workspace globex (same agent slugs, same people)

    def ids(self, *names: str) -> set[int]:
        return {self.convs[n] for n in names}


@pytest.fixture
def narrowing(world) -> Narrowing:
    """Titles say "zephyr", bodies say "rose": a title search and a content search can't mix."""
    convs, foreign = {}, {}
    minute = 0
    for ws, into in ((WS, convs), ("globex", foreign)):
        for agent in ("concierge", "billing"):
            for creator in ("alice", "bob", None):
                minute += 1
                name = f"{agent}/{creator or 'nobody'}"
                c = world.conversation(ws, agent, name.replace("/", "-"), f"Zephyr plans of {name}",
                                       creator=creator, created=minute)
                world.message(ws, c, f"the rose garden, said {name}", minute=minute + 0.5)
                into[name] = c
    return Narrowing(world, convs, foreign)


SCOPED_BOB_SEES = ("concierge/alice", "concierge/bob", "concierge/nobody", "billing/bob")


def test_scoped_reader_recent_list(narrowing, codec):
    bob = reader(narrowing.w, WS, "bob", agents=["concierge"])
    assert set(recent_ids(narrowing.w, scope_of(narrowing.w, bob), codec)) == narrowing.ids(*SCOPED_BOB_SEES)


def test_scoped_reader_title_search(narrowing, codec):
    bob = reader(narrowing.w, WS, "bob", agents=["concierge"])
    page = search(narrowing.w, scope_of(narrowing.w, bob), codec, "zephyr")
    assert {s["id"] for s in page["sessions"]} == narrowing.ids(*SCOPED_BOB_SEES)
    assert all(s["match"]["on"] == ["title"] for s in page["sessions"])


def test_scoped_reader_content_search(narrowing, codec):
    bob = reader(narrowing.w, WS, "bob", agents=["concierge"])
    page = search(narrowing.w, scope_of(narrowing.w, bob), codec, "rose")
    assert {s["id"] for s in page["sessions"]} == narrowing.ids(*SCOPED_BOB_SEES)
    assert all(s["match"]["on"] == ["content"] for s in page["sessions"])


def test_scoped_reader_reads_one(narrowing, codec):
    w = narrowing.w
    bob = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    for name in SCOPED_BOB_SEES:
        assert sessions.get_one(w.conn, bob, narrowing.convs[name])["id"] == narrowing.convs[name]
    missing = max(list(narrowing.convs.values()) + list(narrowing.foreign.values())) + 1000
    with pytest.raises(NotFound) as nonexistent:
        sessions.get_one(w.conn, bob, missing)
    hidden = [narrowing.convs["billing/alice"], narrowing.convs["billing/nobody"], *narrowing.foreign.values()]
    for conversation_id in hidden:
        with pytest.raises(NotFound) as info:
            sessions.get_one(w.conn, bob, conversation_id)
        # indistinguishable from a conversation that does not exist
        assert (info.value.status, info.value.code) == (nonexistent.value.status, nonexistent.value.code)
        assert info.value.message.replace(str(conversation_id), "ID") == \
            nonexistent.value.message.replace(str(missing), "ID")


def test_reader_of_every_agent_sees_the_whole_workspace_and_nothing_else(narrowing, codec):
    w = narrowing.w
    everything = scope_of(w, reader(w, WS, "carol", agents=None))
    expected = set(narrowing.convs.values())
    assert set(recent_ids(w, everything, codec)) == expected
    assert {s["id"] for s in search(w, everything, codec, "zephyr")["sessions"]} == expected
    assert {s["id"] for s in search(w, everything, codec, "rose")["sessions"]} == expected
    for conversation_id in narrowing.foreign.values():
        with pytest.raises(NotFound):
            sessions.get_one(w.conn, everything, conversation_id)


def test_reader_without_agents_sees_only_their_own(narrowing, codec):
    w = narrowing.w
    bob = scope_of(w, reader(w, WS, "bob", agents=[]))
    own = narrowing.ids("concierge/bob", "billing/bob")
    assert set(recent_ids(w, bob, codec)) == own
    assert {s["id"] for s in search(w, bob, codec, "zephyr")["sessions"]} == own
    assert {s["id"] for s in search(w, bob, codec, "rose")["sessions"]} == own
    with pytest.raises(NotFound):
        sessions.get_one(w.conn, bob, narrowing.convs["concierge/alice"])


def test_same_person_in_another_workspace_sees_only_that_workspace(narrowing, codec):
    w = narrowing.w
    bob = scope_of(w, reader(w, "globex", "bob", agents=["concierge"]))
    expected = {narrowing.foreign[n] for n in SCOPED_BOB_SEES}
    assert set(recent_ids(w, bob, codec)) == expected
    assert {s["id"] for s in search(w, bob, codec, "zephyr")["sessions"]} == expected
    assert {s["id"] for s in search(w, bob, codec, "rose")["sessions"]} == expected


def test_principal_pointing_into_another_workspace_still_sees_nothing_of_it(narrowing, codec):
    """Defence in depth: a token row whose actor and agents belong to workspace V, bound to W."""
    w = narrowing.w
    foreign_bob = w.actor_id("globex", "web:demo", "bob")
    foreign_agents = (w.agent_id("globex", "concierge"), w.agent_id("globex", "billing"))
    principal = Principal(token_id=0, kind=TokenKind.reader, workspace_id=w.workspace(WS),
                          actor_id=foreign_bob, agent_ids=foreign_agents)
    scope = scope_of(w, principal)
    assert scope.agent_ids == []
    assert recent_ids(w, scope, codec) == []
    assert search(w, scope, codec, "zephyr")["sessions"] == []
    assert search(w, scope, codec, "rose")["sessions"] == []
    for conversation_id in narrowing.foreign.values():
        with pytest.raises(NotFound):
            sessions.get_one(w.conn, scope, conversation_id)


def test_principal_of_another_workspace_with_this_workspaces_actor(narrowing, codec):
    """The actor id alone opens nothing outside the principal's workspace."""
    w = narrowing.w
    acme_bob = w.actor_id(WS, "web:demo", "bob")
    principal = Principal(token_id=0, kind=TokenKind.reader, workspace_id=w.workspace("globex"),
                          actor_id=acme_bob, agent_ids=())
    scope = scope_of(w, principal)
    assert recent_ids(w, scope, codec) == []
    assert search(w, scope, codec, "zephyr")["sessions"] == []
    assert search(w, scope, codec, "rose")["sessions"] == []
    for name in ("concierge/bob", "billing/bob"):
        with pytest.raises(NotFound):
            sessions.get_one(w.conn, scope, narrowing.convs[name])


AGENT_FILTER = [
    ("concierge", ("concierge/alice", "concierge/bob", "concierge/nobody")),
    ("billing", ("billing/bob",)),   # not in bob's scope: only his own conversations with it
    ("no-such-agent", ()),
]


def test_agent_filter(narrowing, codec):
    w = narrowing.w
    principal = reader(w, WS, "bob", agents=["concierge"])
    for agent, expected in AGENT_FILTER:
        bob = scope_of(w, principal, agent)
        want = narrowing.ids(*expected)
        assert set(recent_ids(w, bob, codec)) == want, agent
        assert {s["id"] for s in search(w, bob, codec, "zephyr")["sessions"]} == want, agent
        assert {s["id"] for s in search(w, bob, codec, "rose")["sessions"]} == want, agent


def test_agent_filter_of_a_reader_of_every_agent(narrowing, codec):
    w = narrowing.w
    carol = scope_of(w, reader(w, WS, "carol", agents=None), "billing")
    expected = narrowing.ids("billing/alice", "billing/bob", "billing/nobody")
    assert set(recent_ids(w, carol, codec)) == expected
    assert {s["id"] for s in search(w, carol, codec, "rose")["sessions"]} == expected


def test_session_fields(narrowing, codec):
    w = narrowing.w
    bob = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    c = narrowing.convs["concierge/alice"]
    one = sessions.get_one(w.conn, bob, c)
    assert one == {
        "id": c,
        "title": "Zephyr plans of concierge/alice",
        "agent": {"slug": "concierge", "name": "concierge"},
        "connector": "web:demo",
        "external_id": "concierge-alice",
        "audience": "members",
        "creator": {"namespace": "web:demo", "external_id": "alice", "display_name": ""},
        "created_at": at(1).isoformat(),
        "last_active_at": at(1.5).isoformat(),
    }
    listed = {s["id"]: s for s in sessions.recent(w.conn, bob, codec, None, 100)["sessions"]}
    assert listed[c] == one


# ---------------------------------------------------------------------------------------------
# recent list: order, paging, cursor stability


@pytest.fixture
def crowd(world) -> tuple[World, dict[int, float]]:
    """Eleven conversations over two agents; several share a last_active_at exactly."""
    last_active: dict[int, float] = {}
    plan = [  # (agent, creator, created, message minutes)
        ("concierge", None, 0, [5]),
        ("billing", "bob", 0, [5]),
        ("concierge", "alice", 5, []),
        ("concierge", None, 1, [3, 9]),
        ("billing", "bob", 2, [9]),
        ("concierge", "bob", 9, []),
        ("concierge", None, 20, []),
        ("billing", "bob", 0, [1, 2]),
        ("concierge", None, 5, [4]),
        ("concierge", "alice", 0, [7]),
        ("concierge", None, 9, []),
    ]
    for n, (agent, creator, created, minutes) in enumerate(plan):
        c = world.conversation(WS, agent, f"t{n}", f"conversation {n}", creator=creator, created=created)
        for minute in minutes:
            world.message(WS, c, f"message at {minute}", minute=minute)
        last_active[c] = max([created, *minutes])
    world.conversation(WS, "billing", "hidden", creator="alice", created=30)  # not bob's to see
    return world, last_active


def test_recent_order_by_last_activity_with_id_tie_break(crowd, codec):
    w, last_active = crowd
    bob = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    page = sessions.recent(w.conn, bob, codec, None, 100)
    assert [s["id"] for s in page["sessions"]] == by_recency(last_active)
    assert page["next"] is None
    stamps = [s["last_active_at"] for s in page["sessions"]]
    assert stamps == [at(last_active[s["id"]]).isoformat() for s in page["sessions"]]


def test_identical_last_active_at_orders_by_id_descending(world, codec):
    ids = [world.conversation(WS, "concierge", f"t{n}", created=7) for n in range(6)]
    ids += [world.conversation(WS, "billing", f"u{n}", creator="bob", created=7) for n in range(3)]
    stamps = {world.last_active(i) for i in ids}
    assert stamps == {at(7)}
    bob = scope_of(world, reader(world, WS, "bob", agents=["concierge"]))
    assert recent_ids(world, bob, codec) == sorted(ids, reverse=True)
    for limit in (1, 2, 4):
        assert recent_ids(world, bob, codec, limit) == sorted(ids, reverse=True)


def test_recent_paging_visits_every_conversation_once(crowd, codec):
    w, last_active = crowd
    bob = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    expected = by_recency(last_active)
    for limit in (1, 2, 3, 4, 10, 11, 12):
        pages = recent_pages(w, bob, codec, limit)
        assert all(len(p) == limit for p in pages[:-1]), limit
        assert 1 <= len(pages[-1]) <= limit, limit
        assert len(pages) == -(-len(expected) // limit), limit  # no empty page after the last
        assert [i for p in pages for i in p] == expected, limit


def test_recent_on_an_empty_workspace(world, codec):
    world.workspace(WS)
    bob = scope_of(world, reader(world, WS, "bob"))
    assert sessions.recent(world.conn, bob, codec, None, 10) == {"sessions": [], "next": None}


@pytest.mark.parametrize("change", ["becomes-active", "streams", "deleted", "message-deleted"])
def test_cursor_is_stable_when_its_conversation_changes(crowd, codec, change):
    w, last_active = crowd
    bob = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    order = by_recency(last_active)
    for limit in (2, 3, 5):
        with w.conn.transaction():  # each limit starts from the same world
            _page_across_a_change(w, bob, codec, order, change, limit)
            raise psycopg.Rollback()


def _page_across_a_change(w: World, bob: sessions.Scope, codec: CursorCodec, order: list[int], change: str,
                          limit: int) -> None:
    first = sessions.recent(w.conn, bob, codec, None, limit)
    seen = [s["id"] for s in first["sessions"]]
    assert seen == order[:limit]
    pointed = seen[-1]
    if change == "becomes-active":
        w.message(WS, pointed, "a new message", minute=60)
    elif change == "streams":
        reply = w.message(WS, pointed, "", role="assistant", state="streaming", minute=0)
        with w.conn.transaction():
            ingest.patch_message(w.conn, w.workspace(WS), reply, ingest.MessagePatch(append="typing…"))
    elif change == "deleted":
        with w.conn.transaction():
            ingest.delete_conversation(w.conn, w.workspace(WS), pointed)
    else:  # its messages go: it falls back to its creation time, possibly below the cursor
        w.conn.execute("delete from messages where conversation_id = %s", (pointed,))
    rest, cursor = [], first["next"]
    while cursor is not None:
        page = sessions.recent(w.conn, bob, codec, cursor, limit)
        rest += [s["id"] for s in page["sessions"]]
        cursor = page["next"]
    # no other conversation skipped or repeated
    assert [i for i in rest if i != pointed] == order[limit:], (change, limit)
    assert len(rest) == len(set(rest)), (change, limit)
    assert not set(rest) & set(seen[:-1]), (change, limit)


def test_recent_cursor_of_another_filter_is_refused(crowd, codec):
    w, _ = crowd
    principal = reader(w, WS, "bob", agents=None)
    everything = scope_of(w, principal)
    cursor = sessions.recent(w.conn, everything, codec, None, 2)["next"]
    assert cursor is not None
    with pytest.raises(BadRequest):
        sessions.recent(w.conn, scope_of(w, principal, "billing"), codec, cursor, 2)
    with pytest.raises(BadRequest):
        search(w, everything, codec, "conversation", 2, cursor)


def test_recent_refuses_a_cursor_signed_with_another_key(crowd, codec):
    w, _ = crowd
    bob = scope_of(w, reader(w, WS, "bob"))
    cursor = sessions.recent(w.conn, bob, CursorCodec(b"someone else's key"), None, 2)["next"]
    with pytest.raises(BadRequest):
        sessions.recent(w.conn, bob, codec, cursor, 2)


# ---------------------------------------------------------------------------------------------
# title search: a person's `%` and `_` are literal


@pytest.fixture
def titled(world) -> tuple[World, dict[str, int]]:
    titles = ["100% done", "1000 done", "a_b", "axb", "50/50", "back\\slash", "backslash", "Ünïcode Straße"]
    return world, {t: world.conversation(WS, "concierge", f"t{n}", t) for n, t in enumerate(titles)}


TITLE_CASES = [
    ("100%", ["100% done"]),
    ("100", ["100% done", "1000 done"]),
    ("%", ["100% done"]),
    ("% done", ["100% done"]),
    ("a_b", ["a_b"]),
    ("_", ["a_b"]),
    ("a%b", []),
    ("back\\slash", ["back\\slash"]),
    ("\\", ["back\\slash"]),
    ("DONE", ["100% done", "1000 done"]),
    ("straße", ["Ünïcode Straße"]),
]


def test_title_search_treats_wildcards_literally(titled, codec):
    w, convs = titled
    scope = scope_of(w, reader(w, WS, "bob"))
    wrong = []
    for q, expected in TITLE_CASES:
        page = search(w, scope, codec, q)
        found = {s["id"] for s in page["sessions"]}
        if found != {convs[t] for t in expected}:
            wrong.append((q, sorted(t for t, i in convs.items() if i in found), expected))
        assert all(s["match"]["on"] == ["title"] and "message_id" not in s["match"] for s in page["sessions"])
    assert wrong == []


# ---------------------------------------------------------------------------------------------
# content search: websearch syntax, what is indexed, excerpts


@pytest.fixture
def contents(world) -> tuple[World, dict[str, int]]:
    bodies = {
        "phrase": "We booked the Rose Room for Friday",
        "scattered": "The room next to the rose garden is free",
        "petals": "Rose petals on every table",
        "other": "Nothing to see here",
    }
    convs = {}
    for n, (name, body) in enumerate(bodies.items()):
        convs[name] = world.conversation(WS, "concierge", name, f"conversation {n}")
        world.message(WS, convs[name], body, minute=n + 1)
    return world, convs


# A search box's query: its words are OR'd (a conversation matches on any, ranks by how many and
# how rare), a quoted phrase matches as a phrase, `-word` excludes the messages holding it, and
# `or` is the default anyway.
SEARCH_BOX_CASES = [
    ("rose", ["phrase", "scattered", "petals"]),
    ("rose room", ["phrase", "scattered", "petals"]),
    ('"rose room"', ["phrase"]),
    ('"room rose"', []),
    ("rose -garden", ["phrase", "petals"]),
    ("-garden rose", ["phrase", "petals"]),
    ("rose or -garden", ["phrase", "petals"]),
    ("-garden or petals", ["petals"]),
    ("garden or petals", ["scattered", "petals"]),
    ("garden petals", ["scattered", "petals"]),
    ('"rose room" or petals', ["phrase", "petals"]),
    ("ROSE", ["phrase", "scattered", "petals"]),
    ("tulip", []),
    ('"', []),
    ("-", []),
    ("&|!():*", []),
]


def test_content_search_reads_a_search_box(contents, codec):
    w, convs = contents
    scope = scope_of(w, reader(w, WS, "bob"))
    wrong = []
    for q, expected in SEARCH_BOX_CASES:
        found = {s["id"] for s in search(w, scope, codec, q)["sessions"]}
        if found != {convs[n] for n in expected}:
            wrong.append((q, sorted(n for n, i in convs.items() if i in found), expected))
    assert wrong == []


def test_more_of_the_query_ranks_higher(contents, codec):
    w, convs = contents
    scope = scope_of(w, reader(w, WS, "bob"))
    ranked = [s["id"] for s in search(w, scope, codec, "rose room")["sessions"]]
    assert set(ranked[:2]) == {convs["phrase"], convs["scattered"]} and ranked[2] == convs["petals"]


def test_the_conversation_is_the_document(world, codec):
    """Issue 18: "the one where we sorted out the double booking" found nothing unless one message
    said all of it. The conversation whose messages together hold the query's words comes first,
    above one whose single message holds the rarest of them."""
    together = world.conversation(WS, "concierge", "together", "")
    world.message(WS, together, "There is a double booking on room 12", minute=1)
    world.message(WS, together, "Sorted out, we moved the second guest", minute=2)
    world.message(WS, together, "Thanks", minute=3)
    booking = world.conversation(WS, "concierge", "booking", "")
    world.message(WS, booking, "A booking for two, please", minute=4)
    sorted_ = world.conversation(WS, "concierge", "sorted", "")
    world.message(WS, sorted_, "All sorted", minute=5)
    unrelated = world.conversation(WS, "concierge", "unrelated", "")
    world.message(WS, unrelated, "The pool opens at nine", minute=6)
    # Function words are in most messages of a real workspace: their idf is near zero there.
    for n in range(30):
        chatter = world.conversation(WS, "concierge", f"chatter-{n}", "")
        world.message(WS, chatter, f"where did we go out, the one time at the place number {n}", minute=7 + n)
    scope = scope_of(world, reader(world, WS, "bob"))
    hits = search(world, scope, codec, "the one where we sorted out the double booking")["sessions"]
    assert hits[0]["id"] == together
    assert {h["id"] for h in hits[1:3]} == {booking, sorted_}
    # It holds only "the": an English question's function words are left out, as `english` would.
    assert unrelated not in [h["id"] for h in hits]
    # Its best message is named, with the query's words highlighted in it.
    match = hits[0]["match"]
    assert match["message_id"] is not None and match["highlights"]


def test_content_hit_carries_the_message_and_an_excerpt(contents, codec):
    w, convs = contents
    scope = scope_of(w, reader(w, WS, "bob"))
    message_id = w.conn.execute("select id from messages where conversation_id = %s",
                                (convs["phrase"],)).fetchone()["id"]
    [hit] = search(w, scope, codec, '"rose room"')["sessions"]
    match = hit["match"]
    assert match["on"] == ["content"]
    assert match["message_id"] == message_id
    # ts_headline trims short words at either end (ShortWord=2), so "We" may go
    assert match["excerpt"] in "We booked the Rose Room for Friday"
    assert "booked the Rose Room for Friday" in match["excerpt"]
    assert [match["excerpt"][a:b] for a, b in match["highlights"]] == ["Rose", "Room"]
    assert match["score"] > 0


def test_content_hit_points_at_the_best_message(world, codec):
    c = world.conversation(WS, "concierge", "t1", "booking")
    world.message(WS, c, "rose", minute=1)
    best = world.message(WS, c, "rose room, the Rose Room, rose room", minute=2)
    world.message(WS, c, "nothing", minute=3)
    scope = scope_of(world, reader(world, WS, "bob"))
    [hit] = search(world, scope, codec, "rose room")["sessions"]
    assert hit["match"]["message_id"] == best


def test_excerpt_highlights_cannot_be_forged(world, codec):
    from backscroll.search.sessions import HL_START, HL_STOP

    c = world.conversation(WS, "concierge", "t1", "booking")
    world.message(WS, c, f"{HL_START}fake{HL_STOP} highlight next to the rose")
    scope = scope_of(world, reader(world, WS, "bob"))
    [hit] = search(world, scope, codec, "rose")["sessions"]
    excerpt, highlights = hit["match"]["excerpt"], hit["match"]["highlights"]
    assert HL_START not in excerpt and HL_STOP not in excerpt
    assert [excerpt[a:b] for a, b in highlights] == ["rose"]


def test_excerpt_is_short_and_around_the_match(world, codec):
    c = world.conversation(WS, "concierge", "t1", "booking")
    words = [f"w{n}" for n in range(400)]
    words[300] = "rose"
    world.message(WS, c, " ".join(words))
    scope = scope_of(world, reader(world, WS, "bob"))
    [hit] = search(world, scope, codec, "rose")["sessions"]
    excerpt = hit["match"]["excerpt"]
    assert "rose" in excerpt.split()
    assert len(excerpt.split()) <= LIMITS.excerpt_words
    assert "w0" not in excerpt.split()


def test_tool_results_summaries_system_and_streaming_replies_are_not_found(world, codec):
    c = world.conversation(WS, "concierge", "t1", "booking")
    for role in ("tool", "summary", "system"):
        world.message(WS, c, f"kumquat from the {role}", role=role)
    reply = world.message(WS, c, "kumquat being typed", role="assistant", state="streaming")
    scope = scope_of(world, reader(world, WS, "bob"))
    assert search(world, scope, codec, "kumquat")["sessions"] == []
    with world.conn.transaction():
        ingest.patch_message(world.conn, world.workspace(WS), reply, ingest.MessagePatch(state="finished"))
    [hit] = search(world, scope, codec, "kumquat")["sessions"]
    assert hit["match"]["message_id"] == reply


def test_title_and_content_hit_on_one_conversation(world, codec):
    both = world.conversation(WS, "concierge", "both", "Rose Room booking")
    world.message(WS, both, "the rose room is ours")
    content_only = world.conversation(WS, "concierge", "content", "booking")
    world.message(WS, content_only, "rose room rose room rose room")
    title_only = world.conversation(WS, "concierge", "title", "rose")
    scope = scope_of(world, reader(world, WS, "bob"))
    hits = search(world, scope, codec, "rose")["sessions"]
    assert [h["id"] for h in hits][-1] == content_only  # title hits rank first
    on = {h["id"]: h["match"]["on"] for h in hits}
    assert on == {both: ["title", "content"], content_only: ["content"], title_only: ["title"]}


# ---------------------------------------------------------------------------------------------
# ranked search paging


@pytest.fixture
def ranked(world) -> tuple[World, set[int]]:
    """Title hits, content hits and both; many with identical scores, so ids break ties."""
    hits = set()
    for n in range(5):
        hits.add(world.conversation(WS, "concierge", f"title{n}", "rose"))               # identical title scores
    for n in range(3):
        hits.add(world.conversation(WS, "concierge", f"ltitle{n}", f"a rose by any other name {n}"))
    for n in range(6):
        c = world.conversation(WS, "concierge", f"body{n}", "untitled")
        world.message(WS, c, "the rose garden")                                          # identical ranks
        hits.add(c)
    for n in range(3):
        c = world.conversation(WS, "billing", f"mine{n}", "untitled", creator="bob")
        world.message(WS, c, "rose " * (n + 1))
        hits.add(c)
    for n in range(3):  # not matching, or not bob's to see
        world.conversation(WS, "concierge", f"miss{n}", "tulip")
        c = world.conversation(WS, "billing", f"theirs{n}", "rose", creator="alice")
        world.message(WS, c, "rose")
    return world, hits


def test_search_paging_visits_every_hit_once(ranked, codec):
    w, hits = ranked
    scope = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    everything = search(w, scope, codec, "rose", 100)
    assert everything["next"] is None
    order = [s["id"] for s in everything["sessions"]]
    assert set(order) == hits and len(order) == len(hits)
    for limit in (1, 2, 3, 5, 16, 17, 18):
        assert search_ids(w, scope, codec, "rose", limit) == order, limit
    keys = [(2 if "title" in s["match"]["on"] else 1, s["match"]["score"], s["id"]) for s in everything["sessions"]]
    assert keys == sorted(keys, reverse=True)


def test_search_cursor_is_refused_for_another_query(ranked, codec):
    w, _ = ranked
    principal = reader(w, WS, "bob", agents=["concierge"])
    scope = scope_of(w, principal)
    cursor = search(w, scope, codec, "rose", 2)["next"]
    assert cursor is not None
    for other in ("garden", "rose ", "Rose"):
        with pytest.raises(BadRequest) as info:
            search(w, scope, codec, other, 2, cursor)
        assert info.value.code == "invalid_cursor"
    with pytest.raises(BadRequest):
        search(w, scope_of(w, principal, "concierge"), codec, "rose", 2, cursor)
    with pytest.raises(BadRequest):
        sessions.recent(w.conn, scope, codec, cursor, 2)
    # the same query takes it
    assert search(w, scope, codec, "rose", 2, cursor)["sessions"]


def test_search_cursor_survives_a_new_hit(ranked, codec):
    w, hits = ranked
    scope = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    first = search(w, scope, codec, "rose", 4)
    seen = [s["id"] for s in first["sessions"]]
    late = w.conversation(WS, "concierge", "late", "untitled")
    w.message(WS, late, "rose")
    rest, cursor = [], first["next"]
    while cursor:
        page = search(w, scope, codec, "rose", 4, cursor)
        rest += [s["id"] for s in page["sessions"]]
        cursor = page["next"]
    assert not set(seen) & set(rest)
    assert set(seen) | set(rest) - {late} == hits
    assert len(rest) == len(set(rest))


# ---------------------------------------------------------------------------------------------
# ranking inside the title tier; queries without a positive term; cursor positions


@pytest.fixture
def title_tier(world) -> tuple[World, dict[str, int]]:
    """Titles that match "rose" equally well; some conversations also say it, more or less often."""
    convs = {}
    for name, says in (("title-only-a", None), ("says-once", "a rose"), ("title-only-b", None),
                       ("says-thrice", "rose, rose, rose"), ("title-only-c", None), ("says-twice", "rose rose"),
                       ("says-tulip", "a tulip")):
        convs[name] = world.conversation(WS, "concierge", name, "The rose room")
        if says:
            world.message(WS, convs[name], says)
    convs["content-only"] = world.conversation(WS, "concierge", "content-only", "untitled")
    world.message(WS, convs["content-only"], "rose rose rose rose")
    return world, convs


def test_title_hits_whose_contents_match_rank_first_in_the_title_tier(title_tier, codec):
    w, convs = title_tier
    scope = scope_of(w, reader(w, WS, "bob"))
    # Same title, so the same title similarity: the content decides (more mentions rank higher),
    # then title-only hits by id, newest first; the content-only hit stays below every title hit.
    title_only = sorted((convs[n] for n in ("title-only-a", "title-only-b", "title-only-c", "says-tulip")),
                        reverse=True)
    expected = [convs["says-thrice"], convs["says-twice"], convs["says-once"], *title_only, convs["content-only"]]
    page = search(w, scope, codec, "rose")
    assert [s["id"] for s in page["sessions"]] == expected
    on = {s["id"]: s["match"]["on"] for s in page["sessions"]}
    assert [on[i] for i in expected] == [["title", "content"]] * 3 + [["title"]] * 4 + [["content"]]
    assert len({s["match"]["score"] for s in page["sessions"][:7]}) == 1  # the title score is the same
    for limit in (1, 2, 3, 4):
        assert search_ids(w, scope, codec, "rose", limit) == expected, limit


def test_title_tier_order_survives_paging_with_ties(world, codec):
    """Many title+content hits with identical titles and bodies: the cursor's extra key pages them."""
    ids = []
    for n in range(7):
        c = world.conversation(WS, "concierge", f"t{n}", "rose")
        if n % 2:
            world.message(WS, c, "rose")
        ids.append(c)
    scope = scope_of(world, reader(world, WS, "bob"))
    said = sorted(ids[1::2], reverse=True)
    expected = said + sorted(ids[0::2], reverse=True)
    for limit in (1, 2, 3, 100):
        assert search_ids(world, scope, codec, "rose", limit) == expected, limit


NO_POSITIVE_TERM = ["-rose", "-garden", "-garden -room", '-"rose room"', "or", "- -"]


def test_a_query_without_a_positive_term_searches_titles_only(contents, codec):
    """`-garden` alone would match nearly every message the reader may see; only titles answer."""
    w, convs = contents
    titled = w.conversation(WS, "concierge", "titled", "Tea-rose and -garden notes")
    w.message(WS, titled, "Nothing about flowers", minute=9)
    scope = scope_of(w, reader(w, WS, "bob"))
    found = {q: [(s["id"], s["match"]["on"]) for s in search(w, scope, codec, q)["sessions"]]
             for q in NO_POSITIVE_TERM}
    assert found == {"-rose": [(titled, ["title"])], "-garden": [(titled, ["title"])], "-garden -room": [],
                     '-"rose room"': [], "or": [], "- -": []}
    # the same for the reader's own conversations with agents outside the token's scope
    mine = w.conversation(WS, "concierge", "mine", "untitled", creator="bob")
    w.message(WS, mine, "my own notes", minute=10)
    own_only = scope_of(w, reader(w, WS, "bob", agents=[]))
    assert own_only.other_agent_ids and search(w, own_only, codec, "notes")["sessions"]
    assert {q: search(w, own_only, codec, q)["sessions"] for q in NO_POSITIVE_TERM} == \
        {q: [] for q in NO_POSITIVE_TERM}
    # an excluded word excludes in the reader's own conversations with other agents too
    w.message(WS, mine, "my own notes about tulips", minute=11)
    assert [s["match"]["message_id"] for s in search(w, own_only, codec, "notes -tulips")["sessions"]] == \
        [w.conn.execute("select id from messages where body = 'my own notes'").fetchone()["id"]]
    assert search(w, own_only, codec, "tulips -notes")["sessions"] == []
    # a positive term next to the exclusion searches contents as before
    assert {s["id"] for s in search(w, scope, codec, "rose -garden")["sessions"]} == \
        {convs["phrase"], convs["petals"]}


def test_a_query_without_a_positive_term_plans_no_content_scan(contents, codec):
    w, _ = contents
    scope = scope_of(w, reader(w, WS, "bob"))
    statements = []

    class Recording:
        def execute(self, query, params=None, **kwargs):
            statements.append((query, params))
            return w.conn.execute(query, params, **kwargs)

    sessions.search(Recording(), scope, codec, "-rose", None, 20, LIMITS, settings=DECLARED)
    [(query, params)] = [s for s in statements if s[0] is sessions_sql.SEARCH]
    plan = "\n".join(r["QUERY PLAN"] for r in w.conn.execute("explain " + query, params).fetchall())
    assert "message_search" not in plan


def test_search_refuses_a_malformed_cursor_position(ranked, codec):
    from backscroll.search.cursor import fingerprint

    w, _ = ranked
    scope = scope_of(w, reader(w, WS, "bob", agents=["concierge"]))
    fp = fingerprint("search", "rose", None)
    good = search(w, scope, codec, "rose", 2)["next"]
    assert search(w, scope, codec, "rose", 2, good)["sessions"]
    for position in ([2, 1.0, 5], [2, 1.0, -1.0, 5, 0], [2, "1.0", -1.0, 5], [2, 1.0, -1.0, "5"], [3, 1.0, -1.0, 5],
                     [True, 1.0, -1.0, 5], [2.0, 1.0, -1.0, 5], [2, 1.0, False, 5], [2, 1.0, -1.0, 5.5], [2, float("nan"), -1.0, 5],
                     [2, 1.0, float("inf"), 5], [2, None, -1.0, 5], {"tier": 2}, "2,1,5", None):
        with pytest.raises(BadRequest) as info:
            search(w, scope, codec, "rose", 2, codec.encode("search", fp, position))
        assert info.value.code == "invalid_cursor", position


# ---------------------------------------------------------------------------------------------
# defence in depth: the sidecar narrows by agent; a row that disagrees with its conversation opens nothing


def test_sidecar_row_of_another_workspace_opens_nothing(world, codec):
    """A sidecar row for a message of workspace globex that names a conversation of acme (no write
    path makes one) surfaces in no search of acme: neither through the reader's agents nor through
    the reader's own conversations with other agents."""
    secret_conv = world.conversation("globex", "concierge", "g1", "untitled", creator="carol")
    secret = world.message("globex", secret_conv, "the globex kumquat secret")
    in_scope = world.conversation(WS, "concierge", "a1", "untitled")
    own_elsewhere = world.conversation(WS, "billing", "a2", "untitled", creator="bob")
    bob = scope_of(world, reader(world, WS, "bob", agents=["concierge"]))
    assert search(world, bob, codec, "kumquat")["sessions"] == []
    for target in (in_scope, own_elsewhere):
        world.conn.execute("update message_search set conversation_id = %s where message_id = %s", (target, secret))
        assert search(world, bob, codec, "kumquat")["sessions"] == [], target
        for agent in ("concierge", "billing"):
            assert search(world, scope_of(world, reader(world, WS, "bob", agents=["concierge"]), agent), codec,
                          "kumquat")["sessions"] == [], (target, agent)
    # the same row, pointed back at its own conversation, is found by a reader of globex
    world.conn.execute("update message_search set conversation_id = %s where message_id = %s", (secret_conv, secret))
    carol = scope_of(world, reader(world, "globex", "carol", agents=[]))
    assert [s["id"] for s in search(world, carol, codec, "kumquat")["sessions"]] == [secret_conv]
