"""search_history on random worlds: every result is authorized, and nothing eligible is missing.

Hypothesis builds a world per example: one workspace; one or two agents; two or three connector
namespaces (slack:acme, web:acme, slack:other) with a few actors each, external ids reused across
namespaces and display names colliding; conversations of every audience kind (public,
workspace, DMs = members with one reader, private rooms = members with several, external with
or without readers), often twin DMs of one agent with two identities, and sibling rooms
(private or external) whose reader sets differ beside a workspace-visible room; messages with
random speakers, roles, states (some streaming, some later finished), per-message audiences and
missing source evidence; agent replies whose provenance
names other messages and memories (memories inserted with SQL, with their own audience and
sources, often widely visible sources under a narrow audience); identity links, some revoked,
some for the other agent; sidecar rows re-pointed at the other agent; deleted messages that
provenance still names. Then 2-5 turns, each a search (destination, requester, 1-3 vocabulary
words, random filters, limit, loaded window, answering message, sometimes a second search in
the same turn, sometimes an evidence ledger filled to within a few messages of the 400 budget).
The second test always has two agents, twin DMs, sibling rooms beside a workspace room and
re-pointed sidecar rows, and adds a reply whose lineage has 5,000 or 5,001 nodes and one whose
history names 500 or 501 ids.

Everything is checked against a REFERENCE model written here in plain Python from the spec
(seed 000 and the comments of sql/0004), never by calling the SQL predicates:

(a) soundness: every message shown (hits, neighbours, `message_ids`) is a finished user or
    assistant message of the turn's agent, not already in the turn's context, with source
    evidence, allowed by the audience rule (public anywhere; workspace into workspace or members
    of its namespace; members into members of its namespace with readers a subset; external
    likewise into external), or by the identity-aware extension (a single-reader members origin
    into a single-reader members destination whose readers are one person by a live link of
    this agent), and its whole lineage (history ids, memory ids, memories' sources, recursively)
    exists, has evidence and is allowed the same way (memories on their own audience), with at
    most 5,000 nodes and no message naming more than 500 history ids.
(b) completeness: lexical matching is exact here (plain lowercase words, which the `simple`
    parser lowercases and splits on anything else), so the eligible matching set is known. The
    number of hits is min(effective limit, eligible matches), the limit clamped and shrunk by
    the evidence budget as history.py does, unless the status is search_budget_exhausted (then
    fewer). Each hit's neighbours are exactly the two nearest eligible messages on either side,
    and `message_ids` is exactly hits and neighbours less what the turn already had.
    Ranking: rather than re-derive the ranking's float arithmetic and its tie-break by id, this
    reads `ts_rank_cd` for each eligible match in SQL (over a tsquery built here, not
    backscroll_or_query), computes the other features and the score here, checks them against
    the features and scores of the returned hits, and requires that no eligible match left out
    scores above the lowest hit returned (beyond float noise). The audit row's exclusion counts
    are checked against the reference's first failing rule for each match.
(c) the pre-delivery recheck of each turn's whole evidence names the same reason (and message)
    as the reference.

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

from backscroll import history, ingest, links, turns
from tests.ranking_reference import bm25_reference

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


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


Audience = tuple  # (kind, namespace, readers: tuple[str, ...])


@dataclass
class Conv:
    id: int
    agent: int
    connector_ns: str
    audience: Audience


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
    audience: Audience
    sources: list[int]


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
    searchable_convs: list[int] = field(default_factory=list)
    focus_convs: list[int] = field(default_factory=list)                 # twin DMs and sibling rooms
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
# The reference predicates, from the spec (seed 000 and sql/0004's comments), in plain Python.

def audience_allows(o: Audience, d: Audience) -> bool:
    o_kind, o_ns, o_readers = o
    d_kind, d_ns, d_readers = d
    if o_kind == "public":
        return True
    if o_kind == "workspace":
        return d_kind in ("workspace", "members") and d_ns == o_ns
    if o_kind == "members":
        return d_kind == "members" and d_ns == o_ns and set(d_readers) <= set(o_readers)
    if o_kind == "external":
        return d_kind == "external" and d_ns == o_ns and set(d_readers) <= set(o_readers)
    raise AssertionError(o_kind)


def identities_linked(model: Model, agent: int, a: tuple[str, str], b: tuple[str, str]) -> bool:
    x, y = model.actors.get(a), model.actors.get(b)
    if x is None or y is None or x == y:
        return False
    return (agent, min(x, y), max(x, y)) in model.live_links


def audience_allows_for(model: Model, agent: int, o: Audience, d: Audience) -> bool:
    if audience_allows(o, d):
        return True
    return (o[0] == "members" and len(o[2]) == 1 and d[0] == "members" and len(d[2]) == 1
            and identities_linked(model, agent, (o[1], o[2][0]), (d[1], d[2][0])))


def lineage_denial(model: Model, roots: list[int], agent: int, d: Audience) -> str | None:
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
            if not audience_allows_for(model, agent, m.audience, d):
                return f"lineage message {ident} ({m.audience}) may not reach {d}"
        else:
            k = model.mems.get(ident)
            if k is None:
                return f"lineage names missing memory {ident}"
            if not audience_allows_for(model, agent, k.audience, d):
                return f"lineage memory {ident} ({k.audience}) may not reach {d}"
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
    if not audience_allows_for(model, turn.agent, m.audience, turn.dest.audience):
        return ("audience", f"{m.audience} may not reach {turn.dest.audience}")
    if m.history or m.memories:
        if mid not in turn.lineage_cache:
            turn.lineage_cache[mid] = lineage_denial(model, [mid], turn.agent, turn.dest.audience)
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
        readers = data.draw(st.lists(st.sampled_from(pool[ns]), max_size=2, unique=True), label=f"{label} readers")
        return ("external", ns, tuple(sorted(readers)))
    return (kind, ns, ())


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
        aud_in = ingest.Audience(kind=audience[0], namespace=audience[1], readers=list(audience[2]))
    msg = ingest.MessageIn(
        role=role, body=body, state=state, created_at=at(minute),
        speaker=ingest.ActorRef(namespace=speaker[0], external_id=speaker[1]) if speaker else None,
        audience=aud_in, evidence=ingest.DEFAULT_EVIDENCE if evidence else None,
        history_message_ids=history, memory_ids=memories)
    mid, created = ingest.append_message(conn, model.ws, conv.id, msg)
    assert created
    model.msgs[mid] = Msg(mid, conv.id, role, state, audience if audience is not None else conv.audience, evidence,
                          model.actors[speaker] if speaker else None, at(minute), body,
                          sorted(set(history)), sorted(set(memories)))
    return mid


def add_memory(conn, model: Model, agent: int, audience: Audience, sources: list[int], body: str) -> int:
    kid = conn.execute(
        "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,"
        " source_message_ids) values (%s, %s, %s, %s, %s, %s, %s) returning id",
        (model.ws, agent, body, audience[0], audience[1], list(audience[2]), sources)).fetchone()["id"]
    model.mems[kid] = Mem(kid, audience, list(sources))
    return kid


def build_world(conn, data, heavy: bool) -> Model:
    """A random world. `heavy` always adds twin DMs and a lineage at the caps."""
    ws = conn.execute("insert into workspaces (slug, name) values ('acme', 'Acme') returning id").fetchone()["id"]
    connectors = data.draw(st.lists(st.sampled_from(CONNECTORS), min_size=2, max_size=3, unique=True),
                           label="connectors")
    namespaces = [f"{t}:{n}" for t, n in connectors]
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
    everyone = sorted(model.actors)

    def create_conversation(agent_slug: str, connector: tuple[str, str], audience: Audience, ext: str) -> Conv:
        conv_in = ingest.ConversationIn(
            agent=agent_slug, connector=ingest.ConnectorRef(type=connector[0], name=connector[1]), external_id=ext,
            title=ext, created_at=T0,
            audience=ingest.Audience(kind=audience[0], namespace=audience[1],
                                     readers=list(audience[2]) if audience[0] == "members" else []))
        cid, _ = ingest.upsert_conversation(conn, ws, conv_in)
        if audience[0] == "external" and audience[2]:
            # The ingest model gives an external audience no readers; the data model allows them.
            conn.execute("update conversations set audience_readers = %s where id = %s", (list(audience[2]), cid))
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
    # Twin DMs, often: the same agent's direct conversations with two identities that a link
    # may (or, revoked, may no longer) join.
    twins: list[tuple[str, str]] = []
    twin_agent = None
    if heavy or chance(data, 60, "twin DMs?"):
        twin_slug = AGENTS[data.draw(st.integers(0, n_agents - 1), label="twin agent")]
        for j in range(2):
            connector = data.draw(st.sampled_from(connectors), label="twin connector")
            ns = f"{connector[0]}:{connector[1]}"
            reader = data.draw(st.sampled_from(pool[ns]), label="twin reader")
            convs.append(create_conversation(twin_slug, connector, ("members", ns, (reader,)), f"D{j}"))
            twin_agent = convs[-1].agent
            twins.append((ns, reader))
            model.focus_convs.append(convs[-1].id)
    # Sibling rooms, often: two private rooms (or two external conversations) of one agent in one
    # namespace whose reader sets differ, where the subset rule decides.
    rooms: list[tuple[str, str]] = []      # first readers of the sibling rooms
    if heavy or chance(data, 50, "sibling rooms?"):
        slug = AGENTS[data.draw(st.integers(0, n_agents - 1), label="sibling agent")]
        if twins and not chance(data, 25, "siblings of another agent?"):
            slug = twin_slug
        connector = data.draw(st.sampled_from(connectors), label="sibling connector")
        ns = f"{connector[0]}:{connector[1]}"
        kinds = ["members", "external"] if heavy else [data.draw(st.sampled_from(["members", "external"]),
                                                                 label="sibling kind")]
        for kind in kinds:
            for j in range(2):
                readers = data.draw(st.lists(st.sampled_from(pool[ns]), min_size=2 if kind == "members" else 0,
                                             max_size=3, unique=True), label="sibling readers")
                convs.append(create_conversation(slug, connector, (kind, ns, tuple(sorted(readers))),
                                                 f"S-{kind}-{j}"))
                model.focus_convs.append(convs[-1].id)
                if kind == "members":
                    rooms.append((ns, min(readers)))
        # and a workspace-visible room beside them, which may reach members but never external.
        if heavy or chance(data, 30, "a workspace room beside them?"):
            convs.append(create_conversation(slug, connector, ("workspace", ns, ()), "S-ws"))
            model.focus_convs.append(convs[-1].id)
    model.searchable_convs = [c.id for c in convs]

    # Messages and memories, interleaved so provenance names only what already exists.
    messages: list[int] = []
    memories: list[int] = []
    n_items = data.draw(st.integers(10, 40), label="items")
    for i in range(n_items):
        if messages and chance(data, 14, "memory?"):
            # Often formed from widely visible messages, so that its own audience decides.
            wide = [m for m in messages if m in model.msgs and model.msgs[m].audience[0] == "public"]
            pick = wide if wide and chance(data, 50, "wide sources?") else messages
            sources = data.draw(st.lists(st.sampled_from(pick), max_size=3, unique=True), label="memory sources")
            agent = data.draw(st.sampled_from(model.agents), label="memory agent")
            audience = draw_audience(data, model, pool, data.draw(st.sampled_from(namespaces)), f"memory {i}")
            memories.append(add_memory(conn, model, agent, audience, sources, f"memory {i}"))
            continue
        focus = [c for c in convs if c.id in model.focus_convs]
        conv = data.draw(st.sampled_from(focus if focus and chance(data, 50 if heavy else 30, "in a focus room?")
                                         else convs),
                         label="message conversation")
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
                memory_ids = data.draw(st.lists(st.sampled_from(memories), max_size=2, unique=True), label="memories")
        audience = None
        if chance(data, 14, "own audience?"):
            audience = draw_audience(data, model, pool, conv.connector_ns, f"message {i}")
            if audience[0] == "external" and audience[2]:
                audience = ("external", audience[1], ())  # the ingest model gives external no readers
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

    twin_link = bool(twins) and twins[0] != twins[1] and not chance(data, 20, "no twin link?")
    link_ops = data.draw(st.integers(0, 5), label="links") + twin_link
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
        link_id = links.link(conn, ws, links.LinkIn(
            agent=model.slugs[model.agents[agent_index]], a=links.ActorKey(namespace=a[0], external_id=a[1]),
            b=links.ActorKey(namespace=b[0], external_id=b[1]), proof="verified in test"))
        agent = model.agents[agent_index]
        key = (agent, min(model.actors[a], model.actors[b]), max(model.actors[a], model.actors[b]))
        if chance(data, 50 if twin_link and op == 0 else 35, "revoked?"):
            links.revoke(conn, ws, link_id)
            model.live_links.discard(key)
        else:
            model.live_links.add(key)

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
    if model.focus_convs and chance(data, 60 if heavy else 40, "into a twin DM or sibling room?"):
        choices = model.focus_convs
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
        requester=turns.RequesterRef(namespace=requester[0], external_id=requester[1]) if requester else None))
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
    result = history.search_history(conn, model.ws, None, request, None)
    hits = [h["message_id"] for h in result["hits"]]
    where = f"turn {turn.id} into {turn.dest.audience} (agent {turn.agent}), query {query!r}, filters {filters}"

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
    for h in hits:
        assert h in eligible, f"hit {h} does not match the query and filters ({model.msgs[h]}); {where}"
    assert len(hits) == len(set(hits))

    # (b) Completeness: as many hits as the limit allows, and nothing better left out.
    requested = history.clamp_limit(limit)
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
    guard = lineage_denial(model, sorted(turn.in_context), turn.agent, turn.dest.audience) is None

    def jointly_denied(mid: int) -> bool:
        before, after = expected_neighbours(model, turn, model.msgs[mid])
        roots = sorted(turn.in_context | set(result["message_ids"]) | {mid, *before, *after})
        return guard and lineage_denial(model, roots, turn.agent, turn.dest.audience) is not None

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
        bm25 = bm25_reference(conn, [turn.agent], query_words)
        rows = conn.execute(
            "select s.message_id as id, extract(epoch from (now() - m.created_at))::float8 as age"
            "  from message_search s join messages m on m.id = s.message_id where s.message_id = any(%s)",
            (sorted(eligible),)).fetchall()
        assert {r["id"] for r in rows} == eligible
        rows = [{**r, "lexical": bm25[r["id"]]} for r in rows]
        spoke = {m.conv for m in model.msgs.values() if m.speaker is not None and m.speaker in turn.requester_ids}
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
    if any(not audience_allows(model.msgs[i].audience, turn.dest.audience) for i in result["message_ids"]):
        event("a message disclosed through an identity link")
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


def check_recheck(conn, model: Model, turn: TurnModel) -> None:
    """(c) The pre-delivery recheck of everything the turn saw agrees with the reference: the
    reply is deliverable iff there are at most 500 messages, each exists, has evidence and may
    reach the destination (the first that fails, in id order, is named), and the lineage of
    them all, walked together within the caps, may too."""
    ids = sorted(turn.in_context)
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
            elif not audience_allows_for(model, turn.agent, m.audience, turn.dest.audience):
                expected = ("audience", mid)
            else:
                continue
            break
        else:
            if ids and lineage_denial(model, ids, turn.agent, turn.dest.audience) is not None:
                expected = ("lineage", None)
    verdict = turns.recheck(conn, model.ws, None, turn.id)
    event(f"recheck: {expected[0]}")
    assert (verdict["reason"], verdict.get("message_id")) == expected, (
        f"recheck of turn {turn.id} into {turn.dest.audience}: {verdict}, reference: {expected}")
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
            check_recheck(conn, model, turn)


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
