"""Session search for people: the recent list, title search and content search.

Narrowing is part of every query: a reader sees the conversations of the agents their token
is scoped to, plus the conversations they created themselves, whichever agent those are with.
Nothing is filtered after a query returns, and no response counts what was hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

import psycopg
from psycopg import sql

from ..access.auth import Principal
from ..config import SearchSettings, Settings
from ..embeddings.gateway import Gateway
from ..embeddings.vectors import distance, exact_distance, param, use_iterative_scan
from ..errors import BadRequest, NotFound
from ..vocabulary import MAX_ID, nfc
from . import hybrid, ranking
from .cursor import CursorCodec, fingerprint
from .terms import SearchTerms, search_box_terms
from .sessions_sql import (
    RESOLVE_SCOPE, RECENT, SEARCH, CONTENT_LIST, SEARCH_LISTED, SEMANTIC_EXACT,
    SEMANTIC_EXACT_ARMS, SEMANTIC_HNSW, ONE,
)

# Private-use characters mark highlights inside ts_headline output; they are removed from
# the body first, so a message cannot forge a highlight.
HL_START, HL_STOP = "\ue000", "\ue001"
SEARCHABLE_CHARS = 100_000  # the sidecar indexes this much of each body; excerpts read as much


@dataclass(frozen=True)
class Scope:
    workspace_id: int
    actor_id: int
    agent_ids: list[int]
    only_agent: int | None  # the `agent` filter, when it names an existing agent
    # The workspace's agents outside agent_ids (and inside the `agent` filter): search reaches the
    # reader's own conversations with them through the sidecar's GIN index. Not a grant: the own
    # conversations are still narrowed by creator, workspace and filter.
    other_agent_ids: list[int]
    ts_config: str | None  # the workspace's text search configuration


@dataclass(frozen=True)
class Limits:
    default: int
    maximum: int
    query_max_chars: int
    excerpt_words: int

    @classmethod
    def of(cls, search: SearchSettings) -> Limits:
        """The limits a server holds to, from its search settings."""
        return cls(default=search.page_limit_default, maximum=search.page_limit_max,
                   query_max_chars=search.query_max_chars, excerpt_words=search.excerpt_words)


def resolve_scope(conn: psycopg.Connection, principal: Principal, agent: str | None) -> Scope:
    row = conn.execute(
        RESOLVE_SCOPE,
        {
            "ws": principal.workspace_id,
            "all_agents": principal.agent_ids is None,
            "agent_ids": list(principal.agent_ids or []),
            "only_slug": agent,
        },
    ).fetchone()
    only_agent = row["only_agent"]
    if agent is not None and only_agent is None:
        only_agent = -1  # an agent that does not exist: own conversations with it are none
    agent_ids = list(row["agent_ids"])
    others = [a for a in row["workspace_agents"]
              if a not in agent_ids and (only_agent is None or a == only_agent)]
    return Scope(principal.workspace_id, principal.actor_id, agent_ids, only_agent, others, row["ts_config"])


def statistics_agents(scope: Scope) -> list[int]:
    """Whose documents BM25's statistics count: the reader's agents (as the `agent` filter narrows
    them), never the workspace's, so a message stored with an agent the reader cannot see moves
    no score and no order (issue 29). The reader's own conversations with other agents are
    ranked by these statistics too; they hold nothing the statistics could count that the
    reader may not see, and adding their agents would count those agents' other conversations."""
    return list(scope.agent_ids)


def narrowed_agents(scope: Scope) -> list[int]:
    """The reader's agents a listing or a search reads, as the `agent` filter narrows them."""
    return scope.agent_ids if scope.only_agent is None else [a for a in scope.agent_ids if a == scope.only_agent]


def _session(row: dict) -> dict:
    creator = None
    if row["creator_external_id"] is not None:
        creator = {
            "namespace": row["creator_namespace"],
            "external_id": row["creator_external_id"],
            "display_name": row["creator_display_name"],
        }
    return {
        "id": row["id"],
        "title": row["title"],
        "agent": {"slug": row["agent_slug"], "name": row["agent_name"]},
        "connector": row["connector"],
        "external_id": row["external_id"],
        "audience": row["audience_kind"],
        "creator": creator,
        "created_at": row["created_at"].isoformat(),
        "last_active_at": row["last_active_at"].isoformat(),
    }


def parse_excerpt(marked: str) -> tuple[str, list[list[int]]]:
    """Strip highlight markers; return the text and [start, end) spans of matched words."""
    text: list[str] = []
    spans: list[list[int]] = []
    pos = 0
    start = None
    for ch in marked:
        if ch == HL_START:
            start = pos
        elif ch == HL_STOP:
            if start is not None:
                spans.append([start, pos])
            start = None
        else:
            text.append(ch)
            pos += 1
    return "".join(text), spans


def headline_options(words: int) -> str:
    return (
        f"StartSel={HL_START}, StopSel={HL_STOP}, MaxWords={words}, "
        f"MinWords={max(3, words // 3)}, ShortWord=2, MaxFragments=1, FragmentDelimiter=\" … \""
    )


def recent(conn: psycopg.Connection, scope: Scope, codec: CursorCodec, before: str | None, limit: int) -> dict:
    fp = fingerprint("recent", scope.only_agent)
    after_at, after_id = "infinity", MAX_ID
    if before:
        after_at, after_id = codec.decode_keyset(before, "recent", fp)
    agents = narrowed_agents(scope)
    rows = conn.execute(
        RECENT,
        {
            "ws": scope.workspace_id,
            "actor": scope.actor_id,
            "agents": agents,
            "only_agent": scope.only_agent,
            "after_at": after_at,
            "after_id": after_id,
            "fetch": limit + 1,
        },
    ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = None
    if more:
        last = rows[-1]
        nxt = codec.encode("recent", fp, [last["last_active_at"].isoformat(), last["id"]])
    return {"sessions": [_session(r) for r in rows], "next": nxt}


def escape_like(text: str) -> str:
    """Make a person's text literal inside ILIKE: `%`, `_` and the escape itself."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# A cursor pages one ranking: lexical (kind "search") or fused ("search-hybrid"), whose scores are
# not comparable. A lexical cursor keeps paging lexically even when vectors are back.
LEXICAL_CURSOR, FUSED_CURSOR = "search", "search-hybrid"


def _decode_search_cursor(codec: CursorCodec, before: str, fp: str) -> tuple[str, list]:
    try:
        return LEXICAL_CURSOR, codec.decode(before, LEXICAL_CURSOR, fp)
    except BadRequest as first:
        try:
            return FUSED_CURSOR, codec.decode(before, FUSED_CURSOR, fp)
        except BadRequest:
            raise first from None


def vector_candidates(conn: psycopg.Connection, scope: Scope, agents: list[int], qv: hybrid.QueryVector,
                      settings: Settings, *, docs: int | None = None, arm: str | None = None) -> list[dict]:
    """The reader's conversations nearest the query, nearest first, each with its nearest message.
    `docs`: how many documents `agents` hold, when the caller has read it already. `arm`: for an
    exact scope, only that arm of the scan (SEMANTIC_EXACT_ARMS: "agents" or "own")."""
    if docs is None:
        docs = ranking.scope_docs(conn, agents)
    exact = hybrid.exact_scope(settings.search, docs)
    dist = (exact_distance if exact else distance)(qv.model.dimensions)
    text = (SEMANTIC_EXACT_ARMS[arm] if arm else SEMANTIC_EXACT) if exact else SEMANTIC_HNSW
    statement = sql.SQL(text).format(distance=dist)
    with conn.transaction():
        if not exact:
            use_iterative_scan(conn, max(settings.search.hnsw_ef_search, hybrid.VECTOR_K),
                               settings.search.hnsw_max_scan_tuples)
        return conn.execute(statement, {
            "model": qv.model.model, "query_vector": param(conn, qv.vector), "vector_k": hybrid.VECTOR_K,
            "ws": scope.workspace_id, "agents": agents, "actor": scope.actor_id, "only_agent": scope.only_agent,
        }).fetchall()


# ---------------------------------------------------------------------------------------------
# The steps of a session search, in order (`search` runs them), and what each hands on. A
# statement binds the groups of parameters it reads: the reader's reach (Reach), the title match
# (Titles), the content terms (Content), the page (Position) and the excerpts, the fusion (Lists);
# their names are the statements' own (sessions_sql).


@dataclass(frozen=True)
class Position:
    """Where the page starts: which ranking the cursor pages and the last row it served."""
    fingerprint: str
    kind: str | None  # LEXICAL_CURSOR or FUSED_CURSOR; None on a first page
    after: list       # (tier, score, content score, id) of the last row served

    def params(self, limit: int) -> dict:
        tier, score, content, conversation = self.after
        return {"after_tier": tier, "after_score": score, "after_content": content, "after_id": conversation,
                "fetch": limit + 1}


def read_position(codec: CursorCodec, scope: Scope, q: str, before: str | None) -> Position:
    fp = fingerprint("search", q, scope.only_agent)
    if not before:
        return Position(fp, None, [3, math.inf, math.inf, MAX_ID])  # before every row
    kind, position = _decode_search_cursor(codec, before, fp)
    return Position(fp, kind, _search_position(position))


@dataclass(frozen=True)
class Reach:
    """The conversations a search may reach: the reader's agents' (as the `agent` filter narrows
    them) and the reader's own with other agents."""
    scope: Scope
    agents: list[int]

    @classmethod
    def of(cls, scope: Scope) -> Reach:
        return cls(scope, narrowed_agents(scope))

    @property
    def other_agents(self) -> list[int]:
        return [a for a in self.scope.other_agent_ids if self.scope.only_agent is None or a == self.scope.only_agent]

    def params(self) -> dict:
        s = self.scope
        return {"ws": s.workspace_id, "actor": s.actor_id, "agents": self.agents, "only_agent": s.only_agent,
                "other_agents": self.other_agents, "ts_config": s.ts_config}


def titles(q: str) -> dict:
    """The title match: the query as typed, literal inside ILIKE."""
    return {"q": q, "pattern": f"%{escape_like(q)}%"}


def excerpts(limits: Limits) -> dict:
    """How a content match's excerpt is cut and marked."""
    return {"searchable": SEARCHABLE_CHARS, "markers": HL_START + HL_STOP,
            "headline_options": headline_options(limits.excerpt_words)}


@dataclass(frozen=True)
class Content:
    """The query as the content list reads it: the terms that count and the excluded ones, those
    candidates are read from (the rarest), the recent window they are read in, the ranking's
    statistics, and the share of the query a fused match must hold."""
    words: SearchTerms
    generating: list[str]
    searching: bool  # any term has lexemes: contents are searched at all
    since: datetime | None
    walk: bool
    stats: ranking.QueryStats
    rank: ranking.Ranking
    min_covered: float
    lexical_weight: float  # the content list's weight in the fusion

    def params(self) -> dict:
        rank = self.rank
        return {"rrf_k": hybrid.RRF_K, "rrf_lexical_weight": self.lexical_weight, "pool": rank.pool or None,
                "since": self.since, "walk": self.walk, "terms": self.words.positive, "gen_terms": self.generating,
                "negated": self.words.negated, "searching": self.searching,
                "coverage_weight": rank.coverage_weight if rank.method == "bm25" else 0.0,
                "min_covered": self.min_covered, **self.stats.params(rank)}


def plan_content(conn: psycopg.Connection, reach: Reach, q: str, rank: ranking.Ranking,
                 settings: Settings) -> Content:
    """The query's terms and statistics, and the recent window content candidates are read from."""
    scope, agents = reach.scope, reach.agents
    cfg = scope.ts_config or ranking.MULTILINGUAL
    typed = search_box_terms(q)
    # Candidates come from the rarest terms by their frequency in the agents searched: one read
    # for both.
    stats = ranking.query_stats(conn, statistics_agents(scope), cfg, typed.positive, settings.language, query=q,
                                scope_agents=agents)
    words = replace(typed, positive=list(stats.terms))
    chosen = ranking.generating_terms(list(stats.scope_term_df), rank.pool)
    searching = any(stats.term_has_lexemes)  # lexemes depend on the configuration alone
    # A common word: content candidates are read from the window of the reader's agents' recent
    # messages that holds about the pool's worth of matches (own conversations windowed alike).
    matches = sum(stats.scope_term_df[i] for i in chosen)
    since = ranking.recent_window_start(conn, scope.workspace_id, agents, matches, stats.scope_docs, rank.pool)
    # Walking, the window is read through the agents' recency index (message_search_agent_recent,
    # bounded by `since`), each document tested for the word: about twice walk_window's rows.
    walk = ranking.walk_window(since, matches, stats.scope_docs, rank.pool)
    return Content(words, [words.positive[i] for i in chosen], searching, since, walk, stats, rank,
                   _min_covered(stats, words.positive, rank, settings), settings.search.hybrid_lexical_weight)


@dataclass(frozen=True)
class Lists:
    """The candidate lists the hybrid sequence produced."""
    qv: hybrid.QueryVector
    nearest: list[dict]         # conversations nearest first, each with its nearest message
    content: list[dict] | None  # read beside the vector list; None: the statement reads it

    def params(self) -> dict:
        return {"fused": self.qv.usable, "vector_conversations": [r["conversation_id"] for r in self.nearest],
                "vector_messages": [r["message_id"] for r in self.nearest]}


def gather_lists(conn: psycopg.Connection, reach: Reach, content: Content, pending: hybrid.PendingVector | None,
                 side: hybrid.SideConnection | None, ledger: psycopg.Connection | None,
                 settings: Settings) -> Lists:
    """The vector list and, when it is produced beside, the content list read here meanwhile."""
    scope, agents, docs = reach.scope, reach.agents, content.stats.scope_docs
    # An exact scan beside the content list is split in its two arms: the reader's agents' on the
    # side connection, the reader's own conversations with other agents here, once the content
    # list is read (a quiet reader's scan is most of its search, and this connection is idle).
    split = side is not None and pending is not None and scope.actor_id is not None and bool(reach.other_agents)
    if split:
        split = hybrid.exact_scope(settings.search, docs)

    def vector_list(c: psycopg.Connection, usable: hybrid.QueryVector) -> list[dict]:
        return vector_candidates(c, scope, agents, usable, settings, docs=docs, arm="agents" if split else None)

    def own_arm(pending: hybrid.PendingVector) -> list[dict]:
        # This connection's arm of a split exact scan, once the content list is read.
        early = pending.arrived() if split else None
        return vector_candidates(conn, scope, agents, early, settings, docs=docs, arm="own") if early else []

    lists = hybrid.gather(conn, pending, side, scope.workspace_id, agents, ledger=ledger,
                          lexical=lambda: conn.execute(CONTENT_LIST, {**reach.params(), **content.params()}).fetchall(),
                          vector_list=vector_list, meanwhile=own_arm)
    nearest = lists.vectors
    if lists.lexical is not None and split and nearest is not None:
        # The arms' conversations are disjoint (an arm each side of `agents`): merged as the
        # one statement orders them.
        nearest = sorted([*nearest, *lists.meanwhile], key=lambda r: (r["distance"], r["conversation_id"]))
    return Lists(lists.qv, nearest or [], lists.lexical)


def _listed(content: list[dict]) -> dict:
    """A content list read beforehand, as SEARCH_LISTED binds it."""
    return {"content_conversations": [r["conversation_id"] for r in content],
            "content_messages": [r["message_id"] for r in content], "content_scores": [r["score"] for r in content],
            "content_covered": [r["covered"] for r in content], "content_ranks": [r["rank"] for r in content]}


def still_paging(position: Position, qv: hybrid.QueryVector) -> None:
    """A fused ranking's cursor cannot page on without the vector list."""
    if position.kind == FUSED_CURSOR and not qv.usable:
        raise BadRequest("this cursor pages a search that used semantic matches, which are unavailable now "
                         f"({hybrid.category(qv) or 'not configured'}); search again from the first page",
                         code="cursor_mode_changed")


def run(conn: psycopg.Connection, params: dict, lists: Lists) -> list[dict]:
    """One statement: title matches first, then content and semantic matches (fused, or content
    alone), narrowed to the reach, from the page's position on; one row more than the page."""
    statement, listed = (SEARCH_LISTED, _listed(lists.content)) if lists.content is not None else (SEARCH, {})
    return conn.execute(statement, {**params, **listed, **lists.params()}).fetchall()


def page(rows: list[dict], limit: int, codec: CursorCodec, position: Position,
         qv: hybrid.QueryVector) -> tuple[list[dict], str | None]:
    """The page's rows and, when more follow, the cursor after its last (of the ranking it used)."""
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last = rows[-1]
    return rows, codec.encode(FUSED_CURSOR if qv.usable else LEXICAL_CURSOR, position.fingerprint,
                              [last["tier"], last["score"], last["content_score"], last["id"]])


def _found(row: dict) -> dict:
    """A session as a search answers it: with what it matched on and its excerpt."""
    session = _session(row)
    matched_on = [on for on in ("title", "content", "semantic") if row[f"on_{on}"]]
    match: dict = {"on": matched_on, "score": row["score"]}
    if row["message_id"] is not None:
        text, spans = parse_excerpt(row["excerpt"] or "")
        match.update({"message_id": row["message_id"], "excerpt": text, "highlights": spans})
    session["match"] = match
    return session


def search(conn: psycopg.Connection, scope: Scope, codec: CursorCodec, q: str, before: str | None,
           limit: int, limits: Limits, *, settings: Settings, gateway: Gateway | None = None,
           ledger: psycopg.Connection | None = None, rank: ranking.Ranking | None = None,
           side: hybrid.SideConnection | None = None) -> dict:
    """Title, content and (with an embeddings model) semantic search, narrowed in SQL.

    Title matches come first; below them, content and semantic matches are fused by reciprocal
    rank when a query vector is available, and ranked by content score alone otherwise (BM25 or
    ts_rank_cd: `rank`, else the settings'). With `side` (where a second connection may come
    from), the vector list is produced there while this connection reads the content list."""
    rank = rank or ranking.Ranking.from_settings(settings.search)
    position = read_position(codec, scope, q, before)
    reach = Reach.of(scope)
    # The query embedding is under way while the statistics and the recent window are read.
    pending = (hybrid.start_embedding(conn, settings.embeddings, q, gateway=gateway)
               if position.kind != LEXICAL_CURSOR else None)
    content = plan_content(conn, reach, q, rank, settings)
    lists = gather_lists(conn, reach, content, pending, side, ledger, settings)
    still_paging(position, lists.qv)
    rows = run(conn, {**reach.params(), **titles(q), **position.params(limit), **excerpts(limits),
                      **content.params()}, lists)
    rows, nxt = page(rows, limit, codec, position, lists.qv)
    return {"sessions": [_found(r) for r in rows], "next": nxt, "mode": lists.qv.mode,
            "degradation": lists.qv.degradation, "ranking": rank.method}


def _min_covered(stats: ranking.QueryStats, terms: list[str], rank: ranking.Ranking,
                 settings: Settings) -> float:
    """How much of the query's idf a conversation must hold to enter the fused content list: what
    search_history's fused lexical list asks of a message (ranking.match_floor), for a query of
    ranking.MIN_MATCH_TERMS terms or more, with BM25 (whose idf the coverage is counted in)."""
    if len(terms) < ranking.MIN_MATCH_TERMS or rank.method != "bm25":
        return 0.0
    return ranking.match_floor(stats.slot_weights(), settings.search.hybrid_min_match_share)


def _search_position(position: object) -> list:
    """(tier, score, content score, id) of the last row served, from a decoded cursor."""
    try:
        if not isinstance(position, list) or len(position) != 4:
            raise ValueError
        tier, score, content, conversation = position
        if type(tier) is not int or tier not in (1, 2) or type(conversation) is not int \
                or not all(type(v) in (int, float) and math.isfinite(v) for v in (score, content)):
            raise ValueError
    except ValueError:
        raise BadRequest("invalid cursor", code="invalid_cursor") from None
    return [tier, float(score), float(content), conversation]


def validate_query(q: str | None, limits: Limits) -> str | None:
    if q is None:
        return None
    if "\x00" in q:
        raise BadRequest("q must not contain NUL characters", code="invalid_query")
    if len(q) > limits.query_max_chars:
        raise BadRequest(f"q is {len(q)} characters long; the most accepted is {limits.query_max_chars}",
                         code="query_too_long")
    q = nfc(q).strip()
    return q or None


def get_one(conn: psycopg.Connection, scope: Scope, conversation_id: int) -> dict:
    row = conn.execute(
        ONE, {"id": conversation_id, "ws": scope.workspace_id, "actor": scope.actor_id, "agents": scope.agent_ids}
    ).fetchone()
    if row is None:
        # The same answer whether it does not exist or is not the reader's to see.
        raise NotFound(f"no session {conversation_id}")
    return _session(row)
