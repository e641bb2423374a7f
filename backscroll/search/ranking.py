"""Lexical ranking for both searches: BM25 over the sidecar's documents (the default) or
PostgreSQL's ts_rank_cd, and the bounded candidate pool.

BM25 (Robertson/Spärck Jones, Lucene's idf) scores a message by the query's lexemes:

    score = sum over lexemes t of  idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

tf counts the lexeme's positions in the body, plus `speaker_weight` for each in the speaker's
name (the document's weight class A); len is the body's length in tokens; N, avglen and df(t)
are kept per agent (migration 0009) and per agent and audience (migration 0027), exact at every
moment (folded counts plus pending deltas), and summed over what the caller may see, so that no
number and no order moves with a row outside it: for session search the reader's agents; for
search_history the turn's agent's documents in the audiences its destination may receive
(`audiences`). A word in most messages ("the", "de", "der") gets an idf near zero in any
language, so no stopword list is needed.

Candidates are bounded before anything is scored: the query's terms are taken rarest first
(by document frequency) while their matches fit the pool, and only messages matching those
terms are candidates; the frequent terms still add to the score of every candidate. When even
the rarest term matches more than the pool, the most recent of its matches are taken. All of
this runs inside the statements that already carry the eligibility predicates: bounding
changes what is ranked, never what may be seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import psycopg

from .. import language
from ..config import LanguageSettings, SearchSettings
from .sqltext import compose

METHODS = ("bm25", "ts_rank_cd")
# The configuration whose documents add each message's own stems (migration 0022).
MULTILINGUAL = "multilingual"
# Fused with a vector list, a query of this many terms or more asks its lexical matches to hold a
# share of its idf (hybrid_min_match_share): both searches' rule.
MIN_MATCH_TERMS = 3


# Each setting's declared default: the settings are where each is declared, once.
_DEFAULTS = SearchSettings.model_construct()


@dataclass(frozen=True)
class Ranking:
    method: str = _DEFAULTS.search_ranking
    k1: float = _DEFAULTS.bm25_k1
    b: float = _DEFAULTS.bm25_b
    speaker_weight: float = _DEFAULTS.search_speaker_weight
    pool: int = _DEFAULTS.search_candidate_pool   # candidates scored at most; 0: every match
    coverage_weight: float = _DEFAULTS.search_session_coverage_weight  # session search only

    @classmethod
    def from_settings(cls, search: SearchSettings) -> Ranking:
        return cls(method=search.search_ranking, k1=search.bm25_k1, b=search.bm25_b,
                   speaker_weight=search.search_speaker_weight, pool=search.search_candidate_pool,
                   coverage_weight=search.search_session_coverage_weight)

    @property
    def rank_weights(self) -> list[float]:
        """ts_rank_cd's weights {D, C, B, A}: the body and its stems (C) at the body's default
        (0.1), the name scaled alike."""
        return [0.1, 0.1, 0.4, 0.1 * self.speaker_weight]


# Where a search's statistics are read: per agent, or per agent and audience (the receivable
# audience keys of a search_history destination, `%(audiences)s`). The pending deltas are one
# stream for both (each names its agent and audience); folded counts are kept in both shapes.
SCOPES = {
    "agents": {"TERM_STATS": "search_term_stats", "DOC_STATS": "search_doc_stats",
               "IN_SCOPE": "agent_id = any(%(agents)s::bigint[])"},
    "audiences": {"TERM_STATS": "search_audience_term_stats", "DOC_STATS": "search_audience_doc_stats",
                  "IN_SCOPE": "agent_id = any(%(agents)s::bigint[]) and audience_id = any(%(audiences)s::bigint[])"},
}


# The documents of `agents` (in the scope) and their total length, and the documents of
# `scope_agents` among them (folded counts plus pending deltas): exact, and a read of a few rows
# however large the scope. Also how a search sizes its scope (an exact vector list for a small
# one, the HNSW walk for a large one).
def scope_docs_sql(scope: str) -> str:
    return compose("""
select coalesce(sum(x.docs), 0)::bigint as docs, coalesce(sum(x.total_len), 0)::bigint as total_len,
       coalesce(sum(x.docs) filter (where x.agent_id = any(%(scope_agents)s::bigint[])), 0)::bigint as scope_docs
  from (select agent_id, docs, total_len from <<DOC_STATS>> where <<IN_SCOPE>>
        union all
        select agent_id, docs, total_len from search_doc_deltas where <<IN_SCOPE>>) x
""", DOC_STATS=SCOPES[scope]["DOC_STATS"], IN_SCOPE=SCOPES[scope]["IN_SCOPE"])


SCOPE_DOCS = scope_docs_sql("agents")

# Everything BM25 and the candidate bound need, in one round trip: which of the query's terms
# count (under `multilingual`, a sentence in a detected language leaves out that language's
# function words: `lang`, see query_language); each counted term's lexemes in the workspace's
# configuration (a quoted phrase has several; a word the configuration drops as a stopword has
# none) and, for a word read through stemmers too (backscroll_term_configs), its alternative
# forms; each lexeme's document frequency over the agents BM25 counts (`agents`, and under the
# `audiences` scope only their documents in those audiences) and over those the candidates are
# read from (`scope_agents`, a subset; folded counts plus pending deltas); and both sets'
# documents, with the BM25 agents' total length.
def query_stats_sql(scope: str) -> str:
    return compose("""
with typed as (
    select t.term, t.i from unnest(%(terms)s::text[]) with ordinality as t(term, i)
),
dropped as (
    select coalesce(array_agg(x.i), '{}') as ids
      from typed x
     where %(lang)s::regconfig is not null
       and <<FUNCTION_WORD>>
),
counted as (
    select x.term, x.i from typed x, dropped d
     where not (x.i = any(d.ids)) or cardinality(d.ids) = (select count(*) from typed)
),
terms as (
    select t.i, cardinality(c.configs) > 1 as alternatives,
           array(select distinct u.lexeme from unnest(c.configs) as r(cfg), unnest(to_tsvector(r.cfg, t.term)) u
                  order by 1) as lexemes
      from counted t
      cross join lateral (select backscroll_term_configs(%(cfg)s::regconfig, t.term, %(stems)s::regconfig[])
                                 as configs) c
),
df as (
    select l.lexeme, s.df + d.df as df, s.scope_df + d.scope_df as scope_df
      from (select distinct x.lexeme from terms, unnest(terms.lexemes) as x(lexeme)) l
      cross join lateral (
            select coalesce(sum(t.df), 0) as df,
                   coalesce(sum(t.df) filter (where t.agent_id = any(%(scope_agents)s::bigint[])), 0) as scope_df
              from <<TERM_STATS>> t
             where <<IN_SCOPE>> and t.lexeme = l.lexeme) s
      cross join lateral (
            select coalesce(sum(t.delta), 0) as df,
                   coalesce(sum(t.delta) filter (where t.agent_id = any(%(scope_agents)s::bigint[])), 0) as scope_df
              from search_term_deltas t
             where <<IN_SCOPE>> and t.lexeme = l.lexeme) d
),
docs as (<<SCOPE_DOCS>>)
select d.docs, d.total_len, d.scope_docs,
       (select coalesce(json_agg(c.i - 1 order by c.i), '[]') from counted c) as counted,
       (select coalesce(json_agg(t.lexemes order by t.i), '[]') from terms t) as per_term,
       (select coalesce(json_agg(t.alternatives order by t.i), '[]') from terms t) as alternatives,
       (select coalesce(json_object_agg(df.lexeme, json_build_array(df.df, df.scope_df)), '{}') from df) as df
  from docs d
""", FUNCTION_WORD="""x.term !~ '\\s' and length(to_tsvector(%(cfg)s::regconfig, x.term)) > 0
       and length(to_tsvector(%(lang)s::regconfig, x.term)) = 0""", SCOPE_DOCS=scope_docs_sql(scope).strip(),
       TERM_STATS=SCOPES[scope]["TERM_STATS"], IN_SCOPE=SCOPES[scope]["IN_SCOPE"])


QUERY_STATS = {scope: query_stats_sql(scope) for scope in SCOPES}


def bm25_scores(source: str) -> str:
    """The select that scores by BM25 the candidates in CTE `source` (message_id, tsv, doc_len),
    for a statement's `bm25` CTE."""
    # Each row's document is cut down to the query's lexemes first (ts_delete twice, in C), so
    # the per-row unnest costs the few lexemes that match, not the whole document. tf counts a
    # lexeme's positions in the body (weight D) and its stems (weight C, a lexeme apart from the
    # words: migration 0022) as 1 and its positions in the speaker's name (weight A) as
    # speaker_weight. A slot's forms ("researching", its stem "research") are alternatives: the
    # slot scores by its best form, so a word is not counted twice for being held twice.
    return compose("""
select x.message_id,
       coalesce((select sum(s.best)
                   from (select max(q.idf * u.tf * (%(k1)s + 1)
                                    / (u.tf + %(k1)s * (1 - %(b)s + %(b)s * x.doc_len / %(avgdl)s))) as best
                           from (select v.lexeme,
                                        cardinality(v.weights)
                                        - (1 - %(speaker_weight)s) * cardinality(array_positions(v.weights, 'A')) as tf
                                   from unnest(ts_delete(x.tsv, tsvector_to_array(ts_delete(x.tsv, %(lexemes)s::text[])))) v) u
                           join unnest(%(lexemes)s::text[], %(idf)s::float8[], %(slots)s::int[]) as q(lexeme, idf, slot)
                             on q.lexeme = u.lexeme
                          group by q.slot) s), 0)::float8 as bm25
  from <<BM25_SOURCE>> x
 where %(bm25)s
""", BM25_SOURCE=source).strip()


# How far back the window of recent messages reaches, for a scope: the created_at of its k-th most
# recent document, by the recency indexes of migration 0009 (index-only walks of k entries for
# one agent; of k / the scope's share of the workspace for several).
AGENT_SINCE = """
select s.created_at from message_search s
 where s.agent_id = %(agent)s::bigint
 order by s.created_at desc
offset %(k)s limit 1
"""
# The same among the agent's documents in the receivable audiences (the audience rides in the
# recency index, migration 0027: no heap read for the documents it skips).
AUDIENCE_SINCE = """
select s.created_at from message_search s
 where s.agent_id = %(agent)s::bigint and s.audience_id = any(%(audiences)s::bigint[])
 order by s.created_at desc
offset %(k)s limit 1
"""
SCOPE_SINCE = """
select s.created_at from message_search s
 where s.workspace_id = %(ws)s and s.agent_id = any(%(agents)s::bigint[])
 order by s.created_at desc
offset %(k)s limit 1
"""
WINDOW_SLACK = 2.0      # the window holds about this many times the pool's worth of matches
WINDOW_WORTH_IT = 0.5   # a window over more than this share of the scope saves too little


def recent_window(matches: int, docs: int, pool: int) -> int | None:
    """How many of the scope's most recent documents to read candidates from, when `matches`
    (of `docs`) exceed the pool: about WINDOW_SLACK pools' worth of matches, if matches are
    spread evenly in time. None: read every match."""
    if pool <= 0 or matches <= pool or docs <= 0:
        return None
    share = WINDOW_SLACK * pool / matches
    if share >= WINDOW_WORTH_IT:
        return None
    return math.ceil(docs * share)


# Inside a recent window, the candidates are found one of two ways. Through the word index: a
# bitmap of the rarest terms' matches ANDed with the window's (about `matches` + `window` index
# entries, then the heap rows of the matches). Or, when matches are dense, by walking the scope's
# recency index from the newest document and testing each until the pool is full: about
# pool / (matches / docs) rows. The walk wins for a word in a large share of the documents (at
# 300k messages, a word in a quarter of them: 3.3 ms instead of 7-8 ms) and loses for a sparse
# one, so it is taken only when that read stays under WALK_MAX_ROWS.
WALK_MAX_ROWS = 3000


def walk_window(since: datetime | None, matches: int, docs: int, pool: int) -> bool:
    """Whether a windowed candidate read walks the recency index (see WALK_MAX_ROWS) rather than
    ANDing the word index with the window."""
    if since is None or pool <= 0 or matches <= 0:
        return False
    return pool * docs / matches <= WALK_MAX_ROWS


def recent_window_start(conn: psycopg.Connection, workspace_id: int, agents: list[int], matches: int,
                        docs: int, pool: int, audiences: list[int] | None = None) -> datetime | None:
    """Where the window of the scope's recent messages starts when `matches` (of `docs`) exceed
    the pool; None when every match is read (see recent_window). With `audiences` (one agent's):
    the window of its documents in those audiences."""
    window = recent_window(matches, docs, pool)
    if window is None or not agents:
        return None
    if audiences is not None:
        (agent,) = agents
        row = conn.execute(AUDIENCE_SINCE, {"agent": agent, "audiences": audiences, "k": window}).fetchone()
    elif len(agents) == 1:
        row = conn.execute(AGENT_SINCE, {"agent": agents[0], "k": window}).fetchone()
    else:
        row = conn.execute(SCOPE_SINCE, {"ws": workspace_id, "agents": agents, "k": window}).fetchone()
    return row["created_at"] if row else None


def idf(docs: int, df: int) -> float:
    """Lucene's BM25 idf: positive for every df, near zero for a lexeme in every document."""
    df = max(0, min(df, docs))
    return math.log(1 + (docs - df + 0.5) / (df + 0.5))


def generating_terms(term_df: list[int], pool: int) -> list[int]:
    """Indexes of the terms that generate candidates: rarest first, while their matches fit
    `pool` (always at least one). A pool of 0 keeps every term (exhaustive)."""
    order = sorted(range(len(term_df)), key=lambda i: (term_df[i], i))
    if pool <= 0:
        return sorted(order)
    chosen: list[int] = []
    total = 0
    for i in order:
        if chosen and total + term_df[i] > pool:
            break
        chosen.append(i)
        total += term_df[i]
    return sorted(chosen)


@dataclass(frozen=True)
class QueryStats:
    lexemes: list[str]          # the query's lexemes, by slot (a lexeme of two slots is listed twice)
    idf: list[float]            # beside `lexemes`
    avgdl: float
    docs: int
    term_df: list[int]          # per term: how many documents it matches at least (0 for no lexeme)
    term_has_lexemes: list[bool]
    df: tuple[int, ...] = ()    # beside `lexemes`
    slots: tuple[int, ...] = ()  # beside `lexemes`: which slot each belongs to
    stems: tuple[str, ...] = ()  # the configurations a word was read through (backscroll_term_configs)
    terms: tuple[str, ...] = ()  # the query's terms that count (function words left out), beside term_df
    scope_term_df: tuple[int, ...] = ()  # beside term_df: over the agents the candidates are read from
    scope_docs: int = 0          # the documents of those agents

    def slot_weights(self) -> list[float]:
        """Each slot's idf (at its best form's), a lexeme no document holds counted as one
        document would (not as more than any lexeme that occurs): what match_floor weighs."""
        best: dict[int, float] = {}
        for slot, n in zip(self.slots, self.df):
            best[slot] = max(best.get(slot, 0.0), idf(self.docs, max(n, 1)))
        return list(best.values())

    def params(self, ranking: Ranking) -> dict:
        return {"bm25": ranking.method == "bm25", "k1": ranking.k1, "b": ranking.b,
                "speaker_weight": ranking.speaker_weight, "rank_weights": ranking.rank_weights,
                "lexemes": self.lexemes, "idf": self.idf, "slots": list(self.slots), "avgdl": self.avgdl,
                "stems": list(self.stems)}


def match_floor(weights: list[float], share: float) -> float:
    """How much of a query's (idf) weight a fused lexical match must hold, both searches' rule:
    `share` of the whole, and never less than its median term weighs, so that a match on one of
    the query's commoner words alone does not enter the fused list, while one on a rarer word does
    (a 7-word question's answer often holds just its one rare word)."""
    present = sorted(w for w in weights if w > 0)
    if not present or share <= 0:
        return 0.0  # 0: every lexical match is fused
    return max(share * sum(present), present[(len(present) - 1) // 2]) - 1e-9


def scope_docs(conn: psycopg.Connection, agents: list[int]) -> int:
    """How many documents (indexed messages) these agents hold."""
    return int(conn.execute(SCOPE_DOCS, {"agents": agents, "scope_agents": agents}).fetchone()["docs"])


def slots_of(per_term: list[list[str]], alternatives: list[bool]) -> list[frozenset[str]]:
    """What BM25 sums over: a word read through stemmers is one slot of alternative forms; any
    other term gives a slot per lexeme (each word of a phrase counts). The same slot twice is one."""
    slots: list[frozenset[str]] = []
    for lexemes, alternative in zip(per_term, alternatives):
        for slot in ([frozenset(lexemes)] if alternative else [frozenset([lx]) for lx in lexemes]):
            if slot and slot not in slots:
                slots.append(slot)
    return slots


# The words of a query that are function words of its own language ("when", "did", "the"; "quand",
# "le"), when the query reads as a sentence in one: left out under `multilingual`, as a pinned
# language's configuration leaves them out (QUERY_STATS's `dropped`; all of them stay when every
# one is a function word). Quoted phrases and words no stemmer drops stay.
def query_language(conn: psycopg.Connection, cfg: str, query: str, terms: list[str],
                   language_settings: LanguageSettings) -> str | None:
    """The configuration of the language whose function words `terms` leave out: under
    `multilingual`, for a query of two terms or more that reads as one language; else None."""
    if cfg != MULTILINGUAL or len(terms) < 2:
        return None
    return language.detector(conn, language_settings).query_language(query)


def query_stats(conn: psycopg.Connection, agents: list[int], cfg: str, terms: list[str],
                language_settings: LanguageSettings, *, query: str | None = None,
                scope_agents: list[int] | None = None, audiences: list[int] | None = None) -> QueryStats:
    """The statistics BM25 and the candidate bound need, for `terms` over `agents`, in one
    statement; under `multilingual`, a word is also read through the stemmers of the detector's
    languages and, given the `query` they came from, the function words of its language are left
    out (QueryStats.terms: the terms that count). `scope_agents` (a subset of `agents`, by
    default all of them): where the candidates are read, whose frequencies bound them.
    `audiences`: only the documents of those audience keys count (search_history's receivable
    audiences), so nothing its destination may not receive moves a number or the order."""
    stems = language.stemmers(conn, language_settings) if cfg == MULTILINGUAL else []
    lang = query_language(conn, cfg, query, terms, language_settings) if query is not None else None
    scope = agents if scope_agents is None else scope_agents
    statement = QUERY_STATS["agents" if audiences is None else "audiences"]
    # Not prepared: with a workspace's many agents its generic plan is a 2 s scan (see db.py).
    stats = conn.execute(statement, {"cfg": cfg, "terms": terms, "agents": agents, "scope_agents": scope,
                                     "audiences": audiences, "stems": list(stems), "lang": lang}).fetchone()
    per_term: list[list[str]] = stats["per_term"]
    alternatives: list[bool] = stats["alternatives"]
    df = {lx: int(n) for lx, (n, _) in stats["df"].items()}
    scope_df = {lx: int(n) for lx, (_, n) in stats["df"].items()}
    docs = int(stats["docs"])
    avgdl = (stats["total_len"] / docs) if docs else 1.0
    pairs = [(lx, k) for k, slot in enumerate(slots_of(per_term, alternatives)) for lx in sorted(slot)]

    def term_df(frequency: dict[str, int]) -> list[int]:
        # A phrase matches no more documents than its rarest word; a word, at least as many as
        # its most common form (its stem is in every document holding an inflection).
        return [(max if alt else min)((frequency[lx] for lx in lxs), default=0)
                for lxs, alt in zip(per_term, alternatives)]

    return QueryStats(
        lexemes=[lx for lx, _ in pairs],
        idf=[idf(docs, df[lx]) for lx, _ in pairs],
        avgdl=max(avgdl, 1.0),
        docs=docs,
        term_df=term_df(df),
        term_has_lexemes=[bool(lxs) for lxs in per_term],
        df=tuple(df[lx] for lx, _ in pairs),
        slots=tuple(k for _, k in pairs),
        stems=tuple(stems),
        terms=tuple(terms[i] for i in stats["counted"]),
        scope_term_df=tuple(term_df(scope_df)),
        scope_docs=int(stats["scope_docs"]),
    )
