"""Lexical ranking (issue 8): BM25 against a Python reference, its statistics under every kind of
write, frequent words, speaker names, the bounded pool, and a workspace's language change with
its background rebuild."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from backscroll.search import history, maintenance, ranking, sessions
from backscroll.search.ranking import Ranking
from tests.db.conftest import LIMITS, reader
from tests.ranking_reference import bm25_reference, session_reference
from tests.audit import audited
from tests.world import DECLARED, World, bearer, client

WS = "acme"
AGENT = "concierge"
NS = "web:demo"

# Recounted from the sidecar: what the folded statistics plus the pending deltas must equal.
RECOUNT_DF = """
select s.agent_id, u.lexeme, count(*) as df from message_search s, unnest(s.tsv) u group by 1, 2
"""
KEPT_DF = """
select agent_id, lexeme, sum(df) as df
  from (select agent_id, lexeme, df from search_term_stats
        union all select agent_id, lexeme, delta from search_term_deltas) x
 group by 1, 2 having sum(df) <> 0
"""
RECOUNT_DOCS = "select agent_id, count(*) as docs, sum(doc_len) as len from message_search group by 1"
KEPT_DOCS = """
select agent_id, sum(docs) as docs, sum(total_len) as len
  from (select agent_id, docs, total_len from search_doc_stats
        union all select agent_id, docs, total_len from search_doc_deltas) x
 group by 1 having sum(docs) <> 0
"""


# The same per (agent, audience key), migration 0027: what search_history sums.
RECOUNT_AUDIENCE_DF = """
select s.agent_id, s.audience_id, u.lexeme, count(*) as df from message_search s, unnest(s.tsv) u group by 1, 2, 3
"""
KEPT_AUDIENCE_DF = """
select agent_id, audience_id, lexeme, sum(df) as df
  from (select agent_id, audience_id, lexeme, df from search_audience_term_stats
        union all select agent_id, audience_id, lexeme, delta from search_term_deltas
                   where audience_id is not null) x  -- written before 0027: counted per agent only
 group by 1, 2, 3 having sum(df) <> 0
"""
RECOUNT_AUDIENCE_DOCS = """
select agent_id, audience_id, count(*) as docs, sum(doc_len) as len,
       count(*) filter (where tsv <> ''::tsvector) as indexable
  from message_search group by 1, 2
"""
KEPT_AUDIENCE_DOCS = """
select agent_id, audience_id, sum(docs) as docs, sum(total_len) as len, sum(indexable) as indexable
  from (select agent_id, audience_id, docs, total_len, indexable from search_audience_doc_stats
        union all select agent_id, audience_id, docs, total_len, indexable from search_doc_deltas
                   where audience_id is not null) x
 group by 1, 2 having sum(docs) <> 0
"""


def assert_statistics_exact(w: World) -> None:
    recount = {(r["agent_id"], r["lexeme"]): r["df"] for r in w.conn.execute(RECOUNT_DF).fetchall()}
    kept = {(r["agent_id"], r["lexeme"]): r["df"] for r in w.conn.execute(KEPT_DF).fetchall()}
    assert kept == recount
    docs = {r["agent_id"]: (r["docs"], r["len"]) for r in w.conn.execute(RECOUNT_DOCS).fetchall()}
    kept_docs = {r["agent_id"]: (r["docs"], r["len"]) for r in w.conn.execute(KEPT_DOCS).fetchall()}
    assert kept_docs == docs
    key = ("agent_id", "audience_id", "lexeme")
    recount = {tuple(r[k] for k in key): r["df"] for r in w.conn.execute(RECOUNT_AUDIENCE_DF).fetchall()}
    kept = {tuple(r[k] for k in key): r["df"] for r in w.conn.execute(KEPT_AUDIENCE_DF).fetchall()}
    assert kept == recount
    values = ("docs", "len", "indexable")
    docs = {(r["agent_id"], r["audience_id"]): tuple(r[v] for v in values)
            for r in w.conn.execute(RECOUNT_AUDIENCE_DOCS).fetchall()}
    kept_docs = {(r["agent_id"], r["audience_id"]): tuple(r[v] for v in values)
                 for r in w.conn.execute(KEPT_AUDIENCE_DOCS).fetchall()}
    assert kept_docs == docs


def person(w: World, external_id: str, name: str) -> None:
    w.actor_id(WS, NS, external_id, name)


@pytest.fixture
def venue(world) -> World:
    """Two people talk about the venue; only Priya decides it. Frequent words everywhere. The
    workspace is pinned to `simple`: these tests check BM25 itself against a reference over
    lexemes (tests/db/test_multilingual.py checks it over a word's forms, the default)."""
    w = world
    w.workspaces[WS] = w.conn.execute("insert into workspaces (slug, name, ts_config) values (%s, 'Acme', 'simple') "
                                      "returning id", (WS,)).fetchone()["id"]
    person(w, "priya", "Priya Raman")
    person(w, "tom", "Tom Okafor")
    conv = w.conversation(WS, AGENT, "party", "Summer party", creator="priya")
    w.message(WS, conv, "what did the caterer say about the date of the party", speaker="tom", minute=1)
    w.message(WS, conv, "the venue on the river is too small for the whole team I think", speaker="tom", minute=2)
    w.message(WS, conv, "We book the venue at the harbour, final answer", speaker="priya", minute=3)
    w.message(WS, conv, "the the the of the of the and the to the", speaker="tom", minute=4)
    for i in range(12):
        w.message(WS, conv, f"what did the team say about the plan, item {i} of the list", speaker="tom",
                  minute=5 + i)
    return w


def search_history(w: World, query: str, rank: Ranking | None = None, limit: int = 20) -> dict:
    conv = w.conversation(WS, AGENT, "ask", "Asking", creator="priya")
    turn = w.turn(WS, AGENT, conv, requester="priya")
    request = history.SearchRequest(turn_id=turn, query=query, limit=limit)
    return audited(w.conn, turn, history.search_history(w.conn, w.workspace(WS), None, request, None, rank=rank,
                                                        settings=DECLARED))


def session_search(w: World, query: str, rank: Ranking | None = None) -> dict:
    scope = sessions.resolve_scope(w.conn, reader(w, WS, "priya"), None)
    from backscroll.search.cursor import CursorCodec

    return sessions.search(w.conn, scope, CursorCodec(b"k" * 32), query, None, 20, LIMITS, rank=rank, settings=DECLARED)


@pytest.mark.parametrize("speaker_weight", [0.0, 0.5, 2.0])
def test_bm25_in_sql_equals_the_reference(venue, speaker_weight):
    """Every hit's lexical feature is BM25 as the Python reference computes it from the raw
    documents (its own df, N and average length), with the speaker's name weighted as set."""
    rank = Ranking(speaker_weight=speaker_weight)
    result = search_history(venue, "Priya venue the harbour", rank=rank)
    assert result["ranking"] == "bm25" and result["hits"]
    agent = venue.agent_id(WS, AGENT)
    expected = bm25_reference(venue.conn, [agent], {"priya", "venue", "the", "harbour"}, rank)
    for hit in result["hits"]:
        assert hit["features"]["lexical"] == pytest.approx(expected[hit["message_id"]], rel=1e-9)


def test_session_search_scores_are_bm25_over_the_workspace(venue):
    person(venue, "ines", "Inès")
    other = venue.conversation(WS, "scout", "other-agent", "Elsewhere", creator="priya")
    venue.message(WS, other, "the venue list for the scouts", speaker="ines")
    page = session_search(venue, "venue")
    agents = [r["id"] for r in venue.conn.execute("select id from agents where workspace_id = %s",
                                                   (venue.workspace(WS),)).fetchall()]
    expected = bm25_reference(venue.conn, agents, {"venue"})
    conversations = session_reference(venue.conn, agents, {"venue"})
    checked = 0
    for s in page["sessions"]:
        m = s["match"]
        if "content" in m["on"] and "title" not in m["on"]:
            assert m["score"] == pytest.approx(conversations[s["id"]], rel=1e-5)
            checked += 1
    assert checked and page["ranking"] == "bm25"
    # Without the coverage term a conversation scores by its best message's BM25 alone.
    plain = session_search(venue, "venue", rank=Ranking(coverage_weight=0))
    for s in plain["sessions"]:
        m = s["match"]
        if "content" in m["on"] and "title" not in m["on"]:
            assert m["score"] == pytest.approx(expected[m["message_id"]], rel=1e-5)


def test_session_search_adds_what_the_conversation_holds_together(venue):
    """A conversation's score is its best message's BM25 plus the idf of every query word some of
    its messages hold (issue 18): two words in two messages beat one word in one."""
    page = session_search(venue, "venue harbour")
    agents = [r["id"] for r in venue.conn.execute("select id from agents where workspace_id = %s",
                                                   (venue.workspace(WS),)).fetchall()]
    lexemes = {"venue", "harbour"}
    expected = session_reference(venue.conn, agents, lexemes)
    got = {s["id"]: s["match"]["score"] for s in page["sessions"]
           if "content" in s["match"]["on"] and "title" not in s["match"]["on"]}
    assert got and all(got[c] == pytest.approx(expected[c], rel=1e-5) for c in got)
    assert [s["id"] for s in page["sessions"] if s["id"] in got] == sorted(got, key=lambda c: (-expected[c], -c))


def test_frequent_words_weigh_little_without_a_stopword_list(venue):
    """`simple` keeps "what", "did", "the": with BM25 they weigh almost nothing; ts_rank_cd lets
    the message made of them win."""
    query = "what did the the the venue harbour"
    bm25 = search_history(venue, query, rank=Ranking(method="bm25"))
    top = bm25["hits"][0]
    assert "harbour" in top["text"]
    cd = search_history(venue, query, rank=Ranking(method="ts_rank_cd"))
    assert cd["ranking"] == "ts_rank_cd"
    assert "harbour" not in cd["hits"][0]["text"]


def test_a_speakers_name_finds_what_they_said(venue):
    """Priya's message never says "Priya"; her name is in its document (weight A), so "what did
    Priya say about the venue" ranks her answer above Tom's venue message."""
    hits = search_history(venue, "what did Priya say about the venue")["hits"]
    assert hits[0]["speaker"]["external_id"] == "priya" and "harbour" in hits[0]["text"]
    # On the body alone, the name adds nothing and Tom's longer venue message can come first.
    plain = search_history(venue, "what did Priya say about the venue", rank=Ranking(speaker_weight=0))
    priya_body = next(h for h in plain["hits"] if "harbour" in h["text"])
    assert priya_body["features"]["lexical"] < hits[0]["features"]["lexical"]
    # Session search reaches it by the name too.
    page = session_search(venue, "Priya harbour")
    assert page["sessions"] and "harbour" in page["sessions"][0]["match"]["excerpt"]


def test_the_name_in_the_document_follows_a_rename(venue):
    person(venue, "priya", "Priya Sharma-Raman")
    tsv = venue.conn.execute(
        "select s.tsv::text as t from message_search s join messages m on m.id = s.message_id"
        " join actors a on a.id = m.speaker_actor_id where a.external_id = 'priya' limit 1").fetchone()["t"]
    assert "'sharma':" in tsv and "A" in tsv
    assert_statistics_exact(venue)


def test_statistics_stay_exact_through_every_write(venue):
    w = venue
    conv = w.conversation(WS, AGENT, "more", "More", creator="tom")
    streaming = w.message(WS, conv, "draft", speaker="tom", state="streaming", minute=40, external_id="s1")
    assert_statistics_exact(w)
    w.conn.execute("update messages set body = 'the harbour venue is booked', state = 'finished' where id = %s",
                   (streaming,))
    assert_statistics_exact(w)
    gone = w.message(WS, conv, "harbour harbour harbour", speaker="priya", minute=41)
    w.conn.execute("delete from messages where id = %s", (gone,))
    assert_statistics_exact(w)
    # A sidecar row re-pointed to another agent moves its counts too.
    w.conversation(WS, "scout", "scouting", "Scouting", creator="tom")
    w.conn.execute("update message_search set agent_id = %s where message_id = %s",
                   (w.agent_id(WS, "scout"), streaming))
    assert_statistics_exact(w)
    # A conversation's readers set: its messages move to the new audience key (migration 0027).
    w.conn.execute("update messages set audience_readers = array['priya', 'tom'] where conversation_id = %s", (conv,))
    assert_statistics_exact(w)
    assert maintenance.fold(w.conn) > 0
    assert w.conn.execute("select count(*) as n from search_term_deltas").fetchone()["n"] == 0
    assert_statistics_exact(w)
    w.conn.execute("delete from conversations where id = %s", (conv,))
    assert_statistics_exact(w)


def test_generating_terms_take_the_rarest_while_they_fit():
    assert ranking.generating_terms([5000, 3, 40, 900], pool=1000) == [1, 2, 3]
    assert ranking.generating_terms([5000, 3, 40, 990], pool=1000) == [1, 2]
    assert ranking.generating_terms([5000, 7000], pool=1000) == [0]      # the rarest, even when over
    assert ranking.generating_terms([5000, 7000], pool=0) == [0, 1]      # exhaustive
    assert ranking.generating_terms([0, 0, 12], pool=10) == [0, 1]


def test_the_recent_window_holds_about_two_pools_of_matches_or_is_not_used():
    assert ranking.recent_window(matches=10_000, docs=40_000, pool=500) == 4_000   # 10% of the scope
    assert ranking.recent_window(matches=400, docs=40_000, pool=500) is None       # fits the pool
    assert ranking.recent_window(matches=1_500, docs=40_000, pool=500) is None     # window > half: not worth it
    assert ranking.recent_window(matches=10_000, docs=40_000, pool=0) is None      # exhaustive


def test_a_dense_word_walks_the_recent_window_and_a_sparse_one_uses_the_word_index():
    now = datetime.now(timezone.utc)
    # A word in a quarter of 40,000 documents fills a pool of 500 after ~2,000 of them.
    assert ranking.walk_window(now, matches=10_000, docs=40_000, pool=500)
    # In 5% of them, ~10,000 would be read: the word index and the window's bitmap are cheaper.
    assert not ranking.walk_window(now, matches=2_001, docs=40_000, pool=500)
    assert not ranking.walk_window(None, matches=10_000, docs=40_000, pool=500)   # no window
    assert not ranking.walk_window(now, matches=10_000, docs=40_000, pool=0)      # exhaustive


def _walked_and_indexed(monkeypatch, run) -> tuple[dict, dict]:
    """`run()` once walking the window (ranking.walk_window chooses it), once through the word
    index (WALK_MAX_ROWS 0): the two plans of one statement."""
    chosen = []
    real = ranking.walk_window
    monkeypatch.setattr(ranking, "walk_window", lambda *a: chosen.append(real(*a)) or chosen[-1])
    walked = run()
    monkeypatch.setattr(ranking, "WALK_MAX_ROWS", 0)
    indexed = run()
    assert chosen == [True, False]
    return walked, indexed


def test_walking_the_recent_window_finds_what_the_word_index_finds(venue, monkeypatch):
    """The two ways of reading a window (ranking.walk_window) are two plans of one statement:
    the same candidates, so the same hits in the same order."""
    walked, indexed = _walked_and_indexed(monkeypatch, lambda: search_history(venue, "the", rank=Ranking(pool=3)))
    assert [h["message_id"] for h in walked["hits"]] == [h["message_id"] for h in indexed["hits"]]
    assert len(walked["hits"]) == 3


def test_session_search_walking_the_window_finds_what_the_word_index_finds(venue, monkeypatch):
    """Session search reads a common word's window either way too (ranking.walk_window): the
    same sessions in the same order, with the same matched messages."""
    walked, indexed = _walked_and_indexed(monkeypatch, lambda: session_search(venue, "the", rank=Ranking(pool=3)))
    signature = [(s["id"], s["match"].get("message_id"), s["match"]["score"]) for s in walked["sessions"]]
    assert signature == [(s["id"], s["match"].get("message_id"), s["match"]["score"]) for s in indexed["sessions"]]
    assert walked["sessions"]


def test_idf_is_small_for_a_word_in_every_document_and_never_negative():
    assert ranking.idf(1000, 1000) == pytest.approx(0.0005, abs=1e-3)
    assert ranking.idf(1000, 1) > 6
    assert all(ranking.idf(100, df) > 0 for df in range(0, 101))


def test_the_pool_bounds_what_is_scored_but_keeps_the_rare_match(venue):
    """With a pool of 3, "the" (in most messages) generates no candidates once "harbour" (rare)
    fits: only messages with the rare word are scored, and the answer is still first."""
    bounded = search_history(venue, "the harbour", rank=Ranking(pool=3))
    assert [h["text"] for h in bounded["hits"]][:1] == ["We book the venue at the harbour, final answer"]
    assert all("harbour" in h["text"] for h in bounded["hits"])
    exhaustive = search_history(venue, "the harbour", rank=Ranking(pool=0))
    assert len(exhaustive["hits"]) > len(bounded["hits"])
    assert exhaustive["hits"][0]["message_id"] == bounded["hits"][0]["message_id"]
    # One common word alone: the most recent of its matches, at most the pool.
    common = search_history(venue, "the", rank=Ranking(pool=3))
    assert len(common["hits"]) == 3
    times = [h["time"] for h in search_history(venue, "the", rank=Ranking(pool=0))["hits"]]
    assert {h["time"] for h in common["hits"]} == set(sorted(times, reverse=True)[:3])


def test_a_language_change_rebuilds_in_the_background_while_search_answers(venue):
    w = venue
    assert not search_history(w, "booking")["hits"]          # `simple` does not stem "book"
    state = maintenance.request_reindex(w.conn, WS, "english")
    assert state.reindexing and state.rebuilt == 0 and state.documents > 0
    # Until the swap, search answers from the current documents, in the current configuration.
    assert not search_history(w, "booking")["hits"]
    reindexer = maintenance.Reindexer(batch=5)
    step = reindexer.step(w.conn)
    assert step.rebuilt == 5 and not step.swapped
    # A message written meanwhile gets its next document from the trigger.
    late = w.message(WS, w.conversation(WS, AGENT, "late", "Late", creator="priya"), "Rooms booked for May",
                     speaker="tom", minute=60)
    assert w.conn.execute("select tsv_next is not null as ok from message_search where message_id = %s",
                          (late,)).fetchone()["ok"]
    assert not search_history(w, "booking")["hits"]
    while not (step := reindexer.step(w.conn)).swapped:
        pass
    assert maintenance.language(w.conn, WS).as_dict() == {
        "workspace": WS, "text_search_config": "english", "speaker_names": True, "reindex": None}
    found = {h["message_id"] for h in search_history(w, "booking")["hits"]}
    assert late in found and len(found) >= 2                 # "book" and "booked" stem to "book"
    assert_statistics_exact(w)
    # Speaker names off: the name no longer finds her message.
    maintenance.reindex(w.conn, batch=100)                    # nothing pending: a no-op
    maintenance.request_reindex(w.conn, WS, speaker_names=False)
    assert maintenance.reindex(w.conn, batch=100) == [WS]
    assert not [h for h in search_history(w, "Raman")["hits"]]
    assert_statistics_exact(w)


def test_an_unknown_configuration_is_a_clear_400(venue):
    from backscroll.errors import BadRequest

    with pytest.raises(BadRequest, match="unknown text search configuration 'klingon'"):
        maintenance.request_reindex(venue.conn, WS, "klingon")
    assert maintenance.language(venue.conn, WS).ts_config == "simple"


def test_search_settings_endpoint(db_url, venue):
    admin = venue.token("admin")
    ingest = venue.token("ingest", WS)
    with client(db_url) as http:
        path = f"/v1/workspaces/{WS}/search-settings"
        assert http.get(path).status_code == 401
        assert http.get(path, headers=bearer(ingest)).status_code == 403
        r = http.get(path, headers=bearer(admin))
        assert r.status_code == 200 and r.json()["text_search_config"] == "simple"
        r = http.put(path, headers=bearer(admin), json={"text_search_config": "klingon"})
        assert r.status_code == 400 and "unknown text search configuration" in r.json()["error"]["message"]
        r = http.put(path, headers=bearer(admin), json={"text_search_config": "x; drop table messages"})
        assert r.status_code == 400
        r = http.put(path, headers=bearer(admin), json={"text_search_config": "german"})
        assert r.status_code == 202 and r.json()["reindex"]["text_search_config"] == "german"
        assert http.get("/v1/workspaces/nope/search-settings", headers=bearer(admin)).status_code == 404
    # The API's background thread finishes it; `backscroll reindex` would too.
    maintenance.reindex(venue.conn, batch=1000)
    assert maintenance.language(venue.conn, WS).ts_config == "german"


def test_session_search_scores_only_the_most_recent_matches_of_a_common_word(world):
    """A word in every conversation, a pool of 2: the content candidates are the two most recent
    matching messages (found through the window of recent messages), never an older one."""
    w = world
    person(w, "priya", "Priya Raman")
    convs = []
    for i in range(12):
        conv = w.conversation(WS, AGENT, f"c{i}", f"Thread {i}", creator="priya")
        w.message(WS, conv, f"the note number {i}", speaker="priya", minute=10 + i)
        convs.append(conv)
    w.message(WS, convs[0], "unrelated words only", speaker="priya", minute=50)
    bounded = session_search(w, "note", rank=Ranking(pool=2))
    assert {s["id"] for s in bounded["sessions"]} == set(convs[-2:])
    everything = session_search(w, "note", rank=Ranking(pool=0))
    assert {s["id"] for s in everything["sessions"]} == set(convs)


def test_a_bulk_import_folds_its_statistics(cli_env, tmp_path):
    import json

    from backscroll import cli
    from backscroll.store.db import connect

    lines = [{"workspace": "acme", "agent": AGENT, "connector": {"type": "web", "name": "demo"},
              "external_id": f"bulk-{i}", "title": f"Bulk {i}", "audience": {"kind": "workspace"},
              "messages": [{"role": "user", "body": f"the harbour venue note {i}", "external_id": f"bulk-m{i}"}]}
             for i in range(5)]
    path = tmp_path / "bulk.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with connect(cli_env, autocommit=True) as conn:
        conn.execute("insert into workspaces (slug, name) values ('acme', 'Acme')")
    assert cli.main(["import", str(path), "--quiet"]) == 0
    with connect(cli_env, autocommit=True) as conn:
        assert conn.execute("select count(*) as n from search_term_deltas").fetchone()["n"] == 0
        assert conn.execute("select df from search_term_stats where lexeme = 'harbour'").fetchone()["df"] == 5
