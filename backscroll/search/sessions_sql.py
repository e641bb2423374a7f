"""The statements of session search: the reader's scope, the recent list, title and content
search, their fusion with the semantic list, and one session by id.

Each statement is a named constant with bound parameters; fragments are stitched only through
`sqltext.compose`. The comments beside them explain the planner choices they rely on.
"""

from __future__ import annotations

from . import hybrid, ranking
from .sqltext import compose, with_ctes


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
# only (content_score -1); within the content tier by the content score.
#
# A person searches for a conversation, so the conversation is what matches: the query's terms
# (`terms`: words and quoted phrases) are OR'd, a message matching any of them is a candidate,
# and a conversation scores by its best message (BM25 over every term, or ts_rank_cd: `ranking`)
# plus `coverage_weight` times the idf of every query lexeme some candidate of the conversation
# holds (BM25 only): the conversation whose messages together hold more of the query's words,
# and rarer ones, comes first, even when no single message holds them all. `-word` excludes the
# messages that contain it (the conversation may still match through its other messages).
# Candidates come from the query's rarest terms (`gen_terms`, ranking.generating_terms) and are
# at most `pool`, the most recent of their matches: a common word must not make every message of
# the workspace a candidate; the frequent terms still add to every candidate's score.
#
# With a query vector (an embeddings model configured and answering), the content tier also
# holds semantic hits: the vector list (SEMANTIC_EXACT / SEMANTIC_HNSW, under the same narrowing,
# which `semantic_hits` checks again) and the content list are fused by reciprocal rank
# (RRF_K = 60), and that score orders the tier. A semantic-only hit shows its nearest message.
#
# The excerpt highlights every term of the query in the best message.
#
# The tsqueries are written inline with the workspace's configuration (resolve_scope fetched
# it): the planner sees constants, and the final join has no CTE or workspaces to plan around. In
# the first branch they sit behind InitPlans, `(select ...)`, so the planner keeps agent_id in
# the GIN index condition (seeing the selectivity of a common word, it would otherwise filter
# agent_id on the heap and visit far more pages). The reader's own conversations with other
# agents are reached through the same GIN index, over the workspace's other agents, instead of
# reading every sidecar row of every own conversation. A query with no positive term (`-rose`)
# would match nearly everything the reader can see: it searches titles only (`searching` is
# false, which the planner folds, so no content scan is even planned).
TSQUERY = "backscroll_or_query(%(ts_config)s::regconfig, %(terms)s::text[], %(stems)s::regconfig[])"
GEN_TSQUERY = "backscroll_or_query(%(ts_config)s::regconfig, %(gen_terms)s::text[], %(stems)s::regconfig[])"
NEG_TSQUERY = "backscroll_or_query(%(ts_config)s::regconfig, %(negated)s::text[], %(stems)s::regconfig[])"
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
        and %(searching)s
        -- Walking (ranking.walk_window, a common word): the word test is kept off the word index
        -- (the constant CASE folds when the statement is planned), so a recency index is walked
        -- from the newest document, each tested, until the pool is full; the same rows as the
        -- word index's bitmap ANDed with the window, read in a few thousand rows instead of a
        -- bitmap of every match (230,000 entries, 90 ms, for a word in a quarter of 1M messages).
        and case when %(walk)s then coalesce(s.tsv @@ (select <<GEN_TSQUERY>>), false)
                 else s.tsv @@ (select <<GEN_TSQUERY>>) end
        and not coalesce(s.tsv @@ (select <<NEG_TSQUERY>>), false)
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
        and %(searching)s
        and s.tsv @@ <<GEN_TSQUERY>>
        and not coalesce(s.tsv @@ <<NEG_TSQUERY>>, false)
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
-- The idf of each slot of the query (a word, with its alternative forms) that some candidate of
-- the conversation holds, at its best form held (each document cut down to the query's lexemes
-- first, as bm25_scores does).
coverage as (
    select c.conversation_id, sum(c.best) as covered
      from (select h.conversation_id, max(q.idf) as best
              from (select distinct x.conversation_id, u.lexeme
                      from content_candidates x,
                           unnest(tsvector_to_array(ts_delete(x.tsv, tsvector_to_array(ts_delete(x.tsv, %(lexemes)s::text[])))))
                           as u(lexeme)
                     where %(bm25)s) h
              join unnest(%(lexemes)s::text[], %(idf)s::float8[], %(slots)s::int[]) as q(lexeme, idf, slot)
                on q.lexeme = h.lexeme
             group by h.conversation_id, q.slot) c
     group by c.conversation_id
),
best_content as (
    select distinct on (m.conversation_id) m.conversation_id, m.message_id,
           m.score + %(coverage_weight)s * coalesce(v.covered, 0) as score, coalesce(v.covered, 0) as covered
      from content_matches m
      left join coverage v on v.conversation_id = m.conversation_id
     order by m.conversation_id, m.score desc, m.message_id desc
),
content_ranked as (
    select b.*, row_number() over (order by b.score desc, b.conversation_id desc) as rank
      from best_content b
)
""", GEN_TSQUERY=GEN_TSQUERY, NEG_TSQUERY=NEG_TSQUERY, TSQUERY=TSQUERY,
   BM25_SCORES=ranking.bm25_scores("content_candidates"))
# The content list handed back in (the hybrid path reads it on its own, beside the vector list).
CONTENT_FROM_LIST = """
content_ranked as (
    select l.conversation_id, l.message_id, l.score, l.covered, l.rank
      from unnest(%(content_conversations)s::bigint[], %(content_messages)s::bigint[],
                  %(content_scores)s::float8[], %(content_covered)s::float8[], %(content_ranks)s::bigint[])
           as l(conversation_id, message_id, score, covered, rank)
)
"""
SEARCH_FUSION = compose("""
-- Fused with the vector list, a conversation enters the content list only when its messages hold
-- `min_covered` of the query's idf (hybrid_min_match_share of it, for a query of three terms or
-- more): a question's function words alone must not buy a rank that outranks what the vectors
-- found. Ranked again among those that enter; unfused, every content match enters.
content_fused as (
    select b.conversation_id, b.message_id, b.score,
           row_number() over (order by b.score desc, b.conversation_id desc) as rank
      from content_ranked b
     where not %(fused)s or b.covered >= %(min_covered)s
),
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
      full join content_fused b on b.conversation_id = t.id
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
            ts_headline(h.cfg, translate(left(m.body, %(searchable)s), %(markers)s, ''),
                        backscroll_or_query(h.cfg, %(terms)s::text[], %(stems)s::regconfig[]), %(headline_options)s)
       end as excerpt
  from page p
  join conversations c on c.id = p.id<<SESSION_JOINS>>
  left join messages m on m.id = p.message_id
  cross join lateral (select backscroll_headline_config(%(ts_config)s::regconfig, m.language) as cfg) h
 order by p.tier desc, p.score desc, p.content_score desc, p.id desc
""", SESSION_COLUMNS=SESSION_COLUMNS, SESSION_JOINS=SESSION_JOINS, RRF=hybrid.rrf_sql("b.rank", "v.rank"))


# One statement: titles, contents and the vector list handed in, fused (the lexical path).
SEARCH = with_ctes(SEARCH_TITLES, SEARCH_CONTENT, SEARCH_FUSION)
# The hybrid path in two: the content list alone (read while the vector list is produced beside
# it), then titles and both lists, fused, from the same text.
CONTENT_LIST = (with_ctes(SEARCH_CONTENT)
                + "\nselect conversation_id, message_id, score, covered, rank from content_ranked\n")
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
