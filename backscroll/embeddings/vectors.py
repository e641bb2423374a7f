"""Vectors in PostgreSQL: the model registry, one HNSW index per model, and how a query reaches it.

`message_embeddings.embedding` is an untyped `vector`, so models of different sizes share the
table. Each registered model gets a partial expression index,

    create index concurrently ... on message_embeddings
        using hnsw ((embedding::vector(D)) vector_cosine_ops) where model = 'M'

and a query uses it only when it says the same thing: `e.model = 'M'` (a literal or a bound
parameter of an unnamed statement, which psycopg uses with prepared statements off) and orders by
`(e.embedding::vector(D)) <=> query`. `distance(dims)` writes that expression. A query never
compares vectors of two models: the model is in the predicate and the cast fixes the size.

Vectors travel in pgvector's binary form (pgvector-python's adapter): a query vector or the
vectors the worker and the backfill store are bound through `param`, which makes sure the
connection knows the type (`store.db.adapt_vectors`), never written out as text.

A filtered HNSW scan (only this reader's agents, only eligible messages) returns too few rows
without pgvector's iterative scan: the index hands over its ef_search nearest and the filter drops
most of them. `use_iterative_scan` turns it on for the current transaction.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass
from typing import Sequence

import psycopg
from pgvector import Vector
from psycopg import sql
from psycopg.adapt import PyFormat

from ..errors import BackscrollError, Conflict
from ..store.db import adapt_vectors
from ..store.migrate import ADVISORY_LOCK_ID

log = logging.getLogger(__name__)

MAX_DIMENSIONS = 2000  # HNSW's limit for `vector`

SELECT_MODEL = "select model, dimensions, index_name from embedding_models where model = %(model)s"
SELECT_MODELS = "select model, dimensions, index_name, created_at from embedding_models order by created_at, model"
INSERT_MODEL = """
insert into embedding_models (model, dimensions, index_name) values (%(model)s, %(dimensions)s, %(index_name)s)
on conflict (model) do nothing
"""
# Messages indexed before the model existed have no job in the outbox: they are the backfill's.
OWE_BACKFILL = """
insert into embedding_backfills (model, state, embedded, total)
select %(model)s, 'pending', 0, count(*) from message_search where tsv <> ''::tsvector
having count(*) > 0
on conflict (model) do nothing
"""
INDEX_VALID = "select i.indisvalid as valid from pg_index i where i.indexrelid = to_regclass(%(name)s)"
CREATE_INDEX = sql.SQL(
    "create index concurrently if not exists {name} on message_embeddings "
    "using hnsw ((embedding::vector({dims})) vector_cosine_ops) where model = {model}"
)
DROP_INDEX = sql.SQL("drop index concurrently if exists {name}")
ITERATIVE_SCAN = """
select set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', %(ef_search)s, true),
       set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s, true)
"""


class DimensionMismatch(Conflict):
    code = "dimension_mismatch"


class ModelNotRegistered(BackscrollError):
    status = 503
    code = "model_not_registered"


@dataclass(frozen=True)
class Model:
    model: str
    dimensions: int
    index_name: str


def index_name(model: str) -> str:
    """A stable index name for a model: readable, and unique by a digest of the exact name."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:24]
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return f"message_embeddings_hnsw_{slug}_{digest}"


def validate(model: str, dimensions: int) -> None:
    if not model or len(model) > 200 or any(ord(ch) < 32 or ord(ch) == 127 for ch in model):
        raise BackscrollError("a model name is 1 to 200 printable characters", code="bad_model", status=400)
    if not 1 <= dimensions <= MAX_DIMENSIONS:
        raise BackscrollError(f"dimensions must be between 1 and {MAX_DIMENSIONS} (HNSW's limit), not {dimensions}",
                              code="bad_dimensions", status=400)


def register_model(url: str, model: str, dimensions: int) -> tuple[Model, bool]:
    """Register `model` with `dimensions` and build its index, concurrently (writes go on).
    Idempotent: returns (model, created). A different size for a registered model is refused."""
    validate(model, dimensions)
    with psycopg.connect(url, autocommit=True) as conn:
        _lock(conn)
        try:
            name = index_name(model)
            created = conn.execute(INSERT_MODEL, {"model": model, "dimensions": dimensions,
                                                  "index_name": name}).rowcount == 1
            row = conn.execute(SELECT_MODEL, {"model": model}).fetchone()
            found = Model(*row)
            if found.dimensions != dimensions:
                raise DimensionMismatch(
                    f"model {model!r} is registered with {found.dimensions} dimensions, not {dimensions}; "
                    "a different size is a different model: register it under a new name "
                    f"(e.g. {model}@{dimensions}) and backfill it")
            _build_index(conn, found)
            if created:
                conn.execute(OWE_BACKFILL, {"model": model})
        finally:
            conn.execute("select pg_advisory_unlock(%s)", (ADVISORY_LOCK_ID,))
    if created:
        log.info("registered model %s (%d dimensions), index %s", model, dimensions, found.index_name)
    return found, created


def _lock(conn: psycopg.Connection) -> None:
    """The migrations' lock: a model is registered after the schema exists, never during a
    migration. Polled rather than waited for: a session waiting for a lock holds a snapshot, and
    `create index concurrently` in the session holding it would wait for that snapshot in turn."""
    while not conn.execute("select pg_try_advisory_lock(%s)", (ADVISORY_LOCK_ID,)).fetchone()[0]:
        time.sleep(0.2)


def _build_index(conn: psycopg.Connection, model: Model) -> None:
    name = sql.Identifier(model.index_name)
    state = conn.execute(INDEX_VALID, {"name": model.index_name}).fetchone()
    if state is not None and not state[0]:
        # An interrupted concurrent build leaves an invalid index that `if not exists` would keep.
        log.warning("index %s is invalid (an interrupted build); rebuilding it", model.index_name)
        conn.execute(DROP_INDEX.format(name=name))
    conn.execute(CREATE_INDEX.format(name=name, dims=sql.Literal(model.dimensions), model=sql.Literal(model.model)))


def registered(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(SELECT_MODELS).fetchall()


def get_model(conn: psycopg.Connection, model: str) -> Model:
    row = conn.execute(SELECT_MODEL, {"model": model}).fetchone()
    if row is None:
        raise ModelNotRegistered(
            f"model {model!r} is not registered: run `backscroll migrate --model {model} --dimensions D`")
    return Model(row["model"], row["dimensions"], row["index_name"]) if isinstance(row, dict) else Model(*row)


def distance(dims: int, column: str = "e", query: str = "query_vector") -> sql.Composed:
    """`(e.embedding::vector(D)) <=> %(query_vector)b::vector(D)`: the cosine distance, written as the
    model's index expression so the planner can use that index; the query vector is bound with
    `param`, in binary (`%b`), and the cast checks its size."""
    return sql.SQL("({col}.embedding::vector({dims})) <=> {param}::vector({dims})").format(
        col=sql.Identifier(column), dims=sql.Literal(dims), param=_binary(query))


def exact_distance(dims: int, column: str = "e", query: str = "query_vector") -> sql.Composed:
    """The same cosine distance for an exact scan, computed as `1 + (a <#> q)`: every stored vector
    is unit length (the gateway normalizes; migration 0013 checks it) as is the query's, so one
    minus the inner product is the cosine distance, at about half the arithmetic of `<=>`, which
    a scan of thousands of vectors feels. An index walk keeps `distance`, its index's expression."""
    return sql.SQL("1 + (({col}.embedding::vector({dims})) <#> {param}::vector({dims}))").format(
        col=sql.Identifier(column), dims=sql.Literal(dims), param=_binary(query))


def _binary(name: str) -> sql.Placeholder:
    """`%(name)b`: a vector parameter is sent in binary whatever else its connection can dump."""
    return sql.Placeholder(name, PyFormat.BINARY)


def use_iterative_scan(conn: psycopg.Connection, ef_search: int, max_scan_tuples: int) -> None:
    """Within the current transaction, let HNSW scans keep walking until the filters are satisfied
    (`relaxed_order`: results may come slightly out of order, so order the final list again)."""
    conn.execute(ITERATIVE_SCAN, {"ef_search": str(ef_search), "max_scan_tuples": str(max_scan_tuples)})


def param(conn: psycopg.Connection, vector: Sequence[float]) -> Vector:
    """`vector` as a parameter of a statement run on `conn` (alone, or in a list for a
    `vector[]`), in pgvector's binary form where the statement says `%(name)b` (a list of them
    as `%s` would go as text); `conn` learns the type first if it has not."""
    adapt_vectors(conn)
    return Vector(list(vector))


def coverage(embedded: int, total: int) -> float:
    """The share of indexable messages that have a vector of a model (1 when there are none):
    the admin report shows it and hybrid search applies it to a scope."""
    return 1.0 if total == 0 else round(min(embedded / total, 1.0), 4)
