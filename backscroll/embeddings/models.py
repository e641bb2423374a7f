"""`backscroll models list` and `backscroll models drop`: the registered models, and taking one
away with everything stored for it.

Dropping keeps the coverage counters (migration 0020) exact at every moment: the vectors are
deleted in batches while the model is still registered, so each batch is subtracted from the
counts by the row trigger on message_embeddings; the registration row goes last, and its trigger
removes the model's counters (its backfill rows go with it by cascade). Other models' counters
are never touched. Each batch commits on its own, so a long drop holds no long transaction, and
an interrupted drop is finished by running it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from psycopg import sql
from tqdm import tqdm

from ..errors import BackscrollError, Conflict
from ..store.migrate import ADVISORY_LOCK_ID
from . import backfill, vectors

log = logging.getLogger(__name__)

DROP_BATCH = 5000

LIST = """
select r.model, r.dimensions, r.index_name,
       (select count(*) from message_embeddings e where e.model = r.model) as embedded
  from embedding_models r
 order by r.created_at, r.model
"""
INDEXABLE = "select count(*) as n from message_search where tsv <> ''::tsvector"
COUNT_VECTORS = "select count(*) as n from message_embeddings where model = %(model)s"
# Through the primary key (message_id, model) once the ids are picked through the model's btree.
DELETE_VECTORS = """
delete from message_embeddings
 where model = %(model)s
   and message_id = any(array(select message_id from message_embeddings where model = %(model)s
                               limit %(limit)s))
"""
DELETE_MODEL = "delete from embedding_models where model = %(model)s"
ANY_MODEL = "select exists (select 1 from embedding_models) as any"
# With no model registered nothing drains the outbox, and none is queued (off means off, 0005).
DELETE_JOBS = """
delete from embedding_outbox
 where message_id = any(array(select message_id from embedding_outbox limit %(limit)s))
"""
INDEX_EXISTS = "select to_regclass(%(name)s) is not null as found"


class ModelInUse(Conflict):
    code = "model_in_use"


@dataclass(frozen=True)
class Dropped:
    model: str
    vectors: int
    index: str | None  # the index dropped, if there was one
    registered: bool   # whether the model was registered when the drop began
    jobs: int          # outbox jobs removed (only when the last model went)


def list_models(conn: psycopg.Connection) -> list[dict]:
    total = conn.execute(INDEXABLE).fetchone()["n"]
    return [{**r, "total": total, "coverage": vectors.coverage(r["embedded"], total)} for r in conn.execute(LIST)]


def drop_model(url: str, model: str, *, quiet: bool = False, batch: int = DROP_BATCH) -> Dropped:
    """Delete `model`'s vectors, its HNSW index, its registration and its backfill. Under the
    migrations' lock (as register_model), and the model's backfill lock, so no backfill of it
    runs meanwhile; refused while one is running."""
    with psycopg.connect(url, autocommit=True) as conn:  # tuple rows, as vectors._lock reads them
        vectors._lock(conn)
        held = {"class": backfill.LOCK_CLASS, "model": model}
        try:
            if not conn.execute(backfill.TRY_LOCK, held).fetchone()[0]:
                raise backfill.BackfillRunning(f"a backfill of {model} is running: stop it (or its Job) first")
            try:
                return _drop(conn, model, quiet, batch)
            finally:
                conn.execute(backfill.UNLOCK, held)
        finally:
            conn.execute("select pg_advisory_unlock(%s)", (ADVISORY_LOCK_ID,))


def _drop(conn: psycopg.Connection, model: str, quiet: bool, batch: int) -> Dropped:
    found = conn.execute(vectors.SELECT_MODEL, {"model": model}).fetchone()
    # Not registered: a drop interrupted after the registration went may have left the index.
    name = vectors.Model(*found).index_name if found else vectors.index_name(model)
    total = conn.execute(COUNT_VECTORS, {"model": model}).fetchone()[0]
    if found is None and total == 0 and not conn.execute(INDEX_EXISTS, {"name": name}).fetchone()[0]:
        raise BackscrollError(f"model {model!r} is not registered", code="model_not_registered", status=404)
    deleted = 0
    with tqdm(total=total, unit="vec", desc=f"drop {model}", disable=quiet, dynamic_ncols=True) as bar:
        while True:
            n = conn.execute(DELETE_VECTORS, {"model": model, "limit": batch}).rowcount
            if n == 0:
                break
            deleted += n
            bar.update(n)
    dropped_index = None
    if conn.execute(INDEX_EXISTS, {"name": name}).fetchone()[0]:
        conn.execute(vectors.DROP_INDEX.format(name=sql.Identifier(name)))
        dropped_index = name
    conn.execute(DELETE_MODEL, {"model": model})
    jobs = 0
    if not conn.execute(ANY_MODEL).fetchone()[0]:
        while n := conn.execute(DELETE_JOBS, {"limit": batch}).rowcount:
            jobs += n
    log.info("dropped model %s: %d vectors, index %s, %d outbox jobs", model, deleted, dropped_index or "-", jobs)
    return Dropped(model=model, vectors=deleted, index=dropped_index, registered=found is not None, jobs=jobs)
