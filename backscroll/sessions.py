"""Session search for people: the recent list, title search and content search.

Narrowing is part of every query: a reader sees the conversations of the agents their token
is scoped to, plus the conversations they created themselves, whichever agent those are with.
Nothing is filtered after a query returns, and no response counts what was hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from .auth import Principal
from .cursor import CursorCodec, fingerprint
from .errors import BadRequest, NotFound

# The first page starts "before" the largest position a keyset can hold.
MAX_ID = 9_223_372_036_854_775_807

# Private-use characters mark highlights inside ts_headline output; they are removed from
# the body first, so a message cannot forge a highlight.
HL_START, HL_STOP = "\ue000", "\ue001"
SEARCHABLE_CHARS = 100_000  # the sidecar indexes this much of each body; excerpts read as much

RESOLVE_SCOPE = """
select coalesce(array_agg(a.id order by a.id), '{}') as agent_ids,
       (select id from agents where workspace_id = %(ws)s and slug = %(only_slug)s) as only_agent
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
# the reader's own conversations (conversations_creator_recent), merged: each reads at most a
# page, so page 500 costs what page 1 does.
RECENT = (
    """
with page as (
    select x.id, x.last_active_at
      from unnest(%(agents)s::bigint[]) as a(agent_id)
      cross join lateral (
            select c.id, c.last_active_at
              from conversations c
             where c.agent_id = a.agent_id
               and c.workspace_id = %(ws)s
               and (c.last_active_at, c.id) < (%(after_at)s::timestamptz, %(after_id)s::bigint)
             order by c.last_active_at desc, c.id desc
             limit %(fetch)s) x
    union
    (select c.id, c.last_active_at
       from conversations c
      where c.creator_actor_id = %(actor)s
        and c.workspace_id = %(ws)s
        and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)
        and (c.last_active_at, c.id) < (%(after_at)s::timestamptz, %(after_id)s::bigint)
      order by c.last_active_at desc, c.id desc
      limit %(fetch)s)
)
select"""
    + SESSION_COLUMNS
    + """
  from page p
  join conversations c on c.id = p.id"""
    + SESSION_JOINS
    + """
 order by p.last_active_at desc, p.id desc
 limit %(fetch)s
"""
)

# Ranked search. Titles by trigram (ilike over conversations_title_trgm); contents by full
# text over the sidecar (finished user and assistant messages only). Both branches carry the
# same narrowing. A title hit ranks above a content-only hit (tier 2 over tier 1); within a
# tier by score (word similarity for titles, ts_rank_cd for contents), then by id.
SEARCH = (
    """
with q as (
    select websearch_to_tsquery(w.ts_config, %(q)s) as tsq from workspaces w where w.id = %(ws)s
),
title_hits as (
    select c.id, word_similarity(%(q)s, c.title) as score
      from conversations c
     where c.workspace_id = %(ws)s
       and c.title ilike %(pattern)s
       and (c.agent_id = any(%(agents)s::bigint[])
            or (c.creator_actor_id = %(actor)s
                and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)))
),
content_matches as (
    select s.conversation_id, s.message_id, ts_rank_cd(s.tsv, q.tsq) as score
      from message_search s, q
     where s.agent_id = any(%(agents)s::bigint[])
       and s.tsv @@ q.tsq
    union all
    select s.conversation_id, s.message_id, ts_rank_cd(s.tsv, q.tsq)
      from conversations c
      join message_search s on s.conversation_id = c.id
     cross join q
     where c.creator_actor_id = %(actor)s
       and c.workspace_id = %(ws)s
       and not (c.agent_id = any(%(agents)s::bigint[]))
       and (%(only_agent)s::bigint is null or c.agent_id = %(only_agent)s)
       and s.tsv @@ q.tsq
),
best_content as (
    select distinct on (conversation_id) conversation_id, message_id, score
      from content_matches
     order by conversation_id, score desc, message_id desc
),
hits as (
    select coalesce(t.id, b.conversation_id) as id,
           case when t.id is not null then 2 else 1 end as tier,
           coalesce(t.score, b.score)::real as score,
           t.id is not null as on_title,
           b.message_id
      from title_hits t
      full join best_content b on b.conversation_id = t.id
),
page as (
    select * from hits h
     where (h.tier, h.score, h.id) < (%(after_tier)s::int, %(after_score)s::real, %(after_id)s::bigint)
     order by h.tier desc, h.score desc, h.id desc
     limit %(fetch)s
)
select"""
    + SESSION_COLUMNS
    + """,
       p.tier, p.score, p.on_title, p.message_id,
       case when p.message_id is not null then
            ts_headline(w.ts_config,
                        translate(left(m.body, %(searchable)s), %(markers)s, ''),
                        q.tsq, %(headline_options)s)
       end as excerpt
  from page p
  join conversations c on c.id = p.id"""
    + SESSION_JOINS
    + """
  join workspaces w on w.id = c.workspace_id
  cross join q
  left join messages m on m.id = p.message_id
 order by p.tier desc, p.score desc, p.id desc
"""
)

ONE = (
    "select"
    + SESSION_COLUMNS
    + "  from conversations c"
    + SESSION_JOINS
    + """
 where c.id = %(id)s
   and c.workspace_id = %(ws)s
   and (c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)
"""
)


@dataclass(frozen=True)
class Scope:
    workspace_id: int
    actor_id: int
    agent_ids: list[int]
    only_agent: int | None  # the `agent` filter, when it names an existing agent


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
    return Scope(principal.workspace_id, principal.actor_id, list(row["agent_ids"]), only_agent)


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
        position = codec.decode(before, "recent", fp)
        try:
            after_at, after_id = datetime.fromisoformat(position[0]), int(position[1])
        except (TypeError, ValueError, IndexError):
            raise BadRequest("invalid cursor", code="invalid_cursor") from None
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


def search(conn: psycopg.Connection, scope: Scope, codec: CursorCodec, q: str, before: str | None,
           limit: int, limits: Limits) -> dict:
    fp = fingerprint("search", q, scope.only_agent)
    after = [3, 0.0, MAX_ID]
    if before:
        position = codec.decode(before, "search", fp)
        try:
            after = [int(position[0]), float(position[1]), int(position[2])]
        except (TypeError, ValueError, IndexError):
            raise BadRequest("invalid cursor", code="invalid_cursor") from None
    agents = scope.agent_ids if scope.only_agent is None else [a for a in scope.agent_ids if a == scope.only_agent]
    rows = conn.execute(
        SEARCH,
        {
            "ws": scope.workspace_id,
            "actor": scope.actor_id,
            "agents": agents,
            "only_agent": scope.only_agent,
            "q": q,
            "pattern": f"%{escape_like(q)}%",
            "after_tier": after[0],
            "after_score": after[1] if before else float("inf"),
            "after_id": after[2],
            "fetch": limit + 1,
            "searchable": SEARCHABLE_CHARS,
            "markers": HL_START + HL_STOP,
            "headline_options": headline_options(limits.excerpt_words),
        },
    ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    sessions = []
    for row in rows:
        session = _session(row)
        matched_on = (["title"] if row["on_title"] else []) + (["content"] if row["message_id"] else [])
        match: dict = {"on": matched_on, "score": row["score"]}
        if row["message_id"] is not None:
            text, spans = parse_excerpt(row["excerpt"] or "")
            match.update({"message_id": row["message_id"], "excerpt": text, "highlights": spans})
        session["match"] = match
        sessions.append(session)
    nxt = None
    if more:
        last = rows[-1]
        nxt = codec.encode("search", fp, [last["tier"], last["score"], last["id"]])
    return {"sessions": sessions, "next": nxt}


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
