"""`search_history` for agents: history outside the loaded window, under the disclosure model.

Eligibility is decided in SQL, by the same predicates as loaded history, before anything is
ranked: source evidence exists, the audience predicate (identity-aware) allows the message into
the destination conversation's audience, and the lineage walk allows everything it was built
from. The perspective (the turn's agent) and the destination are bound from the turn; the tool
takes neither.

With an embeddings model configured the search is hybrid: a vector candidate list, produced
under the same predicates inside the (iterative) index scan, is fused with the lexical list by
reciprocal rank; how it degrades is in `hybrid`.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from ..config import Settings, setting
from ..embeddings.gateway import Gateway
from ..embeddings.vectors import distance, ef_search_for, exact_distance, literal, use_iterative_scan
from ..errors import NotFound
from ..vocabulary import Text
from . import hybrid, ranking
from .sqltext import compose, with_ctes

LIMIT_DEFAULT = 8
LIMIT_MAX = 20
EVIDENCE_CAP = 400          # distinct messages a turn may hold as evidence
MESSAGES_PER_HIT = 5        # a hit and up to two neighbours on either side
NEIGHBOURS = 2
COUNTING_CEILING = 1000     # audit exclusion counts are exact over this many ranked matches
MAX_TERMS = 32
MAX_TERM_CHARS = 128
TEXT_MAX_CHARS = 4000
RECENCY_HALF_LIFE_DAYS = 30.0
WEIGHTS = {"recency": 0.25, "requester_spoke": 0.25, "same_conversation": 0.1}
# Fused with a vector list, a message enters the lexical list only when it matches at least this
# share of a query of MIN_MATCH_TERMS terms or more, each term weighted by its idf (so "what",
# "did" and "the" count for almost nothing, and a rare name for much). The words are OR'd (an
# agent's query is a sentence), and rank fusion sees ranks, not scores: without it, messages that
# share only "of" and "room" with "bathtub overflow soaked ceiling of room below" outrank the one
# the vector list found (bench/RESULTS.md, semantic search and ranking). Lexical search alone
# keeps every match. MIN_MATCH_WEIGHTED = False counts terms alike (the rule before BM25).
MIN_MATCH_SHARE = 0.5
MIN_MATCH_TERMS = 3
MIN_MATCH_WEIGHTED = True


class ActorFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    external_id: Text = Field(min_length=1, max_length=256)
    namespace: Text | None = Field(default=None, max_length=200, description="`type:name`; any when omitted")


class Filters(BaseModel):
    model_config = ConfigDict(extra="forbid")
    actor: ActorFilter | None = Field(default=None, description="Only messages this person said")
    requester_only: bool = Field(default=False, description="Only messages the requester said (any linked identity)")
    conversation_id: int | None = Field(default=None, ge=1, le=2**63 - 1)
    connector: Text | None = Field(default=None, max_length=200, description="`type:name`")
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    turn_id: int = Field(ge=1, le=2**63 - 1)
    query: Text = Field(min_length=1, max_length=512)
    filters: Filters = Field(default_factory=Filters)
    limit: int | None = Field(default=None, description=f"Hits wanted; default {LIMIT_DEFAULT}, clamped to 1..{LIMIT_MAX}")


def split_terms(query: str) -> list[str]:
    """Quoted phrases stay together; everything else splits on whitespace. Terms are OR'd."""
    terms: list[str] = []
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', query):
        term = (quoted or bare).strip().strip('"')
        if term:
            terms.append(term[:MAX_TERM_CHARS])
    return terms[:MAX_TERMS]


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

# The requester and every identity verifiably linked to them in this perspective.
RESOLVE_LINKED = """
select %(actor)s::bigint as id where %(actor)s::bigint is not null
union
select case when l.actor_a = %(actor)s then l.actor_b else l.actor_a end
  from identity_links l
 where l.agent_id = %(agent)s and l.revoked_at is null and l.verified_at is not null
   and %(actor)s in (l.actor_a, l.actor_b)
"""
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
VECTOR_ELIGIBLE = compose("""s.agent_id = %(agent)s::bigint
       and cn.agent_id = %(agent)s
       and c.workspace_id = %(ws)s
       and (%(only_speakers)s::bigint[] is null or m.speaker_actor_id = any(%(only_speakers)s::bigint[]))
       and (%(f_conversation)s::bigint is null or m.conversation_id = %(f_conversation)s)
       and (%(f_connector)s::text is null or cn.namespace = %(f_connector)s)
       and (%(f_since)s::timestamptz is null or m.created_at >= %(f_since)s)
       and (%(f_until)s::timestamptz is null or m.created_at < %(f_until)s)
       and not (m.id = any(%(in_context)s::bigint[]))
       and exists (select 1 from message_source_evidence ev where ev.message_id = m.id)
       and <<DESTINATION_ALLOWS>>""", DESTINATION_ALLOWS=DESTINATION_ALLOWS)
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
    select backscroll_or_query(%(cfg)s::regconfig, %(terms)s::text[]) as tsq,
           backscroll_or_query(%(cfg)s::regconfig, %(gen_terms)s::text[]) as gen_tsq,
           array(select backscroll_or_query(%(cfg)s::regconfig, array[t])
                   from unnest(%(terms)s::text[]) as t) as each_term
),
matches as materialized (
    select s.message_id, s.conversation_id, s.created_at, s.tsv, s.doc_len,
           case when %(bm25)s then 0
                else ts_rank_cd(%(rank_weights)s::float4[], s.tsv, q.tsq, 32) end::float8 as cd
      from message_search s cross join q
     where s.agent_id = %(agent)s::bigint
       -- Walking (ranking.walk_window): the word test is kept off the word index (a constant
       -- CASE folds when the statement is planned), so the recency index is walked in order.
       -- Never for a strict list: half the words thin the matches out, and the walk would read
       -- far more rows per candidate than walk_window expects.
       and case when %(walk)s and %(min_mass)s::float8 <= 0 then coalesce(s.tsv @@ q.gen_tsq, false)
                else s.tsv @@ q.gen_tsq end
       and (%(since)s::timestamptz is null or s.created_at >= %(since)s)
       and (%(min_mass)s::float8 <= 0
            or (select coalesce(sum(t.weight), 0) from unnest(q.each_term, %(term_weights)s::float8[]) as t(tq, weight)
                 where s.tsv @@ t.tq) >= %(min_mass)s::float8)
     order by s.created_at desc, s.message_id desc
     limit %(pool)s
),
bm25 as materialized (<<BM25_SCORES>>),
lexical_list as materialized (
    select x.message_id, x.conversation_id, x.created_at,
           case when %(bm25)s then coalesce(b.bm25, 0) else x.cd end as lexical
      from matches x left join bm25 b on b.message_id = x.message_id
)
""", BM25_SCORES=ranking.bm25_scores("matches"))
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
spoke as materialized (
    select distinct r.conversation_id from messages r
     where r.speaker_actor_id = any(%(requester_ids)s::bigint[])
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
             when r.id = any(%(in_context)s::bigint[]) then 'already_in_context'
             when not exists (select 1 from message_source_evidence e where e.message_id = r.id) then 'no_evidence'
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
""", DESTINATION_ALLOWS=DESTINATION_ALLOWS, RRF_OF_POOL=hybrid.rrf_sql("l.lexical_rank_all", "w.vector_pos"),
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

# Canonical text is read from messages only after authorization, for the ids chosen above.
HYDRATE = """
select m.id, m.conversation_id, m.role::text as role, left(m.body, %(max_chars)s) as text,
       length(m.body) > %(max_chars)s as truncated, m.created_at,
       c.title, cn.namespace as connector, c.audience_kind::text as audience_kind,
       a.namespace as speaker_namespace, a.external_id as speaker_external_id,
       a.display_name as speaker_display_name
  from messages m
  join conversations c on c.id = m.conversation_id
  join connectors cn on cn.id = c.connector_id
  left join actors a on a.id = m.speaker_actor_id
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
# The reply's provenance as a whole: the pre-delivery recheck asks exactly this.
JOINT_LINEAGE = """
select backscroll_lineage_allows(%(ids)s::bigint[], %(agent)s, %(d_conversation)s::bigint,
                                 %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[]) as ok
"""
SET_PLAN_CACHE_MODE = """
select current_setting('plan_cache_mode') as was, set_config('plan_cache_mode', %(mode)s, true)
"""
EXCLUSION_KEYS = ("already_in_context", "no_evidence", "audience", "lineage", "below_cutoff")


@dataclass(frozen=True)
class Turn:
    id: int
    workspace_id: int
    agent_id: int
    conversation_id: int
    requester_actor_id: int | None
    reply_message_id: int | None
    audience_kind: str
    audience_namespace: str
    audience_readers: list[str]
    ts_config: str

    @property
    def destination(self) -> dict:
        return {"kind": self.audience_kind, "namespace": self.audience_namespace, "readers": list(self.audience_readers)}

    def destination_params(self) -> dict:
        return {"d_conversation": self.conversation_id, "d_kind": self.audience_kind,
                "d_namespace": self.audience_namespace, "d_readers": list(self.audience_readers)}


@contextmanager
def generic_plans(conn: psycopg.Connection) -> Iterator[None]:
    """Prepared statements run here on their generic plan. For NEIGHBOURS: planning it (the
    inlined audience predicate, twice) costs about twice what running it does, its best plan is
    the same for any hits (an index walk per hit), yet PostgreSQL's estimate for an array of
    unknown size keeps it on custom plans. Set for the current transaction (the request's), then
    restored; after an error the transaction's end discards it."""
    was = conn.execute(SET_PLAN_CACHE_MODE, {"mode": "force_generic_plan"}, prepare=True).fetchone()["was"]
    yield
    conn.execute(SET_PLAN_CACHE_MODE, {"mode": was}, prepare=True)


def _jointly_allowed(conn: psycopg.Connection, ids: list[int], params: dict) -> bool:
    return bool(conn.execute(JOINT_LINEAGE, {**params, "ids": ids}, prepare=True).fetchone()["ok"])


def evidence_ids(conn: psycopg.Connection, turn_id: int) -> list[int]:
    """Every message the turn has seen (answering, loaded, searched): its context and its provenance."""
    return conn.execute(SELECT_EVIDENCE_IDS, {"turn": turn_id}, prepare=True).fetchone()["ids"]


def load_turn(conn: psycopg.Connection, workspace_id: int, turn_id: int) -> Turn:
    row = conn.execute(SELECT_TURN, {"turn": turn_id, "ws": workspace_id}, prepare=True).fetchone()
    if row is None:
        raise NotFound(f"no turn {turn_id}")
    return Turn(**row)


def clamp_limit(limit: int | None) -> int:
    return LIMIT_DEFAULT if limit is None else max(1, min(int(limit), LIMIT_MAX))


def _linked(conn: psycopg.Connection, agent_id: int, actor_id: int | None) -> list[int]:
    if actor_id is None:
        return []
    rows = conn.execute(RESOLVE_LINKED, {"actor": actor_id, "agent": agent_id}, prepare=True).fetchall()
    return [r["id"] for r in rows]


def _speakers(conn: psycopg.Connection, turn: Turn, filters: Filters, requester_ids: list[int]) -> list[int] | None:
    """The speaker set a filter resolves to: None for no filter, [] for an unresolvable one."""
    sets: list[set[int]] = []
    if filters.actor is not None:
        rows = conn.execute(RESOLVE_ACTOR, {"ws": turn.workspace_id, "agent": turn.agent_id,
                                            "external_id": filters.actor.external_id,
                                            "namespace": filters.actor.namespace}).fetchall()
        sets.append({r["id"] for r in rows})
    if filters.requester_only:
        sets.append(set(requester_ids))
    if not sets:
        return None
    return sorted(set.intersection(*sets))


def _hit(row: dict, features: dict, neighbours: dict) -> dict:
    speaker = None
    if row["speaker_external_id"] is not None:
        speaker = {"namespace": row["speaker_namespace"], "external_id": row["speaker_external_id"],
                   "display_name": row["speaker_display_name"]}
    return {
        "message_id": row["id"],
        "text": row["text"],
        "truncated": row["truncated"],
        "role": row["role"],
        "speaker": speaker,
        "room": {"conversation_id": row["conversation_id"], "title": row["title"], "connector": row["connector"],
                 "audience": row["audience_kind"]},
        "time": row["created_at"].isoformat(),
        **({"score": features["score"], "features": features["features"]} if features else {}),
        **({"neighbours": neighbours} if neighbours is not None else {}),
    }


def vector_shape(turn: Turn, docs: int, settings: Settings | None) -> str:
    """Which statement produces the vector list: the exact scan of a small perspective (at most
    `hybrid_exact_max_rows` documents), the exact scan of the agent's public messages for a
    large one into a public destination, else the HNSW walk."""
    if hybrid.exact_scope(settings, docs):
        return "exact"
    return "public" if turn.audience_kind == "public" else "hnsw"


def _min_match(stats: ranking.QueryStats, terms: list[str]) -> dict:
    """A fused search's lexical list admits only messages matching half the query's (weighted)
    words, when it has MIN_MATCH_TERMS of them: the parameters that say so (none for shorter
    queries). A term no message contains still counts (a query whose words mostly occur nowhere
    is a paraphrase: its lexical list should be strict), but as a term of one message, not as
    more than any term that does occur."""
    if len(terms) < MIN_MATCH_TERMS:
        return {}
    weights = [(ranking.idf(stats.docs, max(df, 1)) if MIN_MATCH_WEIGHTED else 1.0) if has else 0.0
               for df, has in zip(stats.term_df, stats.term_has_lexemes)]
    return {"term_weights": weights, "min_mass": MIN_MATCH_SHARE * sum(weights) - 1e-9}


def _vector_candidates(conn: psycopg.Connection, qv: hybrid.QueryVector, params: dict,
                       settings: Settings | None, shape: str) -> list[int]:
    """The vector list, nearest first, under the same predicates as the lexical list."""
    rows = _vector_list(conn, qv, params, settings, shape)
    if shape == "public" and rows and rows[0]["too_many"]:
        rows = _vector_list(conn, qv, params, settings, "hnsw")
    return [r["id"] for r in rows]


def _vector_list(conn: psycopg.Connection, qv: hybrid.QueryVector, params: dict,
                 settings: Settings | None, shape: str) -> list[dict]:
    measure = distance if shape == "hnsw" else exact_distance
    statement = sql.SQL(VECTOR_SHAPES[shape]).format(distance=measure(qv.model.dimensions))
    public_cap = setting(settings, "hybrid_public_max_rows")
    with conn.transaction():
        if shape == "hnsw":
            use_iterative_scan(conn, settings, ef_search=max(ef_search_for(settings), hybrid.VECTOR_K))
        return conn.execute(statement, {**params, "model": qv.model.model, "query_vector": literal(qv.vector),
                                        "vector_k": hybrid.VECTOR_K, "public_cap": public_cap}).fetchall()


def search_history(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None,
                   request: SearchRequest, digest: bytes | None, *, settings: Settings | None = None,
                   gateway: Gateway | None = None, rank: ranking.Ranking | None = None,
                   side: hybrid.SideConnection | None = None) -> dict:
    """Run one search for a turn; record its results as evidence and write its audit row.

    Hybrid when `settings` name an embeddings model (see `hybrid` for how it degrades); lexical
    without settings or without a model. The lexical ranking is `rank`, else the settings'. With
    `side` (where a second connection may come from), the vector list is produced there while
    this connection reads the lexical list."""
    rank = rank or ranking.Ranking.from_settings(settings)
    turn = load_turn(conn, workspace_id, request.turn_id)
    if agent_ids is not None and turn.agent_id not in agent_ids:
        raise NotFound(f"no turn {request.turn_id}")
    requested = clamp_limit(request.limit)
    in_context = evidence_ids(conn, turn.id)
    used = len(in_context)
    remaining = EVIDENCE_CAP - used
    filters_json = request.filters.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    qv = hybrid.QueryVector(hybrid.LEXICAL)

    def audit(status: str, effective: int, selected: list[dict], exclusions: dict) -> None:
        conn.execute(INSERT_AUDIT, {
            "turn": turn.id, "digest": digest, "filters": Jsonb(filters_json),
            "destination": Jsonb(turn.destination), "requested": requested, "effective": effective,
            "status": status, "mode": qv.mode, "degradation": hybrid.category(qv),
            "selected": Jsonb(selected), "exclusions": Jsonb(exclusions),
        }, prepare=True)

    if remaining <= 0:
        audit("search_budget_exhausted", 0, [], {k: 0 for k in EXCLUSION_KEYS})
        return {"message_ids": [], "hits": [], "status": "search_budget_exhausted",
                "budget": {"evidence": used, "cap": EVIDENCE_CAP}, "mode": qv.mode, "degradation": None,
                "ranking": rank.method}

    # The one query embedding (a gateway call attributed to the searcher's workspace), or why
    # not: under way while the identities, statistics and recent window are read.
    pending = hybrid.start_embedding(conn, settings, request.query, gateway=gateway)

    effective = max(1, min(requested, remaining // MESSAGES_PER_HIT))
    requester_ids = _linked(conn, turn.agent_id, turn.requester_actor_id)
    speakers = _speakers(conn, turn, request.filters, requester_ids)
    terms = split_terms(request.query)
    stats = ranking.query_stats(conn, [turn.agent_id], turn.ts_config, terms)
    chosen = ranking.generating_terms(stats.term_df, rank.pool)
    generating = [terms[i] for i in chosen]
    matches = sum(stats.term_df[i] for i in chosen)
    since = ranking.recent_window_start(conn, turn.workspace_id, [turn.agent_id], matches, stats.docs, rank.pool)
    f = request.filters
    params = {
        "cfg": turn.ts_config, "terms": terms, "agent": turn.agent_id, "ws": turn.workspace_id,
        "dest": turn.conversation_id, "in_context": in_context, "requester_ids": requester_ids,
        "only_speakers": speakers, "f_conversation": f.conversation_id, "f_connector": f.connector,
        "f_since": f.since, "f_until": f.until, "half_life": RECENCY_HALF_LIFE_DAYS,
        "w_recency": WEIGHTS["recency"], "w_requester": WEIGHTS["requester_spoke"],
        "w_same": WEIGHTS["same_conversation"], "limit": effective, "ceiling": COUNTING_CEILING,
        "rrf_k": hybrid.RRF_K, "vector_ids": [], "fused": False, "min_mass": 0.0,
        "term_weights": [0.0] * len(terms),
        "gen_terms": generating, "pool": rank.pool or None, "since": since,
        "walk": ranking.walk_window(since, matches, stats.docs, rank.pool), **stats.params(rank),
        **turn.destination_params(),
    }
    shape = vector_shape(turn, stats.docs, settings)
    vector_params = dict(params)  # a copy: the side thread reads it while this one updates `params`

    def vector_list(c: psycopg.Connection, usable: hybrid.QueryVector) -> list[int]:
        return _vector_candidates(c, usable, vector_params, settings, shape)

    strict = _min_match(stats, terms)

    def lexical_list() -> list[dict]:
        # Read while the vector list is produced beside it: strict, as a fused search reads it,
        # unless the fusion then does not happen.
        params.update(strict)
        return conn.execute(LEXICAL_LIST, params).fetchall() if terms else []

    lists = hybrid.gather(conn, pending, side, turn.workspace_id, [turn.agent_id],
                          lexical=lexical_list, vector_list=vector_list)
    qv, statement = lists.qv, SEARCH
    params.update(vector_ids=lists.vectors or [], fused=bool(lists.vectors))
    if lists.lexical is not None:
        lexical = lists.lexical
        if not params["fused"] and params["min_mass"] > 0:
            params.update(min_mass=0.0, term_weights=[0.0] * len(terms))
            lexical = conn.execute(LEXICAL_LIST, params).fetchall()
        statement = SEARCH_LISTED
        params.update(lexical_ids=[r["message_id"] for r in lexical],
                      lexical_conversations=[r["conversation_id"] for r in lexical],
                      lexical_created=[r["created_at"] for r in lexical],
                      lexical_scores=[r["lexical"] for r in lexical])
    elif params["fused"]:
        params.update(strict)
    rows = conn.execute(statement, params).fetchall() if terms or params["vector_ids"] else []
    hits = sorted((r for r in rows if r["row_kind"] == "hit"), key=lambda r: r["rank"])
    counts = {k: 0 for k in EXCLUSION_KEYS}
    for r in rows:
        if r["row_kind"] == "count" and r["outcome"] in counts:
            counts[r["outcome"]] = r["n"]

    hit_ids = [h["id"] for h in hits]
    neighbour_rows = []
    if hit_ids:
        with generic_plans(conn):
            neighbour_rows = conn.execute(NEIGHBOURS_SQL, {**params, "hits": hit_ids, "n": NEIGHBOURS},
                                          prepare=True).fetchall()
    around: dict[int, dict[str, list[int]]] = {h: {"before": [], "after": []} for h in hit_ids}
    for r in neighbour_rows:
        around[r["hit"]][r["side"]].append(r["id"])

    # Admit hits in rank order while the turn's evidence stays under the cap. Each hit's lineage
    # was allowed on its own; the reply's recheck walks the whole evidence set together, and a
    # walk past the node cap denies all of it. So a hit is admitted only if the turn's evidence
    # stays jointly deliverable with it (when it was deliverable to begin with).
    admitted: list[int] = []
    evidence: list[int] = []
    seen = set(in_context)
    status = "ok"
    lineage_params = {"agent": turn.agent_id, **turn.destination_params()}
    guard_joint = bool(hit_ids) and _jointly_allowed(conn, list(in_context), lineage_params)
    if guard_joint:
        # A lineage verdict can only turn from allowed to denied as roots are added (a larger set
        # walks a superset of nodes), so when everything this search could add is deliverable
        # together with the turn's evidence, so is every subset of it: one walk instead of one
        # per hit.
        offered = [m for h in hit_ids for m in (*around[h]["before"], h, *around[h]["after"])]
        guard_joint = not _jointly_allowed(conn, list(dict.fromkeys([*in_context, *offered])), lineage_params)
    jointly_denied = 0
    for h in hit_ids:
        group = [m for m in [*around[h]["before"], h, *around[h]["after"]] if m not in seen and m not in evidence]
        if used + len(evidence) + len(group) > EVIDENCE_CAP:
            status = "search_budget_exhausted"
            break
        if guard_joint and not _jointly_allowed(conn, [*in_context, *evidence, *group], lineage_params):
            counts["lineage"] += 1
            jointly_denied += 1
            continue
        admitted.append(h)
        evidence.extend(group)

    texts = {r["id"]: r for r in conn.execute(HYDRATE, {"ids": evidence, "max_chars": TEXT_MAX_CHARS}, prepare=True).fetchall()}
    conn.execute(ADD_EVIDENCE, {"turn": turn.id, "ids": evidence, "via": "search"}, prepare=True)

    by_id = {h["id"]: h for h in hits}
    selected_audit = []
    result_hits = []
    for h in admitted:
        row = by_id[h]
        inspectable = {"lexical": row["lexical"], "recency": row["recency"],
                       "requester_spoke": row["requester_spoke"], "same_conversation": row["same_conversation"]}
        if qv.usable:
            # Fused: the score is the RRF score; each list's rank is shown (null: not in that list).
            inspectable.update(lexical_rank=row["lexical_rank"], vector_rank=row["vector_rank"], rrf=row["rrf"])
        features = {"score": row["rrf"] if qv.usable else row["score"], "features": inspectable}
        selected_audit.append({"message_id": h, **features})
        neighbours = {side: [_hit(texts[m], {}, None) for m in around[h][side] if m in texts]
                      for side in ("before", "after")}
        result_hits.append(_hit(texts[h], features, neighbours))
    # Hits cut by the budget were eligible and ranked but not shown.
    counts["below_cutoff"] += len(hit_ids) - len(admitted) - jointly_denied
    audit(status, effective, selected_audit, counts)
    return {
        "message_ids": evidence,
        "hits": result_hits,
        "status": status,
        "budget": {"evidence": used + len(evidence), "cap": EVIDENCE_CAP},
        "mode": qv.mode,
        "degradation": qv.degradation,
        "ranking": rank.method,
    }
