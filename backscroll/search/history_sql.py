"""The statements of `search_history`: eligibility (the disclosure rule, in SQL), the lexical and
vector candidate lists, ranking, neighbours and the audit row.

Each statement is a named constant with bound parameters; fragments are stitched only through
`sqltext.compose`. The comments beside them explain the planner choices they rely on.
"""

from __future__ import annotations

from . import hybrid, ranking
from .sqltext import compose, with_ctes


SELECT_TURN = """
select t.id, t.workspace_id, t.agent_id, t.conversation_id, t.requester_actor_id, t.reply_message_id,
       c.audience_kind::text as audience_kind, c.audience_namespace, c.audience_readers,
       w.ts_config::text as ts_config
  from turns t
  join conversations c on c.id = t.conversation_id
  join workspaces w on w.id = t.workspace_id
 where t.id = %(turn)s and t.workspace_id = %(ws)s
   for update of t
"""
SELECT_EVIDENCE_IDS = "select coalesce(array_agg(message_id order by message_id), '{}') as ids from turn_evidence where turn_id = %(turn)s"

# The requester (`p.actor`) and every identity verifiably linked to them in this perspective
# (`p.agent`), for a statement that names them in a relation `p`.
RESOLVE_LINKED = """
select p.actor as id from p where p.actor is not null
union
select case when l.actor_a = p.actor then l.actor_b else l.actor_a end
  from p join identity_links l on l.agent_id = p.agent and p.actor in (l.actor_a, l.actor_b)
 where l.revoked_at is null and l.verified_at is not null
"""
# What a search starts from, in one round trip: the turn (locked, as SELECT_TURN locks it), every
# message it has seen, its requester's identities, and the audience keys its destination may
# receive (migration 0027: backscroll_disclosable over the keys): the one scope of its
# candidates, statistics, coverage and features, so nothing outside it moves a number or the order.
SEARCH_TURN = compose("""
with turn as (<<SELECT_TURN>>),
p as (select requester_actor_id as actor, agent_id as agent from turn)
select turn.*,
       (<<SELECT_EVIDENCE_IDS>>) as in_context,
       array(select l.id from (<<RESOLVE_LINKED>>) l order by 1) as requester_ids,
       backscroll_receivable_audiences(turn.workspace_id, turn.agent_id, turn.conversation_id,
                                       turn.audience_kind::audience_kind, turn.audience_namespace,
                                       turn.audience_readers) as audiences
  from turn
""", SELECT_TURN=SELECT_TURN.strip(), SELECT_EVIDENCE_IDS=SELECT_EVIDENCE_IDS, RESOLVE_LINKED=RESOLVE_LINKED.strip())
# An actor filter resolves only through actors this agent's conversations know; an
# unresolvable filter resolves to nothing (and so returns nothing), never to "anyone".
RESOLVE_ACTOR = """
with named as (
    select a.id from actors a
     where a.workspace_id = %(ws)s and a.external_id = %(external_id)s
       and (%(namespace)s::text is null or a.namespace = %(namespace)s)
       and exists (select 1 from connectors cn where cn.agent_id = %(agent)s and cn.namespace = a.namespace)
)
select id from named
union
select case when l.actor_a = n.id then l.actor_b else l.actor_a end
  from named n join identity_links l on l.agent_id = %(agent)s and l.revoked_at is null
                                   and l.verified_at is not null
                                   and n.id in (l.actor_a, l.actor_b)
"""

# Vector candidates, under the same predicates as the lexical list: the perspective (sidecar
# narrowed by agent, re-derived through connectors), the structural filters, and the cheap
# exclusions (loaded window, source evidence, audience, identity-aware) for each candidate, so a
# vector list never hands over rows that are dropped later. The lineage walk stays lazy: SEARCH
# evaluates it in fused order, before the cut. Only vectors of the configured model are compared
# (`e.model = ...` and the model's own index expression, {distance}).
#
# VECTOR_ELIGIBLE is written once and used in two shapes of the statement:
# - VECTOR_EXACT, for small perspectives: every embedded message of the agent, through the
#   sidecar's agent index, ordered by the exact distance;
# - VECTOR_HNSW, for large ones: the model's HNSW index walked in distance order, each candidate
#   tested by a correlated scalar sub-select (which the planner cannot turn into a join that
#   would bypass the index) under pgvector's iterative scan, which keeps walking until
#   `vector_k` eligible rows are found instead of handing over its nearest and losing most of
#   them to the filter. Relaxed order: the nearest come back approximately sorted; sort again.

# The disclosure rule for a message `m` into the turn's destination: what backscroll_disclosable
# says (migration 0018: the audience predicate, identity-aware, or a row sealed to its own
# conversation), with the destination reader's linked identities resolved once per statement (an
# uncorrelated sub-select) instead of one function call per row. Both SEARCH and the vector
# lists use it.
DESTINATION_ALLOWS = """(backscroll_audience_allows(m.audience_kind, m.audience_namespace, m.audience_readers,
                                   %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[])
        or (m.audience_kind = 'members' and cardinality(m.audience_readers) = 1
            and (m.audience_namespace, m.audience_readers[1]) in (
                select li.namespace, li.external_id
                  from backscroll_linked_identities(%(agent)s, %(d_namespace)s, (%(d_readers)s::text[])[1]) li
                 where %(d_kind)s::audience_kind = 'members' and cardinality(%(d_readers)s::text[]) = 1))
        or backscroll_sealed_allows(m.conversation_id, m.audience_kind, m.audience_namespace, m.audience_readers,
                                    %(d_conversation)s::bigint, %(d_kind)s::audience_kind, %(d_namespace)s))"""
VECTOR_FROM = """message_search s
           join messages m on m.id = s.message_id
           join conversations c on c.id = m.conversation_id
           join connectors cn on cn.id = c.connector_id"""
# The perspective (re-derived through connectors) and the structural filters, over VECTOR_FROM.
PERSPECTIVE_FILTERS = """s.agent_id = %(agent)s::bigint
       and cn.agent_id = %(agent)s
       and c.workspace_id = %(ws)s
       and (%(only_speakers)s::bigint[] is null or m.speaker_actor_id = any(%(only_speakers)s::bigint[]))
       and (%(f_conversation)s::bigint is null or m.conversation_id = %(f_conversation)s)
       and (%(f_connector)s::text is null or cn.namespace = %(f_connector)s)
       and (%(f_since)s::timestamptz is null or m.created_at >= %(f_since)s)
       and (%(f_until)s::timestamptz is null or m.created_at < %(f_until)s)"""
# The exclusions a candidate `r` meets before the audience predicate, first first: the audit's names.
EXCLUDED_BEFORE_AUDIENCE = """when r.id = any(%(in_context)s::bigint[]) then 'already_in_context'
             when not exists (select 1 from message_source_evidence e where e.message_id = r.id) then 'no_evidence'"""
VECTOR_ELIGIBLE = compose("""<<PERSPECTIVE_FILTERS>>
       and not (m.id = any(%(in_context)s::bigint[]))
       and exists (select 1 from message_source_evidence ev where ev.message_id = m.id)
       and <<DESTINATION_ALLOWS>>""", PERSPECTIVE_FILTERS=PERSPECTIVE_FILTERS, DESTINATION_ALLOWS=DESTINATION_ALLOWS)
VECTOR_EXACT = compose("""
select s.message_id as id, {distance} as distance
  from <<VECTOR_FROM>>
  join message_embeddings e on e.message_id = s.message_id and e.model = %(model)s
 where <<VECTOR_ELIGIBLE>>
 order by ({distance}) + 0, s.message_id
 limit %(vector_k)s
""", VECTOR_FROM=VECTOR_FROM, VECTOR_ELIGIBLE=VECTOR_ELIGIBLE)
VECTOR_HNSW = compose("""
with nearest as materialized (
    select e.message_id as id, {distance} as distance
      from message_embeddings e
     where e.model = %(model)s
       and coalesce((select true
                       from <<VECTOR_FROM>>
                      where s.message_id = e.message_id
                        and <<VECTOR_ELIGIBLE>>), false)
     order by {distance}
     limit %(vector_k)s
)
select id, distance from nearest order by distance + 0, id
""", VECTOR_FROM=VECTOR_FROM, VECTOR_ELIGIBLE=VECTOR_ELIGIBLE)
# - VECTOR_PUBLIC, for a large perspective into a public destination, where only public messages
#   can be eligible: the vectors of the agent's public messages (each vector carries its
#   message's public agent, migration 0014; it narrows, it does not vouch), read in one range of
#   their partial index and sorted by the exact distance, then VECTOR_ELIGIBLE tested in that
#   order until `vector_k` pass (offset 0 keeps the test above the sort). Exact, so nothing is
#   missed, and it reads a few thousand vectors instead of walking the index past the ~98% it
#   must refuse.
#   An agent with more than `public_cap` public messages gets one row with `too_many` instead
#   (counted in the index first, so no distance is computed), and the HNSW walk: an exact list
#   must stay a small read.
VECTOR_PUBLIC = compose("""
with counted as materialized (
    select count(*) as n
      from (select from message_embeddings p
             where p.public_agent_id = %(agent)s and p.model = %(model)s
             limit %(public_cap)s + 1) x
),
nearest as materialized (
    select d.id, d.distance
      from (select e.message_id as id, {distance} as distance
              from message_embeddings e
             where e.public_agent_id = %(agent)s
               and e.model = %(model)s
               and (select n from counted) <= %(public_cap)s
             order by ({distance}) + 0, e.message_id
            offset 0) d
     where coalesce((select true
                       from <<VECTOR_FROM>>
                      where s.message_id = d.id
                        and <<VECTOR_ELIGIBLE>>), false)
     limit %(vector_k)s
)
select id, distance, false as too_many from nearest
union all
select null, null, true where (select n from counted) > %(public_cap)s
order by too_many, distance, id
""", VECTOR_FROM=VECTOR_FROM, VECTOR_ELIGIBLE=VECTOR_ELIGIBLE)
VECTOR_SHAPES = {"exact": VECTOR_EXACT, "hnsw": VECTOR_HNSW, "public": VECTOR_PUBLIC}
# A lexical candidate's columns, and the bounds it meets besides its words: the window and, for a
# strict list, the weighted share of the query's terms it holds.
MATCH_COLUMNS = """s.message_id, s.conversation_id, s.created_at, s.tsv, s.doc_len,
                    case when %(bm25)s then 0
                         else ts_rank_cd(%(rank_weights)s::float4[], s.tsv, q.tsq, 32) end::float8 as cd"""
MATCH_BOUNDS = """(%(since)s::timestamptz is null or s.created_at >= %(since)s)
                and (%(min_mass)s::float8 <= 0
                     or (select coalesce(sum(t.weight), 0)
                           from unnest(q.each_term, %(term_weights)s::float8[]) as t(tq, weight)
                          where s.tsv @@ t.tq) >= %(min_mass)s::float8)"""
# One statement (or two: `SEARCH_LISTED` below). Candidates come from the sidecar first (the
# lexical matches through its GIN (agent, tsv) index, generated by the query's rarest terms and
# bounded by `pool` (see `ranking`), scored by BM25 or ts_rank_cd over every term; and the vector
# candidates found above); the perspective is re-derived through connectors, with the
# conversation filters and `requester_spoke`, once per conversation; every candidate is scored and ranked (the pool's order: each list's rank among
# all candidates, fused by reciprocal rank, which is the lexical order when there is no vector
# list). The cheap predicates are then evaluated on demand, in ranked order, in a fixed order
# (the first that fails names the exclusion), so only the rows that the audit pool (the first
# COUNTING_CEILING) and the selection read are ever classified (the audience predicate is
# DESTINATION_ALLOWS, as for the vector lists). Lexical alone, the eligible rows are read in ranked order until `limit` pass
# the lineage walk (evaluated lazily, one message at a time); fused, each list is ranked among
# the eligible rows of the pool and the two are fused by reciprocal rank (RRF_K) first.
# On-demand evaluation relies on each materialized CTE being read in the order it produced, and
# on `classified` reading `ranked` in order: its lateral subquery is fenced (`offset 0`) so the
# planner cannot flatten it into a join that reorders the rows.
SEARCH_LEXICAL = compose("""
q as (
    select backscroll_or_query(%(cfg)s::regconfig, %(terms)s::text[], %(stems)s::regconfig[]) as tsq,
           backscroll_or_query(%(cfg)s::regconfig, %(gen_terms)s::text[], %(stems)s::regconfig[]) as gen_tsq,
           array(select backscroll_or_query(%(cfg)s::regconfig, array[t], %(stems)s::regconfig[])
                   from unnest(%(terms)s::text[]) as t) as each_term
),
matches as materialized (
    -- Walking (ranking.walk_window): each receivable audience key's own documents in recency
    -- order (its range of message_search_audience_recent, migration 0029), each range read until
    -- the pool is full or the window ends, then merged: no document of a key the destination may
    -- not receive is read. The word test is kept off the word index (coalesce) so the ranges are
    -- walked in order. Never for a strict list: half the words thin the matches out, and the
    -- walk would read far more rows per candidate than walk_window expects.
    (select w.* from unnest(%(audiences)s::bigint[]) as a(id)
       cross join lateral (
             select <<MATCH_COLUMNS>>
               from message_search s cross join q
              where s.agent_id = %(agent)s::bigint and s.audience_id = a.id
                and coalesce(s.tsv @@ q.gen_tsq, false) and <<MATCH_BOUNDS>>
              order by s.created_at desc, s.message_id desc
              limit %(pool)s) w
      where %(walk)s and %(min_mass)s::float8 <= 0)
    union all
    -- Otherwise through the word index: the agent's matches, of the receivable keys only (a
    -- hidden match never takes an eligible one's place; the rule is still applied below).
    (select <<MATCH_COLUMNS>>
       from message_search s cross join q
      where s.agent_id = %(agent)s::bigint
        and s.audience_id = any(%(audiences)s::bigint[])
        and s.tsv @@ q.gen_tsq and <<MATCH_BOUNDS>>
        and not (%(walk)s and %(min_mass)s::float8 <= 0))
     order by created_at desc, message_id desc
     limit %(pool)s
),
bm25 as materialized (<<BM25_SCORES>>),
lexical_list as materialized (
    select x.message_id, x.conversation_id, x.created_at,
           case when %(bm25)s then coalesce(b.bm25, 0) else x.cd end as lexical
      from matches x left join bm25 b on b.message_id = x.message_id
)
""", BM25_SCORES=ranking.bm25_scores("matches"), MATCH_COLUMNS=MATCH_COLUMNS, MATCH_BOUNDS=MATCH_BOUNDS)
# For the audit row alone: the matches of the generating terms, in the same window, perspective
# and filters, that the audience keys kept out of the pool (the destination may not receive
# them), up to the counting ceiling, each named by the first rule that excludes it.
HIDDEN_EXCLUSIONS = compose("""
with q as (
    select backscroll_or_query(%(cfg)s::regconfig, %(gen_terms)s::text[], %(stems)s::regconfig[]) as gen_tsq
),
-- The sidecar's matches first, as SEARCH_LEXICAL reads them (its GIN index on (agent, tsv)),
-- then the perspective and the filters on those rows only.
matched as materialized (
    select s.message_id
      from message_search s cross join q
     where s.agent_id = %(agent)s::bigint
       and s.tsv @@ q.gen_tsq
       and (%(since)s::timestamptz is null or s.created_at >= %(since)s)
       and not (s.audience_id = any(%(audiences)s::bigint[]))
),
-- Each match tested on its own (the fenced lateral): the planner, misjudging how few the
-- matches are, would otherwise read every message of the agent's conversations to join them.
-- (Even unfiltered, the perspective is re-derived: the sidecar's rows alone are not the agent's
-- perspective, and the property test counts a row they hold and it does not.)
hidden as (
    select y.id
      from matched x
      cross join lateral (select s.message_id as id
                            from <<VECTOR_FROM>>
                           where s.message_id = x.message_id and <<PERSPECTIVE_FILTERS>>
                          offset 0) y
     limit %(ceiling)s
)
select case <<EXCLUDED_BEFORE_AUDIENCE>> else 'audience' end as outcome, count(*) as n
  from hidden r
 group by 1
""", VECTOR_FROM=VECTOR_FROM, PERSPECTIVE_FILTERS=PERSPECTIVE_FILTERS,
     EXCLUDED_BEFORE_AUDIENCE=EXCLUDED_BEFORE_AUDIENCE)
# The lexical list handed back in (the hybrid path reads it on its own, beside the vector list).
LEXICAL_FROM_LIST = """
lexical_list as (
    select l.message_id, l.conversation_id, l.created_at, l.lexical
      from unnest(%(lexical_ids)s::bigint[], %(lexical_conversations)s::bigint[],
                  %(lexical_created)s::timestamptz[], %(lexical_scores)s::float8[])
           as l(message_id, conversation_id, created_at, lexical)
)
"""
SEARCH_RANKING = compose("""
vec as (
    select v.id, v.pos from unnest(%(vector_ids)s::bigint[]) with ordinality as v(id, pos)
),
candidates as materialized (
    select l.message_id, l.conversation_id, l.created_at, l.lexical, true as lexical_match
      from lexical_list l
    union all
    select s.message_id, s.conversation_id, s.created_at, 0::float8, false
      from vec join message_search s on s.message_id = vec.id
     where s.agent_id = %(agent)s::bigint
       and not exists (select 1 from lexical_list x where x.message_id = vec.id)
),
-- Where the requester spoke, judged by what the destination may receive of it: a message of
-- theirs it may not receive (a DM into a public room) says nothing about the room here. Only
-- the candidates' conversations are asked about (the requester may have spoken in a thousand),
-- and each of the requester's messages there probes its own sidecar row (a scalar sub-select,
-- so the planner cannot turn it into a scan of every receivable document to join them).
spoke as materialized (
    select distinct r.conversation_id from messages r
     where r.speaker_actor_id = any(%(requester_ids)s::bigint[])
       and r.conversation_id in (select k.conversation_id from candidates k)
       and (select rs.audience_id from message_search rs where rs.message_id = r.id)
           = any(%(audiences)s::bigint[])
       and exists (select 1 from message_source_evidence e where e.message_id = r.id)
),
scored as (
    select k.message_id as id, k.conversation_id, k.created_at, k.lexical, k.lexical_match,
           vec.pos as vector_pos,
           power(0.5, greatest(extract(epoch from (now() - k.created_at)), 0)
                      / (86400.0 * %(half_life)s)) as recency,
           k.conversation_id in (select conversation_id from spoke) as requester_spoke,
           (k.conversation_id = %(dest)s) as same_conversation
      from candidates k
      left join vec on vec.id = k.message_id
     where (%(f_conversation)s::bigint is null or k.conversation_id = %(f_conversation)s)
       and (%(only_speakers)s::bigint[] is null
            or exists (select 1 from messages m where m.id = k.message_id
                                                  and m.speaker_actor_id = any(%(only_speakers)s::bigint[])))
       and (%(f_since)s::timestamptz is null or k.created_at >= %(f_since)s)
       and (%(f_until)s::timestamptz is null or k.created_at < %(f_until)s)
),
weighted as materialized (
    select s.*,
           s.lexical * (1 + %(w_recency)s * s.recency
                          + %(w_requester)s * s.requester_spoke::int
                          + %(w_same)s * s.same_conversation::int) as score
      from scored s
),
lexical_ranks as (
    select w.id, row_number() over (order by w.score desc, w.id desc) as lexical_rank_all
      from weighted w
     where w.lexical_match and %(fused)s
),
ranked as materialized (
    select w.*, l.lexical_rank_all,
           case when %(fused)s
                then <<RRF_OF_POOL>>
                else w.score end::float8 as pool_key
      from weighted w
      left join lexical_ranks l on l.id = w.id
     order by pool_key desc, w.id desc
),
classified as materialized (
    select r.*, m.has_lineage,
           case
             <<EXCLUDED_BEFORE_AUDIENCE>>
             when not <<DESTINATION_ALLOWS>> then 'audience'
           end as excluded_by
      from ranked r
      cross join lateral (
            select m.conversation_id, m.audience_kind, m.audience_namespace, m.audience_readers,
                   (cardinality(m.history_message_ids) > 0 or cardinality(m.memory_ids) > 0) as has_lineage
              from messages m
              join conversations c on c.id = m.conversation_id
              join connectors cn on cn.id = c.connector_id
             where m.id = r.id
               and cn.agent_id = %(agent)s
               and c.workspace_id = %(ws)s
               and (%(f_connector)s::text is null or cn.namespace = %(f_connector)s)
            offset 0) m
),
pool as materialized (
    select * from classified limit %(ceiling)s
),
fused as (
    select f.*, <<RRF_OF_ELIGIBLE>> as rrf
      from (select p.*,
                   case when p.lexical_match then row_number() over (
                        partition by p.lexical_match order by p.score desc, p.id desc) end as lexical_rank,
                   case when p.vector_pos is not null then row_number() over (
                        partition by p.vector_pos is not null order by p.vector_pos) end as vector_rank
              from pool p
             where p.excluded_by is null and %(fused)s) f
),
eligible as (
    select c.*, null::bigint as lexical_rank, null::bigint as vector_rank, null::numeric as rrf
      from classified c
     where c.excluded_by is null and not %(fused)s
    union all
    -- offset 0: the lineage filter below must not be pushed under this sort, where it would walk
    -- every fused pool member's lineage instead of stopping at the limit.
    (select * from fused order by rrf desc, id desc offset 0)
),
selected as materialized (
    select e.*, row_number() over () as rank
      from (select * from eligible e
             where not e.has_lineage
                or backscroll_lineage_allows(array[e.id], %(agent)s, %(d_conversation)s::bigint,
                                             %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[])
             limit %(limit)s) e
),
lineage_denied as materialized (
    -- Each unselected pool member's own lineage verdict, in one walk (migration 0012).
    select backscroll_lineage_denied(array(select p.id from pool p
                                            where p.excluded_by is null and p.has_lineage
                                              and p.id not in (select id from selected)),
                                     %(agent)s, %(d_conversation)s::bigint, %(d_kind)s::audience_kind,
                                     %(d_namespace)s, %(d_readers)s::text[]) as ids
),
pool_classified as (
    select case
             when p.excluded_by is not null then p.excluded_by
             when p.id in (select id from selected) then 'selected'
             when p.id = any((select ids from lineage_denied)::bigint[]) then 'lineage'
             else 'below_cutoff'
           end as outcome
      from pool p
)
select 'hit' as row_kind, s.id, s.conversation_id, s.created_at, s.lexical, s.recency, s.requester_spoke,
       s.same_conversation, s.score, s.lexical_rank, s.vector_rank, s.rrf::float8 as rrf, s.rank,
       null::text as outcome, null::bigint as n
  from selected s
union all
select 'count', null, null, null, null, null, null, null, null, null, null, null, null, outcome, count(*)
  from pool_classified group by outcome
""", DESTINATION_ALLOWS=DESTINATION_ALLOWS, EXCLUDED_BEFORE_AUDIENCE=EXCLUDED_BEFORE_AUDIENCE,
   RRF_OF_POOL=hybrid.rrf_sql("l.lexical_rank_all", "w.vector_pos"),
   RRF_OF_ELIGIBLE=hybrid.rrf_sql("f.lexical_rank", "f.vector_rank"))


# One statement: the lexical list, the vector list handed in, ranked, classified and selected.
SEARCH = with_ctes(SEARCH_LEXICAL, SEARCH_RANKING)
# The hybrid path in two: the lexical list alone (read while the vector list is produced beside
# it), then the rest from the same text.
LEXICAL_LIST = with_ctes(SEARCH_LEXICAL) + """
select message_id, conversation_id, created_at, lexical from lexical_list
"""
SEARCH_LISTED = with_ctes(LEXICAL_FROM_LIST, SEARCH_RANKING)

# Neighbours: up to two eligible messages on either side of a hit, in the same conversation,
# passing the same predicates as hits. Walked through the conversation's index in order, so
# the lineage walk runs only until two are found.
NEIGHBOUR_PREDICATES = """
              exists (select 1 from message_search s where s.message_id = m.id)
          and not (m.id = any(%(in_context)s::bigint[]))
          and exists (select 1 from message_source_evidence e where e.message_id = m.id)
          and backscroll_disclosable(%(agent)s, m.conversation_id, m.audience_kind, m.audience_namespace,
                                     m.audience_readers, %(d_conversation)s::bigint, %(d_kind)s::audience_kind,
                                     %(d_namespace)s, %(d_readers)s::text[])
          and ((cardinality(m.history_message_ids) = 0 and cardinality(m.memory_ids) = 0)
               or backscroll_lineage_allows(array[m.id], %(agent)s, %(d_conversation)s::bigint,
                                            %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[]))"""
NEIGHBOURS_SQL = compose("""
select h.hit, n.side, n.id
  from unnest(%(hits)s::bigint[]) as h(hit)
  join messages hm on hm.id = h.hit
  cross join lateral (
      (select 'before' as side, m.id, m.created_at
         from messages m
        where m.conversation_id = hm.conversation_id
          and (m.created_at, m.id) < (hm.created_at, hm.id)
          and <<NEIGHBOUR_PREDICATES>>
        order by m.created_at desc, m.id desc
        limit %(n)s)
      union all
      (select 'after', m.id, m.created_at
         from messages m
        where m.conversation_id = hm.conversation_id
          and (m.created_at, m.id) > (hm.created_at, hm.id)
          and <<NEIGHBOUR_PREDICATES>>
        order by m.created_at, m.id
        limit %(n)s)
  ) n
 order by h.hit, n.created_at, n.id
""", NEIGHBOUR_PREDICATES=NEIGHBOUR_PREDICATES.strip())

# Canonical text is read from messages only after authorization, for the ids chosen above. The
# room's own metadata (title, connector, kind) only where the room itself may be disclosed to the
# destination: a public message in a private room names no private title.
HYDRATE = """
select m.id, m.conversation_id, m.role::text as role, left(m.body, %(max_chars)s) as text,
       length(m.body) > %(max_chars)s as truncated, m.created_at, r.disclosed as room_disclosed,
       case when r.disclosed then c.title end as title,
       case when r.disclosed then cn.namespace end as connector,
       case when r.disclosed then c.audience_kind::text end as audience_kind,
       a.namespace as speaker_namespace, a.external_id as speaker_external_id,
       a.display_name as speaker_display_name
  from messages m
  join conversations c on c.id = m.conversation_id
  join connectors cn on cn.id = c.connector_id
  left join actors a on a.id = m.speaker_actor_id
 cross join lateral (select backscroll_disclosable(%(agent)s, c.id, c.audience_kind, c.audience_namespace,
                                                   c.audience_readers, %(d_conversation)s::bigint,
                                                   %(d_kind)s::audience_kind, %(d_namespace)s,
                                                   %(d_readers)s::text[]) as disclosed) r
 where m.id = any(%(ids)s::bigint[])
"""
ADD_EVIDENCE = """
insert into turn_evidence (turn_id, message_id, via)
select %(turn)s, unnest(%(ids)s::bigint[]), %(via)s
on conflict do nothing
"""
INSERT_AUDIT = """
insert into search_audit (turn_id, query_digest, filters, destination_audience, requested_limit, effective_limit,
                          status, mode, degradation, selected, exclusions)
values (%(turn)s, %(digest)s, %(filters)s, %(destination)s, %(requested)s, %(effective)s,
        %(status)s, %(mode)s, %(degradation)s, %(selected)s, %(exclusions)s)
returning id
"""
# How a search ends, in one round trip: the evidence it adds recorded, its audit row written, and
# the texts of what it shows.
FINISH_SEARCH = compose("""
with evidence as (<<ADD_EVIDENCE>>),
audit as (<<INSERT_AUDIT>>)
<<HYDRATE>>""", ADD_EVIDENCE=ADD_EVIDENCE.strip(), INSERT_AUDIT=INSERT_AUDIT.strip(), HYDRATE=HYDRATE.strip())
def _lineage_allows(ids: str) -> str:
    """Whether the messages of parameter `ids` may be delivered together to the turn's destination."""
    return compose("""backscroll_lineage_allows(<<IDS>>::bigint[], %(agent)s, %(d_conversation)s::bigint,
                                 %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[])""", IDS=ids)


# The reply's provenance as a whole: the pre-delivery recheck asks exactly this.
JOINT_LINEAGE = compose("select <<ALLOWS>> as ok", ALLOWS=_lineage_allows("%(ids)s"))
# Whether a search must check its hits' joint lineage one by one (see search_history): only when the
# turn's evidence (`ids`) is deliverable on its own and stops being so with all the search offers.
JOINT_LINEAGE_GUARD = compose("select case when <<EVIDENCE>> then not <<OFFERED>> else false end as guard",
                              EVIDENCE=_lineage_allows("%(ids)s"), OFFERED=_lineage_allows("%(offered)s"))
SET_PLAN_CACHE_MODE = """
select current_setting('plan_cache_mode') as was, set_config('plan_cache_mode', %(mode)s, true)
"""
