"""Non-interference of the whole API (security issue 29, item 1).

THE PROPERTY. For every route that answers a reader or a runtime, the answer is the same whether
or not the database also holds rows outside that caller's scope. Every field is compared: hits,
their order, scores, features, excerpts, highlights, titles and rooms, neighbours, `message_ids`,
budgets, statuses, modes, degradation, recheck verdicts, the turn trace, whoami, `next` (present
or not, and the pages it leads to), error codes and messages. Ids are mapped between the two
databases (they differ: hidden rows are interleaved in insertion order), and so are the clock
times the server writes (a reply's time, a trace's `added_at`: any two times after the worlds'
own month compare equal; the worlds' own times must be identical).

HOW. Two databases from the migrated template. A holds the visible world; B holds the same world
with hidden rows interleaved, in insertion order and in time. The visible world is
tests/db/test_history_property.py's random world (`build_world`), recorded while it is built in A
and replayed into B (`Recording`, `Replay`: a draw from `sampled_from` is replayed by its index, so
B's own ids come back), with hidden rows written between the replayed draws. Before any request
the two visible worlds are checked equal row by row (`check_same_visible_world`): a difference
there is this test's fault, and says so. Then the same requests go to both over HTTP (create_app +
TestClient, real tokens) and the answers are compared field by field; a mismatch names the
request, the field's path and both values.

WHAT IS HIDDEN, and from whom. The callers of an example are one runtime token scoped to the
world's agents and one or two reader tokens, each scoped to some of those agents (perhaps none:
then it sees only the sessions its person created). Hidden rows are, by construction, outside
every caller's scope:
- `workspace`: another workspace (same agent slugs, namespaces, external ids, titles and words);
- `agent`: an agent no token is scoped to (`ghost`), in the same workspace and namespaces, with
  public rooms, the requesters' own words, titles like the visible ones, and turns of its own;
- `audience`: in the world's agents that no reader is scoped to, rows whose audience the
  destination of no turn of this example may receive, by the reference rule of
  test_history_property (never by the product's predicate): DMs of other people (new ones, and
  DM-audience messages inside visible rooms, often spoken by the turns' requesters), private
  rooms whose readers are not a superset of a destination's, external conversations of another
  organisation or namespace, workspace rooms of another namespace, sealed (legacy) rows of other
  conversations; each with source evidence and no lineage (see the residual below);
- `link`: identity links recorded without proof (pending), between actors no link joins in A.
Never hidden here, because they are in an eligible audience: rows excluded only by the lineage
walk or by missing source evidence. They may move the order of search_history hits (BM25
statistics count the audiences a destination may receive) but never a number:
`test_lineage_or_evidence_excluded_rows_move_no_number` holds that, with order ignored.

THE ROUTES (from the application's route table; `test_the_routes_a_reader_or_runtime_reaches_are
_all_compared` fails when a route is added that this file does not cover or name):
reader: GET /v1/agent-sessions (recent, `agent=`, paged through `next`), GET /v1/agent-sessions?q=
(title and content search, phrases and -words, paged through `next`), GET /v1/agent-sessions/{id}
(visible sessions, and hidden ones against ids that do not exist: the same 404), GET
/v1/agent-sessions/{id}/messages (paged; hidden ones alike), GET /v1/whoami.
runtime: POST /v1/turns (and into other agents' or workspaces' conversations: 404 alike),
POST /v1/tools/search_history (filters: conversation, connector, actor, requester_only, since,
until, limit; other agents' turns: 404 alike), POST /v1/turns/{id}/memories, POST
/v1/turns/{id}/reply, POST /v1/turns/{id}/recheck, GET /v1/turns/{id}/trace, GET /v1/whoami.
The trace is compared whole, except its audit rows' exclusion counts, which
`test_the_trace_counts_no_hidden_match` holds on its own (they count the matches the audience
rule removed, which are the hidden rows themselves). Each search_history hit's and neighbour's
room is also checked against the reference rule: `disclosed` is whether the conversation's own
audience may reach the destination, and an undisclosed room carries no title, connector or
audience.

Beside the property, named tests hold the issue's repros (each fails on the code the issue was
filed against): scores that moved with DMs and with another agent's messages, the requester_spoke
boost, the coverage of a hybrid search, room titles handed to destinations that may not read the
room, the residual (order only), the trace's exclusion counts, and a turn's requester looked up
among people only hidden rows name.

Every example builds two databases and drops them; hypothesis runs derandomized (the same worlds
every run, as test_history_property does; BACKSCROLL_EXPLORE=1 draws new ones;
BACKSCROLL_NONINTERFERENCE_EXAMPLES sets how many, 20 by default).
BACKSCROLL_NONINTERFERENCE_HIDDEN=workspace,agent,audience,link narrows the hidden rows to some
kinds, to find which kind moves an answer.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import psycopg
from hypothesis import event, given, settings
from hypothesis import strategies as st

from backscroll.access.auth import TokenKind, create_token
from backscroll.ingest import links
from backscroll import ingest
from backscroll.search import turns as turn_api
from backscroll.store.db import connect
from tests.api.support import api_routes
from tests.conftest import TEMPLATE
from tests.db.test_history_property import (
    BODIES, EXTERNAL_IDS, LEGACY_PLACEHOLDER, PRIVATE, SETTINGS, T0, VOCAB, Model, at, build_world, chance,
    draw_focus, origin_allows,
)
from tests.world import client

GHOST = "ghost"                        # the agent no token is scoped to
OTHER_WS = "globex"                    # the workspace no token is for
SHADOW = ("slack", "shadow")           # a namespace no visible row uses
HIDDEN_PEOPLE = ["h1", "h2", "h3"]     # people only hidden rows name
HIDDEN_WORD = "zebulon"                # a word only hidden rows hold (often asked for)
HIDDEN_TITLES = ["Otter Corp acquisition - board only", "Project Nightingale layoffs list", "C0", "C1", "D0",
                 "S-members-base", "falcon budget", "Rose deposit"]
OWN_TITLES = ["Rose Room offsite", "falcon budget review", "Friday deposit", "merger notes", "C1 follow-up"]
HIDDEN_KINDS = ("workspace", "agent", "audience", "link")
# Times the server writes itself (a reply, a trace) are after the worlds' own (T0 + minutes):
# any two such times compare equal, the worlds' own must be identical.
CLOCK = T0 + timedelta(days=30)
PHANTOM = 10**12                       # A's stand-in for an id only B has: PHANTOM + B's id
FLOAT_REL = 1e-9
# search_history's `recency` halves every 30 days from now(), and its score holds it: the two
# databases answer a few milliseconds apart (a reply stored a second ago moves by ~1e-6). BM25
# statistics moved by a hidden row move a score by far more.
CLOCK_FLOATS = (re.compile(r".*\.recency"), re.compile(r"\$\.hits\[\d+\]\.score"),
                re.compile(r"\$\.search_audit\[\d+\]\.selected\[\d+\]\.score"))
CLOCK_REL = 1e-5
PAGES_MAX = 12

Aud = tuple  # (kind, namespace, readers): test_history_property's Audience


def hidden_kinds() -> set[str]:
    raw = os.environ.get("BACKSCROLL_NONINTERFERENCE_HIDDEN")
    kinds = set(HIDDEN_KINDS) if not raw else {k.strip() for k in raw.split(",") if k.strip()}
    unknown = kinds - set(HIDDEN_KINDS)
    assert not unknown, f"BACKSCROLL_NONINTERFERENCE_HIDDEN: unknown kinds {unknown}; known {HIDDEN_KINDS}"
    return kinds


# ---------------------------------------------------------------------------------------------
# Two databases from the migrated template (the fixtures' way; names carry the pid, so runs in
# parallel never collide).

_databases = itertools.count()


@contextmanager
def database_pair(pg_url: str) -> Iterator[tuple[str, str]]:
    names = [f"bs_ni_{os.getpid()}_{next(_databases)}" for _ in range(2)]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for name in names:
            admin.execute(f"create database {name} template {TEMPLATE} strategy file_copy")
    try:
        url_a, url_b = (psycopg.conninfo.make_conninfo(pg_url, dbname=name) for name in names)
        yield url_a, url_b
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            for name in names:
                admin.execute(f"drop database if exists {name} with (force)")


# ---------------------------------------------------------------------------------------------
# Rows written through the ingestion code (the production path), by stable keys.

@dataclass(frozen=True)
class ConvKey:
    ws: str
    agent: str
    namespace: str
    external_id: str


@dataclass
class NewWorkspace:
    slug: str
    kind: str = "workspace"


@dataclass
class NewConv:
    ws: str
    agent: str
    connector: tuple[str, str]
    external_id: str
    title: str
    audience: Aud | None            # None: the creator alone (ingestion's default)
    creator: str | None = None      # an external id in the connector's namespace
    minute: float = 0
    kind: str = "visible"           # visible, or the hidden kind it belongs to

    @property
    def key(self) -> ConvKey:
        return ConvKey(self.ws, self.agent, f"{self.connector[0]}:{self.connector[1]}", self.external_id)

    @property
    def reference_audience(self) -> Aud:
        ns = self.key.namespace
        return self.audience if self.audience is not None else ("members", ns, (self.creator,))


@dataclass
class NewMsg:
    conv: ConvKey
    external_id: str
    body: str
    minute: float
    role: str = "user"
    speaker: tuple[str, str] | None = None    # (namespace, external id)
    speaker_name: str | None = None           # only for people no visible row names
    audience: Aud | None = None               # None: the conversation's
    evidence: bool = True
    state: str = "finished"
    history: tuple[str, ...] = ()             # external ids of messages it was built from
    kind: str = "visible"


@dataclass
class NewLink:
    ws: str
    agent: str
    a: tuple[str, str]
    b: tuple[str, str]
    verified: bool = False
    kind: str = "link"


@dataclass
class NewTurn:
    conv: ConvKey
    kind: str = "agent"


def _audience_in(aud: Aud | None) -> ingest.Audience | None:
    if aud is None:
        return None
    kind, ns, readers = aud
    if kind in PRIVATE and not readers:   # legacy: written with a placeholder, blanked with SQL
        readers = (LEGACY_PLACEHOLDER,)
    return ingest.Audience(kind=kind, namespace=ns, readers=list(readers) if kind in PRIVATE else [])


def _legacy(aud: Aud | None) -> bool:
    return aud is not None and aud[0] in PRIVATE and not aud[2]


@dataclass
class Known:
    """What the visible world holds (read from A once it is built): a row of B that names one of
    these must wait until B has it, so that B creates every visible row in A's order."""
    agents: set[tuple[str, str]] = field(default_factory=set)             # (ws, slug)
    connectors: set[tuple[str, str, str]] = field(default_factory=set)    # (ws, agent, namespace)
    actors: set[tuple[str, str, str]] = field(default_factory=set)        # (ws, namespace, external id)

    @classmethod
    def read(cls, conn: psycopg.Connection) -> "Known":
        k = cls()
        for r in conn.execute("select w.slug as ws, a.slug from agents a join workspaces w on w.id = a.workspace_id"):
            k.agents.add((r["ws"], r["slug"]))
        for r in conn.execute("select w.slug as ws, a.slug, cn.namespace from connectors cn"
                              " join agents a on a.id = cn.agent_id join workspaces w on w.id = a.workspace_id"):
            k.connectors.add((r["ws"], r["slug"], r["namespace"]))
        for r in conn.execute("select w.slug as ws, x.namespace, x.external_id from actors x"
                              " join workspaces w on w.id = x.workspace_id"):
            k.actors.add((r["ws"], r["namespace"], r["external_id"]))
        return k


class Writer:
    """Writes ops into one database; remembers the ids of the hidden ones, by kind."""

    def __init__(self, conn: psycopg.Connection, known: Known | None = None):
        self.conn = conn
        self.known = known or Known()
        self.hidden: dict[str, list[int]] = defaultdict(list)      # table -> ids
        self.hidden_convs: list[tuple[str, int]] = []             # (hidden kind, id)
        self.hidden_turns: list[int] = []
        self.pending: list = []
        self.gate = True

    # lookups
    def ws_id(self, slug: str) -> int | None:
        row = self.conn.execute("select id from workspaces where slug = %s", (slug,)).fetchone()
        return row["id"] if row else None

    def conv_id(self, key: ConvKey) -> int | None:
        row = self.conn.execute(
            "select c.id from conversations c join workspaces w on w.id = c.workspace_id"
            "  join agents a on a.id = c.agent_id join connectors cn on cn.id = c.connector_id"
            " where w.slug = %s and a.slug = %s and cn.namespace = %s and c.external_id = %s",
            (key.ws, key.agent, key.namespace, key.external_id)).fetchone()
        return row["id"] if row else None

    def message_id(self, ws: str, external_id: str) -> int | None:
        row = self.conn.execute(
            "select m.id from messages m join conversations c on c.id = m.conversation_id"
            "  join workspaces w on w.id = c.workspace_id where w.slug = %s and m.external_id = %s",
            (ws, external_id)).fetchone()
        return row["id"] if row else None

    def _has(self, table: str, where: str, params: tuple) -> bool:
        return self.conn.execute(f"select exists (select 1 from {table} where {where}) as x", params).fetchone()["x"]

    def _agent_ready(self, ws: str, slug: str) -> bool:
        return not self.gate or (ws, slug) not in self.known.agents or self._has(
            "agents a join workspaces w on w.id = a.workspace_id", "w.slug = %s and a.slug = %s", (ws, slug))

    def _actor_ready(self, ws: str, ns: str, ext: str) -> bool:
        return not self.gate or (ws, ns, ext) not in self.known.actors or self._has(
            "actors x join workspaces w on w.id = x.workspace_id",
            "w.slug = %s and x.namespace = %s and x.external_id = %s", (ws, ns, ext))

    def ready(self, op, hidden: bool = True) -> bool:
        """Whether the rows this op names exist. A hidden op also waits for the visible rows it
        would otherwise create (an agent, a connector, a person) before B's visible world does."""
        self.gate = hidden
        if isinstance(op, NewWorkspace):
            return True
        if isinstance(op, NewConv):
            ns = op.key.namespace
            return (self.ws_id(op.ws) is not None and self._agent_ready(op.ws, op.agent)
                    and (not hidden or (op.ws, op.agent, ns) not in self.known.connectors or self._has(
                        "connectors cn join agents a on a.id = cn.agent_id join workspaces w on w.id = a.workspace_id",
                        "w.slug = %s and a.slug = %s and cn.namespace = %s", (op.ws, op.agent, ns)))
                    and (op.creator is None or self._actor_ready(op.ws, ns, op.creator)))
        if isinstance(op, NewMsg):
            return (self.conv_id(op.conv) is not None
                    and (op.speaker is None or self._actor_ready(op.conv.ws, *op.speaker))
                    and all(self.message_id(op.conv.ws, h) is not None for h in op.history))
        if isinstance(op, NewLink):
            return (self.ws_id(op.ws) is not None and self._agent_ready(op.ws, op.agent)
                    and self._actor_ready(op.ws, *op.a) and self._actor_ready(op.ws, *op.b))
        if isinstance(op, NewTurn):
            return self.conv_id(op.conv) is not None
        raise AssertionError(op)

    def apply(self, op, hidden: bool) -> int:
        c = self.conn
        if isinstance(op, NewWorkspace):
            new = c.execute("insert into workspaces (slug, name) values (%s, %s) returning id",
                            (op.slug, op.slug.title())).fetchone()["id"]
            table = "workspaces"
        elif isinstance(op, NewConv):
            conv_in = ingest.ConversationIn(
                agent=op.agent, connector=ingest.ConnectorRef(type=op.connector[0], name=op.connector[1]),
                external_id=op.external_id, title=op.title, audience=_audience_in(op.audience),
                creator=ingest.ActorRef(external_id=op.creator) if op.creator else None, created_at=at(op.minute))
            new, created = ingest.upsert_conversation(c, self.ws_id(op.ws), conv_in)
            assert created, op
            if _legacy(op.audience):
                c.execute("update conversations set audience_readers = '{}' where id = %s", (new,))
            table = "conversations"
            if hidden:
                self.hidden_convs.append((op.kind, new))
        elif isinstance(op, NewMsg):
            speaker = None
            if op.speaker:
                speaker = ingest.ActorRef(namespace=op.speaker[0], external_id=op.speaker[1],
                                          display_name=op.speaker_name)
            msg = ingest.MessageIn(
                external_id=op.external_id, role=op.role, body=op.body, state=op.state, created_at=at(op.minute),
                speaker=speaker, audience=_audience_in(op.audience),
                evidence=ingest.DEFAULT_EVIDENCE if op.evidence else None,
                history_message_ids=[self.message_id(op.conv.ws, h) for h in op.history])
            new, created = ingest.append_message(c, self.ws_id(op.conv.ws), self.conv_id(op.conv), msg)
            assert created, op
            if _legacy(op.audience):
                c.execute("update messages set audience_readers = '{}' where id = %s", (new,))
            table = "messages"
        elif isinstance(op, NewLink):
            new = links.link(c, self.ws_id(op.ws), links.LinkIn(
                agent=op.agent, a=links.ActorKey(namespace=op.a[0], external_id=op.a[1]),
                b=links.ActorKey(namespace=op.b[0], external_id=op.b[1]),
                proof="verified in test" if op.verified else None))
            table = "identity_links"
        elif isinstance(op, NewTurn):
            new = turn_api.register_turn(c, self.ws_id(op.conv.ws), None, turn_api.TurnIn(
                agent=op.conv.agent, conversation_id=self.conv_id(op.conv)))
            table = "turns"
            if hidden:
                self.hidden_turns.append(new)
        else:
            raise AssertionError(op)
        if hidden:
            self.hidden[table].append(new)
        return new

    def write(self, ops, hidden: bool) -> None:
        for op in ops:
            assert self.ready(op, hidden), f"not ready: {op}"
            self.apply(op, hidden)

    # hidden rows, scheduled between the visible world's writes
    def schedule(self, ops: list, positions: list[int]) -> None:
        self.pending = sorted(zip(positions, range(len(ops)), ops), key=lambda t: (t[0], t[1]))

    def run_due(self, position: float) -> None:
        """Write the pending hidden rows due by this position whose rows they name exist, until
        none is left that can be (a row may name one written later in the same pass)."""
        progress = True
        while progress:
            progress = False
            still = []
            for entry in self.pending:
                due, _, op = entry
                if due <= position and self.ready(op):
                    self.apply(op, hidden=True)
                    progress = True
                else:
                    still.append(entry)
            self.pending = still


# ---------------------------------------------------------------------------------------------
# The visible world: test_history_property's build_world, recorded in A and replayed into B.

def _unwrap(strategy):
    while hasattr(strategy, "wrapped_strategy"):
        strategy = strategy.wrapped_strategy
    return strategy


def _sampled(strategy) -> tuple | None:
    """The elements of a plain sampled_from, or None."""
    s = _unwrap(strategy)
    elements = getattr(s, "elements", None)
    if elements is None or getattr(s, "_transformations", ()):
        return None
    return tuple(elements)


def _encode(strategy, value):
    elements = _sampled(strategy)
    if elements is not None:
        return ("index", len(elements), elements.index(value))
    inner = getattr(_unwrap(strategy), "element_strategy", None)
    if inner is not None and _sampled(inner) is not None and isinstance(value, list):
        elements = _sampled(inner)
        return ("indexes", len(elements), [elements.index(v) for v in value])
    return ("value", None, value)


def _decode(strategy, entry):
    how, n, value = entry
    if how == "value":
        return value
    elements = _sampled(strategy) if how == "index" else _sampled(getattr(_unwrap(strategy), "element_strategy", None))
    assert elements is not None and len(elements) == n, (
        f"replay: the world diverged (a {how} draw over {n} elements meets {elements!r})")
    return elements[value] if how == "index" else [elements[i] for i in value]


class Recording:
    """Stands in for hypothesis' `data` while the world is built in A: every draw is kept, a
    draw from sampled_from (of ids, of conversations) by its index."""

    def __init__(self, data):
        self.data = data
        self.log: list[tuple] = []

    def draw(self, strategy, label=None):
        value = self.data.draw(strategy, label=label)
        self.log.append(_encode(strategy, value))
        return value


class Replay:
    """The same draws again, for B, over B's own ids; before each draw, the hidden rows due."""

    def __init__(self, log: list[tuple], before_draw: Callable[[int], None]):
        self.log = log
        self.before_draw = before_draw
        self.position = 0

    def draw(self, strategy, label=None):
        self.before_draw(self.position)
        entry = self.log[self.position]
        self.position += 1
        return _decode(strategy, entry)


# ---------------------------------------------------------------------------------------------
# Ids of the two databases.

class Ids:
    """B's id -> A's id, by kind; ids only B has read as `<B-only kind id>`; probes of an id only B
    has use PHANTOM + id in A (no such row) and compare as that."""

    KINDS = ("ws", "agent", "actor", "conv", "msg", "mem", "turn", "link", "token", "audit")

    def __init__(self):
        self.b2a: dict[str, dict[int, int]] = {k: {} for k in self.KINDS}
        self.a2b: dict[str, dict[int, int]] = {k: {} for k in self.KINDS}

    def pair(self, kind: str, a: int, b: int) -> None:
        assert self.b2a[kind].get(b, a) == a and self.a2b[kind].get(a, b) == b, (kind, a, b)
        self.b2a[kind][b] = a
        self.a2b[kind][a] = b

    def to_a(self, kind: str, b: Any) -> Any:
        if not isinstance(b, int) or isinstance(b, bool):
            return b
        if b in self.b2a[kind]:
            return self.b2a[kind][b]
        return f"<B-only {kind} {b}>"

    def to_b(self, kind: str, a: int) -> int:
        return self.a2b[kind][a]


def _zip_ids(ids: Ids, kind: str, a_ids: list[int], b_ids: list[int], hidden: set[int]) -> None:
    b_visible = [b for b in sorted(b_ids) if b not in hidden]
    assert len(b_visible) == len(a_ids), (
        f"TEST HARNESS: {kind}: A has {len(a_ids)} rows, B {len(b_visible)} besides its hidden ones")
    for a, b in zip(sorted(a_ids), b_visible):
        ids.pair(kind, a, b)


def map_worlds(conn_a, conn_b, writer_b: Writer, ids: Ids) -> None:
    """Pair every visible row of A with B's: by stable keys where rows have them, else by order
    (B writes the visible rows in A's order, so their ids keep A's order)."""
    def keyed(conn, query):
        return {tuple(r[k] for k in r if k != "id"): r["id"] for r in conn.execute(query)}

    for kind, query in (
            ("ws", "select id, slug from workspaces"),
            ("agent", "select a.id, w.slug, a.slug as agent from agents a join workspaces w on w.id = a.workspace_id"),
            ("actor", "select x.id, w.slug, x.namespace, x.external_id from actors x"
                      " join workspaces w on w.id = x.workspace_id"),
            ("conv", "select c.id, w.slug, a.slug as agent, cn.namespace, c.external_id from conversations c"
                     " join workspaces w on w.id = c.workspace_id join agents a on a.id = c.agent_id"
                     " join connectors cn on cn.id = c.connector_id")):
        in_a, in_b = keyed(conn_a, query), keyed(conn_b, query)
        for key, a in in_a.items():
            assert key in in_b, f"TEST HARNESS: B has no {kind} {key}"
            ids.pair(kind, a, in_b[key])
    for kind, table in (("msg", "messages"), ("mem", "memories"), ("turn", "turns"), ("link", "identity_links")):
        def all_ids(conn):
            return [r["id"] for r in conn.execute(f"select id from {table} order by id")]
        _zip_ids(ids, kind, all_ids(conn_a), all_ids(conn_b), set(writer_b.hidden.get(table, [])))


MESSAGE_ROWS = """
select m.id, m.conversation_id, m.external_id, m.role::text as role, m.state::text as state, m.body,
       m.audience_kind::text as audience_kind, m.audience_namespace, m.audience_readers, m.audience_inherited,
       m.created_at, m.history_message_ids, m.memory_ids,
       sp.namespace as speaker_namespace, sp.external_id as speaker_id, sp.display_name as speaker_name,
       exists (select 1 from message_source_evidence e where e.message_id = m.id) as evidence,
       (select a.slug from message_search s join agents a on a.id = s.agent_id where s.message_id = m.id) as sidecar
  from messages m left join actors sp on sp.id = m.speaker_actor_id
"""
CONVERSATION_ROWS = """
select c.id, c.title, c.audience_kind::text as audience_kind, c.audience_namespace, c.audience_readers,
       c.created_at, cr.namespace as creator_namespace, cr.external_id as creator_id
  from conversations c left join actors cr on cr.id = c.creator_actor_id
"""
MEMORY_ROWS = """
select k.id, a.slug as agent, k.body, k.audience_kind::text as audience_kind, k.audience_namespace,
       k.audience_readers, k.source_message_ids, k.turn_id
  from memories k join agents a on a.id = k.agent_id
"""
LINK_ROWS = """
select l.id, a.slug as agent, xa.namespace as a_ns, xa.external_id as a_id, xb.namespace as b_ns,
       xb.external_id as b_id, l.proof, l.revoked_at is null as live
  from identity_links l join agents a on a.id = l.agent_id
  join actors xa on xa.id = l.actor_a join actors xb on xb.id = l.actor_b
"""
TURN_ROWS = "select id, conversation_id, requester_actor_id, reply_message_id from turns"
ACTOR_ROWS = "select id, display_name, kind::text as kind from actors"
ID_COLUMNS = {"conversation_id": "conv", "history_message_ids": "msg", "memory_ids": "msg",
              "source_message_ids": "msg", "turn_id": "turn", "requester_actor_id": "actor",
              "reply_message_id": "msg"}


def check_same_visible_world(conn_a, conn_b, ids: Ids) -> None:
    """Every visible row of B is its A row, ids mapped: otherwise the replay (this test), not the
    product, made the difference, and the comparison below would prove nothing. Provenance may
    name a message the world deleted since (build_world does): such an id reads `<gone>` on both
    sides."""
    tables = {"msg": "messages", "mem": "memories", "turn": "turns", "conv": "conversations", "actor": "actors"}
    alive = [{k: {r["id"] for r in conn.execute(f"select id from {t}")} for k, t in tables.items()}
             for conn in (conn_a, conn_b)]

    def ids_of(row: dict, side: int, kind: str) -> dict:
        row = dict(row)
        for col, col_kind in ID_COLUMNS.items():
            if col not in row or row[col] is None:
                continue
            col_kind = "mem" if (kind == "msg" and col == "memory_ids") else col_kind

            def one(v):
                if v not in alive[side][col_kind]:
                    return "<gone>"
                return v if side == 0 else ids.to_a(col_kind, v)
            row[col] = [one(v) for v in row[col]] if isinstance(row[col], list) else one(row[col])
        return row

    for kind, query in (("msg", MESSAGE_ROWS), ("conv", CONVERSATION_ROWS), ("mem", MEMORY_ROWS),
                        ("link", LINK_ROWS), ("turn", TURN_ROWS), ("actor", ACTOR_ROWS)):
        rows_b = {r["id"]: r for r in conn_b.execute(query)}
        for row_a in conn_a.execute(query):
            row_b = ids_of(rows_b[ids.to_b(kind, row_a["id"])], 1, kind)
            row_b["id"] = row_a["id"]
            row_a = ids_of(row_a, 0, kind)
            assert row_a == row_b, f"TEST HARNESS: the visible {kind} differs in B:\n A {row_a}\n B {row_b}"


# ---------------------------------------------------------------------------------------------
# Comparing answers.

ID_KEYS = {"message_id": "msg", "message_ids": "msg", "history_message_ids": "msg", "source_message_ids": "msg",
           "memory_ids": "mem", "conversation_id": "conv", "turn_id": "turn", "token_id": "token",
           "workspace_id": "ws", "actor_id": "actor", "agent_ids": "agent"}
# What a bare "id" is, under these keys (elsewhere: the route's own `id_kind`).
ID_UNDER = {"sessions": "conv", "messages": "msg", "search_audit": "audit"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


def to_a(value: Any, ids: Ids, id_kind: str | None, key: str | None = None) -> Any:
    """B's answer with B's ids replaced by A's."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "id":
                out[k] = ids.to_a(id_kind, v) if id_kind else v
            elif k in ID_KEYS:
                kind = ID_KEYS[k]
                out[k] = [ids.to_a(kind, x) for x in v] if isinstance(v, list) else ids.to_a(kind, v)
            else:
                out[k] = to_a(v, ids, ID_UNDER.get(k, id_kind), k)
        return out
    if isinstance(value, list):
        return [to_a(v, ids, id_kind, key) for v in value]
    return value


def _clock(text: str) -> datetime | None:
    if not isinstance(text, str) or not TIMESTAMP.match(text):
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def differences(a: Any, b: Any, path: str = "$", ignore: tuple[str, ...] = ()) -> list[str]:
    """Every field where A's answer and B's (ids mapped) differ, as `path: A=... B=...`."""
    if any(re.fullmatch(p, path) for p in ignore):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}.{k}: A={a[k]!r} B=<absent>")
            elif k not in a:
                out.append(f"{path}.{k}: A=<absent> B={b[k]!r}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}", ignore)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [] if len(a) == len(b) else [f"{path}: A has {len(a)} items, B {len(b)}: A={a!r} B={b!r}"]
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]", ignore)
        return out
    numbers = (int, float)
    if (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool)
            and (isinstance(a, float) or isinstance(b, float))):
        rel = CLOCK_REL if any(p.fullmatch(path) for p in CLOCK_FLOATS) else FLOAT_REL
        if math.isclose(a, b, rel_tol=rel, abs_tol=1e-300):
            return []
        return [f"{path}: A={a!r} B={b!r}"]
    ta, tb = _clock(a), _clock(b)
    if ta is not None and tb is not None and ta >= CLOCK and tb >= CLOCK:
        return []   # both written by the server's clock
    if type(a) is not type(b) or a != b:
        return [f"{path}: A={a!r} B={b!r}"]
    return []


# ---------------------------------------------------------------------------------------------
# The same request to both databases.

@dataclass(frozen=True)
class Ref:
    """An id in a request: A's id of a visible row (B's is looked up), or, for a probe, B's id
    of a hidden row (A gets PHANTOM + it, which no row has)."""
    kind: str
    a: int | None = None
    b_only: int | None = None


class Pair:
    def __init__(self, url_a: str, url_b: str, ids: Ids, stack: ExitStack, **settings):
        self.urls = (url_a, url_b)
        self.ids = ids
        self.conns = (stack.enter_context(connect(url_a, autocommit=True)),
                      stack.enter_context(connect(url_b, autocommit=True)))
        self.http = (stack.enter_context(client(url_a, **settings)), stack.enter_context(client(url_b, **settings)))
        self.tokens: dict[str, tuple[str, str]] = {}
        self.events = False   # hypothesis events, in the property only

    def token(self, name: str, kind: str, ws: str, actor: tuple[str, str] | None = None,
              agents: list[str] | None = None) -> None:
        secrets = []
        token_ids = []
        for conn in self.conns:
            ws_id = conn.execute("select id from workspaces where slug = %s", (ws,)).fetchone()["id"]
            actor_id = None
            if actor is not None:
                actor_id = ingest.ensure_actor(conn, ws_id, actor[0], ingest.ActorRef(external_id=actor[1]))
            agent_ids = None
            if agents is not None:
                agent_ids = [conn.execute("select id from agents where workspace_id = %s and slug = %s",
                                          (ws_id, slug)).fetchone()["id"] for slug in agents]
            token_id, secret = create_token(conn, TokenKind(kind), workspace_id=ws_id, actor_id=actor_id,
                                            agent_ids=agent_ids)
            secrets.append(secret)
            token_ids.append(token_id)
        if actor is not None:
            a_actor = self.conns[0].execute(
                "select x.id from actors x join workspaces w on w.id = x.workspace_id"
                " where w.slug = %s and x.namespace = %s and x.external_id = %s", (ws, *actor)).fetchone()["id"]
            b_actor = self.conns[1].execute(
                "select x.id from actors x join workspaces w on w.id = x.workspace_id"
                " where w.slug = %s and x.namespace = %s and x.external_id = %s", (ws, *actor)).fetchone()["id"]
            if a_actor not in self.ids.a2b["actor"]:
                self.ids.pair("actor", a_actor, b_actor)
        self.ids.pair("token", *token_ids)
        self.tokens[name] = tuple(secrets)

    def _resolve(self, value: Any, side: int, swaps: list[tuple[str, str]]) -> Any:
        if isinstance(value, Ref):
            if value.b_only is not None:
                a, b = PHANTOM + value.b_only, value.b_only
                swaps.append((str(b), str(a)))
                if b not in self.ids.b2a[value.kind]:
                    self.ids.pair(value.kind, a, b)
                return a if side == 0 else b
            b = self.ids.to_b(value.kind, value.a)
            if (str(b), str(value.a)) not in swaps:
                swaps.append((str(b), str(value.a)))   # an error message names the id it was given
            return value.a if side == 0 else b
        if isinstance(value, dict):
            return {k: self._resolve(v, side, swaps) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve(v, side, swaps) for v in value]
        return value

    def _path(self, template: str, refs: dict, side: int, swaps) -> str:
        return template.format(**{k: self._resolve(v, side, swaps) for k, v in refs.items()})

    def call(self, label: str, method: str, template: str, token: str, *, refs: dict | None = None,
             body: Any = None, params: dict | None = None, id_kind: str | None = None,
             creates: str | None = None, ignore: tuple[str, ...] = ()) -> tuple[Any, Any]:
        """The request to A and to B; both answers compared (B's ids mapped); A's and B's answers."""
        answers, described = [], None
        swaps: list[tuple[str, str]] = []
        for side in (0, 1):
            path = self._path(template, refs or {}, side, swaps)
            payload = self._resolve(body, side, swaps)
            query = self._resolve(params, side, swaps)
            if side == 0:
                described = f"{label}: {method} {path} params={query} body={payload}"
            r = self.http[side].request(method, path, json=payload, params=query,
                                        headers={"Authorization": f"Bearer {self.tokens[token][side]}"})
            answers.append((r.status_code, r.json() if r.content else None))
        (status_a, a), (status_b, b) = answers
        if self.events:
            event(f"{label}: {status_a}")
        if creates and status_a < 300 and status_b < 300 and isinstance(a, dict) and isinstance(b, dict):
            self.ids.pair(creates, a["id"], b["id"])
        if isinstance(a, dict) and isinstance(b, dict) and "search_audit" in a and "search_audit" in b:
            # Audit rows are written by the searches compared before, in order: paired by position.
            for row_a, row_b in zip(a["search_audit"], b["search_audit"]):
                if row_b["id"] not in self.ids.b2a["audit"]:
                    self.ids.pair("audit", row_a["id"], row_b["id"])
        self.compare(described, status_a, a, status_b, b, id_kind, swaps, ignore)
        return a, b

    def compare(self, described: str, status_a: int, a: Any, status_b: int, b: Any, id_kind: str | None,
                swaps: list[tuple[str, str]], ignore: tuple[str, ...] = ()) -> None:
        mapped = to_a(b, self.ids, id_kind)
        if isinstance(mapped, dict) and isinstance(mapped.get("error"), dict):
            table = dict(swaps)
            mapped["error"]["message"] = re.sub(r"\b\d+\b", lambda m: table.get(m.group(0), m.group(0)),
                                                mapped["error"].get("message", ""))
        problems = [] if status_a == status_b else [f"status: A={status_a} B={status_b}"]
        for key, field_ in (("hits", "message_id"), ("sessions", "id")):
            if isinstance(a, dict) and isinstance(mapped, dict) and isinstance(a.get(key), list) \
                    and isinstance(mapped.get(key), list):
                order_a, order_b = [x.get(field_) for x in a[key]], [x.get(field_) for x in mapped[key]]
                if order_a != order_b:
                    problems.append(f"$.{key} in order ({field_}): A={order_a} B={order_b}")
        problems += differences(a, mapped, ignore=ignore)
        assert not problems, (
            f"the answer moved with rows outside the caller's scope\n  request {described}\n  "
            + "\n  ".join(problems[:12]) + (f"\n  ... and {len(problems) - 12} more" if len(problems) > 12 else ""))

    def pages(self, label: str, template: str, token: str, params: dict, cursor: str, *,
              refs: dict | None = None, id_kind: str | None = None) -> list:
        """A paged GET: each page compared, `next` followed on each side with its own cursor."""
        nexts: list[str | None] = [None, None]
        out = []
        for page in range(PAGES_MAX):
            answers, swaps = [], []
            for side in (0, 1):
                query = dict(self._resolve(params, side, swaps))
                if nexts[side]:
                    query[cursor] = nexts[side]
                path = self._path(template, refs or {}, side, swaps)
                r = self.http[side].get(path, params=query,
                                        headers={"Authorization": f"Bearer {self.tokens[token][side]}"})
                answers.append((r.status_code, r.json()))
            (status_a, a), (status_b, b) = answers
            described = f"{label}: GET {self._path(template, refs or {}, 0, [])} params={query} page {page + 1}"
            # `next` is opaque (B's cursor names B's ids): compared by presence here, then by the
            # page it leads to.
            self.compare(described, status_a, a, status_b, b, id_kind, swaps, ignore=(r"\$\.next",))
            if isinstance(a, dict) and isinstance(b, dict):
                assert (a.get("next") is None) == (b.get("next") is None), (
                    f"the answer moved with rows outside the caller's scope\n  request {described}\n  "
                    f"$.next: A={a.get('next')!r} B={b.get('next')!r}")
            out.append(a)
            if status_a != 200 or not a.get("next"):
                break
            nexts = [a["next"], b["next"]]
        return out


# ---------------------------------------------------------------------------------------------
# Drawing an example: callers, the visible rows they own, turns and searches, hidden rows.

@dataclass
class Reader:
    name: str
    actor: tuple[str, str]
    scope: list[str]
    own: list[NewConv] = field(default_factory=list)


@dataclass
class SearchSpec:
    query: str
    limit: int | None
    filters: dict


@dataclass
class TurnSpec:
    dest: int                         # A's conversation id
    agent: str
    requester: tuple[str, str] | None
    answering: int | None
    loaded: list[int]
    searches: list[SearchSpec]
    memory: bool
    reply: str | None


@dataclass
class Plan:
    readers: list[Reader]
    own_ops: list
    turns: list[TurnSpec]
    reader_requests: dict[str, list[tuple]]
    probes: list[tuple]


def namespace_tuple(ns: str) -> tuple[str, str]:
    kind, _, name = ns.partition(":")
    return kind, name


def draw_query(data) -> str:
    words = data.draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3, unique=True), label="query words")
    if chance(data, 25, "ask for the hidden word?"):
        words.append(HIDDEN_WORD)
    return " ".join(w.title() if chance(data, 15, "query case") else w for w in words)


def draw_search_box(data, titles: list[str]) -> str:
    how = data.draw(st.sampled_from(["words", "words", "phrase", "minus", "title", "title", "hidden"]),
                    label="search box")
    words = data.draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3, unique=True), label="q words")
    if how == "phrase" and len(words) > 1:
        return f'"{words[0]} {words[1]}" ' + " ".join(words[2:])
    if how == "minus" and len(words) > 1:
        return " ".join(words[:-1]) + f" -{words[-1]}"
    if how == "title":
        title = data.draw(st.sampled_from(titles), label="title")
        return title[: data.draw(st.integers(2, max(2, len(title))), label="title prefix")]
    if how == "hidden":
        return data.draw(st.sampled_from([HIDDEN_WORD, "Otter Corp", "Nightingale", f"{words[0]} {HIDDEN_WORD}"]),
                         label="hidden query")
    return " ".join(words)


def draw_filters(data, model: Model) -> dict:
    filters: dict = {}
    if not chance(data, 40, "filters?"):
        return filters
    if chance(data, 25, "actor filter?"):
        actor = {"external_id": data.draw(st.sampled_from(EXTERNAL_IDS + HIDDEN_PEOPLE[:1] + ["nobody"]),
                                          label="actor filter")}
        if data.draw(st.booleans(), label="actor filter namespace?"):
            actor["namespace"] = data.draw(st.sampled_from(model.namespaces + [":".join(SHADOW)]), label="ns")
        filters["actor"] = actor
    if chance(data, 25, "requester_only?"):
        filters["requester_only"] = True
    if chance(data, 30, "conversation filter?"):
        if chance(data, 30, "a hidden conversation?"):
            filters["conversation_id"] = ("hidden", data.draw(st.integers(0, 20), label="which hidden"))
        else:
            filters["conversation_id"] = Ref("conv", data.draw(st.sampled_from(model.searchable_convs),
                                                               label="conversation filter"))
    if chance(data, 25, "connector filter?"):
        filters["connector"] = data.draw(st.sampled_from(model.namespaces + [":".join(SHADOW)]), label="connector")
    if chance(data, 25, "since?"):
        filters["since"] = at(data.draw(st.integers(0, 450), label="since")).isoformat()
    if chance(data, 25, "until?"):
        filters["until"] = at(data.draw(st.integers(0, 450), label="until")).isoformat()
    return filters


def draw_plan(data, model: Model) -> Plan:
    slugs = [model.slugs[a] for a in model.agents]
    people = sorted(model.actors)
    readers: list[Reader] = []
    own_ops: list = []
    # Mostly scopes that leave one of the world's agents to the runtime alone (where rows hidden
    # by their audience can be written): hypothesis draws the first options most often.
    scopes = ([[slugs[1]], [], [slugs[0]], slugs] if len(slugs) > 1 else [[], [slugs[0]]])
    for i in range(data.draw(st.integers(1, 2), label="readers")):
        actor = data.draw(st.sampled_from(people), label="reader")
        if any(r.actor == actor for r in readers):
            continue
        reader = Reader(f"reader{i}", actor, data.draw(st.sampled_from(scopes), label="reader scope"))
        # The sessions the reader created, with any agent: they see these whatever their scope.
        for j in range(data.draw(st.integers(0, 2), label="own sessions")):
            conv = NewConv("acme", data.draw(st.sampled_from(slugs), label="own agent"), namespace_tuple(actor[0]),
                           f"own-{i}-{j}", data.draw(st.sampled_from(OWN_TITLES), label="own title"),
                           None if chance(data, 60, "the creator alone?") else
                           data.draw(st.sampled_from([("public", actor[0], ()), ("workspace", actor[0], ())]),
                                     label="own audience"),
                           creator=actor[1], minute=data.draw(st.integers(0, 300), label="created"))
            reader.own.append(conv)
            own_ops.append(conv)
            same_ns = [p for p in people if p[0] == actor[0]]
            for k in range(data.draw(st.integers(1, 3), label="own messages")):
                own_ops.append(NewMsg(conv.key, f"own-{i}-{j}-{k}", data.draw(BODIES, label="body"),
                                      data.draw(st.integers(1, 400), label="minute"),
                                      role=data.draw(st.sampled_from(["user", "user", "assistant"]), label="role"),
                                      speaker=data.draw(st.sampled_from(same_ns), label="speaker")))
        readers.append(reader)

    turn_specs: list[TurnSpec] = []
    for _ in range(data.draw(st.integers(2, 4), label="turns")):
        if model.focus_groups and chance(data, 60, "into a focus conversation?"):
            dest = model.convs[draw_focus(data, model, turn=True)]
        else:
            dest = model.convs[data.draw(st.sampled_from(model.searchable_convs), label="destination")]
        requester = None
        if not chance(data, 20, "no requester?"):
            requester = data.draw(st.sampled_from(people), label="requester")
            own = None
            if dest.audience[0] == "members" and dest.audience[2]:
                own = (dest.audience[1], dest.audience[2][0])
            if own in model.actors and chance(data, 50, "asked by the room's reader?"):
                requester = own
        in_dest = sorted(m.id for m in model.msgs.values() if m.conv == dest.id)
        answering = data.draw(st.sampled_from(in_dest), label="answering") if in_dest and chance(
            data, 50, "answering a message?") else None
        loaded = data.draw(st.lists(st.sampled_from(in_dest), max_size=3, unique=True),
                           label="loaded") if in_dest else []
        searches = [SearchSpec(draw_query(data),
                               data.draw(st.one_of(st.none(), st.integers(1, 20)), label="limit"),
                               draw_filters(data, model))
                    for _ in range(data.draw(st.integers(1, 2), label="searches"))]
        turn_specs.append(TurnSpec(dest.id, model.slugs[dest.agent], requester, answering, loaded, searches,
                                   memory=chance(data, 25, "form a memory?"),
                                   reply=data.draw(BODIES, label="reply") if chance(data, 40, "reply?") else None))

    titles = sorted({f"C{i}" for i in range(3)} | {c.title for c in own_ops if isinstance(c, NewConv)}
                    | {"S-members", "X-globex", "D0", "L0"})
    reader_requests: dict[str, list[tuple]] = {}
    for reader in readers:
        requests: list[tuple] = [("whoami",)]
        requests.append(("list", None, data.draw(st.integers(1, 6), label="page size")))
        requests.append(("list", data.draw(st.sampled_from(slugs + [GHOST, "nobody"]), label="agent filter"),
                         data.draw(st.integers(1, 6), label="page size")))
        for _ in range(data.draw(st.integers(2, 4), label="reader searches")):
            agent = data.draw(st.sampled_from(slugs + [GHOST]), label="search agent") if chance(
                data, 20, "search one agent?") else None
            requests.append(("search", draw_search_box(data, titles), agent,
                             data.draw(st.integers(1, 5), label="search page size")))
        visible = sorted(model.convs)
        for conv in data.draw(st.lists(st.sampled_from(visible), max_size=3, unique=True), label="sessions read"):
            requests.append(("get", conv))
        for conv in data.draw(st.lists(st.sampled_from(visible), max_size=2, unique=True), label="transcripts"):
            requests.append(("transcript", conv, data.draw(st.integers(2, 8), label="transcript page")))
        for _ in range(data.draw(st.integers(1, 3), label="hidden sessions read")):
            requests.append(("get-hidden", data.draw(st.integers(0, 30), label="which hidden")))
        requests.append(("transcript-hidden", data.draw(st.integers(0, 30), label="which hidden"), 5))
        reader_requests[reader.name] = requests
    probes = [("turn-hidden", data.draw(st.integers(0, 30), label="which hidden"),
               data.draw(st.sampled_from(slugs + [GHOST]), label="as agent")),
              ("search-hidden-turn", data.draw(st.integers(0, 30), label="which hidden turn"))]
    return Plan(readers, own_ops, turn_specs, reader_requests, probes)


def draw_audience(data, model: Model, ns: str, label: str) -> Aud:
    """An audience for a row that should stay hidden: mostly narrow, sometimes not (the
    reference decides)."""
    kind = data.draw(st.sampled_from(["dm-hidden", "dm", "room", "external", "external", "legacy", "workspace",
                                      "public"]), label=f"{label} audience")
    if chance(data, 25, f"{label} another namespace?"):
        ns = data.draw(st.sampled_from(model.namespaces + [":".join(SHADOW)]), label=f"{label} namespace")
    pool = sorted({ext for (n, ext) in model.actors if n == ns} | set(HIDDEN_PEOPLE))
    if kind == "dm-hidden":
        return ("members", ns, (data.draw(st.sampled_from(HIDDEN_PEOPLE), label=f"{label} reader"),))
    if kind == "dm":
        return ("members", ns, (data.draw(st.sampled_from(pool), label=f"{label} reader"),))
    if kind == "room":
        return ("members", ns, tuple(sorted(data.draw(st.lists(st.sampled_from(pool), min_size=2, max_size=3,
                                                               unique=True), label=f"{label} readers"))))
    if kind == "external":
        return ("external", ns, tuple(sorted(data.draw(st.lists(st.sampled_from(pool + ["XGLOBEX", "XINITECH"]),
                                                                min_size=1, max_size=2, unique=True),
                                                       label=f"{label} readers"))))
    if kind == "legacy":   # stored before 0018 with no readers (only external: members always had them)
        return ("external", ns, ())
    if kind == "workspace":
        return ("workspace", ns, ())
    return ("public", ns, ())


def draw_hidden(data, model: Model, plan: Plan, kinds: set[str], known_links: set) -> list:
    """Rows outside every caller's scope (see the module docstring), in the order B writes them."""
    slugs = [model.slugs[a] for a in model.agents]
    people = sorted(model.actors)
    reader_actors = {r.actor for r in plan.readers}
    seen = set().union(*(r.scope for r in plan.readers))
    ops: list = []
    n = itertools.count()

    def words() -> str:
        body = data.draw(BODIES, label="hidden body")
        return f"{body} {HIDDEN_WORD}" if chance(data, 30, "with the hidden word?") else body

    def speaker(ns: str) -> tuple[tuple[str, str], str | None]:
        same = [p for p in people if p[0] == ns]
        requesters = [t.requester for t in plan.turns if t.requester and t.requester[0] == ns]
        if requesters and chance(data, 35, "a requester speaks?"):
            return data.draw(st.sampled_from(requesters), label="hidden speaker"), None
        if same and chance(data, 50, "a visible person speaks?"):
            return data.draw(st.sampled_from(same), label="hidden speaker"), None
        return (ns, data.draw(st.sampled_from(HIDDEN_PEOPLE), label="hidden person")), "Alice"

    def messages(conv: NewConv, kind: str, count: int, audience: Callable[[], Aud | None] = lambda: None) -> None:
        for _ in range(count):
            who, name = speaker(conv.key.namespace)
            ops.append(NewMsg(conv.key, f"hidden-{next(n)}", words(), data.draw(st.integers(1, 400), label="minute"),
                              role=data.draw(st.sampled_from(["user", "user", "assistant"]), label="hidden role"),
                              speaker=who, speaker_name=name, audience=audience(), kind=kind))

    if "workspace" in kinds:
        ops.append(NewWorkspace(OTHER_WS))
        for j in range(data.draw(st.integers(1, 3), label="their conversations")):
            ns = data.draw(st.sampled_from(model.namespaces), label="their namespace")
            conv = NewConv(OTHER_WS, data.draw(st.sampled_from(slugs + [GHOST]), label="their agent"),
                           namespace_tuple(ns), f"C{j}", data.draw(st.sampled_from(HIDDEN_TITLES), label="their title"),
                           data.draw(st.sampled_from([("public", ns, ()), ("workspace", ns, ())]), label="their aud"),
                           minute=data.draw(st.integers(0, 300), label="created"), kind="workspace")
            ops.append(conv)
            messages(conv, "workspace", data.draw(st.integers(1, 4), label="their messages"))
            if chance(data, 40, "a turn of theirs?"):
                ops.append(NewTurn(conv.key, kind="workspace"))
    if "agent" in kinds:
        for j in range(data.draw(st.integers(1, 3), label="ghost conversations")):
            ns = data.draw(st.sampled_from(model.namespaces), label="ghost namespace")
            creators = [p[1] for p in people if p[0] == ns and p not in reader_actors] + HIDDEN_PEOPLE
            conv = NewConv("acme", GHOST, namespace_tuple(ns), data.draw(st.sampled_from([f"C{j}", f"G{j}"]),
                                                                       label="ghost external id"),
                           data.draw(st.sampled_from(HIDDEN_TITLES), label="ghost title"),
                           draw_audience(data, model, ns, "ghost") if chance(data, 50, "ghost audience?")
                           else ("public", ns, ()),
                           creator=data.draw(st.sampled_from(creators), label="ghost creator")
                           if chance(data, 30, "a ghost creator?") else None,
                           minute=data.draw(st.integers(0, 300), label="created"), kind="agent")
            ops.append(conv)
            messages(conv, "agent", data.draw(st.integers(1, 5), label="ghost messages"))
            if chance(data, 50, "a ghost turn?"):
                ops.append(NewTurn(conv.key, kind="agent"))
    if "audience" in kinds:
        own_keys = {c.key for r in plan.readers for c in r.own}
        for slug in [s for s in slugs if s not in seen]:
            agent = next(a for a in model.agents if model.slugs[a] == slug)
            dests = [model.convs[t.dest] for t in plan.turns if t.agent == slug]

            def hidden_from_turns(aud: Aud, own_conv: int) -> bool:
                return not any(origin_allows(model, agent, aud, own_conv, d) for d in dests)

            namespaces = sorted(model.agent_namespaces(agent))
            for j in range(data.draw(st.integers(1, 3), label="hidden conversations")):
                ns = data.draw(st.sampled_from(namespaces + [":".join(SHADOW)]), label="hidden conv namespace")
                aud = draw_audience(data, model, ns, "hidden conversation")
                if not hidden_from_turns(aud, -1):
                    continue
                conv = NewConv("acme", slug, namespace_tuple(ns), f"H{j}",
                               data.draw(st.sampled_from(HIDDEN_TITLES), label="hidden title"), aud,
                               minute=data.draw(st.integers(0, 300), label="created"), kind="audience")
                ops.append(conv)
                messages(conv, "audience", data.draw(st.integers(1, 4), label="hidden messages"))
            inside = [c for c in model.convs.values() if c.agent == agent]
            for _ in range(data.draw(st.integers(1, 6), label="hidden messages in visible rooms")):
                if not inside:
                    break
                host = data.draw(st.sampled_from(inside), label="host room")
                key = ConvKey("acme", slug, host.connector_ns, _external_id(model, host))
                assert key not in own_keys
                aud = draw_audience(data, model, host.connector_ns, "hidden message")
                if not hidden_from_turns(aud, host.id):
                    continue
                who, name = speaker(host.connector_ns)
                ops.append(NewMsg(key, f"hidden-{next(n)}", words(), data.draw(st.integers(1, 400), label="minute"),
                                  role=data.draw(st.sampled_from(["user", "user", "assistant"]), label="hidden role"),
                                  speaker=who, speaker_name=name, audience=aud, kind="audience"))
    if "link" in kinds and len(people) >= 2 and not chance(data, 30, "no pending links?"):
        for _ in range(data.draw(st.integers(1, 3), label="pending links")):
            a, b = data.draw(st.lists(st.sampled_from(people), min_size=2, max_size=2, unique=True), label="pair")
            slug = data.draw(st.sampled_from(slugs), label="link agent")
            if (slug, *sorted([a, b])) in known_links:
                continue
            known_links.add((slug, *sorted([a, b])))
            ops.append(NewLink("acme", slug, a, b, verified=False))
    return ops


def _external_id(model: Model, conv) -> str:
    return model.conv_external_ids[conv.id]


def model_external_ids(conn, model: Model) -> None:
    """build_world names its conversations C0, D0, S-members-base, ...: their external ids, by id."""
    model.conv_external_ids = {r["id"]: r["external_id"] for r in conn.execute(
        "select id, external_id from conversations where id = any(%s)", (list(model.convs),))}


def linked_pairs(conn) -> set:
    """(agent slug, actor key, actor key) of every link A records, in any state."""
    out = set()
    for r in conn.execute(LINK_ROWS):
        out.add((r["agent"], *sorted([(r["a_ns"], r["a_id"]), (r["b_ns"], r["b_id"])])))
    return out


# ---------------------------------------------------------------------------------------------
# Running an example.

@dataclass
class Example:
    pair: Pair
    writer_b: Writer
    model: Model | None = None
    own_audiences: dict[int, Aud] = field(default_factory=dict)   # A's id -> audience, of the readers' sessions


def hidden_conv(ex: Example, index: int, kinds: tuple[str, ...] = HIDDEN_KINDS) -> Ref | None:
    convs = [c for k, c in ex.writer_b.hidden_convs if k in kinds]
    return Ref("conv", b_only=convs[index % len(convs)]) if convs else None


def resolve_filters(ex: Example, filters: dict) -> dict:
    out = dict(filters)
    if isinstance(out.get("conversation_id"), tuple):
        ref = hidden_conv(ex, out["conversation_id"][1])
        if ref is None:
            out.pop("conversation_id")
        else:
            out["conversation_id"] = ref
    return out


def run_runtime(ex: Example, plan: Plan, slugs: list[str]) -> None:
    pair = ex.pair
    pair.token("runtime", "runtime", "acme", agents=slugs)
    pair.call("whoami (runtime)", "GET", "/v1/whoami", "runtime")
    for t in plan.turns:
        body: dict = {"agent": t.agent, "conversation_id": Ref("conv", t.dest),
                      "loaded_message_ids": [Ref("msg", m) for m in t.loaded]}
        if t.requester:
            body["requester"] = {"external_id": t.requester[1], "namespace": t.requester[0]}
        if t.answering:
            body["answering_message_id"] = Ref("msg", t.answering)
        a, _ = pair.call("register a turn", "POST", "/v1/turns", "runtime", body=body, id_kind="turn", creates="turn")
        if "id" not in a:
            continue
        turn = Ref("turn", a["id"])
        shown: list[int] = []
        for s in t.searches:
            request = {"turn_id": turn, "query": s.query, "filters": resolve_filters(ex, s.filters)}
            if s.limit is not None:
                request["limit"] = s.limit
            answer, _ = pair.call("search_history", "POST", "/v1/tools/search_history", "runtime", body=request)
            if ex.model is not None and isinstance(answer, dict) and "hits" in answer:
                check_rooms(ex, t, answer)
                event(f"search_history with {min(len(answer['hits']), 3)}{'+' if len(answer['hits']) > 2 else ''} hits")
            shown += (answer or {}).get("message_ids", [])
        memories = []
        if t.memory and shown:
            m, _ = pair.call("form a memory", "POST", "/v1/turns/{turn}/memories", "runtime", refs={"turn": turn},
                             body={"body": "what was said", "source_message_ids": [Ref("msg", i) for i in shown[:3]]},
                             id_kind="mem", creates="mem")
            if isinstance(m, dict) and "id" in m:
                memories.append(Ref("mem", m["id"]))
        if t.reply is not None:
            pair.call("store the reply", "POST", "/v1/turns/{turn}/reply", "runtime", refs={"turn": turn},
                      body={"body": t.reply, "memory_ids": memories}, id_kind="msg", creates="msg")
        pair.call("recheck", "POST", "/v1/turns/{turn}/recheck", "runtime", refs={"turn": turn})
        pair.call("trace", "GET", "/v1/turns/{turn}/trace", "runtime", refs={"turn": turn},
                  ignore=(r"\$\.search_audit\[\d+\]\.exclusions",))
    for probe in plan.probes:
        if probe[0] == "turn-hidden":
            ref = hidden_conv(ex, probe[1], kinds=("workspace", "agent"))
            if ref is not None:
                pair.call("a turn in another agent's or workspace's conversation", "POST", "/v1/turns", "runtime",
                          body={"agent": probe[2], "conversation_id": ref}, id_kind="turn", creates="turn")
        elif probe[0] == "search-hidden-turn" and ex.writer_b.hidden_turns:
            turn = Ref("turn", b_only=ex.writer_b.hidden_turns[probe[1] % len(ex.writer_b.hidden_turns)])
            pair.call("search_history in another agent's turn", "POST", "/v1/tools/search_history", "runtime",
                      body={"turn_id": turn, "query": "falcon"})
            pair.call("trace of another agent's turn", "GET", "/v1/turns/{turn}/trace", "runtime", refs={"turn": turn})
            pair.call("recheck of another agent's turn", "POST", "/v1/turns/{turn}/recheck", "runtime",
                      refs={"turn": turn})


def run_readers(ex: Example, plan: Plan) -> None:
    pair = ex.pair
    for reader in plan.readers:
        pair.token(reader.name, "reader", "acme", actor=reader.actor, agents=reader.scope)
        for request in plan.reader_requests[reader.name]:
            what = request[0]
            if what == "whoami":
                pair.call("whoami (reader)", "GET", "/v1/whoami", reader.name)
            elif what == "list":
                params = {"limit": request[2], **({"agent": request[1]} if request[1] else {})}
                pair.pages("recent sessions", "/v1/agent-sessions", reader.name, params, "before")
            elif what == "search":
                params = {"q": request[1], "limit": request[3], **({"agent": request[2]} if request[2] else {})}
                pages = pair.pages("session search", "/v1/agent-sessions", reader.name, params, "before")
                event(f"session search with {'some' if pages and pages[0].get('sessions') else 'no'} sessions")
            elif what == "get":
                pair.call("read one session", "GET", "/v1/agent-sessions/{conv}", reader.name,
                          refs={"conv": Ref("conv", request[1])}, id_kind="conv")
            elif what == "transcript":
                pair.pages("a transcript", "/v1/agent-sessions/{conv}/messages", reader.name, {"limit": request[2]},
                           "after", refs={"conv": Ref("conv", request[1])})
            elif what == "get-hidden":
                ref = hidden_conv(ex, request[1])
                if ref is not None:
                    pair.call("read a hidden session", "GET", "/v1/agent-sessions/{conv}", reader.name,
                              refs={"conv": ref}, id_kind="conv")
            elif what == "transcript-hidden":
                ref = hidden_conv(ex, request[1])
                if ref is not None:
                    pair.pages("a hidden transcript", "/v1/agent-sessions/{conv}/messages", reader.name,
                               {"limit": request[2]}, "after", refs={"conv": ref})


def check_rooms(ex: Example, t: TurnSpec, answer: dict) -> None:
    """A room names its title, connector and audience only where the room itself may be
    disclosed into the destination (the reference rule, on the conversation's own audience)."""
    model = ex.model
    dest = model.convs[t.dest]
    for hit in answer["hits"]:
        for shown in [hit, *hit.get("neighbours", {}).get("before", []), *hit.get("neighbours", {}).get("after", [])]:
            room = shown["room"]
            conv = model.convs.get(room["conversation_id"])
            if conv is None:
                aud = ex.own_audiences.get(room["conversation_id"])
                if aud is None:
                    continue
            else:
                aud = conv.audience
            allowed = origin_allows(model, dest.agent, aud, room["conversation_id"], dest)
            expected_keys = {"conversation_id", "disclosed", "title", "connector", "audience"}
            assert set(room) == expected_keys, f"room {room}: want the keys {sorted(expected_keys)}"
            assert room["disclosed"] is allowed, (
                f"room {room} of conversation {aud} into destination {dest.audience}: disclosed should be {allowed}")
            if not allowed:
                assert (room["title"], room["connector"], room["audience"]) == (None, None, None), (
                    f"DISCLOSED the metadata of room {room} ({aud}) into {dest.audience}")


def run_example(pg_url: str, data) -> None:
    kinds = hidden_kinds()
    with database_pair(pg_url) as (url_a, url_b), ExitStack() as stack:
        conn_a = stack.enter_context(connect(url_a, autocommit=True))
        conn_b = stack.enter_context(connect(url_b, autocommit=True))
        # A: the visible world, each draw recorded; then the sessions the readers created.
        recording = Recording(data)
        with conn_a.transaction():
            model = build_world(conn_a, recording, heavy=False)
        model_external_ids(conn_a, model)
        plan = draw_plan(data, model)
        with conn_a.transaction():
            Writer(conn_a).write(plan.own_ops, hidden=False)
        known = Known.read(conn_a)
        hidden = draw_hidden(data, model, plan, kinds, linked_pairs(conn_a))
        requesters = {t.requester for t in plan.turns if t.requester}
        for op in hidden:
            event(f"hidden: {op.kind} {type(op).__name__}")
            if isinstance(op, NewMsg) and op.audience is not None:
                legacy = " legacy" if _legacy(op.audience) else ""
                event(f"hidden: a {op.audience[0]}{legacy} message in a visible room")
            if isinstance(op, NewMsg) and op.speaker in requesters:
                event(f"hidden: a requester speaks ({op.kind})")
        end = len(recording.log) + len(plan.own_ops)
        positions = [data.draw(st.integers(-1, end), label="when") for _ in hidden]
        # B: the same world, replayed, the hidden rows written between its writes.
        writer_b = Writer(conn_b, known)
        writer_b.schedule(hidden, positions)
        with conn_b.transaction():
            writer_b.run_due(-1)
            build_world(conn_b, Replay(recording.log, writer_b.run_due), heavy=False)
            for i, op in enumerate(plan.own_ops):
                writer_b.run_due(len(recording.log) + i)
                assert writer_b.ready(op, hidden=False), op
                writer_b.apply(op, hidden=False)
            writer_b.run_due(math.inf)
            assert not writer_b.pending, f"TEST HARNESS: hidden rows never written: {writer_b.pending}"
        ids = Ids()
        map_worlds(conn_a, conn_b, writer_b, ids)
        check_same_visible_world(conn_a, conn_b, ids)
        event(f"{sum(len(v) for v in writer_b.hidden.values())} hidden rows" if writer_b.hidden else "no hidden rows")

        pair = Pair(url_a, url_b, ids, stack)
        pair.events = True
        ex = Example(pair, writer_b, model)
        for op in plan.own_ops:
            if isinstance(op, NewConv):
                ex.own_audiences[Writer(conn_a).conv_id(op.key)] = op.reference_audience
        slugs = [model.slugs[a] for a in model.agents]
        run_readers(ex, plan)
        run_runtime(ex, plan, slugs)


# ---------------------------------------------------------------------------------------------
# The property.

@settings(max_examples=int(os.environ.get("BACKSCROLL_NONINTERFERENCE_EXAMPLES", "20")), **SETTINGS)
@given(data=st.data())
def test_every_answer_is_the_same_whatever_the_database_holds_outside_the_callers_scope(pg_url, template_url, data):
    run_example(pg_url, data)


# ---------------------------------------------------------------------------------------------
# Named tests: fixed worlds written with the same ops.

WS = "acme"
SLACK = ("slack", "acme")
NS = "slack:acme"


def _public(ns: str = NS) -> Aud:
    return ("public", ns, ())


def _dm(reader: str, ns: str = NS) -> Aud:
    return ("members", ns, (reader,))


@contextmanager
def fixed_pair(pg_url: str, visible: list, hidden: list, *, order: list[int] | None = None,
               **settings) -> Iterator[Example]:
    """A holds `visible`; B holds `visible` and `hidden`, written in `order` (indexes into
    visible + hidden; by default the hidden rows first, interleaved with the visible ones)."""
    everything = visible + hidden
    if order is None:
        order = [i for pair in itertools.zip_longest(range(len(visible), len(everything)), range(len(visible)))
                 for i in pair if i is not None]
    assert sorted(order) == list(range(len(everything)))
    with database_pair(pg_url) as (url_a, url_b), ExitStack() as stack:
        conn_a = stack.enter_context(connect(url_a, autocommit=True))
        conn_b = stack.enter_context(connect(url_b, autocommit=True))
        for conn in (conn_a, conn_b):
            conn.execute("insert into workspaces (slug, name) values ('acme', 'Acme')")
        Writer(conn_a).write(visible, hidden=False)
        writer_b = Writer(conn_b, Known.read(conn_a))
        waiting: list = []
        for i in order:
            if i < len(visible):
                assert writer_b.ready(visible[i], hidden=False), visible[i]
                writer_b.apply(visible[i], hidden=False)
            else:
                waiting.append(everything[i])
            for op in list(waiting):
                if writer_b.ready(op):
                    writer_b.apply(op, hidden=True)
                    waiting.remove(op)
        assert not waiting, f"TEST HARNESS: hidden rows never written: {waiting}"
        ids = Ids()
        map_worlds(conn_a, conn_b, writer_b, ids)
        check_same_visible_world(conn_a, conn_b, ids)
        yield Example(Pair(url_a, url_b, ids, stack, **settings), writer_b)


def a_id(ex: Example, key_or_ext, ws: str = WS) -> int:
    """A's id of a conversation (by key) or of a message (by external id)."""
    w = Writer(ex.pair.conns[0])
    return w.conv_id(key_or_ext) if isinstance(key_or_ext, ConvKey) else w.message_id(ws, key_or_ext)


def ask(ex: Example, dest: ConvKey | NewConv, query: str, *, requester: str | None = None, agent: str = "concierge",
        limit: int | None = None, **compare) -> tuple[dict, dict, Ref]:
    """A turn into `dest` and one search, compared; (A's answer, B's answer, the turn)."""
    dest = dest.key if isinstance(dest, NewConv) else dest
    ex.pair.tokens.get("runtime") or ex.pair.token("runtime", "runtime", WS, agents=[agent])
    body: dict = {"agent": agent, "conversation_id": Ref("conv", a_id(ex, dest))}
    if requester:
        body["requester"] = {"external_id": requester}
    a, _ = ex.pair.call("register a turn", "POST", "/v1/turns", "runtime", body=body, id_kind="turn", creates="turn")
    turn = Ref("turn", a["id"])
    request = {"turn_id": turn, "query": query, **({"limit": limit} if limit else {})}
    a, b = ex.pair.call("search_history", "POST", "/v1/tools/search_history", "runtime", body=request, **compare)
    return a, b, turn


def zebulon_channel(*, scout: bool = False) -> tuple[list, ConvKey, ConvKey]:
    """A public channel beside U2's DM with the agent, the visible world of repro (a): one message
    holds a unique word (`wombat`) and `zebulon` twice, another `quokka`; asked for `quokka
    zebulon`, the first ranks above the second while `zebulon` is as rare as `quokka`."""
    general = NewConv(WS, "concierge", SLACK, "C-general", "general", _public())
    u2 = NewConv(WS, "concierge", SLACK, "D-u2", "U2 DM", _dm("U2"))
    ops: list = [general, u2,
                 NewMsg(general.key, "zebulon", "wombat at the zebulon zebulon pier", 10, speaker=(NS, "U3")),
                 NewMsg(general.key, "quokka", "quokka sighting at the harbour", 11, speaker=(NS, "U4")),
                 NewMsg(general.key, "lunch", "lunch is pizza on Wednesday", 12, speaker=(NS, "U3")),
                 NewMsg(u2.key, "u2-hello", "hello, what is on this week?", 13, speaker=(NS, "U2"))]
    for i in range(4):
        ops.append(NewMsg(general.key, f"filler-{i}", f"printer on floor {i} is jammed again", 14 + i,
                          speaker=(NS, "U4")))
    return ops, general.key, u2.key


def test_search_history_scores_do_not_move_with_dms_of_another_person(pg_url, template_url):
    """Repro (a): a public hit's lexical score was 0.9176; after five DMs of U1 mentioning
    `zebulon` were stored it was 0.3022, and none of the DMs was returned. From a public channel
    and from U2's DM, the answers (hit order, neighbours, rooms) and the trace's recorded scores
    are the same with and without U1's DMs."""
    visible, general, u2 = zebulon_channel()
    u1 = NewConv(WS, "concierge", SLACK, "D-u1", "U1 DM", _dm("U1"), kind="audience")
    hidden: list = [u1] + [NewMsg(u1.key, f"u1-{i}", f"zebulon reminder number {i}", 20 + i, speaker=(NS, "U1"),
                                  kind="audience") for i in range(5)]
    with fixed_pair(pg_url, visible, hidden) as ex:
        for dest in (general, u2):
            a, b, turn = ask(ex, dest, "quokka zebulon")
            # The world is what it claims (in A): the zebulon message above the quokka one.
            assert [h["message_id"] for h in a["hits"]] == [a_id(ex, "zebulon"), a_id(ex, "quokka")], a["hits"]
            assert not set(b["message_ids"]) & set(ex.writer_b.hidden["messages"]), "a DM of U1 was returned"
            ex.pair.call("trace", "GET", "/v1/turns/{turn}/trace", "runtime", refs={"turn": turn},
                         ignore=(r"\$\.search_audit\[\d+\]\.exclusions",))


def _pool_hits(pg_url, channel_messages: int) -> tuple[set, set]:
    """A public channel with `channel_messages` `zebulon` messages, five newer DMs of U1 saying it
    too (hidden), a pool of three: the public destination's hits, and the channel's newest three."""
    general = NewConv(WS, "concierge", SLACK, "C-general", "general", _public())
    visible: list = [general] + [NewMsg(general.key, f"z-{i}", f"zebulon pier meeting {i}", 10 + i,
                                        speaker=(NS, "U3")) for i in range(channel_messages)]
    u1 = NewConv(WS, "concierge", SLACK, "D-u1", "U1 DM", _dm("U1"), kind="audience")
    hidden: list = [u1] + [NewMsg(u1.key, f"u1-{i}", f"zebulon reminder number {i}", 40 + i, speaker=(NS, "U1"),
                                  kind="audience") for i in range(5)]
    with fixed_pair(pg_url, visible, hidden, search={"search_candidate_pool": 3}) as ex:
        a, b, _ = ask(ex, general, "zebulon")
        return ({h["message_id"] for h in a["hits"]},
                {a_id(ex, f"z-{i}") for i in range(channel_messages - 3, channel_messages)})


def test_hidden_matches_never_take_a_place_in_the_candidate_pool(pg_url, template_url):
    """The candidate pool holds the most recent matches of the rarest terms (ranking.py): five DMs
    of U1 newer than the channel's three `zebulon` messages, with a pool of three, must not push
    the channel's messages out of it (they would, were the pool filled before the audience keys
    narrowed it, and the public destination would find nothing)."""
    hits, newest = _pool_hits(pg_url, 3)
    assert hits == newest


def test_hidden_matches_never_take_a_place_in_the_walked_pool(pg_url, template_url):
    """The same when the word is dense enough for the candidates to be walked in recency order
    (ranking.walk_window, through each receivable key's own range, migration 0029): thirteen
    `zebulon` messages in the channel and a pool of three, so the window holds the newest few;
    the five newer DMs of U1 must not take the pool's places."""
    hits, newest = _pool_hits(pg_url, 13)
    assert hits == newest


def test_session_search_scores_do_not_move_with_another_agents_messages(pg_url, template_url):
    """Repro (b): a reader scoped to `concierge` saw match.score 2.2447 for `zebulon`, then 1.2846
    after ten messages went to an agent the reader cannot see (its sessions answer 404). The
    search, paged, and every read are the same with and without them."""
    visible, general, u2 = zebulon_channel()
    ghost = NewConv(WS, GHOST, SLACK, "C-ghost", "zebulon ferry", _public(), kind="agent")
    hidden: list = [ghost] + [NewMsg(ghost.key, f"g-{i}", f"zebulon ferry {i} leaves at noon", 30 + i,
                                     speaker=(NS, "U3"), kind="agent") for i in range(10)]
    with fixed_pair(pg_url, visible, hidden) as ex:
        ex.pair.token("reader", "reader", WS, actor=(NS, "U2"), agents=["concierge"])
        for q in ("zebulon", "quokka zebulon", "zebulon ferry", "ferry"):
            pages = ex.pair.pages("session search", "/v1/agent-sessions", "reader", {"q": q, "limit": 1}, "before")
            assert q == "ferry" or pages[0]["sessions"], f"{q!r} found nothing: the repro's world is not built"
        ex.pair.pages("recent sessions", "/v1/agent-sessions", "reader", {"limit": 1}, "before")
        ghost_id = ex.writer_b.hidden["conversations"][0]
        ex.pair.call("a hidden session", "GET", "/v1/agent-sessions/{conv}", "reader",
                     refs={"conv": Ref("conv", b_only=ghost_id)}, id_kind="conv")
        ex.pair.pages("a hidden transcript", "/v1/agent-sessions/{conv}/messages", "reader", {"limit": 3}, "after",
                      refs={"conv": Ref("conv", b_only=ghost_id)})


def test_requester_spoke_counts_only_what_the_destination_may_receive(pg_url, template_url):
    """`requester_spoke` was computed over the whole conversation: the requester's words in a DM
    audience inside a public room boosted that room's hits into a destination that may not read
    them. Two public rooms say the same; in B the requester also spoke in the first one, to U1
    alone: the order (and the trace's features) must not change."""
    first = NewConv(WS, "concierge", SLACK, "C-first", "first", _public())
    second = NewConv(WS, "concierge", SLACK, "C-second", "second", _public())
    u2 = NewConv(WS, "concierge", SLACK, "D-u2", "U2 DM", _dm("U2"))
    visible: list = [first, second, u2,
                     NewMsg(first.key, "in-first", "the falcon budget is approved", 10, speaker=(NS, "U3")),
                     NewMsg(second.key, "in-second", "the falcon budget is approved", 10, speaker=(NS, "U3")),
                     NewMsg(u2.key, "u2-hello", "hello", 11, speaker=(NS, "U2"))]
    hidden: list = [NewMsg(first.key, "aside", "lunch on me today", 12, speaker=(NS, "U2"), audience=_dm("U1"),
                           kind="audience")]
    with fixed_pair(pg_url, visible, hidden) as ex:
        for dest in (u2, second):
            a, b, turn = ask(ex, dest, "falcon budget", requester="U2")
            assert len(a["hits"]) == 2
            ex.pair.call("trace", "GET", "/v1/turns/{turn}/trace", "runtime", refs={"turn": turn},
                         ignore=(r"\$\.search_audit\[\d+\]\.exclusions",))


def test_the_trace_counts_no_hidden_match(pg_url, template_url):
    """The turn trace (a runtime's route) shows each search's audit row: its exclusion counts must
    not count the matches only hidden rows hold (five DMs of U1 into U2's DM)."""
    visible, general, u2 = zebulon_channel()
    u1 = NewConv(WS, "concierge", SLACK, "D-u1", "U1 DM", _dm("U1"), kind="audience")
    hidden: list = [u1] + [NewMsg(u1.key, f"u1-{i}", f"zebulon reminder number {i}", 20 + i, speaker=(NS, "U1"),
                                  kind="audience") for i in range(5)]
    with fixed_pair(pg_url, visible, hidden) as ex:
        _, _, turn = ask(ex, u2, "reminder", ignore=())
        ex.pair.call("trace", "GET", "/v1/turns/{turn}/trace", "runtime", refs={"turn": turn})


def test_lineage_or_evidence_excluded_rows_move_no_number(pg_url, template_url):
    """The documented residual. Rows in an audience the destination may receive that the lineage
    walk or missing source evidence excludes are counted by BM25's statistics (which count
    audiences, not verdicts): they may reorder hits, but no number of the answer may move, and
    none of them is shown. Compared with the order of hits ignored, the limit above the matches."""
    general = NewConv(WS, "concierge", SLACK, "C-general", "general", _public())
    board = NewConv(WS, "concierge", SLACK, "C-board", "board", _dm("U1"))
    u2 = NewConv(WS, "concierge", SLACK, "D-u2", "U2 DM", _dm("U2"))
    visible: list = [general, board, u2,
                     NewMsg(board.key, "secret", "the merger closes on Friday", 5, speaker=(NS, "U1")),
                     NewMsg(general.key, "m1", "merger rumours at lunch", 10, speaker=(NS, "U3")),
                     NewMsg(general.key, "m2", "the deposit for the merger dinner", 11, speaker=(NS, "U4")),
                     NewMsg(general.key, "m3", "friday deposit due", 12, speaker=(NS, "U3")),
                     NewMsg(u2.key, "u2-hello", "hello", 13, speaker=(NS, "U2"))]
    hidden: list = [
        # public, but built from U1's board DM: the lineage walk withholds it from a public room
        NewMsg(general.key, "laundered", "merger merger: all done on friday", 14, role="assistant",
               history=("secret",), kind="residual"),
        # public, with no source evidence: never eligible
        NewMsg(general.key, "unsourced", "merger deposit friday", 15, evidence=False, kind="residual"),
        NewMsg(general.key, "unsourced-2", "merger merger merger", 16, evidence=False, kind="residual")]
    with fixed_pair(pg_url, visible, hidden) as ex:
        residual = set(ex.writer_b.hidden["messages"])
        for dest in (general, u2):
            for query in ("merger", "merger deposit friday", "deposit"):
                a, b, turn = ask(ex, dest, query, limit=20, ignore=(r"\$\.hits.*", r"\$\.message_ids.*"))
                mapped = to_a(b, ex.pair.ids, None)
                assert sorted(a["message_ids"]) == sorted(mapped["message_ids"]), (a["message_ids"], mapped)
                b_hits = mapped["hits"]
                shown_b = {n["message_id"] for h in b["hits"] for side in ("before", "after")
                           for n in h["neighbours"][side]} | {h["message_id"] for h in b["hits"]}
                assert not shown_b & residual, f"a residual row was shown: {shown_b & residual}"
                by_id = lambda hits: sorted(hits, key=lambda h: str(h["message_id"]))  # noqa: E731
                problems = differences(by_id(a["hits"]), by_id(b_hits), "$.hits (order ignored)")
                assert not problems, f"query {query!r} into {dest}: " + "\n".join(problems)


def test_turn_registration_reveals_no_person_known_only_from_hidden_rows(pg_url, template_url):
    """A turn's requester is looked up among the workspace's people: a runtime scoped to
    `concierge` must not learn that U1 exists when U1 is known only from rows outside its scope
    (another agent's conversation, U1's own DM with an agent the runtime does not serve). The
    answer to registering a turn for U1 is the same in both databases, and so is everything a
    search in that turn answers."""
    visible, general, u2 = zebulon_channel()
    ghost = NewConv(WS, GHOST, SLACK, "D-u1", "U1 and the ghost", _dm("U1"), creator="U1", kind="agent")
    hidden: list = [ghost, NewMsg(ghost.key, "g-1", "quokka plans", 30, speaker=(NS, "U1"), kind="agent")]
    with fixed_pair(pg_url, visible, hidden) as ex:
        ex.pair.token("runtime", "runtime", WS, agents=["concierge"])
        for requester in ({"external_id": "U1"}, {"external_id": "U1", "namespace": NS}):
            a, _ = ex.pair.call("register a turn for a person only hidden rows name", "POST", "/v1/turns", "runtime",
                                body={"agent": "concierge", "conversation_id": Ref("conv", a_id(ex, general)),
                                      "requester": requester}, id_kind="turn", creates="turn")
            if isinstance(a, dict) and "id" in a:
                ex.pair.call("search_history", "POST", "/v1/tools/search_history", "runtime",
                             body={"turn_id": Ref("turn", a["id"]), "query": "quokka",
                                   "filters": {"requester_only": True}})


def _room(answer: dict) -> list[dict]:
    return [x["room"] for h in answer["hits"] for x in [h, *h["neighbours"]["before"], *h["neighbours"]["after"]]]


def test_a_room_reposted_private_hands_its_new_title_to_no_public_destination(pg_url, template_url):
    """A public channel reposted as a private one keeps its old messages public, and handed its
    new private title ('Otter Corp acquisition - board only') to any public destination. The hit
    and its neighbour are shown (their own audience is public), their room is not."""
    channel = NewConv(WS, "concierge", SLACK, "C-deals", "deals", _public())
    lobby = NewConv(WS, "concierge", SLACK, "C-lobby", "lobby", _public())
    ops = [channel, lobby,
           NewMsg(channel.key, "old-1", "the otter pricing model is ready", 10, speaker=(NS, "U3")),
           NewMsg(channel.key, "old-2", "thanks, reviewing the otter numbers", 11, speaker=(NS, "U4")),
           NewMsg(lobby.key, "hello", "hello", 12, speaker=(NS, "U3"))]
    with fixed_pair(pg_url, ops, []) as ex:
        conn = ex.pair.conns[0]
        ingest.upsert_conversation(conn, conn.execute("select id from workspaces where slug = 'acme'").fetchone()["id"],
                                   ingest.ConversationIn(agent="concierge", connector=ingest.ConnectorRef(
                                       type="slack", name="acme"), external_id="C-deals",
                                       title="Otter Corp acquisition - board only",
                                       audience=ingest.Audience(kind="members", readers=["U1", "U9"])))
        ex.pair.token("runtime", "runtime", WS, agents=["concierge"])
        http = ex.pair.http[0]
        h = {"Authorization": f"Bearer {ex.pair.tokens['runtime'][0]}"}
        turn = http.post("/v1/turns", headers=h, json={"agent": "concierge", "conversation_id": a_id(ex, lobby.key)})
        r = http.post("/v1/tools/search_history", headers=h, json={"turn_id": turn.json()["id"], "query": "otter"})
        assert r.status_code == 200, r.text
        assert "Otter Corp" not in r.text, f"DISCLOSED the private room's title into a public room: {r.text}"
        rooms = _room(r.json())
        assert len(r.json()["hits"]) == 2, r.text
        assert all(room == {"conversation_id": a_id(ex, channel.key), "disclosed": False, "title": None,
                            "connector": None, "audience": None} for room in rooms), rooms


def test_a_public_message_in_a_members_room_hands_out_no_room_title(pg_url, template_url):
    """A message marked public inside a members room is itself disclosable; its room's title
    ('Project Nightingale layoffs list'), connector and audience kind are not."""
    room = NewConv(WS, "concierge", SLACK, "G-hr", "Project Nightingale layoffs list", ("members", NS, ("U1", "U2")))
    lobby = NewConv(WS, "concierge", SLACK, "C-lobby", "lobby", _public())
    dm = NewConv(WS, "concierge", SLACK, "D-u3", "U3 DM", _dm("U3"))
    ops = [room, lobby, dm,
           NewMsg(room.key, "announce", "the cafeteria menu is posted", 10, speaker=(NS, "U1"), audience=_public()),
           NewMsg(room.key, "private", "cafeteria closes for the offsite", 11, speaker=(NS, "U2")),
           NewMsg(lobby.key, "hello", "hello", 12, speaker=(NS, "U3"))]
    with fixed_pair(pg_url, ops, []) as ex:
        ex.pair.token("runtime", "runtime", WS, agents=["concierge"])
        http = ex.pair.http[0]
        h = {"Authorization": f"Bearer {ex.pair.tokens['runtime'][0]}"}
        for dest, room_disclosed in ((lobby, False), (dm, False), (room, True)):
            turn = http.post("/v1/turns", headers=h, json={"agent": "concierge",
                                                           "conversation_id": a_id(ex, dest.key)}).json()["id"]
            r = http.post("/v1/tools/search_history", headers=h, json={"turn_id": turn, "query": "cafeteria menu"})
            assert r.status_code == 200, r.text
            hits = r.json()["hits"]
            assert [x["message_id"] for x in hits][:1] == [a_id(ex, "announce")], r.text
            rooms = [x for x in _room(r.json()) if x["conversation_id"] == a_id(ex, room.key)]
            if room_disclosed:
                assert all(x["disclosed"] is True and x["title"] == "Project Nightingale layoffs list" for x in rooms)
            else:
                assert "Nightingale" not in r.text, f"DISCLOSED a members room's title into {dest.title}: {r.text}"
                assert rooms and all(x == {"conversation_id": a_id(ex, room.key), "disclosed": False, "title": None,
                                           "connector": None, "audience": None} for x in rooms), rooms


def test_hybrid_coverage_counts_only_what_the_caller_may_see(pg_url, template_url):
    """`degradation.coverage` was a count over the agent's whole scope: an unembedded DM of U1,
    another agent's and another workspace's unembedded messages moved it (and the mode). With a
    model configured and every visible message embedded, search_history into U2's DM and session
    search of a reader scoped to `scout` answer alike in both databases."""
    from backscroll.embeddings.vectors import param, register_model
    from tests.semantic.fakes import FakeEmbeddings, fake_vector

    dims, model_name = 8, "fake-8"
    visible, general, u2 = zebulon_channel()
    # The reader's agent: U1's DM (concierge's) is outside the reader's scope as it is outside
    # U2's DM's audience.
    desk = NewConv(WS, "scout", SLACK, "C-desk", "ferry desk", _public())
    visible += [desk, NewMsg(desk.key, "desk-1", "the zebulon ferry desk opens at nine", 15, speaker=(NS, "U2")),
                NewMsg(desk.key, "desk-2", "ferry tickets are sold out", 16, speaker=(NS, "U3"))]
    u1 = NewConv(WS, "concierge", SLACK, "D-u1", "U1 DM", _dm("U1"), kind="audience")
    ghost = NewConv(WS, GHOST, SLACK, "C-ghost", "zebulon ferry", _public(), kind="agent")
    hidden: list = [u1, ghost]
    hidden += [NewMsg(u1.key, f"u1-{i}", f"zebulon reminder number {i}", 20 + i, speaker=(NS, "U1"), kind="audience")
               for i in range(3)]
    hidden += [NewMsg(ghost.key, f"g-{i}", f"zebulon ferry {i}", 30 + i, speaker=(NS, "U3"), kind="agent")
               for i in range(3)]
    server = FakeEmbeddings(dims=dims).start()
    try:
        embeddings = {"embeddings_model": model_name, "embeddings_url": server.url, "embeddings_dimensions": dims,
                      "embeddings_backoff_s": 0.0}
        with fixed_pair(pg_url, visible, hidden, embeddings=embeddings) as ex:
            for side, conn in enumerate(ex.pair.conns):
                register_model(ex.pair.urls[side], model_name, dims)
                hidden_ids = set(ex.writer_b.hidden["messages"]) if side else set()
                for r in conn.execute("select s.message_id, m.body from message_search s"
                                      " join messages m on m.id = s.message_id").fetchall():
                    if r["message_id"] not in hidden_ids:
                        conn.execute("insert into message_embeddings (message_id, model, embedding)"
                                     " values (%s, %s, %s)",
                                     (r["message_id"], model_name, param(conn, fake_vector(r["body"], dims))))
            a, _, _ = ask(ex, u2, "zebulon ferry schedule")
            assert a["mode"] == "hybrid", a
            ex.pair.token("reader", "reader", WS, actor=(NS, "U2"), agents=["scout"])
            pages = ex.pair.pages("session search", "/v1/agent-sessions", "reader", {"q": "zebulon ferry", "limit": 2},
                                  "before")
            assert pages[0]["mode"] == "hybrid" and pages[0]["sessions"], pages
    finally:
        server.stop()


# The routes that answer a reader or a runtime, and where this file compares each; a new one
# fails here until it is compared (or named as answering neither).
COMPARED = {
    ("GET", "/v1/agent-sessions"): "run_readers: list, search (paged)",
    ("GET", "/v1/agent-sessions/{session_id}"): "run_readers: get, get-hidden",
    ("GET", "/v1/agent-sessions/{session_id}/messages"): "run_readers: transcript, transcript-hidden",
    ("GET", "/v1/whoami"): "run_readers and run_runtime",
    ("POST", "/v1/turns"): "run_runtime: register, turn-hidden",
    ("POST", "/v1/tools/search_history"): "run_runtime: searches, search-hidden-turn",
    ("POST", "/v1/turns/{turn_id}/memories"): "run_runtime",
    ("POST", "/v1/turns/{turn_id}/reply"): "run_runtime",
    ("POST", "/v1/turns/{turn_id}/recheck"): "run_runtime",
    ("GET", "/v1/turns/{turn_id}/trace"): "run_runtime (exclusion counts: test_the_trace_counts_no_hidden_match)",
}
NOT_A_READERS_OR_RUNTIMES = {
    # the same bytes whatever the data (the page, its assets, probes, the schema)
    ("GET", "/"), ("GET", "/c/{conversation}"), ("GET", "/static/{name}"), ("GET", "/healthz"), ("GET", "/readyz"),
    ("GET", "/v1/openapi.json"),
    # admin, status and ingest tokens only
    ("GET", "/metrics"), ("GET", "/v1/status"), ("GET", "/v1/workspaces/{slug}/search-settings"),
    ("PUT", "/v1/workspaces/{slug}/search-settings"), ("POST", "/v1/conversations"),
    ("POST", "/v1/conversations/{conversation_id}/messages"), ("PATCH", "/v1/messages/{message_id}"),
    ("DELETE", "/v1/messages/{message_id}"), ("DELETE", "/v1/conversations/{conversation_id}"),
    ("POST", "/v1/import"), ("POST", "/v1/memories"), ("POST", "/v1/identity-links"),
    ("POST", "/v1/identity-links/{link_id}/verify"), ("POST", "/v1/identity-links/{link_id}/revoke"),
    ("PUT", "/v1/conversations/{conversation_id}/readers"),
    # the admin API (admin tokens: installation-wide or scoped to one workspace)
    ("POST", "/v1/admin/workspaces"), ("GET", "/v1/admin/workspaces"), ("GET", "/v1/admin/workspaces/{slug}"),
    ("DELETE", "/v1/admin/workspaces/{slug}"), ("POST", "/v1/admin/tokens"), ("GET", "/v1/admin/tokens"),
    ("POST", "/v1/admin/tokens/{token_id}/revoke"),
}


def test_the_routes_a_reader_or_runtime_reaches_are_all_compared():
    routes = set(api_routes())
    unknown = routes - set(COMPARED) - NOT_A_READERS_OR_RUNTIMES
    assert not unknown, f"routes this file neither compares nor names: {sorted(unknown)}"
    gone = (set(COMPARED) | NOT_A_READERS_OR_RUNTIMES) - routes
    assert not gone, f"routes named here that the application no longer serves: {sorted(gone)}"
