"""Every language stemmed, none worse (issue 18): under `multilingual`, the default, a document
holds its message's words and the stems of the message's own language, detected when it is
written; a query word matches either form, whatever its language; a quoted phrase stays exact;
a workspace may still pin one configuration.

The expectations are written from the issue and from what the Snowball stemmers make of a word
(PostgreSQL's, asked directly below), not from the product's reading of a query."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from backscroll.config import LanguageSettings, Settings
from backscroll.language import Detector
from backscroll.search import history, maintenance, sessions
from backscroll.search.cursor import CursorCodec
from backscroll.search.ranking import Ranking
from tests.db.conftest import LIMITS, reader
from tests.audit import audited
from tests.world import DECLARED, World

WS = "acme"
AGENT = "concierge"
CODEC = CursorCodec(b"k" * 32)
# Stemming languages of the tests' detector: every stemmer PostgreSQL ships for these.
CONFIGS = ("english", "french", "german", "spanish", "italian", "dutch")
K1, B = Ranking().k1, Ranking().b


def ids_for(w: World, q: str) -> list[int]:
    scope = sessions.resolve_scope(w.conn, reader(w, WS, "bob"), None)
    return [s["id"] for s in sessions.search(w.conn, scope, CODEC, q, None, 100, LIMITS, settings=DECLARED)["sessions"]]


def hits_for(w: World, q: str) -> list[dict]:
    scope = sessions.resolve_scope(w.conn, reader(w, WS, "bob"), None)
    return sessions.search(w.conn, scope, CODEC, q, None, 100, LIMITS, settings=DECLARED)["sessions"]


def history_ids(w: World, q: str) -> list[int]:
    ask = w.conversation(WS, AGENT, f"ask-{q}", "Asking")
    turn = w.turn(WS, AGENT, ask)
    request = history.SearchRequest(turn_id=turn, query=q, limit=20)
    return [h["message_id"] for h in history.search_history(w.conn, w.workspace(WS), None, request, None,
                                                            settings=DECLARED)["hits"]]


@pytest.fixture
def trilingual(world):
    """One conversation each in English, French and German, and the languages they were given."""
    w = world
    convs = {
        "en": w.conversation(WS, AGENT, "en", ""),
        "fr": w.conversation(WS, AGENT, "fr", ""),
        "de": w.conversation(WS, AGENT, "de", ""),
    }
    w.message(WS, convs["en"], "Our researchers presented their findings to the board on Tuesday", minute=1)
    w.message(WS, convs["fr"], "Les chercheuses ont présenté leurs recherches au conseil mardi dernier", minute=2)
    w.message(WS, convs["de"], "Die Forscher haben dem Vorstand am Dienstag ihre Ergebnisse vorgestellt", minute=3)
    return w, convs


def test_a_message_is_given_its_language_when_it_is_written(trilingual):
    w, convs = trilingual
    rows = w.conn.execute("select m.conversation_id, m.language::text as language from messages m").fetchall()
    assert {r["conversation_id"]: r["language"] for r in rows} == {
        convs["en"]: "english", convs["fr"]: "french", convs["de"]: "german"}
    # Too short to tell: its words alone, as before stemming existed.
    c = w.conversation(WS, AGENT, "short", "")
    w.message(WS, c, "ok", minute=4)
    assert w.conn.execute("select language::text from messages where conversation_id = %s",
                          (c,)).fetchone()["language"] == "simple"


@pytest.mark.parametrize("query, language", [
    ("researching", "en"), ("researcher", "en"), ("research", "en"),
    ("recherche", "fr"), ("Recherche", "fr"),
    ("Ergebnis", "de"), ("ergebnis", "de"),
])
def test_a_word_finds_its_other_forms_in_each_language(trilingual, query, language):
    w, convs = trilingual
    assert ids_for(w, query) == [convs[language]]


def test_the_word_as_written_still_matches(trilingual):
    w, convs = trilingual
    assert ids_for(w, "researchers") == [convs["en"]]
    assert ids_for(w, "Forscher") == [convs["de"]]
    assert ids_for(w, "chercheuses") == [convs["fr"]]


def test_search_history_reads_a_word_the_same_way(trilingual):
    w, convs = trilingual
    [en] = [r["id"] for r in w.conn.execute("select id from messages where conversation_id = %s", (convs["en"],))]
    [fr] = [r["id"] for r in w.conn.execute("select id from messages where conversation_id = %s", (convs["fr"],))]
    assert history_ids(w, "researching") == [en]
    assert history_ids(w, "recherche") == [fr]


def test_a_quoted_phrase_is_exact(trilingual):
    w, convs = trilingual
    assert ids_for(w, '"researchers presented"') == [convs["en"]]
    assert ids_for(w, '"researching presented"') == []


def test_the_excerpt_highlights_the_form_the_message_holds(trilingual):
    w, _ = trilingual
    [hit] = hits_for(w, "researching")
    match = hit["match"]
    assert [match["excerpt"][a:b] for a, b in match["highlights"]] == ["researchers"]


def test_the_word_as_written_ranks_above_another_form(world):
    w = world
    exact = w.conversation(WS, AGENT, "exact", "")
    w.message(WS, exact, "She spent the afternoon researching tide tables", minute=1)
    other = w.conversation(WS, AGENT, "other", "")
    w.message(WS, other, "She spent the afternoon on research about tide tables", minute=2)
    for n in range(6):
        c = w.conversation(WS, AGENT, f"filler-{n}", "")
        w.message(WS, c, f"She spent the afternoon on the harbour wall, day {n}", minute=3 + n)
    assert ids_for(w, "researching") == [exact, other]


def test_a_pinned_configuration_stems_nothing_else(trilingual):
    """`simple`, pinned, reads the words as written: no language is stemmed, as before."""
    w, convs = trilingual
    maintenance.request_reindex(w.conn, WS, "simple")
    maintenance.reindex(w.conn, 100)
    assert ids_for(w, "researching") == []
    assert ids_for(w, "researchers") == [convs["en"]]
    # and `english`, pinned, stems everything as English (the German words are not German to it)
    maintenance.request_reindex(w.conn, WS, "english")
    maintenance.reindex(w.conn, 100)
    assert ids_for(w, "researching") == [convs["en"]]
    assert ids_for(w, "Ergebnis") == []


def test_new_workspaces_are_multilingual(world):
    world.workspace(WS)
    assert world.conn.execute("select ts_config::text from workspaces where slug = %s",
                              (WS,)).fetchone()["ts_config"] == "multilingual"
    assert Settings(_env_file=None).language.text_search_config == "multilingual"


def test_a_message_written_without_its_language_gets_it_in_the_background(trilingual):
    """Messages from before migration 0022 (or a path that did not say) have no language: the
    maintenance thread detects it and their documents gain their stems."""
    w, convs = trilingual
    w.conn.execute("update messages set language = null")
    assert ids_for(w, "researching") == []  # their words alone
    assert maintenance.fill_languages(w.conn, 2, LanguageSettings()) == 3
    assert ids_for(w, "researching") == [convs["en"]]
    assert w.conn.execute("select count(*) as n from messages where language is null").fetchone()["n"] == 0


def test_the_detector_keeps_to_the_languages_it_is_given():
    english_only = Detector(("en",), 0.0)
    assert english_only.detect("Les chercheuses ont présenté leurs recherches") == "english"
    assert Detector(("en", "fr"), 0.0).detect("Les chercheuses ont présenté leurs recherches") == "french"
    assert Detector(("en", "fr"), 0.99).detect("ok") == "simple"
    assert Detector((), 0.0).detect("anything at all") == "simple"


# --- BM25 with alternative forms, against a reference written from the issue --------------------

def _forms(w: World, word: str) -> set[str]:
    """A word's forms, from the stemmers themselves: as written, and each language's stem."""
    forms = set()
    for cfg in ("simple", *CONFIGS):
        forms |= {r["lexeme"] for r in w.conn.execute(
            "select u.lexeme from unnest(to_tsvector(%s::regconfig, %s)) u", (cfg, word))}
    return forms


def _reference(w: World, words: list[str]) -> dict[int, float]:
    """BM25 where each query word counts once, by the best of its forms a document holds."""
    docs: dict[int, dict[str, list[str]]] = defaultdict(dict)
    for r in w.conn.execute("select s.message_id, u.lexeme, u.weights from message_search s, unnest(s.tsv) u"):
        docs[r["message_id"]][r["lexeme"]] = list(r["weights"])
    n = len(docs)
    length = {m: sum(wt.count("D") for wt in d.values()) for m, d in docs.items()}
    avgdl = sum(length.values()) / n
    scores = {}
    for m, d in docs.items():
        total = 0.0
        for word in words:
            best = 0.0
            for form in _forms(w, word):
                if form not in d:
                    continue
                df = sum(1 for other in docs.values() if form in other)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = len(d[form])
                best = max(best, idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length[m] / avgdl)))
            total += best
        if total:
            scores[m] = total
    return scores


def test_bm25_counts_each_word_once_by_its_best_form(world, monkeypatch):
    monkeypatch.setenv("BACKSCROLL_SEARCH_LANGUAGES", ",".join(
        {"english": "en", "french": "fr", "german": "de", "spanish": "es", "italian": "it", "dutch": "nl"}[c]
        for c in CONFIGS))
    from backscroll.config import get_settings

    get_settings.cache_clear()
    try:
        w = world
        c = w.conversation(WS, AGENT, "c", "")
        w.message(WS, c, "researching the researchers and their research on tides", minute=1)
        w.message(WS, c, "a researcher studies tides", minute=2)
        w.message(WS, c, "the tide tables were wrong", minute=3)
        w.message(WS, c, "nothing to see at the harbour", minute=4)
        words = ["researching", "tides"]
        expected = _reference(w, words)
        ask = w.conversation(WS, AGENT, "ask", "Asking")
        turn = w.turn(WS, AGENT, ask)
        got = audited(w.conn, turn, history.search_history(
            w.conn, w.workspace(WS), None, history.SearchRequest(turn_id=turn, query=" ".join(words), limit=20), None,
            settings=get_settings()))  # the languages set above, as the messages were written with
        scores = {h["message_id"]: h["features"]["lexical"] for h in got["hits"]}
        assert set(scores) == set(expected)
        for m, s in expected.items():
            assert scores[m] == pytest.approx(s, rel=1e-6), m
    finally:
        get_settings.cache_clear()


def test_a_question_leaves_out_the_function_words_of_its_language(world):
    """A sentence reads in its language: its function words are left out, as a pinned language
    leaves them out (Snowball's stopword lists, asked directly), and nothing else is."""
    from backscroll.search import ranking

    conn = world.conn

    def stopword(cfg: str, word: str) -> bool:
        return conn.execute("select length(to_tsvector(%s::regconfig, %s)) = 0 as s", (cfg, word)).fetchone()["s"]

    def counted(cfg: str, query: str, terms: list[str]) -> list[str]:
        return list(ranking.query_stats(conn, [], cfg, terms, LanguageSettings(), query=query).terms)

    question = "When did the researchers present their findings to the board"
    kept = counted("multilingual", question, question.split())
    assert kept == [w for w in question.split() if not stopword("english", w)]
    assert "researchers" in kept and "When" not in kept and "the" not in kept
    french = "Quand est-ce que les chercheuses ont présenté leurs recherches"
    kept = counted("multilingual", french, french.split())
    assert kept == [w for w in french.split() if not stopword("french", w)] and "que" not in kept
    # Too short to tell its language, only function words, a phrase, a pinned configuration: as typed.
    assert counted("multilingual", "the board", ["the", "board"]) == ["the", "board"]
    assert counted("multilingual", "to be or not to be", "to be or not to be".split()) \
        == "to be or not to be".split()
    assert counted("multilingual", 'what did "the board" say about it',
                                 ["what", "did", "the board", "say", "about", "it"]) == ["the board", "say"]
    assert counted("simple", question, question.split()) == question.split()
