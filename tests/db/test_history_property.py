"""search_history on random worlds: every result is authorized, and nothing eligible is missing.

THE RULE, as the reference below states it. It is written from the specification (seed 000,
section "Eligibility"; README.md, "`search_history` for agents"), never from the product's SQL or
history.py: a reference written beside the product's predicate shares its blind spots (issue 16:
two external conversations of one namespace, both stored with no readers, passed "destination
readers are a subset of the origin's" because two empty sets always do).

An audience is (kind, namespace, readers). The origin is the message's (or memory's) audience,
the destination the audience of the turn's destination conversation.
- public reaches any destination;
- workspace reaches a workspace or members destination of the same namespace; never external,
  never public;
- members reaches only a members destination of the same namespace whose readers are a
  NON-EMPTY subset of the origin's readers;
- external (a channel shared with another organisation) reaches a members OR an external
  destination of the same namespace whose readers are a NON-EMPTY subset of the origin's
  readers: "a private conversation is retrievable only in a conversation whose readers could
  already read it" (issue 29: a person's own DM may ask about a shared channel they are in);
  members never reaches external, whose outside readers never read the private room;
- an empty, null or unknown set never widens a verdict: an origin with no readers matches
  nothing by the subset rule, a destination with no readers receives nothing members or external
  by it, and an empty namespace matches nothing (public still reaches anywhere);
- identity-aware extension: a members origin with exactly one reader also reaches a members
  destination with exactly one reader when those two (namespace, external id) identities are
  joined by a LIVE, VERIFIED identity link of the turn's agent (a pending link, recorded without
  proof, grants nothing; a revoked one neither);
- legacy rows, sealed to their own conversation: a members or external origin with NO readers
  (stored before the fix) is disclosable into nothing but its own conversation, i.e. it is
  allowed iff the destination conversation IS its own conversation and the destination's kind
  and namespace equal the origin's. A message's own conversation is the one it is in; a memory's
  is the conversation of the turn it was formed in (memories.turn_id -> turns.conversation_id); a
  memory with no turn (or a turn that does not exist) and no readers reaches nothing.
This rule applies wherever an audience is judged: hits, neighbours, every lineage node, and the
pre-delivery recheck.

Hypothesis builds a world per example: one workspace; one or two agents; two or three connector
namespaces (slack:acme, web:acme, slack:other) with a few actors each, external ids reused across
namespaces and display names colliding; conversations of every audience kind (public,
workspace, DMs = members with one reader, private rooms = members with several, external with
readers), often twin DMs of one agent with two identities (and a third DM whose identity a
pending link claims is the first twin's person); sibling external conversations and sibling
members rooms of one agent in one namespace whose reader sets are, pair by pair, equal, nested
(either way), overlapping or disjoint, sometimes with the same reader set again in another
namespace, beside a workspace-visible room; every such focus conversation saying something; the Slack Connect shape (one agent's external conversations in
one namespace shared with Globex {XGLOBEX[, XGLOBEX2]} and Initech {XINITECH}, plus one shared
with a subset of Globex's readers); legacy external conversations with no readers (one or two in
one namespace, their messages inheriting no readers), legacy per-message audiences and legacy
memories with no readers (formed in a turn of some conversation, with no turn, or with a turn
that does not exist); messages with random speakers, roles, states (some streaming, some later
finished), per-message audiences and missing source evidence; agent replies whose provenance
names other messages and memories (memories inserted with SQL, with their own audience and
sources, often widely visible sources under a narrow audience, often formed in the reply's own
room); identity links, verified at once or recorded pending (then sometimes verified, sometimes
revoked), some revoked, some for the other agent; sidecar rows re-pointed at the other agent;
deleted messages that provenance still names. Then 2-5 turns, each a search (destination,
requester, 1-3 vocabulary words, random filters, limit, loaded window, answering message,
sometimes a second search in the same turn, sometimes an evidence ledger filled to within a few
messages of the 400 budget), sometimes an external message the turn saw losing its readers
before the reply ships (sealed from then on), sometimes a stored reply citing memories. The second test always has
two agents, twin DMs, sibling rooms and external siblings beside a workspace room, legacy
conversations and re-pointed sidecar rows, and adds a reply whose lineage has 5,000 or 5,001 nodes
and one whose history names 500 or 501 ids.

Everything is checked against the REFERENCE model (plain Python, the rule above), never by
calling the SQL predicates:

(a) soundness: every message shown (hits, neighbours, `message_ids`) is a finished user or
    assistant message of the turn's agent, not already in the turn's context, with source
    evidence, allowed into the destination by the rule above, and its whole lineage (history
    ids, memory ids, memories' sources, recursively) exists, has evidence and is allowed the same
    way (memories on their own audience and own conversation), with at most 5,000 nodes and no
    message naming more than 500 history ids.
(b) completeness: lexical matching is exact here (plain lowercase words, which the `simple`
    parser lowercases and splits on anything else), so the eligible matching set is known. The
    number of hits is min(effective limit, eligible matches), the limit clamped and shrunk by
    the evidence budget as history.py does, unless the status is search_budget_exhausted (then
    fewer). Each hit's neighbours are exactly the two nearest eligible messages on either side,
    and `message_ids` is exactly hits and neighbours less what the turn already had.
    Ranking: rather than re-derive the ranking's float arithmetic and its tie-break by id, this
    reads BM25 for each eligible match in SQL (tests/ranking_reference.py), computes the other
    features and the score here, checks them against the features and scores of the returned
    hits, and requires that no eligible match left out scores above the lowest hit returned
    (beyond float noise). The audit row's exclusion counts are checked against the reference's
    first failing rule for each match.
(c) the pre-delivery recheck of each turn's whole evidence (and, when a reply was stored, of the
    memories it cites) names the same reason (and message or memory) as the reference.

Beside the property tests, named tests kill, each on its own, the three weakenings of the
predicate that issue 16 is about: external readers ignored, an empty destination reader set
taken as a subset of anything, and a pending identity link that grants.

Every example runs inside one transaction that is rolled back, in one database per test.
Hypothesis `event`s record what the examples exercised (`--hypothesis-show-statistics`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from backscroll.search import history, turns
from backscroll.search.limits import clamp_limit
from backscroll import ingest
from backscroll.ingest import links
from tests.audit import audited
from tests.ranking_reference import bm25_reference
from tests.world import DECLARED

pytestmark = [pytest.mark.privacy, pytest.mark.lineage]

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
VOCAB = ["falcon", "rose", "budget", "merger", "friday", "deposit"]
CONNECTORS = [("slack", "acme"), ("web", "acme"), ("slack", "other")]
AGENTS = ["concierge", "scout"]
EXTERNAL_IDS = ["u1", "u2", "u3", "u4"]
DISPLAY_NAMES = ["Alice", "Bob", "Carol"]
KINDS = ["public", "workspace", "dm", "dm", "room", "external", "external"]
ROLES = ["user", "user", "user", "assistant", "assistant", "tool", "summary", "system"]
NODE_CAP = 5000
HISTORY_CAP = 500
SCORE_TOLERANCE = 1e-9
PRIVATE = ("members", "external")     # the kinds whose readers decide
LEGACY_PLACEHOLDER = "legacy-placeholder"   # passed through ingest, then blanked with SQL
MISSING_TURN = 10**12                 # a memories.turn_id no turn has (it has no foreign key)
SLACK_CONNECT = ("XGLOBEX", "XGLOBEX2", "XINITECH")


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


Audience = tuple  # (kind, namespace, readers: tuple[str, ...])


@dataclass
class Conv:
    id: int
    agent: int
    connector_ns: str
    audience: Audience


def is_legacy(audience: Audience) -> bool:
    """A members or external audience stored with no readers (before issue 16's fix)."""
    return audience[0] in PRIVATE and not audience[2]


@dataclass
class Msg:
    id: int
    conv: int
    role: str
    state: str
    audience: Audience
    evidence: bool
    speaker: int | None
    created: datetime
    body: str
    history: list[int] = field(default_factory=list)
    memories: list[int] = field(default_factory=list)
    sidecar_agent: int | None = None   # another agent, when its search sidecar row was re-pointed there


@dataclass
class Mem:
    id: int
    agent: int
    audience: Audience
    sources: list[int]
    own_conv: int | None = None   # the conversation of the turn it was formed in, if any


@dataclass
class Model:
    ws: int
    namespaces: list[str]
    agents: list[int]
    actors: dict[tuple[str, str], int] = field(default_factory=dict)
    convs: dict[int, Conv] = field(default_factory=dict)
    msgs: dict[int, Msg] = field(default_factory=dict)
    mems: dict[int, Mem] = field(default_factory=dict)
    live_links: set[tuple[int, int, int]] = field(default_factory=set)    # (agent, low actor, high actor)
    pending_links: set[tuple[int, int, int]] = field(default_factory=set)  # recorded without proof: grant nothing
    searchable_convs: list[int] = field(default_factory=list)
    focus_convs: list[int] = field(default_factory=list)                 # twin DMs, siblings, legacy, ...
    focus_groups: dict[str, list[int]] = field(default_factory=dict)     # the same, by shape
    focus_turns: int = 0                                                 # turns sent into a focus shape so far
    slugs: dict[int, str] = field(default_factory=dict)                  # agent id -> slug
    capped: dict[int, str] = field(default_factory=dict)                 # reply id -> what it is at the caps

    def agent_namespaces(self, agent: int) -> set[str]:
        return {c.connector_ns for c in self.convs.values() if c.agent == agent}

    def linked_to(self, agent: int, actor: int) -> set[int]:
        out = set()
        for ag, a, b in self.live_links:
            if ag == agent and actor in (a, b):
                out.add(b if actor == a else a)
        return out


# ---------------------------------------------------------------------------------------------
# The reference predicates, written from the spec (seed 000 "Eligibility" and issue 16), in plain
# Python. See the module docstring for the rule in words.

def audience_allows(o: Audience, d: Audience) -> bool:
    """The audience rule alone: may origin o be disclosed into destination d?"""
    o_kind, o_ns, o_readers = o
    d_kind, d_ns, d_readers = d
    if o_kind == "public":
        return True
    if not o_ns or d_ns != o_ns:           # an empty namespace matches nothing
        return False
    if o_kind == "workspace":
        return d_kind in ("workspace", "members")
    if o_kind in PRIVATE:
        # A NON-EMPTY subset: an empty destination set receives nothing, an empty origin set
        # (which only an empty destination set could be a subset of) reaches nothing.
        receivers = ("members",) if o_kind == "members" else ("members", "external")
        return d_kind in receivers and len(d_readers) > 0 and set(d_readers) <= set(o_readers)
    raise AssertionError(o_kind)


def identities_linked(model: Model, agent: int, a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Joined by a live, verified link of this agent (a pending link is not live)."""
    x, y = model.actors.get(a), model.actors.get(b)
    if x is None or y is None or x == y:
        return False
    return (agent, min(x, y), max(x, y)) in model.live_links


def pending_between(model: Model, agent: int, o: Audience, d: Audience) -> bool:
    """Would a pending link of this agent join these two single-reader audiences? (for events)"""
    if not (o[0] == "members" and len(o[2]) == 1 and d[0] == "members" and len(d[2]) == 1):
        return False
    x, y = model.actors.get((o[1], o[2][0])), model.actors.get((d[1], d[2][0]))
    return x is not None and y is not None and x != y and (agent, min(x, y), max(x, y)) in model.pending_links


def linked_allows(model: Model, agent: int, o: Audience, d: Audience) -> bool:
    """The identity-aware extension: one person's single-reader members evidence follows them
    into their other single-reader members conversation, by a live link of this agent."""
    return (o[0] == "members" and len(o[2]) == 1 and d[0] == "members" and len(d[2]) == 1
            and identities_linked(model, agent, (o[1], o[2][0]), (d[1], d[2][0])))


def sealed_allows(o: Audience, own_conv: int | None, dest: Conv) -> bool:
    """A legacy origin (members/external with no readers) reaches its own conversation only,
    and only while that conversation's kind and namespace are the origin's."""
    return (is_legacy(o) and own_conv is not None and own_conv == dest.id
            and dest.audience[0] == o[0] and dest.audience[1] == o[1] and bool(o[1]))


def origin_allows(model: Model, agent: int, o: Audience, own_conv: int | None, dest: Conv) -> bool:
    """May an origin (of this own conversation) be disclosed into this turn's destination?"""
    d = dest.audience
    return audience_allows(o, d) or linked_allows(model, agent, o, d) or sealed_allows(o, own_conv, dest)


def message_allows(model: Model, agent: int, m: Msg, dest: Conv) -> bool:
    return origin_allows(model, agent, m.audience, m.conv, dest)


def memory_allows(model: Model, agent: int, k: Mem, dest: Conv) -> bool:
    return origin_allows(model, agent, k.audience, k.own_conv, dest)


def lineage_denial(model: Model, roots: list[int], agent: int, dest: Conv) -> str | None:
    """Walk these messages and everything they were built from; why that is denied, or None."""
    if len(roots) > HISTORY_CAP + 1:
        return f"{len(roots)} input messages"
    seen = {("m", r) for r in roots}
    frontier = list(seen)
    while frontier:
        kind, ident = frontier.pop()
        if kind == "m":
            m = model.msgs.get(ident)
            children = [] if m is None else [("m", h) for h in m.history] + [("k", k) for k in m.memories]
        else:
            k = model.mems.get(ident)
            children = [] if k is None else [("m", s) for s in k.sources]
        for child in children:
            if child not in seen:
                seen.add(child)
                frontier.append(child)
    if len(seen) > NODE_CAP:
        return f"lineage of {len(seen)} nodes exceeds the {NODE_CAP}-node cap"
    for kind, ident in sorted(seen):
        if kind == "m":
            m = model.msgs.get(ident)
            if m is None:
                return f"lineage names missing message {ident}"
            if len(m.history) > HISTORY_CAP:
                return f"lineage message {ident} has {len(m.history)} history ids"
            if not m.evidence:
                return f"lineage message {ident} has no evidence"
            if not message_allows(model, agent, m, dest):
                return f"lineage message {ident} ({m.audience}, conversation {m.conv}) may not reach {dest}"
        else:
            k = model.mems.get(ident)
            if k is None:
                return f"lineage names missing memory {ident}"
            if not memory_allows(model, agent, k, dest):
                return f"lineage memory {ident} ({k.audience}, formed in {k.own_conv}) may not reach {dest}"
    return None


@dataclass
class TurnModel:
    id: int
    agent: int
    dest: Conv
    requester_ids: set[int]
    in_context: set[int]
    lineage_cache: dict[int, str | None] = field(default_factory=dict)


def searchable(m: Msg) -> bool:
    return m.state == "finished" and m.role in ("user", "assistant")


def first_failure(model: Model, turn: TurnModel, mid: int) -> tuple[str, str] | None:
    """The first rule that keeps this message out of this turn, as (rule, detail), or None.
    The rules that can remove a match are named as the audit row names them."""
    m = model.msgs.get(mid)
    if m is None:
        return ("missing", "no such message")
    if not searchable(m):
        return ("unsearchable", f"not a finished user/assistant message ({m.state} {m.role})")
    if model.convs[m.conv].agent != turn.agent:
        return ("perspective", "another agent's message")
    if mid in turn.in_context:
        return ("already_in_context", "the turn already has it")
    if not m.evidence:
        return ("no_evidence", "no source evidence")
    if not message_allows(model, turn.agent, m, turn.dest):
        return ("audience", f"{m.audience} of conversation {m.conv} may not reach {turn.dest}")
    if m.history or m.memories:
        if mid not in turn.lineage_cache:
            turn.lineage_cache[mid] = lineage_denial(model, [mid], turn.agent, turn.dest)
        if turn.lineage_cache[mid] is not None:
            return ("lineage", turn.lineage_cache[mid])
    return None


def tokens(body: str) -> set[str]:
    return set(re.findall(r"[a-z]+", body.lower()))


# ---------------------------------------------------------------------------------------------
# Building a world.

def chance(data, percent: int, label: str) -> bool:
    """True with about this probability. The window sits away from 0 and 99, the values
    Hypothesis favours when generating, and shrinking (toward 0) turns the feature off."""
    return 20 <= data.draw(st.integers(0, 99), label=label) < 20 + percent


def draw_audience(data, model: Model, pool: dict[str, list[str]], default_ns: str, label: str) -> Audience:
    kind = data.draw(st.sampled_from(KINDS), label=f"{label} kind")
    ns = default_ns
    if kind != "public" and chance(data, 17, f"{label} cross-namespace"):
        ns = data.draw(st.sampled_from(model.namespaces), label=f"{label} namespace")
    if kind == "dm":
        return ("members", ns, (data.draw(st.sampled_from(pool[ns]), label=f"{label} reader"),))
    if kind == "room":
        readers = data.draw(st.lists(st.sampled_from(pool[ns]), min_size=2, max_size=3, unique=True),
                            label=f"{label} readers")
        return ("members", ns, tuple(sorted(readers)))
    if kind == "external":
        if chance(data, 25, f"{label} legacy (no readers)?"):
            return ("external", ns, ())
        readers = data.draw(st.lists(st.sampled_from(pool[ns]), min_size=1, max_size=2, unique=True),
                            label=f"{label} readers")
        return ("external", ns, tuple(sorted(readers)))
    return (kind, ns, ())


# Sibling reader sets, relative to a base set {x, y}: inside it, overlapping it, disjoint from it,
# equal to it, around it (and so, among themselves, every relation again: {x} and {z, w} are
# disjoint, {y, z} and {x, y, z} nested, ...).
SIBLINGS = {"inside": "x", "overlapping": "yz", "disjoint": "zw", "equal": "xy", "around": "xyz"}


def sibling_family(data, kind: str) -> list[tuple[str, tuple[str, ...]]]:
    """The base set and three to five of its siblings, with the external ids drawn in any order."""
    x, y, z, w = data.draw(st.permutations(EXTERNAL_IDS), label="sibling reader order")
    ids = {"x": x, "y": y, "z": z, "w": w}
    # Always one inside the base, one around it and one overlapping it (so: nested both ways,
    # overlapping, and disjoint between the inside and the overlapping sets), and perhaps a set
    # disjoint from the base, or equal to it.
    names = ["inside", "around", "overlapping"] + data.draw(
        st.lists(st.sampled_from(["disjoint", "equal"]), max_size=2, unique=True), label=f"{kind} siblings")
    return [("base", (x, y) if x < y else (y, x))] + [
        (name, tuple(sorted(ids[c] for c in SIBLINGS[name]))) for name in names]


def relation_of(d: set[str], o: set[str]) -> str:
    """How a destination's readers relate to an origin's (for events)."""
    if d == o:
        return "equal"
    if d < o:
        return "destination inside origin"
    if o < d:
        return "origin inside destination"
    return "overlapping" if d & o else "disjoint"


def _render(parts: list[tuple[str, str, str]]) -> str:
    out = []
    for word, case, sep in parts:
        out.append(word if case == "lower" else word.title() if case == "title" else word.upper())
        out.append(sep)
    return "".join(out[:-1])


# A body: 1-4 vocabulary words in any case, separated by spaces and punctuation.
BODIES = st.lists(st.tuples(st.sampled_from(VOCAB), st.sampled_from(["lower", "lower", "title", "upper"]),
                            st.sampled_from([" ", " ", ", ", ". ", " - ", "; "])),
                  min_size=1, max_size=4).map(_render)


def draw_focus(data, model: Model, turn: bool = False) -> int:
    """A conversation of one of the focus shapes (twins, siblings, Slack Connect, legacy), each
    shape as likely as the others however many conversations it has. Turns take the shapes in
    turn, from a drawn start, so that one example's few turns meet several of them."""
    # Twins count twice: a link only matters between them, and only when both are chosen.
    groups = sorted(model.focus_groups) + (["twins"] if "twins" in model.focus_groups else [])
    if turn:
        if model.focus_turns == 0:
            model.focus_turns = data.draw(st.integers(0, len(groups) - 1), label="first focus shape")
        group = groups[model.focus_turns % len(groups)]
        model.focus_turns += 1
    else:
        group = data.draw(st.sampled_from(groups), label="focus shape")
    return data.draw(st.sampled_from(model.focus_groups[group]), label=f"focus conversation ({group})")


def draw_body(data, label: str) -> str:
    return data.draw(BODIES, label=label)


def bulk_tool_messages(conn, model: Model, conv: Conv, n: int, minute: float) -> list[int]:
    """n public tool messages with evidence (never searchable), inserted in one statement."""
    ids = [r["id"] for r in conn.execute(
        "insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace,"
        " audience_readers, created_at, updated_at)"
        " select %s, 'tool', 'log line ' || g, 'finished', 'public', %s, '{}', %s, %s"
        "   from generate_series(1, %s) g returning id",
        (conv.id, conv.connector_ns, at(minute), at(minute), n)).fetchall()]
    conn.execute("insert into message_source_evidence (message_id, kind) select unnest(%s::bigint[]), 'ingest'",
                 (ids,))
    for i in ids:
        model.msgs[i] = Msg(i, conv.id, "tool", "finished", ("public", conv.connector_ns, ()), True, None,
                            at(minute), "log line")
    return ids


def add_message(conn, model: Model, conv: Conv, *, role: str, body: str, state: str, speaker: tuple[str, str] | None,
                minute: float, evidence: bool, audience: Audience | None, history: list[int],
                memories: list[int]) -> int:
    aud_in = None
    if audience is not None:
        # Ingest refuses an external audience without readers; a legacy one is written with a
        # placeholder reader and blanked with SQL, as rows stored before the fix are.
        readers = [LEGACY_PLACEHOLDER] if is_legacy(audience) else list(audience[2])
        aud_in = ingest.Audience(kind=audience[0], namespace=audience[1], readers=readers)
    msg = ingest.MessageIn(
        role=role, body=body, state=state, created_at=at(minute),
        speaker=ingest.ActorRef(namespace=speaker[0], external_id=speaker[1]) if speaker else None,
        audience=aud_in, evidence=ingest.DEFAULT_EVIDENCE if evidence else None,
        history_message_ids=history, memory_ids=memories)
    mid, created = ingest.append_message(conn, model.ws, conv.id, msg)
    assert created
    if audience is not None and is_legacy(audience):
        conn.execute("update messages set audience_readers = '{}' where id = %s", (mid,))
    model.msgs[mid] = Msg(mid, conv.id, role, state, audience if audience is not None else conv.audience, evidence,
                          model.actors[speaker] if speaker else None, at(minute), body,
                          sorted(set(history)), sorted(set(memories)))
    return mid


def add_memory(conn, model: Model, agent: int, audience: Audience, sources: list[int], body: str,
               formed_in: Conv | None = None, missing_turn: bool = False) -> int:
    """A memory, inserted with SQL; formed in a turn of `formed_in` when given (its own
    conversation), or naming a turn that does not exist."""
    turn_id = None
    if formed_in is not None:
        turn_id = conn.execute("insert into turns (workspace_id, agent_id, conversation_id) values (%s, %s, %s)"
                               " returning id", (model.ws, formed_in.agent, formed_in.id)).fetchone()["id"]
    elif missing_turn:
        turn_id = MISSING_TURN
    kid = conn.execute(
        "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,"
        " source_message_ids, turn_id) values (%s, %s, %s, %s, %s, %s, %s, %s) returning id",
        (model.ws, agent, body, audience[0], audience[1], list(audience[2]), sources, turn_id)).fetchone()["id"]
    model.mems[kid] = Mem(kid, agent, audience, list(sources), formed_in.id if formed_in is not None else None)
    return kid


def build_world(conn, data, heavy: bool) -> Model:
    """A random world. `heavy` always adds twin DMs, both kinds of siblings, legacy conversations
    and a lineage at the caps."""
    ws = conn.execute("insert into workspaces (slug, name) values ('acme', 'Acme') returning id").fetchone()["id"]
    connectors = data.draw(st.lists(st.sampled_from(CONNECTORS), min_size=2, max_size=3, unique=True),
                           label="connectors")
    namespaces = [f"{t}:{n}" for t, n in connectors]
    connector_of = {f"{t}:{n}": (t, n) for t, n in connectors}
    n_agents = 2 if heavy else data.draw(st.integers(1, 2), label="agents")
    model = Model(ws=ws, namespaces=namespaces, agents=[])

    pool: dict[str, list[str]] = {}
    for ns in namespaces:
        pool[ns] = data.draw(st.lists(st.sampled_from(EXTERNAL_IDS), min_size=2, max_size=4, unique=True),
                             label=f"actors of {ns}")
        for ext in pool[ns]:
            name = data.draw(st.sampled_from(DISPLAY_NAMES), label="display name")
            model.actors[(ns, ext)] = ingest.ensure_actor(conn, ws, ns, ingest.ActorRef(external_id=ext,
                                                                                        display_name=name))

    def create_conversation(agent_slug: str, connector: tuple[str, str], audience: Audience, ext: str) -> Conv:
        readers = list(audience[2]) if audience[0] in PRIVATE else []
        if is_legacy(audience):
            readers = [LEGACY_PLACEHOLDER]   # ingest needs a reader; blanked below, as legacy rows are
        conv_in = ingest.ConversationIn(
            agent=agent_slug, connector=ingest.ConnectorRef(type=connector[0], name=connector[1]), external_id=ext,
            title=ext, created_at=T0,
            audience=ingest.Audience(kind=audience[0], namespace=audience[1], readers=readers))
        cid, _ = ingest.upsert_conversation(conn, ws, conv_in)
        if is_legacy(audience):
            conn.execute("update conversations set audience_readers = '{}' where id = %s", (cid,))
        agent_id = conn.execute("select agent_id from conversations where id = %s", (cid,)).fetchone()["agent_id"]
        if agent_id not in model.agents:
            model.agents.append(agent_id)
            model.slugs[agent_id] = agent_slug
        conv = Conv(cid, agent_id, f"{connector[0]}:{connector[1]}", audience)
        model.convs[cid] = conv
        return conv

    n_convs = data.draw(st.integers(3, 7), label="conversations")
    convs: list[Conv] = []
    for i in range(n_convs):
        agent = AGENTS[i] if i < n_agents else AGENTS[data.draw(st.integers(0, n_agents - 1), label="agent")]
        connector = data.draw(st.sampled_from(connectors), label="connector")
        audience = draw_audience(data, model, pool, f"{connector[0]}:{connector[1]}", f"conversation {i}")
        convs.append(create_conversation(agent, connector, audience, f"C{i}"))

    def focus(conv: Conv, group: str) -> Conv:
        convs.append(conv)
        model.focus_convs.append(conv.id)
        model.focus_groups.setdefault(group, []).append(conv.id)
        return conv

    # Twin DMs, often: the same agent's direct conversations with two identities that a link
    # may (or, revoked or pending, may not) join.
    twins: list[tuple[str, str]] = []
    twin_agent = None
    pending_twin = None
    twin_slug = AGENTS[0]
    if heavy or chance(data, 60, "twin DMs?"):
        twin_slug = AGENTS[data.draw(st.integers(0, n_agents - 1), label="twin agent")]
        for j in range(2):
            connector = data.draw(st.sampled_from(connectors), label="twin connector")
            ns = f"{connector[0]}:{connector[1]}"
            reader = data.draw(st.sampled_from(pool[ns]), label="twin reader")
            dm = create_conversation(twin_slug, connector, ("members", ns, (reader,)), f"D{j}")
            twin_agent = focus(dm, "twins").agent
            twins.append((ns, reader))
        # and often a third DM of the same agent, another identity that a link recorded without
        # proof (pending) claims is the first twin's person: it must grant nothing until verified.
        others = [a for a in sorted(model.actors) if a not in twins and not a[1].startswith("X")]
        if twins[0] != twins[1] and others and (heavy or chance(data, 70, "a pending twin?")):
            claimed = data.draw(st.sampled_from(others), label="pending twin")
            focus(create_conversation(twin_slug, connector_of[claimed[0]], ("members", claimed[0], (claimed[1],)),
                                      "D-pending"), "twins")
            pending_twin = claimed
    # Siblings, often: four to six private rooms, or external conversations, of one agent in
    # one namespace whose reader sets are, pair by pair, equal, nested (either way), overlapping
    # or disjoint, where the subset rule decides; sometimes the base set again in another
    # namespace (the same external ids there are other people), and a workspace-visible room
    # beside them, which may reach members but never external.
    rooms: list[tuple[str, str]] = []      # first readers of the sibling rooms
    if heavy or chance(data, 65, "siblings?"):
        slug = AGENTS[data.draw(st.integers(0, n_agents - 1), label="sibling agent")]
        if twins and not chance(data, 25, "siblings of another agent?"):
            slug = twin_slug
        connector = data.draw(st.sampled_from(connectors), label="sibling connector")
        ns = f"{connector[0]}:{connector[1]}"
        kinds = ["members", "external"] if heavy else data.draw(
            st.sampled_from([["members"], ["external"], ["members", "external"]]), label="sibling kinds")
        for kind in kinds:
            family = sibling_family(data, kind)
            for name, readers in family:
                focus(create_conversation(slug, connector, (kind, ns, readers), f"S-{kind}-{name}"), kind)
                if kind == "members" and (ns, readers[0]) in model.actors:
                    rooms.append((ns, readers[0]))
            if len(namespaces) > 1 and chance(data, 40, "the same readers in another namespace?"):
                other = data.draw(st.sampled_from([n for n in namespaces if n != ns]), label="other namespace")
                focus(create_conversation(slug, connector_of[other], (kind, other, family[0][1]),
                                          f"S-{kind}-elsewhere"), kind)
        if heavy or chance(data, 30, "a workspace room beside them?"):
            focus(create_conversation(slug, connector, ("workspace", ns, ()), "S-ws"), kinds[0])
    # The Slack Connect shape, sometimes: one agent's external conversations in one namespace,
    # one shared with Globex, one with Initech, and one with a subset of Globex's people.
    if heavy or chance(data, 35, "Slack Connect?"):
        slug = AGENTS[data.draw(st.integers(0, n_agents - 1), label="Slack Connect agent")]
        connector = data.draw(st.sampled_from(connectors), label="Slack Connect connector")
        ns = f"{connector[0]}:{connector[1]}"
        for ext in SLACK_CONNECT:
            model.actors[(ns, ext)] = ingest.ensure_actor(conn, ws, ns, ingest.ActorRef(external_id=ext))
        globex = ("XGLOBEX", "XGLOBEX2") if chance(data, 50, "two Globex readers?") else ("XGLOBEX",)
        for ext, readers in (("X-globex", globex), ("X-initech", ("XINITECH",)), ("X-globex-legal", ("XGLOBEX",))):
            focus(create_conversation(slug, connector, ("external", ns, readers), ext), "Slack Connect")
    # Legacy external conversations, often: stored before the fix with no readers, sealed to
    # themselves; often two in one namespace (two empty sets), sometimes a live external
    # conversation beside them, which must receive nothing of theirs.
    if heavy or chance(data, 60, "legacy conversations?"):
        slug = AGENTS[data.draw(st.integers(0, n_agents - 1), label="legacy agent")]
        connector = data.draw(st.sampled_from(connectors), label="legacy connector")
        ns = f"{connector[0]}:{connector[1]}"
        for j in range(data.draw(st.sampled_from([1, 2, 2]), label="legacy conversations")):
            focus(create_conversation(slug, connector, ("external", ns, ()), f"L{j}"), "legacy")
        if chance(data, 50, "a live external conversation beside them?"):
            readers = data.draw(st.lists(st.sampled_from(pool[ns]), min_size=1, max_size=2, unique=True),
                                label="live external readers")
            focus(create_conversation(slug, connector, ("external", ns, tuple(sorted(readers))), "L-live"),
                  "legacy")
    model.searchable_convs = [c.id for c in convs]
    everyone = sorted(model.actors)

    # Messages and memories, interleaved so provenance names only what already exists. Every
    # focus conversation first says something of its own (or the subset rule is seldom asked).
    messages: list[int] = []
    memories: list[int] = []
    for cid in model.focus_convs:
        conv = model.convs[cid]
        for _ in range(data.draw(st.integers(1, 2), label="focus messages")):
            same_ns = [a for a in everyone if a[0] == conv.connector_ns]
            messages.append(add_message(
                conn, model, conv, role="user", body=draw_body(data, "body"), state="finished",
                speaker=data.draw(st.sampled_from(same_ns), label="speaker"),
                minute=data.draw(st.integers(1, 400), label="minute"), evidence=not chance(data, 10, "no evidence?"),
                audience=None, history=[], memories=[]))
    n_items = data.draw(st.integers(10, 40), label="items")
    for i in range(n_items):
        if messages and chance(data, 14, "memory?"):
            # Often formed from widely visible messages, so that its own audience decides.
            wide = [m for m in messages if m in model.msgs and model.msgs[m].audience[0] == "public"]
            pick = wide if wide and chance(data, 50, "wide sources?") else messages
            sources = data.draw(st.lists(st.sampled_from(pick), max_size=3, unique=True), label="memory sources")
            agent = data.draw(st.sampled_from(model.agents), label="memory agent")
            own = [c for c in convs if c.agent == agent]
            formed_in, missing_turn = None, False
            if chance(data, 22, "legacy memory (no readers)?"):
                # Sealed to the conversation of the turn it was formed in: mostly an external
                # one, of its namespace; or formed in no turn, or in a turn that does not exist.
                where = data.draw(st.sampled_from(["turn", "turn", "turn", "no turn", "missing turn"]),
                                  label="legacy memory formed")
                ns = data.draw(st.sampled_from(namespaces), label="legacy memory namespace")
                if where == "turn":
                    external = [c for c in own if c.audience[0] == "external"]
                    formed_in = data.draw(st.sampled_from(external if external and chance(data, 75, "external?")
                                                          else own), label="formed in")
                    if chance(data, 85, "of its conversation's namespace?"):
                        ns = formed_in.audience[1]
                missing_turn = where == "missing turn"
                audience = ("external", ns, ())
            else:
                audience = draw_audience(data, model, pool, data.draw(st.sampled_from(namespaces)), f"memory {i}")
                if chance(data, 30, "formed in a turn?"):
                    formed_in = data.draw(st.sampled_from(own), label="formed in")
            memories.append(add_memory(conn, model, agent, audience, sources, f"memory {i}", formed_in,
                                       missing_turn))
            continue
        if model.focus_groups and chance(data, 50 if heavy else 40, "in a focus room?"):
            conv = model.convs[draw_focus(data, model)]
        else:
            conv = data.draw(st.sampled_from(convs), label="message conversation")
        role = data.draw(st.sampled_from(ROLES), label="role")
        speaker = None
        if role == "user":
            same_ns = [a for a in everyone if a[0] == conv.connector_ns]
            speaker = data.draw(st.sampled_from(same_ns) if not chance(data, 20, "foreign speaker?")
                                else st.sampled_from(everyone), label="speaker")
        history_ids, memory_ids = [], []
        if role == "assistant" and messages:
            # Mostly built from its own room's history, sometimes from anywhere in the workspace.
            local = [m for m in messages if m in model.msgs and model.msgs[m].conv == conv.id]
            choices = local if local and data.draw(st.booleans(), label="local history?") else messages
            memory_only = memories and chance(data, 30, "built on memories alone?")
            if not memory_only:
                history_ids = data.draw(st.lists(st.sampled_from(choices), max_size=3, unique=True), label="history")
            if memory_only or (memories and chance(data, 35, "built on memories?")):
                # Often on memories formed in this very room (which a legacy memory may reach).
                here = [k for k in memories if model.mems[k].own_conv == conv.id]
                kpool = here if here and chance(data, 50, "memories formed here?") else memories
                memory_ids = data.draw(st.lists(st.sampled_from(kpool), max_size=2, unique=True), label="memories")
        audience = None
        if chance(data, 14, "own audience?"):
            audience = draw_audience(data, model, pool, conv.connector_ns, f"message {i}")
        messages.append(add_message(
            conn, model, conv, role=role, body=draw_body(data, "body"),
            state=data.draw(st.sampled_from(["finished"] * 5 + ["streaming"]), label="state"),
            speaker=speaker, minute=data.draw(st.integers(1, 400), label="minute"),
            evidence=not chance(data, 14, "no evidence?"),
            audience=audience, history=history_ids, memories=memory_ids))

    # A lineage right at the caps: a reply whose memory names F fillers (2 + F nodes) and a
    # reply whose history names H of them.
    if heavy:
        fillers_n = data.draw(st.sampled_from([NODE_CAP - 2, NODE_CAP - 1]), label="fillers")
        history_n = data.draw(st.sampled_from([HISTORY_CAP, HISTORY_CAP + 1]), label="history ids")
        log = create_conversation(AGENTS[0], connectors[0], ("public", namespaces[0], ()), "log")
        fillers = bulk_tool_messages(conn, model, log, fillers_n, 0)
        big = add_memory(conn, model, model.convs[log.id].agent, ("public", namespaces[0], ()), fillers, "big memory")
        for what, hist, mems in ((f"{fillers_n + 2} lineage nodes", [], [big]),
                                 (f"{history_n} history ids", fillers[:history_n], [])):
            # Mostly in the public log itself, saying every word (so every query of this agent
            # meets them), sometimes in any room.
            conv, body = log, " ".join(VOCAB)
            if chance(data, 20, "capped reply elsewhere?"):
                conv = data.draw(st.sampled_from(convs), label="capped reply conversation")
                body = draw_body(data, "body")
            messages.append(add_message(conn, model, conv, role="assistant", body=body,
                                        state="finished", speaker=None,
                                        minute=data.draw(st.integers(1, 400), label="minute"),
                                        evidence=True, audience=None, history=hist, memories=mems))
            model.capped[messages[-1]] = what

    # Identity links: verified at once, or recorded pending (no proof yet: grants nothing), then
    # sometimes verified, sometimes revoked; verified ones sometimes revoked.
    twin_link = bool(twins) and twins[0] != twins[1] and not chance(data, 20, "no twin link?")
    link_ops = data.draw(st.integers(0, 5), label="links") + twin_link
    open_links: dict[tuple[int, int, int], str] = {}   # not revoked: key -> "pending" | "live"
    if pending_twin is not None:
        a, b = twins[0], pending_twin
        key = (twin_agent, min(model.actors[a], model.actors[b]), max(model.actors[a], model.actors[b]))
        link_id = links.link(conn, ws, links.LinkIn(
            agent=model.slugs[twin_agent], a=links.ActorKey(namespace=a[0], external_id=a[1]),
            b=links.ActorKey(namespace=b[0], external_id=b[1]), proof=None))
        fate = data.draw(st.sampled_from(["stays pending"] * 3 + ["verified", "revoked"]), label="pending twin fate")
        if fate == "verified":
            links.verify(conn, ws, link_id, proof="verified later in test")
            model.live_links.add(key)
            open_links[key] = "live"
        elif fate == "revoked":
            links.revoke(conn, ws, link_id)
        else:
            model.pending_links.add(key)
            open_links[key] = "pending"
    for op in range(link_ops):
        agent_index = data.draw(st.integers(0, len(model.agents) - 1), label="link agent")
        if twin_link and op == 0 and not chance(data, 25, "twin link for another agent?"):
            agent_index = model.agents.index(twin_agent)
        # Mostly between first readers of private rooms and DMs (where a link can matter: only
        # between two single-reader audiences), else any two actors.
        first_readers = sorted({(c.audience[1], c.audience[2][0]) for c in convs
                                if c.audience[0] == "members" and (c.audience[1], c.audience[2][0]) in model.actors})
        candidates = (first_readers if len(first_readers) >= 2 and not chance(data, 25, "any link?")
                      else everyone)
        a, b = data.draw(st.lists(st.sampled_from(candidates), min_size=2, max_size=2, unique=True), label="link pair")
        if twin_link and op == 0:
            a, b = twins
            # Or a twin and a sibling room's first reader: a link only carries single-reader
            # evidence, so it must not open the room to the DM, nor the DM to the room.
            others = [r for r in rooms if r not in twins]
            if others and chance(data, 50, "link a twin to a room's first reader?"):
                a, b = twins[data.draw(st.integers(0, 1), label="which twin")], others[0]
        agent = model.agents[agent_index]
        key = (agent, min(model.actors[a], model.actors[b]), max(model.actors[a], model.actors[b]))
        # What becomes of it: verified at once or recorded pending; then perhaps verified
        # later, perhaps revoked. The twins' link is mostly live (the third DM's is mostly pending).
        fates = (["live", "live", "live", "live then revoked", "pending", "pending then verified",
                  "pending then revoked"] if twin_link and op == 0 else
                 ["live", "live", "live", "live then revoked", "live then revoked", "pending",
                  "pending then verified", "pending then revoked"])
        fate = data.draw(st.sampled_from(fates), label="link fate")
        pending = fate.startswith("pending")
        if key in open_links and (pending or open_links[key] == "pending"):
            continue  # re-linking a pair whose link is pending, or pending over a live one: not specified
        link_id = links.link(conn, ws, links.LinkIn(
            agent=model.slugs[agent], a=links.ActorKey(namespace=a[0], external_id=a[1]),
            b=links.ActorKey(namespace=b[0], external_id=b[1]), proof=None if pending else "verified in test"))
        state = "pending" if pending else "live"
        if fate == "pending then verified":
            links.verify(conn, ws, link_id, proof="verified later in test")
            state = "live"
        if fate.endswith("revoked"):
            links.revoke(conn, ws, link_id)
            state = "revoked"
        model.live_links.discard(key)
        model.pending_links.discard(key)
        open_links.pop(key, None)
        if state == "live":
            model.live_links.add(key)
        elif state == "pending":
            model.pending_links.add(key)
        if state != "revoked":
            open_links[key] = state

    for mid in [m for m in messages if model.msgs[m].state == "streaming"]:
        if data.draw(st.booleans(), label="finish streaming?"):
            ingest.patch_message(conn, ws, mid, ingest.MessagePatch(state="finished"))
            model.msgs[mid].state = "finished"

    # A sidecar row re-pointed at another agent, sometimes: the sidecar narrows the scan but never
    # vouches for a row, so the message is found by neither agent (its own no longer scans it,
    # the other re-derives the perspective through connectors) and stays a neighbour in its room.
    indexed = [m for m in messages if searchable(model.msgs[m])]
    if len(model.agents) > 1 and indexed and (heavy or chance(data, 30, "sidecar row re-pointed?")):
        public = [m for m in indexed if model.msgs[m].audience[0] == "public"]   # otherwise often moot
        pick = public if public and not chance(data, 30, "any row?") else indexed
        for mid in data.draw(st.lists(st.sampled_from(pick), min_size=1, max_size=3, unique=True),
                             label="re-pointed sidecar rows"):
            other = next(a for a in model.agents if a != model.convs[model.msgs[mid].conv].agent)
            conn.execute("update message_search set agent_id = %s where message_id = %s", (other, mid))
            model.msgs[mid].sidecar_agent = other

    for mid in data.draw(st.lists(st.sampled_from(messages), max_size=2, unique=True), label="deleted"):
        ingest.delete_message(conn, ws, mid)
        del model.msgs[mid]
    return model


# ---------------------------------------------------------------------------------------------
# One search, checked.

def draw_filters(data, model: Model) -> dict:
    filters: dict = {}
    if not chance(data, 25, "filters?"):
        return filters
    if data.draw(st.booleans(), label="actor filter?"):
        actor = {"external_id": data.draw(st.sampled_from(EXTERNAL_IDS + ["nobody"]), label="actor filter id")}
        if data.draw(st.booleans(), label="actor filter namespace?"):
            actor["namespace"] = data.draw(st.sampled_from([f"{t}:{n}" for t, n in CONNECTORS]), label="ns")
        filters["actor"] = actor
    if chance(data, 25, "requester_only?"):
        filters["requester_only"] = True
    if chance(data, 25, "conversation filter?"):
        filters["conversation_id"] = data.draw(st.sampled_from(model.searchable_convs), label="conversation filter")
    if chance(data, 25, "connector filter?"):
        filters["connector"] = data.draw(st.sampled_from([f"{t}:{n}" for t, n in CONNECTORS]), label="connector")
    if chance(data, 25, "since?"):
        filters["since"] = at(data.draw(st.integers(0, 450), label="since"))
    if chance(data, 25, "until?"):
        filters["until"] = at(data.draw(st.integers(0, 450), label="until"))
    return filters


def speaker_set(model: Model, turn: TurnModel, filters: dict) -> set[int] | None:
    sets = []
    if "actor" in filters:
        f = filters["actor"]
        named = {aid for (ns, ext), aid in model.actors.items()
                 if ext == f["external_id"] and f.get("namespace") in (None, ns)
                 and ns in model.agent_namespaces(turn.agent)}
        sets.append(named | {o for n in named for o in model.linked_to(turn.agent, n)})
    if filters.get("requester_only"):
        sets.append(set(turn.requester_ids))
    if not sets:
        return None
    return set.intersection(*sets)


def passes_filters(model: Model, m: Msg, filters: dict, speakers: set[int] | None) -> bool:
    if speakers is not None and m.speaker not in speakers:
        return False
    if "conversation_id" in filters and m.conv != filters["conversation_id"]:
        return False
    if "connector" in filters and model.convs[m.conv].connector_ns != filters["connector"]:
        return False
    if "since" in filters and m.created < filters["since"]:
        return False
    if "until" in filters and not m.created < filters["until"]:
        return False
    return True


def expected_neighbours(model: Model, turn: TurnModel, hit: Msg) -> tuple[list[int], list[int]]:
    ordered = [m.id for m in sorted((m for m in model.msgs.values() if m.conv == hit.conv),
                                    key=lambda m: (m.created, m.id))]
    pos = ordered.index(hit.id)
    before = [i for i in ordered[:pos] if first_failure(model, turn, i) is None][-history.NEIGHBOURS:]
    after = [i for i in ordered[pos + 1:] if first_failure(model, turn, i) is None][:history.NEIGHBOURS]
    return before, after


def new_turn(conn, data, model: Model, heavy: bool) -> TurnModel:
    choices = model.searchable_convs
    if model.focus_groups and chance(data, 60, "into a twin DM, sibling, legacy room...?"):
        dest = model.convs[draw_focus(data, model, turn=True)]
    else:
        dest = model.convs[data.draw(st.sampled_from(choices), label="destination")]
    requester = None
    if not chance(data, 20, "requester?"):
        requester = data.draw(st.sampled_from(sorted(model.actors)), label="requester")
        own = (dest.audience[1], dest.audience[2][0]) if dest.audience[0] == "members" else None
        if own in model.actors and chance(data, 50, "asked by the room's (first) reader?"):
            requester = own  # as people do: in their own DM
    in_dest = sorted(m.id for m in model.msgs.values() if m.conv == dest.id)
    answering = None
    how = data.draw(st.sampled_from(["new", "new", "existing", "none"]), label="answering")
    if how == "new":
        answering = add_message(conn, model, dest, role="user", body=draw_body(data, "question"), state="finished",
                                speaker=requester, minute=data.draw(st.integers(1, 450), label="minute"),
                                evidence=True, audience=None, history=[], memories=[])
    elif how == "existing" and in_dest:
        answering = data.draw(st.sampled_from(in_dest), label="answering message")
    loaded = data.draw(st.lists(st.sampled_from(in_dest), max_size=4, unique=True), label="loaded") if in_dest else []
    padding = 0
    if chance(data, 50 if heavy else 12, "ledger near the budget?"):
        # Leave this much room in the turn's 400-message evidence budget (negative: over it).
        room = data.draw(st.sampled_from([-5, 0, 1, 2, 3, 4, 5, 7, 9, 12, 60]), label="budget room")
        padding = history.EVIDENCE_CAP - room - len(set(loaded) | ({answering} if answering else set()))
    if padding:
        event("turn with an evidence ledger near the budget")
        loaded += bulk_tool_messages(conn, model, dest, padding, 0.5)
    turn_id = turns.register_turn(conn, model.ws, None, turns.TurnIn(
        agent=model.slugs[dest.agent], conversation_id=dest.id, answering_message_id=answering,
        loaded_message_ids=loaded,
        requester=turns.RequesterRef(namespace=requester[0], external_id=requester[1]) if requester else None),
        actors=ingest.actor_resolver(conn, model.ws))
    requester_ids = set()
    if requester:
        rid = model.actors[requester]
        requester_ids = {rid} | model.linked_to(dest.agent, rid)
    context = set(loaded) | ({answering} if answering else set())
    return TurnModel(turn_id, dest.agent, dest, requester_ids, context)


def check_search(conn, data, model: Model, turn: TurnModel) -> None:
    words = data.draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3, unique=True), label="query")
    query = " ".join(w.upper() if chance(data, 20, "query case") else w for w in words)
    limit = data.draw(st.one_of(st.none(), st.integers(-2, 3), st.integers(4, 25)), label="limit")
    filters = draw_filters(data, model)
    used = len(turn.in_context)
    request = history.SearchRequest(turn_id=turn.id, query=query, limit=limit, filters=history.Filters(**filters))
    result = audited(conn, turn.id, history.search_history(conn, model.ws, None, request, None, settings=DECLARED))
    hits = [h["message_id"] for h in result["hits"]]
    where = (f"turn {turn.id} into conversation {turn.dest.id} {turn.dest.audience} (agent {turn.agent}), "
             f"query {query!r}, filters {filters}")

    # (a) Soundness: every message shown (hits, neighbours, message_ids) passes the reference.
    shown = [*result["message_ids"], *hits,
             *(n["message_id"] for h in result["hits"] for side in ("before", "after") for n in h["neighbours"][side])]
    for mid in shown:
        why = first_failure(model, turn, mid)
        assert why is None, f"DISCLOSED message {mid} ({model.msgs.get(mid)}): {why}; {where}"
    assert set(shown) == set(result["message_ids"]), where

    # The eligible matching messages, by the reference.
    speakers = speaker_set(model, turn, filters)
    query_words = {w.lower() for w in words}
    matching = [m for m in model.msgs.values()
                if searchable(m) and model.convs[m.conv].agent == turn.agent and m.sidecar_agent is None
                and tokens(m.body) & query_words and passes_filters(model, m, filters, speakers)]
    eligible = {m.id for m in matching if first_failure(model, turn, m.id) is None}
    assert not any(is_legacy(model.msgs[i].audience) and model.msgs[i].conv != turn.dest.id for i in eligible)
    for h in hits:
        assert h in eligible, f"hit {h} does not match the query and filters ({model.msgs[h]}); {where}"
    assert len(hits) == len(set(hits))

    # (b) Completeness: as many hits as the limit allows, and nothing better left out.
    requested = clamp_limit(limit, history.LIMIT_DEFAULT, history.LIMIT_MAX)
    remaining = history.EVIDENCE_CAP - used
    if remaining <= 0:
        event("budget exhausted before the search")
        assert result["status"] == "search_budget_exhausted" and hits == [] and result["message_ids"] == []
        turn.in_context |= set(result["message_ids"])
        return
    effective = max(1, min(requested, remaining // history.MESSAGES_PER_HIT))
    wanted = min(effective, len(eligible))
    # A hit allowed on its own can still be withheld when the turn's whole evidence with it would
    # overflow the lineage caps (the reply's recheck walks it all together); the audit row counts
    # those under `lineage` on top of the per-message rule. Each such withheld message must be
    # jointly denied by the reference walk, checked below.
    reference_lineage = sum(1 for m in matching if (first_failure(model, turn, m.id) or ("",))[0] == "lineage")
    audit_row = conn.execute("select exclusions from search_audit where turn_id = %s order by id desc limit 1",
                             (turn.id,)).fetchone()
    jointly_withheld = audit_row["exclusions"]["lineage"] - reference_lineage
    assert jointly_withheld >= 0, where
    guard = lineage_denial(model, sorted(turn.in_context), turn.agent, turn.dest) is None

    def jointly_denied(mid: int) -> bool:
        before, after = expected_neighbours(model, turn, model.msgs[mid])
        roots = sorted(turn.in_context | set(result["message_ids"]) | {mid, *before, *after})
        return guard and lineage_denial(model, roots, turn.agent, turn.dest) is not None

    if jointly_withheld:
        event("a hit withheld by the joint lineage cap")
        assert any(jointly_denied(mid) for mid in eligible - set(hits)), where
    if result["status"] == "ok":
        assert len(hits) == wanted - jointly_withheld, (
            f"{len(hits)} hits, expected {wanted} (effective limit {effective}, eligible {sorted(eligible)}); {where}")
    else:
        assert result["status"] == "search_budget_exhausted"
        assert len(hits) < wanted, where

    # Neighbours: exactly the two nearest eligible messages on either side; message_ids exactly
    # the hits and their neighbours, less what the turn already had.
    expected_ids: list[int] = []
    for hit in result["hits"]:
        before, after = expected_neighbours(model, turn, model.msgs[hit["message_id"]])
        got = tuple([n["message_id"] for n in hit["neighbours"][side]] for side in ("before", "after"))
        assert got == (before, after), f"neighbours of {hit['message_id']}: {got} != {(before, after)}; {where}"
        expected_ids += [i for i in [*before, hit["message_id"], *after]
                         if i not in turn.in_context and i not in expected_ids]
    assert result["message_ids"] == expected_ids, where
    assert used + len(expected_ids) <= history.EVIDENCE_CAP
    assert result["budget"] == {"evidence": used + len(expected_ids), "cap": history.EVIDENCE_CAP}

    # Ranking: no eligible matching message left out scores above the lowest hit.
    if eligible:
        # Statistics over what the destination may receive (issue 29): the agent's messages whose
        # audience the rule admits, evidence and lineage aside (the documented residual).
        receivable = {m.id for m in model.msgs.values() if message_allows(model, turn.agent, m, turn.dest)}
        bm25 = bm25_reference(conn, [turn.agent], query_words, counted=receivable)
        rows = conn.execute(
            "select s.message_id as id, extract(epoch from (now() - m.created_at))::float8 as age"
            "  from message_search s join messages m on m.id = s.message_id where s.message_id = any(%s)",
            (sorted(eligible),)).fetchall()
        assert {r["id"] for r in rows} == eligible
        rows = [{**r, "lexical": bm25[r["id"]]} for r in rows]
        # Where the requester spoke, among the messages the destination may receive (with evidence).
        spoke = {m.conv for m in model.msgs.values()
                 if m.speaker is not None and m.speaker in turn.requester_ids and m.id in receivable
                 and m.evidence and m.role in ("user", "assistant") and m.state == "finished"}
        w = history.WEIGHTS
        scores, features = {}, {}
        for r in rows:
            conv = model.msgs[r["id"]].conv
            recency = 0.5 ** (max(r["age"], 0) / (86400.0 * history.RECENCY_HALF_LIFE_DAYS))
            f = {"lexical": r["lexical"], "recency": recency, "requester_spoke": conv in spoke,
                 "same_conversation": conv == turn.dest.id}
            features[r["id"]] = f
            scores[r["id"]] = f["lexical"] * (1 + w["recency"] * recency + w["requester_spoke"] * f["requester_spoke"]
                                              + w["same_conversation"] * f["same_conversation"])
        for hit in result["hits"]:
            mine = features[hit["message_id"]]
            got = hit["features"]
            assert (got["requester_spoke"], got["same_conversation"]) == (
                mine["requester_spoke"], mine["same_conversation"]), f"features of {hit['message_id']}; {where}"
            assert math.isclose(got["lexical"], mine["lexical"], rel_tol=1e-6)
            assert math.isclose(hit["score"], scores[hit["message_id"]], rel_tol=1e-6), where
        got_scores = [h["score"] for h in result["hits"]]
        assert got_scores == sorted(got_scores, reverse=True), where
        if hits:
            floor = min(scores[h] for h in hits)
            for mid in eligible - set(hits):
                if jointly_withheld and jointly_denied(mid):
                    continue
                assert scores[mid] <= floor * (1 + SCORE_TOLERANCE) + SCORE_TOLERANCE, (
                    f"MISSING eligible message {mid} (score {scores[mid]}) ranked above the cut ({floor}); {where}")

    # The audit row: exclusion counts by the first rule that removed each match.
    audit = conn.execute("select * from search_audit where turn_id = %s order by id desc limit 1",
                         (turn.id,)).fetchone()
    counts = {k: 0 for k in history.EXCLUSION_KEYS}
    for m in matching:
        why = first_failure(model, turn, m.id)
        if why is not None:
            counts[why[0]] += 1
    counts["below_cutoff"] = len(eligible) - len(hits) - jointly_withheld
    counts["lineage"] += jointly_withheld
    for key, n in counts.items():
        if n:
            event(f"a match excluded by {key}")
    if hits:
        event("search with hits")
    if result["status"] != "ok":
        event("budget exhausted during the search")
    if any(not audience_allows(model.msgs[i].audience, turn.dest.audience)
           and not sealed_allows(model.msgs[i].audience, model.msgs[i].conv, turn.dest) for i in result["message_ids"]):
        event("a message disclosed through an identity link")
    if any(is_legacy(model.msgs[i].audience) for i in result["message_ids"]):
        event("legacy origin: disclosed in its own conversation")
    record_cases(model, turn, matching, eligible)
    if any(model.msgs[i].history or model.msgs[i].memories for i in result["message_ids"]):
        event("a message with lineage disclosed")
    for m in matching:
        if m.id in model.capped:
            event(f"a matching reply with {model.capped[m.id]}: {'eligible' if m.id in eligible else 'withheld'}")
    assert audit["exclusions"] == counts, where
    assert [s["message_id"] for s in audit["selected"]] == hits
    assert (audit["status"], audit["effective_limit"]) == (result["status"], effective)

    ledger = {r["message_id"] for r in conn.execute("select message_id from turn_evidence where turn_id = %s",
                                                    (turn.id,)).fetchall()}
    assert ledger == turn.in_context | set(expected_ids)
    turn.in_context = ledger


def record_cases(model: Model, turn: TurnModel, matching: list[Msg], eligible: set[int]) -> None:
    """Events: which of issue 16's cases this search met (a query-matching message of the turn's
    agent whose verdict the case decides)."""
    d = turn.dest.audience
    if is_legacy(d):
        event("search from a legacy destination (no readers)")
    for m in matching:
        if model.convs[m.conv].agent != turn.agent:
            continue
        o = m.audience
        elsewhere = m.conv != turn.dest.id
        if is_legacy(o):
            event("legacy origin: matched from another conversation" if elsewhere
                  else "legacy origin: matched in its own conversation")
            if elsewhere and is_legacy(d) and o[:2] == d[:2]:
                event("legacy origin into another legacy conversation of its namespace (two empty sets)")
        elif o[0] in PRIVATE and elsewhere and is_legacy(d) and o[:2] == d[:2]:
            event("legacy destination: a private match with readers, same kind and namespace")
        elif o[0] in PRIVATE and elsewhere and d[0] == o[0] and d[2]:
            if o[1] == d[1]:
                event(f"{o[0]} siblings: {relation_of(set(d[2]), set(o[2]))}")
            elif set(o[2]) == set(d[2]):
                event(f"{o[0]}: the same readers in another namespace")
        if o[0] == "external" and {*o[2], *d[2]} & set(SLACK_CONNECT) and elsewhere and d[0] == "external":
            event(f"Slack Connect: {'found' if m.id in eligible else 'withheld'}")
        if pending_between(model, turn.agent, o, d) and elsewhere:
            event("a pending identity link between origin and destination")
        for k in m.memories:
            if k in model.mems and is_legacy(model.mems[k].audience):
                where = "formed here" if model.mems[k].own_conv == turn.dest.id else "formed elsewhere or nowhere"
                event(f"a match built on a legacy memory {where}")


def store_reply(conn, data, model: Model, turn: TurnModel) -> list[int]:
    """Store the turn's reply, citing a few memories of its agent (often formed in this room);
    the reply joins the model as the assistant message it is. Returns the memories it cites."""
    mine = [k for k in model.mems.values() if k.agent == turn.agent and len(k.sources) <= 3]
    here = [k.id for k in mine if k.own_conv == turn.dest.id]
    pick = here if here and chance(data, 50, "reply on memories formed here?") else [k.id for k in mine]
    cited = sorted(data.draw(st.lists(st.sampled_from(pick), max_size=2, unique=True), label="reply memories")
                   if pick else [])
    body = draw_body(data, "reply")
    stored = turns.store_reply(conn, model.ws, None, turn.id, turns.ReplyIn(body=body, memory_ids=cited))
    assert set(stored["history_message_ids"]) == turn.in_context and stored["memory_ids"] == cited
    created = conn.execute("select created_at from messages where id = %s", (stored["id"],)).fetchone()["created_at"]
    # A reply takes its conversation's audience (a legacy room's reply has no readers either).
    model.msgs[stored["id"]] = Msg(stored["id"], turn.dest.id, "assistant", "finished", turn.dest.audience, True,
                                   None, created, body, sorted(turn.in_context), cited)
    if any(is_legacy(model.mems[k].audience) for k in cited):
        event("a stored reply cites a legacy memory")
    return cited


def reseal(conn, data, model: Model, turn: TurnModel) -> None:
    """Sometimes an external message the turn saw loses its readers before the reply ships: it is
    then sealed to its own conversation, and the recheck must hold it to that."""
    seen = [i for i in sorted(turn.in_context) if i in model.msgs and model.msgs[i].audience[0] == "external"
            and model.msgs[i].audience[2]]
    if seen and chance(data, 30, "an origin loses its readers after the search?"):
        elsewhere = [i for i in seen if model.msgs[i].conv != turn.dest.id]
        mid = data.draw(st.sampled_from(elsewhere if elsewhere and chance(data, 70, "from elsewhere?") else seen),
                        label="resealed message")
        conn.execute("update messages set audience_readers = '{}' where id = %s", (mid,))
        model.msgs[mid].audience = ("external", model.msgs[mid].audience[1], ())
        event("an origin sealed after the search, " + ("in the destination" if model.msgs[mid].conv == turn.dest.id
                                                       else "from another conversation"))


def check_recheck(conn, model: Model, turn: TurnModel, cited: list[int] | None = None) -> None:
    """(c) The pre-delivery recheck of everything the turn saw agrees with the reference: the
    reply is deliverable iff there are at most 500 messages, each exists, has evidence and may
    reach the destination (the first that fails, in id order, is named), each memory the stored
    reply cites may reach it (likewise), the lineage of the messages, walked together within the
    caps, may too, and so may each cited memory's sources."""
    ids = sorted(turn.in_context)
    cited = cited or []
    expected: tuple = ("ok", None)
    if len(ids) > HISTORY_CAP:
        expected = ("provenance_cap", None)
    else:
        for mid in ids:
            m = model.msgs.get(mid)
            if m is None:
                expected = ("message_deleted", mid)
            elif not m.evidence:
                expected = ("no_evidence", mid)
            elif not message_allows(model, turn.agent, m, turn.dest):
                expected = ("audience", mid)
            else:
                continue
            break
        else:
            for kid in cited:
                if not memory_allows(model, turn.agent, model.mems[kid], turn.dest):
                    expected = ("audience", kid)
                    break
            else:
                if ids and lineage_denial(model, ids, turn.agent, turn.dest) is not None:
                    expected = ("lineage", None)
                elif any(lineage_denial(model, model.mems[k].sources, turn.agent, turn.dest) is not None
                         for k in cited):
                    expected = ("lineage", None)
    verdict = turns.recheck(conn, model.ws, None, turn.id)
    event(f"recheck{' of a reply citing memories' if cited else ''}: {expected[0]}")
    if is_legacy(turn.dest.audience):
        event(f"recheck into a legacy destination: {expected[0]}")
    assert (verdict["reason"], verdict.get("message_id")) == expected, (
        f"recheck of turn {turn.id} into conversation {turn.dest.id} {turn.dest.audience} (cited memories "
        f"{[model.mems[k] for k in cited]}): {verdict}, reference: {expected}")
    assert verdict["deliverable"] == (expected[0] == "ok")


def run_example(world, data, heavy: bool) -> None:
    conn: psycopg.Connection = world.conn
    with conn.transaction(force_rollback=True):
        model = build_world(conn, data, heavy)
        for _ in range(data.draw(st.integers(4, 8) if heavy else st.integers(2, 5), label="turns")):
            turn = new_turn(conn, data, model, heavy)
            check_search(conn, data, model, turn)
            if chance(data, 25, "search again in this turn?"):
                check_search(conn, data, model, turn)
            reseal(conn, data, model, turn)
            cited = None
            if len(turn.in_context) <= HISTORY_CAP and chance(data, 20 if heavy else 30, "store a reply?"):
                cited = store_reply(conn, data, model, turn)
            check_recheck(conn, model, turn, cited)


# No shrinking unless asked for: shrinking a failure re-runs whole worlds for up to five minutes
# per test, and `make mutation` runs this file once per mutant. A failure's message already
# names the message, the rule it broke and the destination; to shrink it to a minimal world,
# run with BACKSCROLL_SHRINK=1 (and @reproduce_failure from the printed blob, if need be).
PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
if os.environ.get("BACKSCROLL_SHRINK"):
    PHASES.append(Phase.shrink)
# The same worlds on every run, so `make test` and `make mutation` give one answer in CI;
# BACKSCROLL_EXPLORE=1 draws new worlds each run, to look for what the fixed ones miss.
SETTINGS = dict(deadline=None, database=None, print_blob=True, phases=PHASES,
                derandomize=not os.environ.get("BACKSCROLL_EXPLORE"),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_search_history_is_sound_and_complete_on_random_worlds(world, data):
    run_example(world, data, heavy=False)


@settings(max_examples=25, **SETTINGS)
@given(data=st.data())
def test_search_history_is_sound_and_complete_at_the_lineage_caps_and_budget(world, data):
    """Every world has two agents, twin DMs, sibling rooms, re-pointed sidecar rows, a reply
    whose lineage has 5,000 or 5,001 nodes and one whose history names 500 or 501 ids; half the
    turns start with an evidence ledger near the 400-message budget."""
    run_example(world, data, heavy=True)


# ---------------------------------------------------------------------------------------------
# Named tests: each kills one weakening of the predicate on its own (issue 16).

WS = "acme"
AGENT = "concierge"
SLACK, WEB = ("slack", "acme"), ("web", "acme")
NS, WEB_NS = "slack:acme", "web:acme"


def _external(*readers: str) -> dict:
    return {"kind": "external", "readers": list(readers)}


def _ask(w, conv: int, query: str, *, loaded: list[int] = ()) -> tuple[int, dict]:
    """A turn of the agent in `conv` searches its history; (turn id, result)."""
    turn = w.turn(WS, AGENT, conv, loaded=list(loaded))
    request = history.SearchRequest(turn_id=turn, query=query)
    return turn, history.search_history(w.conn, w.workspace(WS), None, request, None, settings=DECLARED)


def _recheck(w, turn: int) -> tuple:
    verdict = turns.recheck(w.conn, w.workspace(WS), None, turn)
    return verdict["deliverable"], verdict["reason"], verdict.get("message_id")


def _seal(w, table: str, row: int) -> None:
    """Make a row what rows stored before issue 16's fix are: external with no readers."""
    w.conn.execute(f"update {table} set audience_readers = '{{}}' where id = %s", (row,))


def test_an_external_conversation_never_reaches_another_organisations_conversation(world):
    """The Slack Connect repro: one agent, one namespace, a conversation shared with Globex and
    one shared with Initech. Globex's words never reach Initech's conversation, nor one shared
    with both, nor Globex's people in another namespace; they reach Globex's own conversation and
    one shared with a subset of Globex's people, until that one is re-shared with Initech."""
    w = world
    for ns, ext in ((NS, "XGLOBEX"), (NS, "XGLOBEX_CFO"), (NS, "XINITECH"), (WEB_NS, "XGLOBEX")):
        w.actor_id(WS, ns, ext)
    globex = w.conversation(WS, AGENT, "X-globex", "Globex", connector=SLACK,
                            audience=_external("XGLOBEX", "XGLOBEX_CFO"))
    initech = w.conversation(WS, AGENT, "X-initech", "Initech", connector=SLACK, audience=_external("XINITECH"))
    legal = w.conversation(WS, AGENT, "X-globex-legal", "Globex legal", connector=SLACK,
                           audience=_external("XGLOBEX"))                     # a subset of Globex's readers
    both = w.conversation(WS, AGENT, "X-both", "Globex and Initech", connector=SLACK,
                          audience=_external("XGLOBEX", "XINITECH"))          # overlaps, not inside
    web_globex = w.conversation(WS, AGENT, "X-globex-web", "Globex on the web", connector=WEB,
                                audience=_external("XGLOBEX", "XGLOBEX_CFO"))  # same ids, other namespace
    secret = w.message(WS, globex, "Globex pricing: the falcon discount is forty percent", speaker="XGLOBEX",
                       minute=10)
    rival = w.message(WS, initech, "Initech pricing: the falcon discount is ten percent", speaker="XINITECH",
                      minute=11)

    turn, result = _ask(w, initech, "falcon discount pricing")
    assert secret not in result["message_ids"], "DISCLOSED Globex's external conversation into Initech's"
    assert [h["message_id"] for h in result["hits"]] == [rival]
    audit = w.conn.execute("select exclusions from search_audit where turn_id = %s", (turn,)).fetchone()
    assert audit["exclusions"]["audience"] == 1
    for dest, what in ((both, "one shared with Globex and Initech"), (web_globex, "another namespace's")):
        _, result = _ask(w, dest, "falcon discount pricing")
        assert result["message_ids"] == [], f"DISCLOSED an external conversation into {what}: {result['message_ids']}"
    _, result = _ask(w, globex, "falcon discount pricing")
    assert [h["message_id"] for h in result["hits"]] == [secret]
    assert rival not in result["message_ids"], "DISCLOSED Initech's external conversation into Globex's"
    own_turn = w.turn(WS, AGENT, globex, loaded=[secret])
    assert _recheck(w, own_turn) == (True, "ok", None)
    turn, result = _ask(w, legal, "falcon discount pricing")
    assert [h["message_id"] for h in result["hits"]] == [secret]
    assert _recheck(w, turn) == (True, "ok", None)
    # Re-shared with Initech's people: the recheck must stop the reply that quotes Globex.
    w.conn.execute("update conversations set audience_readers = '{XINITECH}' where id = %s", (legal,))
    assert _recheck(w, turn) == (False, "audience", secret)


def test_an_empty_reader_set_never_matches(world):
    """Rows stored before the fix: external with no readers. As a destination such a
    conversation receives nothing private from elsewhere; as an origin it reaches no other
    conversation (with readers or without), only its own; a memory with no readers reaches only
    the conversation of the turn it was formed in."""
    w = world
    for ext in ("XOLD", "XGLOBEX"):
        w.actor_id(WS, NS, ext)
    legacy = w.conversation(WS, AGENT, "X-legacy", "legacy", connector=SLACK, audience=_external("XOLD"))
    _seal(w, "conversations", legacy)
    older = w.conversation(WS, AGENT, "X-older", "older legacy", connector=SLACK, audience=_external("XOLD"))
    _seal(w, "conversations", older)
    globex = w.conversation(WS, AGENT, "X-globex", "Globex", connector=SLACK, audience=_external("XGLOBEX"))
    subset = w.conversation(WS, AGENT, "X-globex-2", "Globex again", connector=SLACK, audience=_external("XGLOBEX"))
    third = w.conversation(WS, AGENT, "X-globex-3", "Globex once more", connector=SLACK, audience=_external("XGLOBEX"))
    old = w.message(WS, legacy, "falcon contract terms from before the fix", speaker="XOLD", minute=10)
    oldest = w.message(WS, older, "falcon contract terms, the older copy", speaker="XOLD", minute=11)
    fresh = w.message(WS, globex, "falcon contract terms for Globex", speaker="XGLOBEX", minute=12)
    aside = w.message(WS, globex, "falcon contract aside, a legacy message", speaker="XGLOBEX", minute=13,
                      audience=_external("XGLOBEX"))
    _seal(w, "messages", aside)
    stored = w.conn.execute("select id, audience_readers from messages where id = any(%s) order by id",
                            ([old, oldest, aside],)).fetchall()
    assert [r["audience_readers"] for r in stored] == [[], [], []]  # the world is what it claims to be

    def found(conv: int) -> tuple[int, set[int]]:
        turn, result = _ask(w, conv, "falcon contract terms aside")
        return turn, set(result["message_ids"])

    legacy_turn, shown = found(legacy)
    assert shown == {old}, f"a legacy destination received {shown - {old}} (fresh {fresh}, oldest {oldest})"
    # The audit names the rule that removed the others: the audience rule, each of them.
    audit = w.conn.execute("select exclusions from search_audit where turn_id = %s", (legacy_turn,)).fetchone()
    assert {k: audit["exclusions"][k] for k in ("audience", "lineage")} == {"audience": 3, "lineage": 0}
    _, shown = found(older)
    assert shown == {oldest}, f"DISCLOSED one legacy conversation into another: {shown - {oldest}}"
    globex_turn, shown = found(globex)
    assert shown == {fresh, aside}, f"legacy rows reached Globex's conversation: {shown - {fresh, aside}}"
    subset_turn, shown = found(subset)
    assert shown == {fresh}, f"a legacy message reached a conversation not its own: {shown - {fresh}}"
    assert _recheck(w, legacy_turn) == (True, "ok", None)
    assert _recheck(w, globex_turn) == (True, "ok", None)
    # The subset conversation loses its readers: a legacy destination now, it may not ship Globex's.
    _seal(w, "conversations", subset)
    assert _recheck(w, subset_turn) == (False, "audience", fresh)
    # And an origin that loses its readers after the search is sealed to its own conversation:
    # the recheck of a turn elsewhere that quoted it must stop the reply.
    third_turn, shown = found(third)
    assert shown == {fresh}
    _seal(w, "messages", fresh)
    assert _recheck(w, third_turn) == (False, "audience", fresh)
    assert _recheck(w, globex_turn) == (True, "ok", None)   # in its own conversation it still ships

    # Memories with no readers: sealed to the conversation of the turn they were formed in.
    agent, ws = w.agent_id(WS, AGENT), w.workspace(WS)

    def memory(turn_id: int | None) -> int:
        return w.conn.execute(
            "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,"
            " source_message_ids, turn_id) values (%s, %s, 'old terms', 'external', %s, '{}', %s, %s) returning id",
            (ws, agent, NS, [old], turn_id)).fetchone()["id"]

    formed_here, formed_nowhere = memory(legacy_turn), memory(None)
    for dest, cited, expected in ((legacy, formed_here, (True, "ok", None)),
                                  (legacy, formed_nowhere, (False, "audience", formed_nowhere)),
                                  (older, formed_here, (False, "audience", formed_here)),
                                  (globex, formed_here, (False, "audience", formed_here))):
        turn = w.turn(WS, AGENT, dest)
        turns.store_reply(w.conn, ws, None, turn, turns.ReplyIn(body="As agreed.", memory_ids=[cited]))
        assert _recheck(w, turn) == expected, (dest, cited)


def test_an_unverified_identity_link_grants_nothing(world):
    """Twin DMs of one agent with one person's two identities: a link recorded without proof
    (pending) lets nothing cross; verified, the DM's message follows the person; revoked, it no
    longer does (the recheck sees it); pending again, still nothing."""
    w = world
    ws = w.workspace(WS)
    w.actor_id(WS, NS, "U_A", "Alice")
    w.actor_id(WS, WEB_NS, "alice", "Alice")
    slack_dm = w.conversation(WS, AGENT, "D-alice", "Alice DM", creator="U_A", connector=SLACK,
                              audience={"kind": "members", "readers": ["U_A"]})
    web_dm = w.conversation(WS, AGENT, "web-alice", "Alice on the web", creator="alice", connector=WEB,
                            audience={"kind": "members", "readers": ["alice"]})
    general = w.conversation(WS, AGENT, "C-general", "general", connector=SLACK, audience={"kind": "public"})
    decision = w.message(WS, slack_dm, "We decided to move the falcon migration to Friday", speaker="U_A", minute=10)
    note = w.message(WS, web_dm, "falcon migration checklist from the web", speaker="alice", minute=11)
    said = w.message(WS, general, "falcon migration: I will write the runbook", speaker="U_A", minute=12)
    pair = dict(agent=AGENT, a=links.ActorKey(namespace=NS, external_id="U_A"),
                b=links.ActorKey(namespace=WEB_NS, external_id="alice"))

    def crossing() -> tuple[set[int], set[int], int]:
        web_turn, into_web = _ask(w, web_dm, "falcon migration")
        _, into_slack = _ask(w, slack_dm, "falcon migration")
        return (set(into_web["message_ids"]) - {note, said}, set(into_slack["message_ids"]) - {decision, said},
                web_turn)

    def said_by_requester() -> set[int]:
        """What Alice (on the web) said, by her identities: a pending link adds none."""
        turn = w.turn(WS, AGENT, web_dm, requester="alice", requester_namespace=WEB_NS)
        request = history.SearchRequest(turn_id=turn, query="falcon migration",
                                        filters=history.Filters(requester_only=True))
        return {h["message_id"] for h in history.search_history(w.conn, ws, None, request, None,
                                                                settings=DECLARED)["hits"]}

    pending = links.link(w.conn, ws, links.LinkIn(**pair, proof=None))
    into_web, into_slack, _ = crossing()
    assert not into_web and not into_slack, f"DISCLOSED through a pending link: {into_web | into_slack}"
    assert said_by_requester() == {note}, "a pending link made another identity's words the requester's"
    links.verify(w.conn, ws, pending, proof="both identities answered a challenge")
    into_web, into_slack, web_turn = crossing()
    assert (into_web, into_slack) == ({decision}, {note})
    assert said_by_requester() == {note, decision, said}
    assert _recheck(w, web_turn) == (True, "ok", None)
    links.revoke(w.conn, ws, pending)
    assert _recheck(w, web_turn) == (False, "audience", decision)
    links.link(w.conn, ws, links.LinkIn(**pair, proof=None))   # pending again
    assert _recheck(w, web_turn) == (False, "audience", decision)
    into_web, into_slack, _ = crossing()
    assert not into_web and not into_slack, f"DISCLOSED through a pending link: {into_web | into_slack}"
    assert said_by_requester() == {note}
