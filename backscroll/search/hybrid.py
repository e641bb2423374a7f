"""Hybrid search helpers shared by both searches: reciprocal rank fusion, and the query-embedding
step with its degradation.

Both lists fused here are already eligible: each was produced by SQL under the search's own
predicates. Fusion only orders what may be shown; it never widens it.

Degradation (what a search reports as `mode` and `degradation`, never as an error):

- no model configured (BACKSCROLL_EMBEDDINGS_MODEL unset, or no URL): mode `lexical`,
  degradation null (the status endpoint is where `not_configured` is reported);
- the model is not registered (`migrate --model` not run): mode `degraded`, `not_registered`;
- the gateway fails: mode `degraded`, category `unavailable`, `timeout` or `rejected`; results
  are the lexical list alone, under the same predicates;
- the model is registered and answers, but not every indexable message of the searched scope has
  a vector of it yet (a backfill owed or running, the outbox not drained, a model just
  registered): mode `degraded`, category `backfilling` with the scope's `coverage` (embedded /
  indexable, from counters kept by triggers); the search is hybrid over what is embedded and
  lexical over the rest. An outage takes precedence: it is reported as the outage.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

import psycopg

from ..config import EmbeddingsSettings, SearchSettings
from ..embeddings import gateway as gateway_module
from ..embeddings.gateway import NOT_CONFIGURED, UNAVAILABLE, Gateway, GatewayError
from ..embeddings.vectors import Model, ModelNotRegistered, get_model
from ..embeddings.vectors import coverage as coverage_ratio
from . import ranking
from .sqltext import compose

RRF_K = 60
VECTOR_K = 50  # nearest vectors a search reads for its vector list

T = TypeVar("T")
# Where a search's vector list gets a connection of its own: a context manager yielding one, or
# None when none is free at once (`db.side_connections`).
SideConnection = Callable[[], AbstractContextManager["psycopg.Connection | None"]]

LEXICAL = "lexical"
HYBRID = "hybrid"
DEGRADED = "degraded"
NOT_REGISTERED = "not_registered"
BACKFILLING = "backfilling"


def rrf_sql(lexical: str, vector: str) -> str:
    """The reciprocal-rank-fusion score in SQL, k bound as %(rrf_k)s: the sum over the two lists
    of weight / (k + the row's 1-based rank there), a list that does not hold the row adding
    nothing (its rank is null). The lexical list's weight is %(rrf_lexical_weight)s
    (`hybrid_lexical_weight`), the vector list's 1. The one formula both searches fuse with;
    `lexical` and `vector` are the columns holding a row's rank in each list."""
    return compose("coalesce(%(rrf_lexical_weight)s::float8 / (%(rrf_k)s + <<LEXICAL_RANK>>), 0)"
                   " + coalesce(1.0::float8 / (%(rrf_k)s + <<VECTOR_RANK>>), 0)",
                   LEXICAL_RANK=lexical, VECTOR_RANK=vector)


def exact_scope(search: SearchSettings, docs: int) -> bool:
    """A small scope (at most `hybrid_exact_max_rows` documents) gets an exact vector scan, a
    large one the HNSW index: the one choice both searches make."""
    return docs <= search.hybrid_exact_max_rows


@dataclass(frozen=True)
class QueryVector:
    """What the query-embedding step produced: a vector of `model`, or why there is none."""
    mode: str
    vector: list[float] | None = None
    model: Model | None = None
    degradation: dict | None = None

    @property
    def usable(self) -> bool:
        return self.vector is not None and self.model is not None


def degradation(category: str, **detail) -> dict:
    return {"category": category, **detail}


def embed_query(conn: psycopg.Connection, embeddings: EmbeddingsSettings, workspace_id: int | None, text: str, *,
                gateway: Gateway | None = None, ledger: psycopg.Connection | None = None) -> QueryVector:
    """One gateway call (purpose=query, attributed to the searcher's workspace), or none when
    semantic search is off. Never raises for the endpoint's sake: a failure is a degradation.
    The usage-ledger row goes to `ledger` (the primary, when `conn` reads a replica) or `conn`."""
    return start_embedding(conn, embeddings, text, gateway=gateway).result(workspace_id, ledger=ledger)


class PendingVector:
    """The query embedding of a search, started before the search reads its statistics and taken
    (`result`) when the vector list needs it: the endpoint's round trip overlaps the reads."""

    def __init__(self, conn: psycopg.Connection, embeddings: EmbeddingsSettings, text: str, gateway: Gateway | None):
        self.conn = conn  # the search's own connection
        self._decided: QueryVector | None = None
        self._pending: gateway_module.PendingQuery | None = None
        self._model: Model | None = None
        if not embeddings.enabled:
            self._decided = QueryVector(LEXICAL)
            return
        gw = gateway or gateway_module.gateway_for(embeddings)
        if not gw.url:
            self._decided = QueryVector(LEXICAL)
            return
        try:
            self._model = get_model(conn, embeddings.embeddings_model)
        except ModelNotRegistered:
            self._decided = QueryVector(DEGRADED, degradation=degradation(NOT_REGISTERED))
            return
        try:
            self._pending = gw.start_query(text)
        except GatewayError as exc:
            self._decided = _degraded_by(exc)

    def result(self, workspace_id: int | None, *, ledger: psycopg.Connection | None = None) -> QueryVector:
        """The query vector, or why there is none; writes the call's ledger row on `ledger` or the
        connection the search reads."""
        if self._decided is not None:
            return self._decided
        try:
            vector = self._pending.result(ledger or self.conn, workspace_id)
        except GatewayError as exc:
            return _degraded_by(exc)
        return self._query_vector(vector)

    def arrived(self) -> QueryVector | None:
        """Wait for the vector without writing the ledger row (`result` writes it): the query
        vector when it is usable, else None."""
        vector = self._pending.answer() if self._pending is not None else None
        qv = self._query_vector(vector) if vector is not None else None
        return qv if qv is not None and qv.usable else None

    def _query_vector(self, vector: list[float]) -> QueryVector:
        model = self._model
        if len(vector) != model.dimensions:
            # The server answers with another size than the model was registered with: comparing
            # would be meaningless (and the cast would fail). Lexical, and say so.
            return QueryVector(DEGRADED, degradation=degradation(UNAVAILABLE, detail=(
                f"{len(vector)}-dimensional query vector for a {model.dimensions}-dimensional model")))
        return QueryVector(HYBRID, vector=vector, model=model)

    def beside(self, side: SideConnection | None, vector_list: Callable[[psycopg.Connection, QueryVector], T]
               ) -> "Beside[T] | None":
        """The vector list, produced on a connection of its own as soon as the vector arrives,
        while the search's connection reads the lexical list; None when there is nothing to
        overlap (no call under way, or no `side` source)."""
        if side is None or self._pending is None:
            return None
        return Beside(self, side, vector_list)


class Beside(Generic[T]):
    """A vector list under way beside the lexical list (`PendingVector.beside`).

    Its connection comes from `side` (the pool the search's own connection came from), waited for
    only briefly: a search never holds one connection while blocking on a second (that is how a
    pool deadlocks), and without one the list is produced afterwards on the search's connection.
    It reads its own snapshot; the fused statement re-checks every vector candidate under the
    search's predicates on the search's connection, so the list can be stale, never wider."""

    def __init__(self, pending: PendingVector, side: SideConnection,
                 vector_list: Callable[[psycopg.Connection, QueryVector], T]):
        self._pending = pending
        self._vector_list = vector_list
        self._future = _executor().submit(self._run, side)

    def _run(self, side: SideConnection) -> T | None:
        qv = self._pending.arrived()
        if qv is None:
            return None
        with side() as conn:
            return self._vector_list(conn, qv) if conn is not None else None

    def result(self, workspace_id: int | None, *, ledger: psycopg.Connection | None = None
               ) -> tuple[QueryVector, T | None]:
        """The query vector (its ledger row written, as `PendingVector.result` does) and the
        vector list (None when the vector is unusable); the list is produced now, on the
        search's connection, if no side connection was free."""
        produced = self._future.result()
        qv = self._pending.result(workspace_id, ledger=ledger)
        if not qv.usable:
            return qv, None
        if produced is None:
            produced = self._vector_list(self._pending.conn, qv)
        return qv, produced


_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()
VECTOR_LIST_THREADS = 64  # vector lists in flight at once per process (threads start on demand)


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=VECTOR_LIST_THREADS, thread_name_prefix="vector-list")
        return _EXECUTOR


def _degraded_by(exc: GatewayError) -> QueryVector:
    if exc.category == NOT_CONFIGURED:
        return QueryVector(LEXICAL)
    return QueryVector(DEGRADED, degradation=degradation(exc.category))


def start_embedding(conn: psycopg.Connection, embeddings: EmbeddingsSettings, text: str, *,
                    gateway: Gateway | None = None) -> PendingVector:
    """Start the query embedding of a search (see `PendingVector`); nothing starts when semantic
    search is off or the model is not registered."""
    return PendingVector(conn, embeddings, text, gateway)


L = TypeVar("L")


@dataclass(frozen=True)
class Gathered(Generic[L, T]):
    """What the hybrid sequence hands back to a search."""
    qv: QueryVector             # the query vector, or why there is none; coverage applied
    lexical: L | None           # the lexical list, read beside the vector list (None: not read here)
    vectors: T | None           # the vector list (None when the query vector is unusable)
    meanwhile: object = None    # what `meanwhile` returned, when it ran


def gather(conn: psycopg.Connection, pending: PendingVector | None, side: SideConnection | None,
           workspace_id: int | None, scope_agents: Sequence[int], *, lexical: Callable[[], L],
           vector_list: Callable[[psycopg.Connection, QueryVector], T], ledger: psycopg.Connection | None = None,
           meanwhile: Callable[[PendingVector], object] | None = None,
           audiences: Sequence[int] | None = None) -> Gathered[L, T]:
    """The hybrid sequence, the one both searches follow.

    With a query embedding under way and a `side` source, the vector list is produced on a
    connection of its own as soon as the vector arrives (`Beside`) while this connection reads
    the lexical list (`lexical`), then does `meanwhile` (work of its own once the lexical list is
    read: session search's own-conversation arm); the search then composes its statement from
    the lists. Otherwise the query vector is awaited and the vector list is produced on this
    connection, and `lexical` is not called: the search reads its lexical list inside its one
    statement. Last, the coverage of the scope's agents (in `audiences`, when given:
    `with_backfill_coverage`)."""
    beside = pending.beside(side, vector_list) if pending is not None else None
    listed = extra = None
    if beside is not None:
        listed = lexical()
        extra = meanwhile(pending) if meanwhile is not None else None
        qv, vectors = beside.result(workspace_id, ledger=ledger)
    else:
        qv = pending.result(workspace_id, ledger=ledger) if pending is not None else QueryVector(LEXICAL)
        vectors = vector_list(conn, qv) if qv.usable else None
    return Gathered(with_backfill_coverage(conn, qv, scope_agents, audiences), listed, vectors, extra)


def with_coverage(qv: QueryVector, embedded: int, total: int) -> QueryVector:
    """A usable query vector over a perspective whose messages are not all embedded yet is still
    hybrid over what is embedded, reported as `backfilling` with the coverage."""
    if not qv.usable or embedded >= total:
        return qv
    # Rounded to four places, one message short of a large scope would read 1.0.
    ratio = min(coverage_ratio(embedded, total), 0.9999)
    return QueryVector(DEGRADED, vector=qv.vector, model=qv.model,
                       degradation=degradation(BACKFILLING, coverage=ratio))


# The scope's coverage: its agents' indexable messages (`tsv <> ''`: what the outbox and the backfill
# owe a vector) and how many of them have a vector of the model, from counters kept by triggers
# (migration 0020: folded counts plus pending deltas, exact at every moment). A read of a few
# rows however large the scope: counting the scope's messages costs more than the search. Under
# the `audiences` scope (search_history: the audiences its destination may receive, migration
# 0027) only those audiences' messages count, so the figure a caller reads moves with nothing
# it may not see.
# The documents' tables and the scope's condition are the statistics' (ranking.SCOPES).
COVERAGE_STATS = {"agents": "embedding_coverage_stats", "audiences": "embedding_audience_coverage_stats"}


def scope_coverage_sql(scope: str) -> str:
    return compose("""
select (select coalesce(sum(indexable), 0)
          from (select indexable from <<DOC_STATS>> where <<IN_SCOPE>>
                union all
                select indexable from search_doc_deltas where <<IN_SCOPE>>) d)::bigint as total,
       (select coalesce(sum(embedded), 0)
          from (select embedded from <<COVERAGE_STATS>>
                 where <<IN_SCOPE>> and model = %(model)s
                union all
                select embedded from embedding_coverage_deltas
                 where <<IN_SCOPE>> and model = %(model)s) e)::bigint as embedded
""", DOC_STATS=ranking.SCOPES[scope]["DOC_STATS"], IN_SCOPE=ranking.SCOPES[scope]["IN_SCOPE"],
       COVERAGE_STATS=COVERAGE_STATS[scope])


SCOPE_COVERAGE = {scope: scope_coverage_sql(scope) for scope in ranking.SCOPES}


def scope_coverage(conn: psycopg.Connection, model: str, agents: Sequence[int],
                   audiences: Sequence[int] | None = None) -> tuple[int, int]:
    """(embedded, total): how many of these agents' indexable messages (in `audiences`, when
    given) have a vector of `model`, of how many."""
    statement = SCOPE_COVERAGE["agents" if audiences is None else "audiences"]
    row = conn.execute(statement, {"model": model, "agents": list(agents),
                                   "audiences": None if audiences is None else list(audiences)}).fetchone()
    return int(row["embedded"]), int(row["total"])


def with_backfill_coverage(conn: psycopg.Connection, qv: QueryVector, agents: Sequence[int],
                           audiences: Sequence[int] | None = None) -> QueryVector:
    """`qv`, reported as `backfilling` with these agents' coverage whenever some of their indexable
    messages have no vector of its model yet, whatever the reason: a backfill owed or running,
    the outbox not drained, a model just registered. An unusable `qv` (an outage, no model) is
    returned as it is: the outage is what is reported."""
    if not qv.usable:
        return qv
    embedded, total = scope_coverage(conn, qv.model.model, agents, audiences)
    return with_coverage(qv, embedded, total)


def category(qv: QueryVector) -> str | None:
    """The degradation's category, as an audit row records it."""
    return qv.degradation["category"] if qv.degradation else None
