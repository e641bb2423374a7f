"""search_history: the evaluation contract of the disclosure model, each case a named test.

Privacy tests are marked `privacy`; `make mutation` replaces the audience predicate with
`true` and expects every one of them to fail, and replaces the lineage predicate with `true`
and expects exactly the tests named `*lineage*` to fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from backscroll.search import history, history_sql, turns
from backscroll.errors import NotFound
from tests.audit import audited
from tests.world import DECLARED, World

WS = "acme"
AGENT = "concierge"
SLACK = ("slack", "acme")
WEB = ("web", "acme")
NS = "slack:acme"

privacy = pytest.mark.privacy


@dataclass
class Town:
    w: World
    dm_alice: int
    dm_bob: int
    general: int
    lounge: int
    private_room: int
    msgs: dict[str, int]


def _members(*readers: str) -> dict:
    return {"kind": "members", "readers": list(readers)}


@pytest.fixture
def town(world) -> Town:
    w = world
    for ext, name in (("U_A", "Alice"), ("U_B", "Bob"), ("U_C", "Carol"), ("U_A2", "Alice")):
        w.actor_id(WS, NS, ext, name)
    dm_alice = w.conversation(WS, AGENT, "D-alice", "Alice DM", creator="U_A", connector=SLACK, audience=_members("U_A"))
    dm_bob = w.conversation(WS, AGENT, "D-bob", "Bob DM", creator="U_B", connector=SLACK, audience=_members("U_B"))
    general = w.conversation(WS, AGENT, "C-general", "general", creator="U_A", connector=SLACK,
                             audience={"kind": "public"})
    lounge = w.conversation(WS, AGENT, "C-lounge", "lounge", creator="U_C", connector=SLACK,
                            audience={"kind": "workspace"})
    private_room = w.conversation(WS, AGENT, "G-board", "board", creator="U_A", connector=SLACK,
                                  audience=_members("U_A", "U_B", "U_C"))
    m = {
        "alice_decision": w.message(WS, dm_alice, "We decided to move the Acme migration to Friday night",
                                    speaker="U_A", minute=10),
        "bob_dm": w.message(WS, dm_bob, "Bob's own note: the Acme migration budget is tight", speaker="U_B", minute=11),
        "general_alice": w.message(WS, general, "The offsite venue is the Rose Room", speaker="U_A", minute=12),
        "general_bob": w.message(WS, general, "Agreed, the Rose Room for the offsite", speaker="U_B", minute=13),
        "lounge_carol": w.message(WS, lounge, "The quarterly budget spreadsheet lives in the shared drive",
                                  speaker="U_C", minute=14),
        "board_secret": w.message(WS, private_room, "Codename Falcon is the merger target", speaker="U_C", minute=15),
    }
    return Town(w, dm_alice, dm_bob, general, lounge, private_room, m)


def ask(t: Town, dest: int, requester: str, query: str, *, namespace: str = NS, limit: int | None = None,
        loaded: list[int] = (), filters: dict | None = None, turn: int | None = None) -> dict:
    """A person asks in `dest`; the agent's turn searches its history."""
    if turn is None:
        answering = t.w.message(WS, dest, f"(asking) {query}", speaker=requester, minute=100)
        turn = t.w.turn(WS, AGENT, dest, requester=requester, requester_namespace=namespace,
                        answering=answering, loaded=list(loaded))
    request = history.SearchRequest(turn_id=turn, query=query, limit=limit, filters=history.Filters(**(filters or {})))
    result = audited(t.w.conn, turn, history.search_history(t.w.conn, t.w.workspace(WS), None, request, None,
                                                            settings=DECLARED))
    result["turn_id"] = turn
    return result


def hit_ids(result: dict) -> list[int]:
    return [h["message_id"] for h in result["hits"]]


def assert_not_disclosed(result: dict, message_id: int, what: str) -> None:
    assert message_id not in result["message_ids"], f"DISCLOSED {what} (message {message_id})"


# 1
def test_an_actor_finds_a_decision_in_their_own_dm_history(town):
    result = ask(town, town.dm_alice, "U_A", "Acme migration decision")
    assert hit_ids(result)[0] == town.msgs["alice_decision"]
    hit = result["hits"][0]
    assert hit["text"].startswith("We decided") and hit["speaker"]["external_id"] == "U_A"
    assert hit["room"]["conversation_id"] == town.dm_alice


# 2
@privacy
def test_another_actors_dm_is_never_a_candidate(town):
    result = ask(town, town.dm_bob, "U_B", "Acme migration decision")
    assert_not_disclosed(result, town.msgs["alice_decision"], "Alice's DM into Bob's DM")
    # Bob's own DM is found; Alice's was removed by the audience rule, as the audit row says.
    assert town.msgs["bob_dm"] in hit_ids(result)
    audit = town.w.conn.execute("select exclusions from search_audit where turn_id = %s",
                                (result["turn_id"],)).fetchone()["exclusions"]
    assert audit["audience"] >= 1


# 3
def test_a_public_channel_exchange_is_found_by_both_participants(town):
    for dest, who in ((town.dm_alice, "U_A"), (town.dm_bob, "U_B")):
        result = ask(town, dest, who, "offsite venue")
        assert {town.msgs["general_alice"], town.msgs["general_bob"]} <= set(hit_ids(result)), who


# 4
def test_a_workspace_channel_the_requester_never_joined_is_found(town):
    result = ask(town, town.dm_bob, "U_B", "quarterly budget spreadsheet")
    assert town.msgs["lounge_carol"] in hit_ids(result)


# 5
@privacy
def test_a_dm_never_surfaces_in_a_public_channel_even_for_its_participant(town):
    result = ask(town, town.general, "U_A", "Acme migration decision")
    assert_not_disclosed(result, town.msgs["alice_decision"], "Alice's DM into the public channel")


# 6
@privacy
def test_a_private_channel_reaches_itself_and_never_a_public_one(town):
    inside = ask(town, town.private_room, "U_A", "Falcon merger")
    assert town.msgs["board_secret"] in hit_ids(inside)
    outside = ask(town, town.general, "U_A", "Falcon merger")
    assert_not_disclosed(outside, town.msgs["board_secret"], "the private board room into the public channel")
    lounge = ask(town, town.lounge, "U_C", "Falcon merger")
    assert_not_disclosed(lounge, town.msgs["board_secret"], "the private board room into a workspace channel")


# 7
def test_a_message_without_source_evidence_is_excluded(town):
    orphan = town.w.message(WS, town.general, "Falcon appears in a message of unknown provenance",
                            speaker="U_B", minute=16, evidence=False)
    result = ask(town, town.general, "U_B", "Falcon provenance")
    assert orphan not in result["message_ids"]


def _laundered_reply(t: Town) -> tuple[int, int]:
    """A private memory (from Alice's DM) and a public reply built on it, innocuous on its face."""
    memory = t.w.conn.execute(
        "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,"
        " source_message_ids) values (%s, %s, 'Alice moves the migration to Friday', 'members', %s, %s, %s)"
        " returning id", (t.w.workspace(WS), t.w.agent_id(WS, AGENT), NS, ["U_A"], [t.msgs["alice_decision"]]),
    ).fetchone()["id"]
    reply = t.w.message(WS, t.general, "Heads up: the offsite planning moves to Friday night", role="assistant",
                        minute=20, memories=[memory])
    return memory, reply


# 8
@privacy
def test_lineage_excludes_a_reply_built_on_a_private_memory(town):
    _, reply = _laundered_reply(town)
    result = ask(town, town.dm_bob, "U_B", "Friday night offsite")
    assert_not_disclosed(result, reply, "a public reply laundering Alice's private memory into Bob's DM")
    # In Alice's own DM the same reply is fine: she may see what it was built from.
    own = ask(town, town.dm_alice, "U_A", "Friday night offsite")
    assert reply in own["message_ids"]


@privacy
def test_lineage_skips_a_laundered_neighbour(town):
    _, reply = _laundered_reply(town)
    before = town.w.message(WS, town.general, "Rose Room deposit paid", speaker="U_B", minute=19)
    result = ask(town, town.dm_bob, "U_B", "deposit")
    assert hit_ids(result) == [before]
    neighbours = result["hits"][0]["neighbours"]
    shown = [n["message_id"] for side in ("before", "after") for n in neighbours[side]]
    assert town.msgs["general_bob"] in shown  # an eligible neighbour is shown ...
    assert reply not in shown, "DISCLOSED a laundered reply as a neighbour"  # ... an ineligible one is skipped
    assert_not_disclosed(result, reply, "a laundered neighbour")


# 9
def test_search_results_become_the_replys_history_ids(town):
    result = ask(town, town.dm_alice, "U_A", "offsite venue")
    assert result["message_ids"]
    stored = turns.store_reply(town.w.conn, town.w.workspace(WS), None, result["turn_id"],
                               turns.ReplyIn(body="It's the Rose Room."))
    row = town.w.conn.execute("select history_message_ids from messages where id = %s", (stored["id"],)).fetchone()
    assert set(result["message_ids"]) <= set(row["history_message_ids"])
    verdict = turns.recheck(town.w.conn, town.w.workspace(WS), None, result["turn_id"])
    assert verdict["deliverable"], verdict


# 10
def test_a_limit_near_the_provenance_caps_keeps_the_reply_deliverable(town):
    w = town.w
    filler = [w.message(WS, town.dm_alice, f"offsite note number {i}", speaker="U_A", minute=30 + i / 100)
              for i in range(420)]
    loaded = filler[:390]
    first = ask(town, town.dm_alice, "U_A", "offsite", limit=20, loaded=loaded)
    used = 390 + 1 + len(first["message_ids"])
    assert first["budget"]["evidence"] == used <= history.EVIDENCE_CAP
    assert len(first["hits"]) <= (history.EVIDENCE_CAP - 391) // history.MESSAGES_PER_HIT or first["hits"]
    # Keep searching until the budget is spent: the tool shrinks, then says so.
    result = first
    for _ in range(50):
        if result["status"] == "search_budget_exhausted":
            break
        result = ask(town, town.dm_alice, "U_A", "offsite note", limit=20, turn=first["turn_id"])
    assert result["status"] == "search_budget_exhausted"
    ledger = w.conn.execute("select count(*) as n from turn_evidence where turn_id = %s",
                            (first["turn_id"],)).fetchone()["n"]
    assert ledger <= history.EVIDENCE_CAP
    turns.store_reply(w.conn, w.workspace(WS), None, first["turn_id"], turns.ReplyIn(body="Done."))
    verdict = turns.recheck(w.conn, w.workspace(WS), None, first["turn_id"])
    assert verdict["deliverable"], verdict


# 11
@privacy
def test_without_semantic_search_results_are_lexical_and_still_authorized(town):
    result = ask(town, town.general, "U_B", "Acme migration decision Falcon merger")
    assert result["mode"] == "lexical"
    assert_not_disclosed(result, town.msgs["alice_decision"], "Alice's DM (lexical fallback)")
    assert_not_disclosed(result, town.msgs["board_secret"], "the board room (lexical fallback)")


# 12
def test_two_actors_with_the_same_display_name_stay_distinct(town):
    impostor = town.w.message(WS, town.general, "Rose Room catering is confirmed", speaker="U_A2", minute=17)
    result = ask(town, town.dm_bob, "U_B", "Rose Room", filters={"actor": {"external_id": "U_A", "namespace": NS}})
    assert town.msgs["general_alice"] in hit_ids(result)
    # Neighbours give context whoever spoke them; the filter chooses the hits.
    assert impostor not in hit_ids(result)
    assert {h["speaker"]["external_id"] for h in result["hits"]} == {"U_A"}
    other = ask(town, town.dm_bob, "U_B", "Rose Room", filters={"actor": {"external_id": "U_A2"}})
    assert hit_ids(other) == [impostor]


def test_an_unresolvable_actor_filter_returns_nothing(town):
    result = ask(town, town.dm_bob, "U_B", "Rose Room", filters={"actor": {"external_id": "nobody"}})
    assert result["hits"] == [] and result["message_ids"] == []


@privacy
def test_identity_link_lets_a_dm_follow_the_same_person_until_revoked(town):
    w = town.w
    web_dm = w.conversation(WS, AGENT, "web-alice", "Alice on the web", creator="alice", connector=WEB,
                            audience={"kind": "members", "readers": ["alice"]})
    unlinked = ask(town, web_dm, "alice", "Acme migration decision", namespace="web:acme")
    assert_not_disclosed(unlinked, town.msgs["alice_decision"], "Alice's Slack DM into an unlinked web DM")
    link = w.link(WS, AGENT, (NS, "U_A"), ("web:acme", "alice"))
    linked = ask(town, web_dm, "alice", "Acme migration decision", namespace="web:acme")
    assert town.msgs["alice_decision"] in hit_ids(linked)
    # The link is Alice's alone: Bob's DM still sees nothing of hers.
    bob = ask(town, town.dm_bob, "U_B", "Acme migration decision")
    assert_not_disclosed(bob, town.msgs["alice_decision"], "Alice's DM into Bob's DM through her link")
    from backscroll.ingest import links
    links.revoke(w.conn, w.workspace(WS), link)
    verdict = turns.recheck(w.conn, w.workspace(WS), None, linked["turn_id"])
    assert verdict == {**verdict, "deliverable": False, "reason": "audience"}
    after = ask(town, web_dm, "alice", "Acme migration decision", namespace="web:acme")
    assert_not_disclosed(after, town.msgs["alice_decision"], "Alice's Slack DM after the link was revoked")


def test_the_answered_message_and_the_loaded_window_are_excluded(town):
    w = town.w
    loaded = [town.msgs["general_alice"]]
    result = ask(town, town.general, "U_B", "Rose Room offsite", loaded=loaded)
    assert town.msgs["general_alice"] not in result["message_ids"]
    answering = w.conn.execute("select answering_message_id from turns where id = %s",
                               (result["turn_id"],)).fetchone()["answering_message_id"]
    assert answering not in result["message_ids"]
    assert town.msgs["general_bob"] in hit_ids(result)


def test_recheck_catches_a_deleted_message_and_a_tightened_room(town):
    w = town.w
    result = ask(town, town.dm_bob, "U_B", "offsite venue")
    assert town.msgs["general_alice"] in result["message_ids"]
    w.conn.execute("delete from messages where id = %s", (town.msgs["general_alice"],))
    verdict = turns.recheck(w.conn, w.workspace(WS), None, result["turn_id"])
    assert (verdict["deliverable"], verdict["reason"], verdict["message_id"]) == (
        False, "message_deleted", town.msgs["general_alice"])
    # A room whose audience tightens: the lounge becomes Carol's alone, Bob's DM may no longer quote it.
    second = ask(town, town.dm_bob, "U_B", "quarterly budget spreadsheet")
    assert town.msgs["lounge_carol"] in second["message_ids"]
    w.conn.execute("update messages set audience_kind = 'members', audience_readers = '{U_C}' where id = %s",
                   (town.msgs["lounge_carol"],))
    verdict = turns.recheck(w.conn, w.workspace(WS), None, second["turn_id"])
    assert (verdict["deliverable"], verdict["reason"]) == (False, "audience")


def test_audit_row_per_search_with_exact_lineage_and_exclusion_counts(town, monkeypatch):
    w = town.w
    _, laundered = _laundered_reply(town)  # lineage: its text mentions Friday night
    w.message(WS, town.general, "Friday night is fine by me", speaker="U_B", minute=21, evidence=False)  # no_evidence
    eligible = [w.message(WS, town.general, f"Friday night plan {i}", speaker="U_B", minute=22 + i) for i in range(3)]
    # audience: Alice's DM mentions "Friday night"; already_in_context: the answering message.
    result = ask(town, town.dm_bob, "U_B", "Friday night", limit=1)
    assert len(result["hits"]) == 1 and result["hits"][0]["message_id"] in eligible
    row = w.conn.execute("select * from search_audit where turn_id = %s", (result["turn_id"],)).fetchone()
    assert row["exclusions"] == {"already_in_context": 1, "no_evidence": 1, "audience": 1, "lineage": 1,
                                 "below_cutoff": 2}
    assert [s["message_id"] for s in row["selected"]] == hit_ids(result)
    assert set(row["selected"][0]["features"]) == {"lexical", "recency", "requester_spoke", "same_conversation"}
    assert row["query_digest"] is None  # no master key: no digest, and never the text
    assert "Friday" not in str(dict(row))
    assert row["destination_audience"] == {"kind": "members", "namespace": NS, "readers": ["U_B"]}
    assert laundered not in result["message_ids"]


def test_a_search_that_finds_nothing_still_writes_its_audit_row(town):
    result = ask(town, town.dm_bob, "U_B", "zeppelin")
    assert result["hits"] == []
    n = town.w.conn.execute("select count(*) as n from search_audit where turn_id = %s",
                            (result["turn_id"],)).fetchone()["n"]
    assert n == 1


def test_a_failed_audit_write_fails_the_search(town, monkeypatch):
    answering = town.w.message(WS, town.dm_bob, "offsite?", speaker="U_B", minute=100)
    turn = town.w.turn(WS, AGENT, town.dm_bob, requester="U_B", answering=answering)
    monkeypatch.setattr(history, "INSERT_AUDIT", history_sql.INSERT_AUDIT.replace("search_audit", "search_audit_missing"))
    # The audit row is written with the evidence, in the statement that ends the search.
    monkeypatch.setattr(history, "FINISH_SEARCH", history_sql.FINISH_SEARCH.replace("into search_audit",
                                                                                    "into search_audit_missing"))
    request = history.SearchRequest(turn_id=turn, query="offsite venue")
    with pytest.raises(Exception):
        with town.w.conn.transaction():
            history.search_history(town.w.conn, town.w.workspace(WS), None, request, None, settings=DECLARED)
    # The evidence the search would have added was rolled back with it.
    ledger = town.w.conn.execute("select count(*) as n from turn_evidence where turn_id = %s and via = 'search'",
                                 (turn,)).fetchone()["n"]
    assert ledger == 0


def test_a_runtime_scoped_to_other_agents_cannot_use_the_turn(town):
    turn = town.w.turn(WS, AGENT, town.dm_bob, requester="U_B")
    request = history.SearchRequest(turn_id=turn, query="offsite")
    with pytest.raises(NotFound):
        history.search_history(town.w.conn, town.w.workspace(WS), (999_999,), request, None, settings=DECLARED)


def test_identifiers_are_matched_as_phrases(town):
    w = town.w
    target = w.message(WS, town.general, "INC-482913 is resolved", speaker="U_B", minute=40)
    other = w.message(WS, town.general, "INC-100200 is still open", speaker="U_B", minute=41)
    result = ask(town, town.dm_bob, "U_B", "INC-482913")
    assert hit_ids(result) == [target]


def test_ranking_features_are_inspectable(town):
    result = ask(town, town.dm_alice, "U_A", "Rose Room offsite")
    assert result["hits"]
    for hit in result["hits"]:
        f = hit["features"]
        assert set(f) == {"lexical", "recency", "requester_spoke", "same_conversation"}
        assert 0 < f["lexical"] and 0 < f["recency"] <= 1  # BM25 is unbounded above
        expected = f["lexical"] * (1 + history.WEIGHTS["recency"] * f["recency"]
                                   + history.WEIGHTS["requester_spoke"] * f["requester_spoke"]
                                   + history.WEIGHTS["same_conversation"] * f["same_conversation"])
        assert hit["score"] == pytest.approx(expected)
    assert all(h["features"]["requester_spoke"] for h in result["hits"] if h["room"]["conversation_id"] == town.general)


def test_the_sidecar_narrows_but_never_vouches(town):
    """A sidecar row claiming the wrong agent (a derived copy gone stale) cannot put another
    agent's conversation into this agent's results: the perspective is re-derived through connectors."""
    w = town.w
    other = w.conversation(WS, "events", "C-events", "events", creator="U_B", connector=SLACK,
                           audience={"kind": "public"})
    foreign = w.message(WS, other, "The Rose Room for the events team", speaker="U_B", minute=50)
    w.conn.execute("update message_search set agent_id = %s where message_id = %s",
                   (w.agent_id(WS, AGENT), foreign))
    result = ask(town, town.dm_bob, "U_B", "Rose Room events")
    assert_not_disclosed(result, foreign, "another agent's conversation through a stale sidecar row")


def _memory_of_logs(t: Town) -> int:
    """A public memory built from 4,998 public log messages: a reply on it has exactly 5,000
    lineage nodes (itself, the memory, the logs), the walk's cap."""
    w = t.w
    log = w.conversation(WS, AGENT, "C-log", "log", connector=SLACK, audience={"kind": "public"})
    ids = [r["id"] for r in w.conn.execute(
        "insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace)"
        " select %s, 'tool', 'log ' || g, 'finished', 'public', %s from generate_series(1, 4998) g returning id",
        (log, NS)).fetchall()]
    w.conn.execute("insert into message_source_evidence (message_id, kind) select unnest(%s::bigint[]), 'ingest'",
                   (ids,))
    return w.conn.execute(
        "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, source_message_ids)"
        " values (%s, %s, 'all the logs', 'public', %s, %s) returning id",
        (w.workspace(WS), w.agent_id(WS, AGENT), NS, ids)).fetchone()["id"]


def test_lineage_counts_a_reply_whose_memory_alone_is_narrow(town):
    """A public reply built on a memory said to Alice alone, itself formed from public messages:
    only the memory's own audience denies it. Left unselected in the pool, the audit's batched
    verdicts (backscroll_lineage_denied) must still count it under lineage, not below the cutoff."""
    w = town.w
    memory = w.conn.execute(
        "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,"
        " source_message_ids) values (%s, %s, 'Alice prefers the Rose Room', 'members', %s, %s, %s)"
        " returning id", (w.workspace(WS), w.agent_id(WS, AGENT), NS, ["U_A"], [town.msgs["general_alice"]]),
    ).fetchone()["id"]
    reply = w.message(WS, town.general, "Noted: the lantern dinner is in the Rose Room", role="assistant",
                      minute=20, memories=[memory])
    eligible = [w.message(WS, town.general, f"lantern dinner plan {i}", speaker="U_B", minute=22 + i)
                for i in range(3)]
    result = ask(town, town.dm_bob, "U_B", "lantern dinner", limit=1)
    assert hit_ids(result)[0] in eligible and reply not in result["message_ids"]
    row = w.conn.execute("select exclusions from search_audit where turn_id = %s", (result["turn_id"],)).fetchone()
    assert (row["exclusions"]["lineage"], row["exclusions"]["below_cutoff"]) == (1, 2), row["exclusions"]


def test_lineage_joint_cap_never_makes_the_reply_undeliverable(town):
    """A reply whose lineage is exactly 5,000 nodes is allowed on its own; with the answering
    message the reply's whole provenance would be 5,001 nodes, which denies everything. The
    search must not admit it (it is counted under `lineage`), so the reply stays deliverable."""
    w = town.w
    memory = _memory_of_logs(town)  # a reply built on it walks 5,000 nodes
    reply = w.message(WS, town.general, "The falcon report is ready", role="assistant", minute=5, memories=[memory])
    alone = w.conn.execute("select backscroll_lineage_allows(array[%s]::bigint[], %s, 'public', %s, '{}') as ok",
                           (reply, w.agent_id(WS, AGENT), NS)).fetchone()["ok"]
    assert alone  # 5,000 nodes: at the cap, allowed
    result = ask(town, town.general, "U_A", "falcon report")
    assert reply not in result["message_ids"]
    audit = w.conn.execute("select exclusions from search_audit where turn_id = %s",
                           (result["turn_id"],)).fetchone()["exclusions"]
    assert audit["lineage"] == 1
    turns.store_reply(w.conn, w.workspace(WS), None, result["turn_id"], turns.ReplyIn(body="Let me check."))
    verdict = turns.recheck(w.conn, w.workspace(WS), None, result["turn_id"])
    assert verdict["deliverable"], verdict


def test_lineage_verdicts_per_root_match_one_walk_per_root(town):
    """The audit's batched verdicts (backscroll_lineage_denied) judge every root exactly as its own
    backscroll_lineage_allows call does: a denied node, or more than 5,000 nodes, denies it. Eleven
    roots of 5,000 nodes each exceed the batch's 50,000 (root, node) pairs and take the per-root
    fallback; fewer take the single walk. Both must agree with the per-root reference."""
    w = town.w
    agent = w.agent_id(WS, AGENT)
    memory = _memory_of_logs(town)
    at_cap = [w.message(WS, town.general, f"report {i}", role="assistant", minute=5 + i, memories=[memory])
              for i in range(11)]  # 5,000 nodes each: allowed
    over_cap = w.message(WS, town.general, "report, annotated", role="assistant", minute=20,
                         memories=[memory], history=[at_cap[0]])  # 5,001 nodes
    _, laundered = _laundered_reply(town)

    def reference(roots):
        return sorted(r for r in roots if not w.conn.execute(
            "select backscroll_lineage_allows(array[%s]::bigint[], %s, 'public', %s, '{}') as ok",
            (r, agent, NS)).fetchone()["ok"])

    def batched(roots):
        return w.conn.execute("select backscroll_lineage_denied(%s::bigint[], %s, 'public', %s, '{}') as ids",
                              (roots, agent, NS)).fetchone()["ids"]

    few = [laundered, over_cap, at_cap[0], at_cap[1]]
    assert reference(few) == sorted([laundered, over_cap])
    assert batched(few) == reference(few)
    many = [*at_cap, over_cap, laundered]  # > 50,000 pairs: the per-root fallback
    assert batched(many) == reference(many) == sorted([laundered, over_cap])
    assert batched([]) == []


@privacy
def test_a_neighbour_with_a_narrower_audience_is_skipped(town):
    """Neighbours pass the same predicates as hits: a message said to Carol alone inside the
    public channel sits right after a public hit, and must not ride along as its neighbour."""
    w = town.w
    hit = w.message(WS, town.general, "Catering deposit for the offsite is paid", speaker="U_B", minute=30)
    aside = w.message(WS, town.general, "Carol, between us: the caterer is my cousin", speaker="U_B", minute=31,
                      audience={"kind": "members", "readers": ["U_C"]})
    result = ask(town, town.dm_bob, "U_B", "catering deposit")
    assert hit_ids(result) == [hit]
    assert_not_disclosed(result, aside, "a message said to Carol alone, as a neighbour in Bob's DM")
