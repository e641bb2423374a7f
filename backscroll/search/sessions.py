"""Session search for people: the recent list, title search and content search.

Narrowing is part of every query: a reader sees the conversations of the agents their token
is scoped to, plus the conversations they created themselves, whichever agent those are with.
Nothing is filtered after a query returns, and no response counts what was hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql

from ..access.auth import Principal
from ..config import Settings
from ..embeddings.gateway import Gateway
from ..embeddings.vectors import distance, ef_search_for, exact_distance, literal, use_iterative_scan
from ..errors import BadRequest, NotFound
from ..vocabulary import MAX_ID
from . import hybrid, ranking
from .cursor import CursorCodec, fingerprint
from .sqltext import compose, with_ctes

# Private-use characters mark highlights inside ts_headline output; they are removed from
# the body first, so a message cannot forge a highlight.
HL_START, HL_STOP = "\ue000", "\ue001"
SEARCHABLE_CHARS = 100_000  # the sidecar indexes this much of each body; excerpts read as much

# The reader's agents (after the `agent` filter), the agent the filter names, every agent of the
# workspace (search() reaches the reader's own conversations with the others through the
# sidecar's GIN index) and the workspace's text search configuration (so a search can write
# its tsquery as a constant the planner sees, instead of joining workspaces).
RESOLVE_SCOPE = """
select coalesce(array_agg(a.id order by a.id), '{}') as agent_ids,
       (select id from agents where workspace_id = %(ws)s and slug = %(only_slug)s) as only_agent,
       (select coalesce(array_agg(o.id order by o.id), '{}') from agents o
         where o.workspace_id = %(ws)s) as workspace_agents,
       (select w.ts_config::text from workspaces w where w.id = %(ws)s) as ts_config
  from agents a
 where a.workspace_id = %(ws)s
   and (%(all_agents)s or a.id = any(%(agent_ids)s::bigint[]))
   and (%(only_slug)s::text is null or a.slug = %(only_slug)s)
"""

SESSION_COLUMNS = """
       c.id, c.title, c.external_id, c.created_at, c.last_active_at,
       c.audience_kind::text as audience_kind,
       ag.slug as agent_slug, ag.name as agent_name, cn.namespace as connector,
       cr.namespace as creator_namespace, cr.external_id as creator_external_id,
       cr.display_name as creator_display_name
"""
SESSION_JOINS = """
  join agents ag on ag.id = c.agent_id
  join connectors cn on cn.id = c.connector_id
  left join actors cr on cr.id = c.creator_actor_id
"""

# Recent list. One keyset scan per visible agent (conversations_agent_recent) plus one over
# the reader's own conversations (conversations_creator_recent), merged and cut to the page
# before the session details are joined: each scan reads at most a page, so page 500 costs what
# page 1 does, and only the page's rows are joined.
RECENT = compose("""
with page as (
    (select x.id, x.last_active_at
       from unnest(%(agents)s::bigint[]) as a(agent_id)
       cross join lateral (
             select c.id, c.last_active_at
               from conversations c
              where c.agent_id = a.agent_id
                and c.workspace_id = %(ws)s
                and (c.last_active_at, c.id) < (%(after_at)s::timestamptz, %(after_id)s::bigint)
              order by c.last_active_at desc, c.id desc
              limit %(fetch)s) x)
    union
    (select c.id, c.last_active_at
       from conversations c
      where c.creator_actor_id = %(actor)s
        and c.workspace_id = %(ws)s
        and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)
        and (c.last_active_at, c.id) < (%(after_at)s::timestamptz, %(after_id)s::bigint)
      order by c.last_active_at desc, c.id desc
      limit %(fetch)s)
    order by last_active_at desc, id desc
    limit %(fetch)s
)
select<<SESSION_COLUMNS>>
  from page p
  join conversations c on c.id = p.id<<SESSION_JOINS>>
 order by p.last_active_at desc, p.id desc
""", SESSION_COLUMNS=SESSION_COLUMNS, SESSION_JOINS=SESSION_JOINS)

# Ranked search. Titles by trigram (ilike over conversations_title_trgm); contents by full
# text over the sidecar (finished user and assistant messages only). Both branches carry the
# same narrowing. A title hit ranks above a content-only hit (tier 2 over tier 1). Within the
# title tier: by title similarity (word_similarity), then by the conversation's best content
# rank, so a conversation whose contents match too comes before one that matches on its title
# only (content_score -1); within the content tier by the content score: BM25 (or ts_rank_cd,
# `ranking`) of the conversation's best message among at most `pool` candidates, the most recent
# matches (a common word must not make every message of the workspace a candidate). Then by id.
#
# With a query vector (an embeddings model configured and answering), the content tier also
# holds semantic hits: the vector list (SEMANTIC_EXACT / SEMANTIC_HNSW, under the same narrowing,
# which `semantic_hits` checks again) and the content list are fused by reciprocal rank
# (RRF_K = 60), and that score orders the tier. A semantic-only hit shows its nearest message.
#
# The excerpt highlights the query's words with its ANDs read as ORs: a message matched partly on
# its speaker's name (weight A, not in the body) still shows where the rest matched.
#
# The tsquery is written inline with the workspace's configuration (resolve_scope fetched it):
# the planner sees a constant, and the final join has no CTE or workspaces to plan around. In
# the first branch it sits behind an InitPlan, `(select ...)`, so the planner keeps agent_id in
# the GIN index condition (seeing the selectivity of a common word, it would otherwise filter
# agent_id on the heap and visit far more pages). The reader's own conversations with other
# agents are reached through the same GIN index, over the workspace's other agents, instead of
# reading every sidecar row of every own conversation. A query with no positive term (`-rose`,
# `-a or b`: querytree() is 'T', or empty) would match nearly everything the reader can see:
# it searches titles only.
TSQUERY = "websearch_to_tsquery(%(ts_config)s::regconfig, %(q)s)"
SEARCH_TITLES = """
title_hits as (
    select c.id, word_similarity(%(q)s, c.title) as score
      from conversations c
     where c.workspace_id = %(ws)s
       and c.title ilike %(pattern)s
       and (c.agent_id = any(%(agents)s::bigint[])
            or (c.creator_actor_id = %(actor)s
                and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)))
)
"""
SEARCH_CONTENT = compose("""
content_candidates as materialized (
    (select s.conversation_id, s.message_id, s.tsv, s.doc_len
       from message_search s
      where s.agent_id = any(%(agents)s::bigint[])
        and s.tsv @@ (select <<TSQUERY>>)
        and querytree(<<TSQUERY>>) not in ('T', '')
        and (%(since)s::timestamptz is null or (s.workspace_id = %(ws)s and s.created_at >= %(since)s))
      order by s.created_at desc, s.message_id desc
      limit %(pool)s)
    union all
    (select s.conversation_id, s.message_id, s.tsv, s.doc_len
       from message_search s
       join conversations c on c.id = s.conversation_id
      where c.creator_actor_id = %(actor)s
        and c.workspace_id = %(ws)s
        and not (c.agent_id = any(%(agents)s::bigint[]))
        and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)
        and s.agent_id = any(%(other_agents)s::bigint[])
        and s.tsv @@ <<TSQUERY>>
        and querytree(<<TSQUERY>>) not in ('T', '')
        and (%(since)s::timestamptz is null or s.created_at >= %(since)s)
      order by s.created_at desc, s.message_id desc
      limit %(pool)s)
),
bm25 as materialized (<<BM25_SCORES>>),
content_matches as (
    select x.conversation_id, x.message_id,
           case when %(bm25)s then coalesce(b.bm25, 0)
                else ts_rank_cd(%(rank_weights)s::float4[], x.tsv, <<TSQUERY>>) end as score
      from content_candidates x
      left join bm25 b on b.message_id = x.message_id
),
best_content as (
    select distinct on (conversation_id) conversation_id, message_id, score
      from content_matches
     order by conversation_id, score desc, message_id desc
),
content_ranked as (
    select b.*, row_number() over (order by b.score desc, b.conversation_id desc) as rank
      from best_content b
)
""", TSQUERY=TSQUERY, BM25_SCORES=ranking.bm25_scores("content_candidates"))
# The content list handed back in (the hybrid path reads it on its own, beside the vector list).
CONTENT_FROM_LIST = """
content_ranked as (
    select l.conversation_id, l.message_id, l.score, l.rank
      from unnest(%(content_conversations)s::bigint[], %(content_messages)s::bigint[],
                  %(content_scores)s::float8[], %(content_ranks)s::bigint[])
           as l(conversation_id, message_id, score, rank)
)
"""
SEARCH_FUSION = compose("""
semantic_hits as (
    select vc.id as conversation_id, v.message_id, v.rank
      from unnest(%(vector_conversations)s::bigint[], %(vector_messages)s::bigint[])
           with ordinality as v(conversation_id, message_id, rank)
      join conversations vc on vc.id = v.conversation_id
     where vc.workspace_id = %(ws)s
       and (vc.agent_id = any(%(agents)s::bigint[])
            or (vc.creator_actor_id = %(actor)s
                and (%(only_agent)s::bigint is null or vc.agent_id = %(only_agent)s)))
),
hits as (
    select coalesce(t.id, b.conversation_id, v.conversation_id) as id,
           case when t.id is not null then 2 else 1 end as tier,
           case when t.id is not null then t.score
                when %(fused)s then <<RRF>>
                else b.score
           end::real as score,
           coalesce(b.score, -1)::real as content_score,
           t.id is not null as on_title,
           b.message_id is not null as on_content,
           v.conversation_id is not null as on_semantic,
           coalesce(b.message_id, v.message_id) as message_id
      from title_hits t
      full join content_ranked b on b.conversation_id = t.id
      full join semantic_hits v on v.conversation_id = coalesce(t.id, b.conversation_id)
),
page as (
    select * from hits h
     where (h.tier, h.score, h.content_score, h.id)
           < (%(after_tier)s::int, %(after_score)s::real, %(after_content)s::real, %(after_id)s::bigint)
     order by h.tier desc, h.score desc, h.content_score desc, h.id desc
     limit %(fetch)s
)
select<<SESSION_COLUMNS>>,
       p.tier, p.score, p.content_score, p.on_title, p.on_content, p.on_semantic, p.message_id,
       case when p.message_id is not null then
            ts_headline(%(ts_config)s::regconfig,
                        translate(left(m.body, %(searchable)s), %(markers)s, ''),
                        replace(<<TSQUERY>>::text, ' & ', ' | ')::tsquery, %(headline_options)s)
       end as excerpt
  from page p
  join conversations c on c.id = p.id<<SESSION_JOINS>>
  left join messages m on m.id = p.message_id
 order by p.tier desc, p.score desc, p.content_score desc, p.id desc
""", SESSION_COLUMNS=SESSION_COLUMNS, SESSION_JOINS=SESSION_JOINS, TSQUERY=TSQUERY,
   RRF=hybrid.rrf_sql("b.rank", "v.rank"))


# One statement: titles, contents and the vector list handed in, fused (the lexical path).
SEARCH = with_ctes(SEARCH_TITLES, SEARCH_CONTENT, SEARCH_FUSION)
# The hybrid path in two: the content list alone (read while the vector list is produced beside
# it), then titles and both lists, fused, from the same text.
CONTENT_LIST = (with_ctes(SEARCH_CONTENT)
                + "\nselect conversation_id, message_id, score, rank from content_ranked\n")
SEARCH_LISTED = with_ctes(SEARCH_TITLES, CONTENT_FROM_LIST, SEARCH_FUSION)

# Semantic candidates: the messages nearest the query under the same narrowing as content
# search (the reader's agents, or the reader's own conversations with any agent of the
# workspace), among vectors of the configured model only; then each conversation's nearest
# message. SEMANTIC_NARROWING is written once and used in two shapes:
# - SEMANTIC_EXACT, for small scopes: the messages of the reader's agents (through the sidecar's
#   agent index) and of their own conversations (through the creator index), narrowed; then
#   their vectors, read in one pass over the vectors' primary key (an array of ids in key order,
#   not one index descent per message), ordered by the exact distance;
# - SEMANTIC_HNSW, for large ones: the model's HNSW index walked in distance order, each
#   candidate tested by a correlated scalar sub-select (the planner cannot turn it into a join
#   that bypasses the index), under pgvector's iterative scan so the narrowing cannot starve the
#   list.
SEMANTIC_FROM = """message_search s
           join conversations c on c.id = s.conversation_id"""
SEMANTIC_NARROWING = """c.workspace_id = %(ws)s
       and (c.agent_id = any(%(agents)s::bigint[])
            or (c.creator_actor_id = %(actor)s
                and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)))"""
# The two arms of SEMANTIC_EXACT: the reader's agents' messages, and the reader's own
# conversations with other agents (disjoint: an arm each side of `agents`). In the API each arm
# can run on a connection of its own (`search`); here they are one statement.
SEMANTIC_AGENTS_ARM = compose("""
    (select e.message_id, {distance} as distance
       from message_embeddings e
      where e.model = %(model)s
        and e.message_id = any(array(
              select s.message_id
                from <<SEMANTIC_FROM>>
               where s.agent_id = any(%(agents)s::bigint[])
                 and <<SEMANTIC_NARROWING>>
               order by 1))
      order by ({distance}) + 0, e.message_id
      limit %(vector_k)s)
""", SEMANTIC_FROM=SEMANTIC_FROM, SEMANTIC_NARROWING=SEMANTIC_NARROWING)
SEMANTIC_OWN_ARM = compose("""
    (select e.message_id, {distance} as distance
       from message_embeddings e
      where e.message_id = any(array(
              select s.message_id
                from <<SEMANTIC_FROM>>
               where c.creator_actor_id = %(actor)s
                 and not (c.agent_id = any(%(agents)s::bigint[]))
                 and <<SEMANTIC_NARROWING>>
               order by 1))
        and e.model = %(model)s
      order by ({distance}) + 0, e.message_id
      limit %(vector_k)s)
""", SEMANTIC_FROM=SEMANTIC_FROM, SEMANTIC_NARROWING=SEMANTIC_NARROWING)
# Each conversation's nearest message, nearest conversation first.
SEMANTIC_BEST = """
select conversation_id, message_id, distance
  from (select distinct on (s.conversation_id) s.conversation_id, n.message_id, n.distance
          from nearest n join message_search s on s.message_id = n.message_id
         order by s.conversation_id, n.distance + 0, n.message_id) best
 order by distance, conversation_id
"""


def _exact_scan(*arms: str) -> str:
    """The exact vector list over these arms (SEMANTIC_AGENTS_ARM, SEMANTIC_OWN_ARM), each
    conversation's nearest message."""
    return compose("""
with nearest as materialized (<<ARMS>>
)<<SEMANTIC_BEST>>""", ARMS="\n    union all".join(a.rstrip() for a in arms), SEMANTIC_BEST=SEMANTIC_BEST)


SEMANTIC_EXACT = _exact_scan(SEMANTIC_AGENTS_ARM, SEMANTIC_OWN_ARM)
SEMANTIC_EXACT_ARMS = {"agents": _exact_scan(SEMANTIC_AGENTS_ARM), "own": _exact_scan(SEMANTIC_OWN_ARM)}
SEMANTIC_HNSW = compose("""
with nearest as materialized (
    select e.message_id, {distance} as distance
      from message_embeddings e
     where e.model = %(model)s
       and coalesce((select true
                       from <<SEMANTIC_FROM>>
                      where s.message_id = e.message_id
                        and <<SEMANTIC_NARROWING>>), false)
     order by {distance}
     limit %(vector_k)s
)
<<SEMANTIC_BEST>>""", SEMANTIC_FROM=SEMANTIC_FROM, SEMANTIC_NARROWING=SEMANTIC_NARROWING,
                        SEMANTIC_BEST=SEMANTIC_BEST)
ONE = compose("""select<<SESSION_COLUMNS>>  from conversations c<<SESSION_JOINS>>
 where c.id = %(id)s
   and c.workspace_id = %(ws)s
   and (c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)
""", SESSION_COLUMNS=SESSION_COLUMNS, SESSION_JOINS=SESSION_JOINS)


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
    # Every agent of the workspace: BM25's document frequencies are the workspace's.
    workspace_agent_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Limits:
    default: int
    maximum: int
    query_max_chars: int
    excerpt_words: int


def clamp_limit(limit: int | None, limits: Limits) -> int:
    if limit is None:
        return limits.default
    return max(1, min(int(limit), limits.maximum))


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
    return Scope(principal.workspace_id, principal.actor_id, agent_ids, only_agent, others, row["ts_config"],
                 tuple(row["workspace_agents"]))


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
    agents = scope.agent_ids if scope.only_agent is None else [a for a in scope.agent_ids if a == scope.only_agent]
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
                      settings: Settings | None, *, docs: int | None = None, arm: str | None = None) -> list[dict]:
    """The reader's conversations nearest the query, nearest first, each with its nearest message.
    `docs`: how many documents `agents` hold, when the caller has read it already. `arm`: for an
    exact scope, only that arm of the scan (SEMANTIC_EXACT_ARMS: "agents" or "own")."""
    if docs is None:
        docs = ranking.scope_docs(conn, agents)
    exact = hybrid.exact_scope(settings, docs)
    dist = (exact_distance if exact else distance)(qv.model.dimensions)
    text = (SEMANTIC_EXACT_ARMS[arm] if arm else SEMANTIC_EXACT) if exact else SEMANTIC_HNSW
    statement = sql.SQL(text).format(distance=dist)
    with conn.transaction():
        if not exact:
            use_iterative_scan(conn, settings, ef_search=max(ef_search_for(settings), hybrid.VECTOR_K))
        return conn.execute(statement, {
            "model": qv.model.model, "query_vector": literal(qv.vector), "vector_k": hybrid.VECTOR_K,
            "ws": scope.workspace_id, "agents": agents, "actor": scope.actor_id, "only_agent": scope.only_agent,
        }).fetchall()


def search(conn: psycopg.Connection, scope: Scope, codec: CursorCodec, q: str, before: str | None,
           limit: int, limits: Limits, *, settings: Settings | None = None, gateway: Gateway | None = None,
           ledger: psycopg.Connection | None = None, rank: ranking.Ranking | None = None,
           side: hybrid.SideConnection | None = None) -> dict:
    """Title, content and (with an embeddings model) semantic search, narrowed in SQL.

    Title matches come first; below them, content and semantic matches are fused by reciprocal
    rank when a query vector is available, and ranked by content score alone otherwise (BM25 or
    ts_rank_cd: `rank`, else the settings'). With `side` (where a second connection may come
    from), the vector list is produced there while this connection reads the content list."""
    rank = rank or ranking.Ranking.from_settings(settings)
    fp = fingerprint("search", q, scope.only_agent)
    after = [3, math.inf, math.inf, MAX_ID]  # before every row
    kind = None
    if before:
        kind, position = _decode_search_cursor(codec, before, fp)
        after = _search_position(position)
    agents = scope.agent_ids if scope.only_agent is None else [a for a in scope.agent_ids if a == scope.only_agent]
    qv = hybrid.QueryVector(hybrid.LEXICAL)
    # The query embedding is under way while the statistics and the recent window are read.
    pending = hybrid.start_embedding(conn, settings, q, gateway=gateway) if kind != LEXICAL_CURSOR else None
    workspace_agents = list(scope.workspace_agent_ids or [*scope.agent_ids, *scope.other_agent_ids])
    stats = ranking.query_stats(conn, workspace_agents, scope.ts_config or "simple", [q])
    whole = sorted(agents) == sorted(workspace_agents)
    since = _recent_window_start(conn, scope, agents, q, rank, stats if whole else None)
    params = {
        "ws": scope.workspace_id,
        "actor": scope.actor_id,
        "agents": agents,
        "only_agent": scope.only_agent,
        "q": q,
        "pattern": f"%{escape_like(q)}%",
        "other_agents": [a for a in scope.other_agent_ids
                         if scope.only_agent is None or a == scope.only_agent],
        "ts_config": scope.ts_config,
        "after_tier": after[0],
        "after_score": after[1],
        "after_content": after[2],
        "after_id": after[3],
        "fetch": limit + 1,
        "searchable": SEARCHABLE_CHARS,
        "markers": HL_START + HL_STOP,
        "headline_options": headline_options(limits.excerpt_words),
        "rrf_k": hybrid.RRF_K,
        "pool": rank.pool or None,
        "since": since,
        **stats.params(rank),
    }

    docs = stats.docs if whole else None
    # An exact scan beside the content list is split in its two arms: the reader's agents' on the
    # side connection, the reader's own conversations with other agents here, once the content
    # list is read (a quiet reader's scan is most of its search, and this connection is idle).
    split = side is not None and pending is not None and scope.actor_id is not None and bool(params["other_agents"])
    if split:
        docs = docs if docs is not None else ranking.scope_docs(conn, agents)
        split = hybrid.exact_scope(settings, docs)

    def vector_list(c: psycopg.Connection, usable: hybrid.QueryVector) -> list[dict]:
        return vector_candidates(c, scope, agents, usable, settings, docs=docs, arm="agents" if split else None)

    def own_arm(pending: hybrid.PendingVector) -> list[dict]:
        # This connection's arm of a split exact scan, once the content list is read.
        early = pending.arrived() if split else None
        return vector_candidates(conn, scope, agents, early, settings, docs=docs, arm="own") if early else []

    lists = hybrid.gather(conn, pending, side, scope.workspace_id, agents, ledger=ledger,
                          lexical=lambda: conn.execute(CONTENT_LIST, params).fetchall(),
                          vector_list=vector_list, meanwhile=own_arm)
    qv, nearest, statement = lists.qv, lists.vectors, SEARCH
    if lists.lexical is not None:
        if split and nearest is not None:
            # The arms' conversations are disjoint (an arm each side of `agents`): merged as the
            # one statement orders them.
            nearest = sorted([*nearest, *lists.meanwhile], key=lambda r: (r["distance"], r["conversation_id"]))
        statement = SEARCH_LISTED
        content = lists.lexical
        params.update(content_conversations=[r["conversation_id"] for r in content],
                      content_messages=[r["message_id"] for r in content],
                      content_scores=[r["score"] for r in content], content_ranks=[r["rank"] for r in content])
    if kind == FUSED_CURSOR and not qv.usable:
        raise BadRequest("this cursor pages a search that used semantic matches, which are unavailable now "
                         f"({hybrid.category(qv) or 'not configured'}); search again from the first page",
                         code="cursor_mode_changed")
    nearest = nearest or []
    rows = conn.execute(statement, {
        **params,
        "fused": qv.usable,
        "vector_conversations": [r["conversation_id"] for r in nearest],
        "vector_messages": [r["message_id"] for r in nearest],
    }).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    sessions = []
    for row in rows:
        session = _session(row)
        matched_on = [on for on in ("title", "content", "semantic") if row[f"on_{on}"]]
        match: dict = {"on": matched_on, "score": row["score"]}
        if row["message_id"] is not None:
            text, spans = parse_excerpt(row["excerpt"] or "")
            match.update({"message_id": row["message_id"], "excerpt": text, "highlights": spans})
        session["match"] = match
        sessions.append(session)
    nxt = None
    if more:
        last = rows[-1]
        nxt = codec.encode(FUSED_CURSOR if qv.usable else LEXICAL_CURSOR, fp,
                           [last["tier"], last["score"], last["content_score"], last["id"]])
    return {"sessions": sessions, "next": nxt, "mode": qv.mode, "degradation": qv.degradation,
            "ranking": rank.method}


def _recent_window_start(conn: psycopg.Connection, scope: Scope, agents: list[int], q: str,
                         rank: ranking.Ranking, stats: ranking.QueryStats | None) -> datetime | None:
    """Where the window of recent messages starts when the query's matches in the reader's agents
    exceed the pool (a common word): content candidates are read from that window only. A query
    ANDs its words, so its matches are at most its rarest word's; the reader's own
    conversations with other agents are windowed alike. `stats`: the query's statistics when they
    were already read over exactly these agents."""
    if rank.pool <= 0 or not agents:
        return None
    mine = stats or ranking.query_stats(conn, agents, scope.ts_config or "simple", [q])
    return ranking.recent_window_start(conn, scope.workspace_id, agents, min(mine.term_df, default=0), mine.docs,
                                       rank.pool)


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
    q = q.strip()
    return q or None


def get_one(conn: psycopg.Connection, scope: Scope, conversation_id: int) -> dict:
    row = conn.execute(
        ONE, {"id": conversation_id, "ws": scope.workspace_id, "actor": scope.actor_id, "agents": scope.agent_ids}
    ).fetchone()
    if row is None:
        # The same answer whether it does not exist or is not the reader's to see.
        raise NotFound(f"no session {conversation_id}")
    return _session(row)
