"""`backscroll backfill --model M`: embed every indexable message that has no vector for M.

Oldest first within each workspace, and one batch per workspace in turn, so a large workspace
does not keep a small one waiting. Each batch is one transaction: the vectors, the workspace's
position and the progress counters commit together, so a run killed at any point resumes from
the last batch it stored, and the primary key (message, model) means nothing is stored twice.
Progress lives in `embedding_backfills` (what `/v1/status` reports) and the per-workspace
positions in `embedding_backfill_positions`.

A round that reaches the end of every workspace is followed by a round from the beginning, which
finds what the first skipped (a message locked by a writer at the time, or imported behind the
position) and is cheap when there is nothing left; the run is finished when a round stores nothing.
A message that also has an outbox job (written while the model was registered) is embedded once:
the backfill takes the job with the batch and settles it, or, when the worker already holds it,
leaves the message to the worker. A text the server refuses is handed to the outbox with its
error, where the worker retries it and parks it if it keeps failing. While the server is unreachable the run waits and tries again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
from tqdm import tqdm

from ..config import Settings
from ..errors import BackscrollError
from ..store.db import connect, lost_connection, wait_for_database
from . import vectors
from .document import document_text
from .gateway import Gateway, GatewayError, gateway_for

log = logging.getLogger(__name__)

# First key of the backfill's advisory lock (the second is hashtext(model)): "bf".
LOCK_CLASS = 0x6266
PAGE_SIZE = 1000
WAIT_MAX_S = 60.0

TRY_LOCK = "select pg_try_advisory_lock(%(class)s, hashtext(%(model)s)) as locked"
UNLOCK = "select pg_advisory_unlock(%(class)s, hashtext(%(model)s))"
LOCK_HELD = """
select exists (
    select 1 from pg_locks
     where locktype = 'advisory' and granted and objsubid = 2
       and database = (select oid from pg_database where datname = current_database())
       and classid = %(class)s::bigint::oid
       and objid = (hashtext(%(model)s)::bigint & 4294967295)::oid) as held
"""
TOTAL = "select count(*) as n from message_search where tsv <> ''::tsvector"
EMBEDDED = "select count(*) as n from message_embeddings where model = %(model)s"
SELECT_PROGRESS = "select * from embedding_backfills where model = %(model)s"
START = """
insert into embedding_backfills (model, state, embedded, total)
values (%(model)s, 'running', %(embedded)s, %(total)s)
on conflict (model) do update
   set state = 'running', updated_at = now(), embedded = excluded.embedded, total = excluded.total,
       finished_at = null, last_error = null,
       -- a finished run's successor starts afresh; an interrupted one resumes
       started_at = case when embedding_backfills.state in ('finished', 'pending') then now()
                         else embedding_backfills.started_at end,
       failed = case when embedding_backfills.state = 'finished' then 0 else embedding_backfills.failed end
"""
FORGET_POSITIONS = "delete from embedding_backfill_positions where model = %(model)s"
POSITIONS = """
select workspace_id, last_created_at, last_message_id from embedding_backfill_positions where model = %(model)s
"""
WORKSPACES = "select id from workspaces order by id"
PAGE = """
select s.message_id, m.created_at
  from message_search s
  join messages m on m.id = s.message_id
 where s.agent_id in (select a.id from agents a where a.workspace_id = %(workspace_id)s)
   and s.tsv <> ''::tsvector
   and (m.created_at, m.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'), coalesce(%(after_id)s::bigint, 0))
   and not exists (select 1 from message_embeddings e where e.message_id = s.message_id and e.model = %(model)s)
 order by m.created_at, m.id
 limit %(limit)s
"""
LOCK_BATCH = """
select m.id as message_id, c.workspace_id, m.body, m.role::text as role, c.title,
       (select a.display_name from actors a join workspaces w on w.id = c.workspace_id
         where a.id = m.speaker_actor_id and w.speaker_names) as speaker
  from messages m
  join conversations c on c.id = m.conversation_id
  join message_search s on s.message_id = m.id
 where m.id = any(%(ids)s::bigint[]) and s.tsv <> ''::tsvector
   and not exists (select 1 from message_embeddings e where e.message_id = m.id and e.model = %(model)s)
 order by m.created_at, m.id
   -- Skip (do not wait for) a message a writer holds; the closing round finds it if it stays.
   for key share of m skip locked
"""
# The outbox jobs of a batch's messages, taken before their texts are read. A job this run holds
# is one it settles: its message is embedded with the text read after the lock, and a writer that
# changes the text meanwhile waits on the job, then queues it again and drops the new vector. A
# job it cannot take is the worker's (claimed, mid-batch): that message is left to the worker.
# Without this, every message written while a backfill runs was embedded twice, once by each.
HOLD_JOBS = """
select message_id from embedding_outbox where message_id = any(%(ids)s::bigint[])
 order by message_id
   for update skip locked
"""
JOBS_OF = "select message_id from embedding_outbox where message_id = any(%(ids)s::bigint[])"
SETTLE_JOBS = "delete from embedding_outbox where message_id = any(%(ids)s::bigint[])"
# A vector the worker stored meanwhile is newer than ours: keep it.
STORE = """
insert into message_embeddings (message_id, model, embedding)
select u.message_id, %(model)s, u.embedding
  from unnest(%(ids)s::bigint[], %(vectors)b::vector[]) as u(message_id, embedding)
on conflict (message_id, model) do nothing
"""
SAVE_POSITION = """
insert into embedding_backfill_positions (model, workspace_id, last_created_at, last_message_id)
values (%(model)s, %(workspace_id)s, %(at)s, %(id)s)
on conflict (model, workspace_id) do update
   set last_created_at = excluded.last_created_at, last_message_id = excluded.last_message_id
"""
PROGRESS = """
update embedding_backfills
   set embedded = embedded + %(embedded)s, failed = failed + %(failed)s, updated_at = now()
 where model = %(model)s
"""
HAND_TO_OUTBOX = """
insert into embedding_outbox (message_id, attempts, last_error, next_attempt_at)
select u.message_id, 1, u.error, now() + make_interval(secs => %(delay_s)s)
  from unnest(%(ids)s::bigint[], %(errors)s::text[]) as u(message_id, error)
on conflict (message_id) do nothing
"""
END = """
update embedding_backfills
   set state = %(state)s, updated_at = now(), last_error = %(error)s,
       finished_at = case when %(state)s = 'finished' then now() end,
       embedded = coalesce(%(embedded)s, embedded), total = coalesce(%(total)s, total)
 where model = %(model)s
"""


class BackfillRunning(BackscrollError):
    status = 409
    code = "backfill_running"


@dataclass
class Result:
    model: str
    state: str
    embedded: int = 0          # by this run
    failed: int = 0            # handed to the outbox by this run
    total: int = 0             # indexable messages
    covered: int = 0           # of them with a vector of this model, at the end
    seconds: float = 0.0
    resumed: bool = False


@dataclass
class _Workspace:
    id: int
    after: tuple[datetime, int] | None = None     # the last message stored (created_at, id)
    fetched: tuple[datetime, int] | None = None   # the last message read into `page`
    page: deque = field(default_factory=deque)
    exhausted: bool = False


class Backfill:
    def __init__(self, settings: Settings, url: str, model: str, *, gateway: Gateway | None = None,
                 rate: float | None = None, batch_size: int | None = None, stop: threading.Event | None = None,
                 quiet: bool = False, max_failures: int = 10):
        self.settings = settings
        self.gateway = gateway or gateway_for(settings.embeddings)
        self.gateway.require_configured()  # off (no model) or nowhere to send: nothing to do
        if model != self.gateway.model:
            raise BackscrollError(
                f"backfill --model {model} needs BACKSCROLL_EMBEDDINGS_MODEL={model}: the gateway embeds with the "
                f"configured model ({self.gateway.model})", code="model_mismatch", status=400)
        self.rate = settings.backfill.backfill_rate if rate is None else rate
        self.batch_size = batch_size or settings.backfill.backfill_batch_size
        self.stop = stop or threading.Event()
        self.quiet = quiet
        self.max_failures = max_failures
        self.url = url
        self.side = connect(url, autocommit=True)  # the run's lock, progress reads, ledger rows
        try:
            self.model = vectors.get_model(self.side, model)
        except BaseException:
            self.side.close()
            raise
        self.conn = connect(url)
        self.failed_ids: set[int] = set()

    def close(self) -> None:
        self.conn.close()
        self.side.close()

    def run(self) -> Result:
        started = time.perf_counter()
        params = {"class": LOCK_CLASS, "model": self.model.model}
        if not self.side.execute(TRY_LOCK, params).fetchone()["locked"]:
            raise BackfillRunning(f"a backfill of {self.model.model} is already running")
        try:
            return self._run(started)
        finally:
            self.side.execute(UNLOCK, params)

    def _run(self, started: float) -> Result:
        model = self.model.model
        total = self.side.execute(TOTAL).fetchone()["n"]
        covered = self.side.execute(EMBEDDED, {"model": model}).fetchone()["n"]
        before = self.side.execute(SELECT_PROGRESS, {"model": model}).fetchone()
        resumed = before is not None and before["state"] not in ("finished", "pending")
        self.side.execute(START, {"model": model, "embedded": covered, "total": total})
        if not resumed:
            self.side.execute(FORGET_POSITIONS, {"model": model})
        result = Result(model=model, state="running", total=total, resumed=resumed)
        log.info("backfill of %s: %d of %d messages embedded%s", model, covered, total,
                 " (resuming)" if resumed else "")
        bar = tqdm(total=total, initial=covered, unit="msg", desc=f"backfill {model}", disable=self.quiet,
                   dynamic_ncols=True, smoothing=0.1)
        self._began = time.monotonic()
        state, error = "interrupted", None
        try:
            positions = {r["workspace_id"]: (r["last_created_at"], r["last_message_id"])
                         for r in self.side.execute(POSITIONS, {"model": model})}
            while not self.stop.is_set():
                stored = self._round(positions, result, bar)
                positions = {}
                if self.stop.is_set():
                    break
                if stored == 0:
                    state = "finished"
                    break
        except GatewayError as exc:
            state, error = "failed", exc.describe()
            raise
        except BaseException as exc:
            state, error = "interrupted", f"{type(exc).__name__}"
            raise
        finally:
            bar.close()
            result.covered = self.side.execute(EMBEDDED, {"model": model}).fetchone()["n"]
            result.total = self.side.execute(TOTAL).fetchone()["n"]
            result.state, result.seconds = state, time.perf_counter() - started
            self.side.execute(END, {"model": model, "state": state, "error": error,
                                    "embedded": result.covered, "total": result.total})
        log.info("backfill of %s %s: %d embedded by this run, %d handed to the outbox, %.1f s",
                 model, state, result.embedded, result.failed, result.seconds)
        return result

    def _round(self, positions: dict, result: Result, bar) -> int:
        """One pass over every workspace, a batch from each in turn. Returns the vectors stored."""
        workspaces = deque(_Workspace(r["id"], positions.get(r["id"])) for r in self.side.execute(WORKSPACES))
        stored = 0
        while workspaces and not self.stop.is_set():
            ws = workspaces.popleft()
            batch = self._next_batch(ws)
            if not batch:
                continue
            self._pace(result.embedded)
            stored += self._store_batch(ws, batch, result, bar)
            workspaces.append(ws)
        return stored

    def _next_batch(self, ws: _Workspace) -> list[tuple[int, datetime]]:
        while len(ws.page) < self.batch_size and not ws.exhausted:
            cursor = ws.fetched or ws.after
            rows = self.side.execute(PAGE, {
                "workspace_id": ws.id, "model": self.model.model, "limit": PAGE_SIZE,
                "after_at": cursor[0] if cursor else None, "after_id": cursor[1] if cursor else None,
            }).fetchall()
            if rows:
                ws.fetched = (rows[-1]["created_at"], rows[-1]["message_id"])
            ws.page.extend((r["message_id"], r["created_at"]) for r in rows if r["message_id"] not in self.failed_ids)
            ws.exhausted = len(rows) < PAGE_SIZE
        return [ws.page.popleft() for _ in range(min(self.batch_size, len(ws.page)))]

    def _store_batch(self, ws: _Workspace, batch: list[tuple[int, datetime]], result: Result, bar) -> int:
        failures = 0
        while True:
            try:
                return self._try_batch(ws, batch, result, bar)
            except GatewayError as exc:
                # Unreachable, slow or circuit open: nothing this batch did. Wait and try it again.
                failures += 1
                if failures >= self.max_failures:
                    raise
                delay = min(WAIT_MAX_S, max(0.05, self.settings.embeddings.embeddings_backoff_s) * 2 ** (failures - 1))
                log.warning("embeddings %s; backfill waits %.1f s (%d/%d): %s", exc.category, delay,
                            failures, self.max_failures, exc.reason)
                if self.stop.wait(delay):
                    return 0

    def _try_batch(self, ws: _Workspace, batch: list[tuple[int, datetime]], result: Result, bar) -> int:
        model = self.model.model
        last_id, last_at = batch[-1]  # skipped or refused ones too: the closing round looks again
        with self.conn.transaction():
            ids = [i for i, _ in batch]
            held = {r["message_id"] for r in self.conn.execute(HOLD_JOBS, {"ids": ids})}
            workers = {r["message_id"] for r in self.conn.execute(JOBS_OF, {"ids": ids})} - held
            ids = [i for i in ids if i not in workers]
            rows = self.conn.execute(LOCK_BATCH, {"ids": ids, "model": model}).fetchall() if ids else []
            done, failed = self._embed(ws.id, rows)
            if done:
                self.conn.execute(STORE, {"model": model, "ids": list(done),
                                          "vectors": [vectors.param(self.conn, v) for v in done.values()]})
                self.conn.execute(SETTLE_JOBS, {"ids": [i for i in done if i in held]})
            if failed:
                self.conn.execute(HAND_TO_OUTBOX, {"ids": list(failed), "errors": list(failed.values()),
                                                   "delay_s": self.settings.worker.worker_backoff_s})
                self.failed_ids.update(failed)
            self.conn.execute(SAVE_POSITION, {"model": model, "workspace_id": ws.id, "at": last_at, "id": last_id})
            self.conn.execute(PROGRESS, {"model": model, "embedded": len(done), "failed": len(failed)})
        ws.after = (last_at, last_id)
        result.embedded += len(done)
        result.failed += len(failed)
        bar.update(len(done))
        return len(done)

    def _embed(self, workspace_id: int, rows: list[dict]) -> tuple[dict[int, list[float]], dict[int, str]]:
        if not rows:
            return {}, {}
        texts = [document_text(r, self.settings.embeddings.embeddings_document_max_chars) for r in rows]
        ids = [r["message_id"] for r in rows]
        try:
            return dict(zip(ids, self.gateway.embed_documents(self.side, workspace_id, texts, "backfill"))), {}
        except GatewayError as exc:
            if not exc.answered:
                raise
            if len(rows) == 1:
                return {}, {ids[0]: exc.describe()}
        done, failed = {}, {}
        for message_id, text in zip(ids, texts):  # find the text the server refuses
            try:
                done[message_id] = self.gateway.embed_documents(self.side, workspace_id, [text], "backfill")[0]
            except GatewayError as exc:
                if not exc.answered:
                    raise
                failed[message_id] = exc.describe()
        return done, failed

    def _pace(self, embedded: int) -> None:
        """Hold to `rate` messages per second, averaged over the run."""
        if self.rate <= 0:
            return
        due = self._began + embedded / self.rate
        delay = due - time.monotonic()
        if delay > 0:
            self.stop.wait(delay)


def run_backfill(settings: Settings, url: str, model: str, **options) -> Result:
    """Run the backfill of `model` to its end. When the database goes away under it (a restart, a
    failover), it waits for it (store.db.wait_for_database) and carries on from its checkpoint:
    the batch in flight was rolled back with its connection, and the lock went with it."""
    stop = options.setdefault("stop", threading.Event())
    while True:
        backfill = None
        try:
            backfill = Backfill(settings, url, model, **options)
            return backfill.run()
        except psycopg.OperationalError as exc:
            if backfill is not None and not lost_connection(exc, backfill.conn, backfill.side):
                raise
            log.warning("backfill of %s: lost the database (%s); reconnecting", model, type(exc).__name__)
            if not wait_for_database(url, stop, settings.database.database_retry_max_s, f"backfill of {model}"):
                raise
        finally:
            if backfill is not None:
                backfill.close()


def lock_held(conn: psycopg.Connection, model: str) -> bool:
    """Is a backfill of `model` running now (in any process)?"""
    return bool(conn.execute(LOCK_HELD, {"class": LOCK_CLASS, "model": model}).fetchone()["held"])
