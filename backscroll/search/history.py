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

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Iterator

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from ..config import Settings
from ..embeddings.gateway import Gateway
from ..embeddings.vectors import distance, exact_distance, param, use_iterative_scan
from ..errors import NotFound
from ..vocabulary import Prose, Text
from . import hybrid, ranking
from .limits import clamp_limit
from .terms import split_terms
from .history_sql import (
    SELECT_TURN, SELECT_EVIDENCE_IDS, SEARCH_TURN, RESOLVE_ACTOR, VECTOR_SHAPES, SEARCH,
    LEXICAL_LIST, SEARCH_LISTED, NEIGHBOURS_SQL, INSERT_AUDIT, FINISH_SEARCH, HIDDEN_EXCLUSIONS,
    JOINT_LINEAGE, JOINT_LINEAGE_GUARD, SET_PLAN_CACHE_MODE,
)

LIMIT_DEFAULT = 8
LIMIT_MAX = 20
EVIDENCE_CAP = 400          # distinct messages a turn may hold as evidence
MESSAGES_PER_HIT = 5        # a hit and up to two neighbours on either side
NEIGHBOURS = 2
COUNTING_CEILING = 1000     # audit exclusion counts are exact over this many ranked matches
TEXT_MAX_CHARS = 4000
RECENCY_HALF_LIFE_DAYS = 30.0
WEIGHTS = {"recency": 0.25, "requester_spoke": 0.25, "same_conversation": 0.1}
# Fused with a vector list, a message enters the lexical list only when it matches at least
# `hybrid_min_match_share` of a query of ranking.MIN_MATCH_TERMS terms or more, each term weighted
# by its idf (so "what", "did" and "the" count for almost nothing, and a rare name for much). The words
# are OR'd (an agent's query is a sentence), and rank fusion sees ranks, not scores: with no rule
# at all, messages that share only "of" and "room" with "bathtub overflow soaked ceiling of room
# below" outrank the one the vector list found; with half the query's idf required, a 10-word
# question's lexical list starves (bench/RESULTS.md, issue 18). Lexical search alone keeps every
# match. MIN_MATCH_WEIGHTED = False counts terms alike (the rule before BM25; benchmarks only).
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
    query: Prose = Field(min_length=1, max_length=512)
    filters: Filters = Field(default_factory=Filters)
    limit: int | None = Field(default=None, description=f"Hits wanted; default {LIMIT_DEFAULT}, clamped to 1..{LIMIT_MAX}")


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

    def lineage_params(self) -> dict:
        """What a lineage verdict into the destination binds."""
        return {"agent": self.agent_id, **self.destination_params()}


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


@dataclass(frozen=True)
class SearchTurn:
    turn: Turn
    in_context: list[int]      # every message the turn has seen (evidence_ids)
    requester_ids: list[int]   # the requester and whoever is verifiably linked to them
    audiences: list[int]       # the audience keys its destination may receive (migration 0027)

    def params(self) -> dict:
        """The perspective every statement of the search binds: the agent, the destination, what
        the turn has seen and who the requester is."""
        t = self.turn
        return {"cfg": t.ts_config, "agent": t.agent_id, "ws": t.workspace_id, "dest": t.conversation_id,
                "in_context": self.in_context, "requester_ids": self.requester_ids, "audiences": self.audiences,
                **t.destination_params()}


def load_search_turn(conn: psycopg.Connection, workspace_id: int, turn_id: int) -> SearchTurn:
    """The turn a search is for and what it is searched with, in one statement."""
    row = conn.execute(SEARCH_TURN, {"turn": turn_id, "ws": workspace_id}, prepare=True).fetchone()
    if row is None:
        raise NotFound(f"no turn {turn_id}")
    in_context, requester_ids, audiences = row.pop("in_context"), row.pop("requester_ids"), row.pop("audiences")
    return SearchTurn(Turn(**row), in_context, requester_ids, audiences)


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


def _hit(row: dict, neighbours: dict | None) -> dict:
    """A hit or a neighbour as the answer shows it. No score and no ranking feature: BM25's
    statistics count the receivable audiences' documents, among them the few that the lineage
    walk or missing evidence then excludes, so a number would move with rows the caller cannot
    see; the order alone is shown, and the exact features are in the audit row."""
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
        "room": {"conversation_id": row["conversation_id"], "disclosed": row["room_disclosed"],
                 "title": row["title"], "connector": row["connector"], "audience": row["audience_kind"]},
        "time": row["created_at"].isoformat(),
        **({"neighbours": neighbours} if neighbours is not None else {}),
    }


def vector_shape(turn: Turn, docs: int, settings: Settings) -> str:
    """Which statement produces the vector list: the exact scan of a small perspective (at most
    `hybrid_exact_max_rows` documents), the exact scan of the agent's public messages for a
    large one into a public destination, else the HNSW walk."""
    if hybrid.exact_scope(settings.search, docs):
        return "exact"
    return "public" if turn.audience_kind == "public" else "hnsw"


def _min_match(stats: ranking.QueryStats, terms: list[str], share: float) -> MatchFloor:
    """A fused search's lexical list admits only messages matching `share` of the query's
    (weighted) words, when it has ranking.MIN_MATCH_TERMS of them: the floor that says so
    (no floor for shorter queries, or a share of 0). A term no message contains still counts (a query whose words mostly occur nowhere
    is a paraphrase: its lexical list should be strict), but as a term of one message, not as
    more than any term that does occur."""
    if len(terms) < ranking.MIN_MATCH_TERMS or share <= 0:
        return MatchFloor.none(terms)
    weights = [(ranking.idf(stats.docs, max(df, 1)) if MIN_MATCH_WEIGHTED else 1.0) if has else 0.0
               for df, has in zip(stats.term_df, stats.term_has_lexemes)]
    return MatchFloor(ranking.match_floor(weights, share), weights)


def _vector_candidates(conn: psycopg.Connection, qv: hybrid.QueryVector, params: dict,
                       settings: Settings, shape: str) -> list[int]:
    """The vector list, nearest first, under the same predicates as the lexical list."""
    rows = _vector_list(conn, qv, params, settings, shape)
    if shape == "public" and rows and rows[0]["too_many"]:
        rows = _vector_list(conn, qv, params, settings, "hnsw")
    return [r["id"] for r in rows]


def _vector_list(conn: psycopg.Connection, qv: hybrid.QueryVector, params: dict,
                 settings: Settings, shape: str) -> list[dict]:
    measure = distance if shape == "hnsw" else exact_distance
    statement = sql.SQL(VECTOR_SHAPES[shape]).format(distance=measure(qv.model.dimensions))
    public_cap = settings.search.hybrid_public_max_rows
    with conn.transaction():
        if shape == "hnsw":
            use_iterative_scan(conn, max(settings.search.hnsw_ef_search, hybrid.VECTOR_K),
                               settings.search.hnsw_max_scan_tuples)
        return conn.execute(statement, {**params, "model": qv.model.model, "query_vector": param(conn, qv.vector),
                                        "vector_k": hybrid.VECTOR_K, "public_cap": public_cap}).fetchall()


# ---------------------------------------------------------------------------------------------
# The steps of a search, in order (search_history, at the end, runs them), and what each hands on.
# A statement binds the groups of parameters it reads: the turn's perspective (SearchTurn.params),
# the filters (Narrowing), the query's terms (Terms), scoring and fusion (Scoring, Lists) and the
# match floor (MatchFloor); their names are the statements' own (history_sql).


def resolve_turn(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None,
                 turn_id: int) -> SearchTurn:
    """The turn, its destination and the perspective it searches with; a turn of an agent outside
    the caller's is not found."""
    bound = load_search_turn(conn, workspace_id, turn_id)
    if agent_ids is not None and bound.turn.agent_id not in agent_ids:
        raise NotFound(f"no turn {turn_id}")
    return bound


@dataclass(frozen=True)
class Budget:
    """The turn's evidence as this search finds it, and the hits it ranks."""
    requested: int  # hits asked for, clamped
    used: int       # messages the turn holds as evidence already
    effective: int  # hits ranked: as many as the rest of the budget holds, MESSAGES_PER_HIT each

    @property
    def exhausted(self) -> bool:
        return EVIDENCE_CAP - self.used <= 0


def decide_budget(bound: SearchTurn, request: SearchRequest) -> Budget:
    requested = clamp_limit(request.limit, LIMIT_DEFAULT, LIMIT_MAX)
    used = len(bound.in_context)
    remaining = EVIDENCE_CAP - used
    return Budget(requested, used, max(1, min(requested, remaining // MESSAGES_PER_HIT)) if remaining > 0 else 0)


@dataclass(frozen=True)
class Audit:
    """What the search's audit row says of the request, whatever the outcome."""
    turn: Turn
    digest: bytes | None
    filters: dict   # the filters as given (defaults left out)
    requested: int

    @classmethod
    def of(cls, bound: SearchTurn, request: SearchRequest, digest: bytes | None, budget: Budget) -> Audit:
        filters = request.filters.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        return cls(bound.turn, digest, filters, budget.requested)

    def row(self, status: str, effective: int, qv: hybrid.QueryVector, selected: list[dict],
            exclusions: dict) -> dict:
        return {
            "turn": self.turn.id, "digest": self.digest, "filters": Jsonb(self.filters),
            "destination": Jsonb(self.turn.destination), "requested": self.requested, "effective": effective,
            "status": status, "mode": qv.mode, "degradation": hybrid.category(qv),
            "selected": Jsonb(selected), "exclusions": Jsonb(exclusions),
        }


def budget_exhausted(conn: psycopg.Connection, audit: Audit, budget: Budget, rank: ranking.Ranking) -> dict:
    """A turn whose evidence is at the cap searches nothing: its audit row says so."""
    qv = hybrid.QueryVector(hybrid.LEXICAL)
    conn.execute(INSERT_AUDIT, audit.row("search_budget_exhausted", 0, qv, [], {k: 0 for k in EXCLUSION_KEYS}),
                 prepare=True)
    return {"message_ids": [], "hits": [], "status": "search_budget_exhausted",
            "budget": {"evidence": budget.used, "cap": EVIDENCE_CAP}, "mode": qv.mode, "degradation": None,
            "ranking": rank.method}


@dataclass(frozen=True)
class Narrowing:
    """The request's filters, as every candidate list binds them."""
    only_speakers: list[int] | None  # None: no speaker filter; []: one that resolves to nobody
    filters: Filters

    def params(self) -> dict:
        f = self.filters
        return {"only_speakers": self.only_speakers, "f_conversation": f.conversation_id,
                "f_connector": f.connector, "f_since": f.since, "f_until": f.until}


@dataclass(frozen=True)
class Terms:
    """The query as the lexical list reads it: the terms that count, those candidates are read
    from (the rarest), the recent window they are read in, and the ranking's statistics."""
    words: list[str]
    generating: list[str]
    since: datetime | None
    walk: bool
    stats: ranking.QueryStats
    rank: ranking.Ranking

    def params(self) -> dict:
        return {"terms": self.words, "gen_terms": self.generating, "pool": self.rank.pool or None,
                "since": self.since, "walk": self.walk, **self.stats.params(self.rank)}


@dataclass(frozen=True)
class MatchFloor:
    """How much of the query's (weighted) words a lexical match must hold (`_min_match`)."""
    min_mass: float
    term_weights: list[float]

    @classmethod
    def none(cls, terms: list[str]) -> MatchFloor:
        return cls(0.0, [0.0] * len(terms))

    def params(self) -> dict:
        return {"min_mass": self.min_mass, "term_weights": self.term_weights}


@dataclass(frozen=True)
class Scoring:
    """How the ranking statement scores, fuses and cuts."""
    limit: int
    lexical_weight: float  # the lexical list's weight in the fusion

    def params(self) -> dict:
        return {"half_life": RECENCY_HALF_LIFE_DAYS, "w_recency": WEIGHTS["recency"],
                "w_requester": WEIGHTS["requester_spoke"], "w_same": WEIGHTS["same_conversation"],
                "limit": self.limit, "ceiling": COUNTING_CEILING, "rrf_k": hybrid.RRF_K,
                "rrf_lexical_weight": self.lexical_weight}


@dataclass(frozen=True)
class Lists:
    """The candidate lists the hybrid sequence produced."""
    qv: hybrid.QueryVector
    vector_ids: list[int]        # nearest first; empty when there is no usable query vector
    lexical: list[dict] | None   # read beside the vector list; None: the ranking statement reads it

    @property
    def fused(self) -> bool:
        return bool(self.vector_ids)

    def params(self) -> dict:
        return {"vector_ids": self.vector_ids, "fused": self.fused}


@dataclass(frozen=True)
class Query:
    """Everything the candidate lists and the ranking statement are read with."""
    bound: SearchTurn
    narrowing: Narrowing
    terms: Terms
    scoring: Scoring
    strict: MatchFloor  # the fused lexical list's floor
    shape: str          # which statement produces the vector list (vector_shape)

    def vector_params(self) -> dict:
        return {**self.bound.params(), **self.narrowing.params()}

    def params(self, floor: MatchFloor, lists: Lists | None = None) -> dict:
        return {**self.bound.params(), **self.narrowing.params(), **self.scoring.params(), **self.terms.params(),
                **floor.params(), **(lists.params() if lists is not None else {})}


def plan_query(conn: psycopg.Connection, bound: SearchTurn, request: SearchRequest, budget: Budget,
               rank: ranking.Ranking, settings: Settings) -> Query:
    """The speakers a filter names, the query's statistics over the receivable audiences and the
    recent window its candidates are read from."""
    turn = bound.turn
    narrowing = Narrowing(_speakers(conn, turn, request.filters, bound.requester_ids), request.filters)
    stats = ranking.query_stats(conn, [turn.agent_id], turn.ts_config, split_terms(request.query),
                                settings.language, query=request.query, audiences=bound.audiences)
    words = list(stats.terms)
    chosen = ranking.generating_terms(stats.term_df, rank.pool)
    matches = sum(stats.term_df[i] for i in chosen)
    since = ranking.recent_window_start(conn, turn.workspace_id, [turn.agent_id], matches, stats.docs, rank.pool,
                                        bound.audiences)
    terms = Terms(words, [words[i] for i in chosen], since, ranking.walk_window(since, matches, stats.docs, rank.pool),
                  stats, rank)
    return Query(bound, narrowing, terms, Scoring(budget.effective, settings.search.hybrid_lexical_weight),
                 _min_match(stats, words, settings.search.hybrid_min_match_share),
                 vector_shape(turn, stats.docs, settings))


def gather_lists(conn: psycopg.Connection, query: Query, pending: hybrid.PendingVector,
                 side: hybrid.SideConnection | None, settings: Settings) -> Lists:
    """The vector list and, when it is produced beside, the lexical list read here meanwhile:
    strict, as a fused search reads it (`fuse` reads it again if the fusion then does not happen)."""
    turn, vector_params, shape = query.bound.turn, query.vector_params(), query.shape

    def vector_list(c: psycopg.Connection, usable: hybrid.QueryVector) -> list[int]:
        return _vector_candidates(c, usable, vector_params, settings, shape)

    def lexical_list() -> list[dict]:
        return conn.execute(LEXICAL_LIST, query.params(query.strict)).fetchall() if query.terms.words else []

    lists = hybrid.gather(conn, pending, side, turn.workspace_id, [turn.agent_id],
                          lexical=lexical_list, vector_list=vector_list, audiences=query.bound.audiences)
    return Lists(lists.qv, lists.vectors or [], lists.lexical)


@dataclass(frozen=True)
class Ranked:
    """The ranking statement's answer: the eligible hits, best first, and the audit's exclusion
    counts (`lineage` and `below_cutoff` completed by the budget)."""
    qv: hybrid.QueryVector
    hits: list[dict]
    counts: dict[str, int]

    @property
    def hit_ids(self) -> list[int]:
        return [h["id"] for h in self.hits]


def _listed(lexical: list[dict]) -> dict:
    """A lexical list read beforehand, as SEARCH_LISTED binds it."""
    return {"lexical_ids": [r["message_id"] for r in lexical],
            "lexical_conversations": [r["conversation_id"] for r in lexical],
            "lexical_created": [r["created_at"] for r in lexical], "lexical_scores": [r["lexical"] for r in lexical]}


def fuse(conn: psycopg.Connection, query: Query, lists: Lists) -> Ranked:
    """Rank the eligible candidates: the lexical list (read here, or inside the statement) fused
    with the vector list by reciprocal rank, or ranked alone; then count what was excluded."""
    floor = query.strict if lists.fused else MatchFloor.none(query.terms.words)
    statement, listed = SEARCH, {}
    if lists.lexical is not None:
        lexical = lists.lexical
        if not lists.fused and query.strict.min_mass > 0:
            lexical = conn.execute(LEXICAL_LIST, query.params(floor, lists)).fetchall()
        statement, listed = SEARCH_LISTED, _listed(lexical)
    params = {**query.params(floor, lists), **listed}
    rows = conn.execute(statement, params).fetchall() if query.terms.words or lists.vector_ids else []
    hits = sorted((r for r in rows if r["row_kind"] == "hit"), key=lambda r: r["rank"])
    counts = {k: 0 for k in EXCLUSION_KEYS}
    for r in rows:
        if r["row_kind"] == "count" and r["outcome"] in counts:
            counts[r["outcome"]] = r["n"]
    if query.terms.words:
        # Matches outside the receivable audiences never entered the pool: counted for the audit
        # row alone, in the same window and under the same ceiling.
        for r in conn.execute(HIDDEN_EXCLUSIONS, params).fetchall():
            counts[r["outcome"]] += r["n"]
    return Ranked(lists.qv, hits, counts)


Around = dict[int, dict[str, list[int]]]  # per hit, the ids of its neighbours "before" and "after"


def neighbours_of(conn: psycopg.Connection, bound: SearchTurn, hit_ids: list[int]) -> Around:
    """Up to NEIGHBOURS messages either side of each hit, under the hits' own predicates."""
    rows = []
    if hit_ids:
        with generic_plans(conn):
            rows = conn.execute(NEIGHBOURS_SQL, {**bound.params(), "hits": hit_ids, "n": NEIGHBOURS},
                                prepare=True).fetchall()
    around: Around = {h: {"before": [], "after": []} for h in hit_ids}
    for r in rows:
        around[r["hit"]][r["side"]].append(r["id"])
    return around


@dataclass(frozen=True)
class Admitted:
    hits: list[int]      # in rank order
    evidence: list[int]  # the messages they add to the turn's evidence: each hit with its neighbours
    status: str
    jointly_denied: int  # hits whose lineage is not deliverable together with the turn's evidence


def apply_budget(conn: psycopg.Connection, bound: SearchTurn, budget: Budget, hit_ids: list[int],
                 around: Around) -> Admitted:
    """Admit hits in rank order while the turn's evidence stays under the cap. Each hit's lineage
    was allowed on its own; the reply's recheck walks the whole evidence set together, and a
    walk past the node cap denies all of it. So a hit is admitted only if the turn's evidence
    stays jointly deliverable with it (when it was deliverable to begin with)."""
    in_context = bound.in_context
    admitted: list[int] = []
    evidence: list[int] = []
    seen = set(in_context)
    status = "ok"
    lineage_params = bound.turn.lineage_params()
    # A lineage verdict can only turn from allowed to denied as roots are added (a larger set walks a
    # superset of nodes), so when everything this search could add is deliverable together with
    # the turn's evidence, so is every subset of it: one walk instead of one per hit. The hits are
    # checked one by one only when the evidence is deliverable on its own and not with all of them.
    offered = [m for h in hit_ids for m in (*around[h]["before"], h, *around[h]["after"])]
    guard_joint = bool(hit_ids) and bool(conn.execute(JOINT_LINEAGE_GUARD, {
        **lineage_params, "ids": list(in_context), "offered": list(dict.fromkeys([*in_context, *offered]))},
        prepare=True).fetchone()["guard"])
    jointly_denied = 0
    for h in hit_ids:
        group = [m for m in [*around[h]["before"], h, *around[h]["after"]] if m not in seen and m not in evidence]
        if budget.used + len(evidence) + len(group) > EVIDENCE_CAP:
            status = "search_budget_exhausted"
            break
        if guard_joint and not _jointly_allowed(conn, [*in_context, *evidence, *group], lineage_params):
            jointly_denied += 1
            continue
        admitted.append(h)
        evidence.extend(group)
    return Admitted(admitted, evidence, status, jointly_denied)


def record(conn: psycopg.Connection, bound: SearchTurn, audit: Audit, budget: Budget, ranked: Ranked,
           admitted: Admitted) -> dict[int, dict]:
    """Write the audit row and record the evidence, in one statement; the admitted messages'
    texts come back."""
    by_id = {h["id"]: h for h in ranked.hits}
    qv = ranked.qv
    selected = []
    for h in admitted.hits:
        row = by_id[h]
        inspectable = {"lexical": row["lexical"], "recency": row["recency"],
                       "requester_spoke": row["requester_spoke"], "same_conversation": row["same_conversation"]}
        if qv.usable:
            # Fused: the score is the RRF score; each list's rank is shown (null: not in that list).
            inspectable.update(lexical_rank=row["lexical_rank"], vector_rank=row["vector_rank"], rrf=row["rrf"])
        selected.append({"message_id": h, "score": row["rrf"] if qv.usable else row["score"], "features": inspectable})
    counts = dict(ranked.counts)
    counts["lineage"] += admitted.jointly_denied
    # Hits cut by the budget were eligible and ranked but not shown.
    counts["below_cutoff"] += len(ranked.hits) - len(admitted.hits) - admitted.jointly_denied
    return {r["id"]: r for r in conn.execute(FINISH_SEARCH, {
        "ids": admitted.evidence, "max_chars": TEXT_MAX_CHARS, "via": "search", **bound.turn.lineage_params(),
        **audit.row(admitted.status, budget.effective, qv, selected, counts)}, prepare=True).fetchall()}


def respond(texts: dict[int, dict], admitted: Admitted, around: Around, budget: Budget, qv: hybrid.QueryVector,
            rank: ranking.Ranking) -> dict:
    hits = []
    for h in admitted.hits:
        neighbours = {side: [_hit(texts[m], None) for m in around[h][side] if m in texts]
                      for side in ("before", "after")}
        hits.append(_hit(texts[h], neighbours))
    return {
        "message_ids": admitted.evidence,
        "hits": hits,
        "status": admitted.status,
        "budget": {"evidence": budget.used + len(admitted.evidence), "cap": EVIDENCE_CAP},
        "mode": qv.mode,
        "degradation": qv.degradation,
        "ranking": rank.method,
    }


def search_history(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None,
                   request: SearchRequest, digest: bytes | None, *, settings: Settings,
                   gateway: Gateway | None = None, rank: ranking.Ranking | None = None,
                   side: hybrid.SideConnection | None = None) -> dict:
    """Run one search for a turn; record its results as evidence and write its audit row.

    Hybrid when `settings` name an embeddings model (see `hybrid` for how it degrades); lexical
    without one. The lexical ranking is `rank`, else the settings'. With `side` (where a second
    connection may come from), the vector list is produced there while this connection reads the
    lexical list."""
    rank = rank or ranking.Ranking.from_settings(settings.search)
    bound = resolve_turn(conn, workspace_id, agent_ids, request.turn_id)
    budget = decide_budget(bound, request)
    audit = Audit.of(bound, request, digest, budget)
    if budget.exhausted:
        return budget_exhausted(conn, audit, budget, rank)
    # The one query embedding (a gateway call attributed to the searcher's workspace), or why
    # not: under way while the identities, statistics and recent window are read.
    pending = hybrid.start_embedding(conn, settings.embeddings, request.query, gateway=gateway)
    query = plan_query(conn, bound, request, budget, rank, settings)
    lists = gather_lists(conn, query, pending, side, settings)
    ranked = fuse(conn, query, lists)
    around = neighbours_of(conn, bound, ranked.hit_ids)
    admitted = apply_budget(conn, bound, budget, ranked.hit_ids, around)
    texts = record(conn, bound, audit, budget, ranked, admitted)
    return respond(texts, admitted, around, budget, ranked.qv, rank)
