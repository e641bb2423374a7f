"""`backscroll worker`: drains the embedding outbox.

The database writes one job per indexable message (a trigger on the search sidecar, only while
a model is registered). The worker claims a batch of due jobs with `FOR UPDATE SKIP LOCKED`,
embeds their text through the gateway, and in the same transaction stores the vectors and
deletes the jobs. Killed mid-batch, the transaction rolls back: the jobs are there again, no
vector was stored, and the primary key (message, model) means a retry can never add a second.

Failures, by whose fault they are:
- the server refused one text (it answered with an error): that job's attempts go up, its next
  attempt backs off exponentially, and after `worker_max_attempts` it is parked with its error;
  a batch the server refused is retried one text at a time, so one poison message does not hold
  back the rest;
- the server is down, slow or its circuit open: nothing is the jobs' fault; they are put back a
  little later without counting an attempt, and the worker waits longer before trying again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from itertools import groupby

import psycopg

from ..config import Settings
from ..store.db import connect, lost_connection, wait_for_database
from . import vectors
from .backfill import BackfillRunning, lock_held, run_backfill
from .document import document_text
from .gateway import Gateway, GatewayError, gateway_for
from .health import Heartbeat
from .metrics import WorkerMetrics

log = logging.getLogger(__name__)

IDLE_MAX_S = 60.0

CLAIM = """
select o.message_id, o.attempts, c.workspace_id, m.body, m.role::text as role, c.title,
       (select a.display_name from actors a join workspaces w on w.id = c.workspace_id
         where a.id = m.speaker_actor_id and w.speaker_names) as speaker
  from embedding_outbox o
  join messages m on m.id = o.message_id
  join conversations c on c.id = m.conversation_id
 where o.parked_at is null and o.next_attempt_at <= now()
 order by o.next_attempt_at, o.message_id
 limit %(limit)s
   for update of o skip locked
   -- A message being deleted is skipped rather than waited for (and cannot be deleted under us).
   for key share of m skip locked
"""
STORE = """
insert into message_embeddings (message_id, model, embedding)
select u.message_id, %(model)s, u.embedding
  from unnest(%(ids)s::bigint[], %(vectors)b::vector[]) as u(message_id, embedding)
on conflict (message_id, model) do update set embedding = excluded.embedding, embedded_at = now()
"""
DONE = "delete from embedding_outbox where message_id = any(%(ids)s::bigint[])"
FAILED = """
update embedding_outbox o
   set attempts = o.attempts + 1,
       last_error = f.error,
       next_attempt_at = now() + make_interval(secs => least(%(max_s)s, %(base_s)s * power(2, o.attempts))),
       parked_at = case when o.attempts + 1 >= %(max_attempts)s then now() end
  from unnest(%(ids)s::bigint[], %(errors)s::text[]) as f(message_id, error)
 where o.message_id = f.message_id
returning o.message_id, o.parked_at is not null as parked
"""
POSTPONED = """
update embedding_outbox
   set next_attempt_at = now() + make_interval(secs => %(delay_s)s), last_error = %(error)s
 where message_id = any(%(ids)s::bigint[])
"""
# The outbox at a glance, for `queue()` and the metrics (one statement, one scan of the table): the
# oldest due job's age is since it was queued, so a job postponed again and again (the server
# down) ages as its message waits for a vector.
QUEUE = """
select count(*) filter (where parked_at is null) as pending,
       count(*) filter (where parked_at is null and next_attempt_at <= now()) as due,
       count(*) filter (where parked_at is not null) as parked,
       coalesce(extract(epoch from now() - min(enqueued_at) filter (
           where parked_at is null and next_attempt_at <= now())), 0)::float8 as oldest_due_s
  from embedding_outbox
"""
QUEUE_COUNTS = ("pending", "due", "parked")


@dataclass
class Stats:
    batches: int = 0
    embedded: int = 0
    failed: int = 0
    parked: int = 0
    postponed: int = 0
    reconnects: int = 0


# The configured model's backfill, when one is owed: registered over existing messages
# (`pending`), or stopped before it finished (`interrupted`, `failed`, or `running` with nobody
# holding its lock: killed).
BACKFILL_STATE = "select state from embedding_backfills where model = %(model)s"
OWED = ("pending", "interrupted", "failed", "running")


class Worker:
    def __init__(self, settings: Settings, url: str, *, gateway: Gateway | None = None,
                 stop: threading.Event | None = None, batch_size: int | None = None,
                 heartbeat: Heartbeat | None = None, metrics: WorkerMetrics | None = None):
        self.settings = settings
        self.heartbeat = heartbeat or Heartbeat()
        self.metrics = metrics or WorkerMetrics(lambda: self.heartbeat.age_s)
        self.gateway = gateway or gateway_for(settings.embeddings)
        self.gateway.require_configured()  # off (no model) or nowhere to send: nothing to do
        self.stop = stop or threading.Event()
        self.batch_size = batch_size or settings.worker.worker_batch_size
        # Ledger rows commit on their own: a call that was made is paid for even if the batch it
        # served rolls back.
        self.ledger = connect(url, autocommit=True)
        try:
            self.model = vectors.get_model(self.ledger, self.gateway.model)
            configured = settings.embeddings.embeddings_dimensions
            if configured and configured != self.model.dimensions:
                raise vectors.DimensionMismatch(
                    f"BACKSCROLL_EMBEDDINGS_DIMENSIONS is {configured} but model "
                    f"{self.model.model!r} is registered with {self.model.dimensions}")
        except BaseException:
            self.ledger.close()
            raise
        self.conn = connect(url)
        self.url = url
        self.stats = Stats()
        self.metrics.start(self.model.model)
        self._metrics_due = 0.0
        self._idle = 0.0
        self._backfill: threading.Thread | None = None
        self._backfill_due = 0.0

    def close(self) -> None:
        if self._backfill is not None:
            self._backfill.join(timeout=30)  # it sees the same stop event and ends its batch
        self.conn.close()
        self.ledger.close()

    def maybe_backfill(self) -> threading.Thread | None:
        """Start the configured model's backfill in a thread when one is owed and no process runs
        it: changing the model starts its backfill without anyone running `backscroll backfill`."""
        if not self.settings.worker.worker_backfill or (self._backfill is not None and self._backfill.is_alive()):
            return None
        now = time.monotonic()
        if now < self._backfill_due:
            return None
        self._backfill_due = now + self.settings.worker.worker_backfill_check_s
        row = self.ledger.execute(BACKFILL_STATE, {"model": self.model.model}).fetchone()
        if row is None or row["state"] not in OWED or lock_held(self.ledger, self.model.model):
            return None
        log.info("worker: the backfill of %s is %s; running it beside the outbox", self.model.model, row["state"])

        def run() -> None:
            try:
                result = run_backfill(self.settings, self.url, self.model.model, stop=self.stop, quiet=True)
                log.info("worker: backfill of %s %s (%d embedded)", result.model, result.state, result.embedded)
            except BackfillRunning:
                log.info("worker: another process took the backfill of %s", self.model.model)
            except GatewayError as exc:
                log.warning("worker: backfill of %s stopped: %s; retried in %.0f s", self.model.model,
                            exc.describe(), self.settings.worker.worker_backfill_check_s)
            except psycopg.OperationalError as exc:
                log.warning("worker: backfill of %s stopped: %s", self.model.model, exc)
            except Exception:
                log.exception("worker: backfill of %s failed", self.model.model)

        self._backfill = threading.Thread(target=run, name="backscroll-backfill", daemon=True)
        self._backfill.start()
        return self._backfill

    def _reconnect(self) -> None:
        for conn in (self.conn, self.ledger):
            try:
                conn.close()
            except psycopg.Error:
                pass
        while wait_for_database(self.url, self.stop, self.settings.database.database_retry_max_s, "worker",
                                tick=self.heartbeat.beat):
            try:
                self.ledger = connect(self.url, autocommit=True)
                self.conn = connect(self.url)
            except psycopg.OperationalError:
                continue  # gone again between the check and the connection
            self.stats.reconnects += 1
            self.metrics.reconnects.labels(model=self.model.model).inc()
            return

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def queue(self) -> dict:
        """The outbox's counts: pending (not parked), due (pending and due now), parked."""
        row = self.ledger.execute(QUEUE).fetchone()
        return {k: row[k] for k in QUEUE_COUNTS}

    def refresh_metrics(self, *, force: bool = False) -> dict | None:
        """Set the outbox gauges from QUEUE, at most every `worker_metrics_refresh_s` (unless
        forced); the row read, or None when it was not yet time."""
        now = time.monotonic()
        if not force and now < self._metrics_due:
            return None
        self._metrics_due = now + self.settings.worker.worker_metrics_refresh_s
        row = self.ledger.execute(QUEUE).fetchone()
        self.metrics.outbox(self.model.model, row)
        return row

    def run(self, *, once: bool = False) -> Stats:
        """Drain until stopped; with `once`, until no job is due (or the server is unreachable)."""
        log.info("worker embedding with %s (%d dimensions), batches of %d",
                 self.model.model, self.model.dimensions, self.batch_size)
        while not self.stop.is_set():
            self.heartbeat.beat()  # each wait below is bounded (IDLE_MAX_S, the poll, a reconnect's steps)
            try:
                if not once:
                    self.maybe_backfill()
                self.refresh_metrics()
                handled, transient = self.run_batch()
            except psycopg.OperationalError as exc:
                # The database restarted or failed over: the batch's transaction is gone with its
                # connection (its claims with it: the jobs are due again), so reconnect and go on.
                if not lost_connection(exc, self.conn, self.ledger):
                    raise
                log.warning("worker: lost the database (%s); reconnecting", type(exc).__name__)
                self._reconnect()
                continue
            if transient:
                if once:
                    break
                self._idle = min(max(self._idle * 2, self.settings.worker.worker_poll_s), IDLE_MAX_S)
                self.stop.wait(self._idle)
            elif handled:
                self._idle = 0.0
            elif once:
                break
            else:
                self.stop.wait(self.settings.worker.worker_poll_s)
        return self.stats

    def run_batch(self) -> tuple[int, bool]:
        """Claim, embed and store one batch. Returns (jobs claimed, whether the server was unreachable)."""
        started = time.perf_counter()
        with self.conn.transaction():
            rows = self.conn.execute(CLAIM, {"limit": self.batch_size}).fetchall()
            if not rows:
                return 0, False
            done: dict[int, list[float]] = {}
            failed: dict[int, str] = {}
            unreachable: GatewayError | None = None
            for workspace_id, group in groupby(sorted(rows, key=lambda r: r["workspace_id"]),
                                               key=lambda r: r["workspace_id"]):
                group = list(group)
                if unreachable is None:
                    unreachable = self._embed(workspace_id, group, done, failed)
            postponed = [r["message_id"] for r in rows if r["message_id"] not in done and r["message_id"] not in failed]
            self._finish(done, failed, postponed, unreachable)
        self.stats.batches += 1
        self.metrics.batch_seconds.labels(model=self.model.model).observe(time.perf_counter() - started)
        return len(rows), unreachable is not None

    def _embed(self, workspace_id: int, rows: list[dict], done: dict, failed: dict) -> GatewayError | None:
        texts = [document_text(r, self.settings.embeddings.embeddings_document_max_chars) for r in rows]
        try:
            vectors_ = self.gateway.embed_documents(self.ledger, workspace_id, texts, "message")
        except GatewayError as exc:
            if not exc.answered:
                return exc
            if len(rows) == 1:
                failed[rows[0]["message_id"]] = exc.describe()
                return None
            # The server refused the batch: find the text it refuses by trying each alone.
            for row, text in zip(rows, texts):
                try:
                    done[row["message_id"]] = self.gateway.embed_documents(self.ledger, workspace_id, [text],
                                                                           "message")[0]
                except GatewayError as one:
                    if not one.answered:
                        return one
                    failed[row["message_id"]] = one.describe()
            return None
        done.update(zip((r["message_id"] for r in rows), vectors_))
        return None

    def _finish(self, done: dict, failed: dict, postponed: list[int], unreachable: GatewayError | None) -> None:
        if done:
            self.conn.execute(STORE, {"model": self.model.model, "ids": list(done),
                                      "vectors": [vectors.param(self.conn, v) for v in done.values()]})
            self.conn.execute(DONE, {"ids": list(done)})
            self.stats.embedded += len(done)
            self.metrics.embedded.labels(model=self.model.model).inc(len(done))
        if failed:
            outcome = self.conn.execute(FAILED, {
                "ids": list(failed), "errors": list(failed.values()),
                "base_s": self.settings.worker.worker_backoff_s, "max_s": self.settings.worker.worker_backoff_max_s,
                "max_attempts": self.settings.worker.worker_max_attempts}).fetchall()
            parked = [r["message_id"] for r in outcome if r["parked"]]
            self.stats.failed += len(failed)
            self.stats.parked += len(parked)
            self.metrics.failed.labels(model=self.model.model).inc(len(failed))
            self.metrics.parked.labels(model=self.model.model).inc(len(parked))
            log.warning("%d message(s) could not be embedded%s: %s", len(failed),
                        f", {len(parked)} parked" if parked else "", next(iter(failed.values())))
        if postponed:
            error = unreachable.describe() if unreachable else "postponed"
            self.conn.execute(POSTPONED, {"ids": postponed, "error": error,
                                          "delay_s": max(self.settings.worker.worker_backoff_s, self._idle)})
            self.stats.postponed += len(postponed)
            self.metrics.postponed.labels(model=self.model.model).inc(len(postponed))
            log.warning("embeddings server unreachable; %d job(s) postponed: %s", len(postponed), error)


def run_worker(settings: Settings, url: str, *, once: bool = False, stop: threading.Event | None = None,
               batch_size: int | None = None, heartbeat: Heartbeat | None = None,
               metrics: WorkerMetrics | None = None) -> Stats:
    with Worker(settings, url, stop=stop, batch_size=batch_size, heartbeat=heartbeat, metrics=metrics) as worker:
        return worker.run(once=once)


def start_thread(settings: Settings, url: str) -> tuple[threading.Thread, threading.Event]:
    """A worker in a daemon thread (for `backscroll demo`); set the event to stop it."""
    stop = threading.Event()
    worker = Worker(settings, url, stop=stop)

    def drain() -> None:
        try:
            worker.run()
        except psycopg.OperationalError as exc:  # the database went away with the process
            log.debug("worker stopped: %s", exc)
        finally:
            worker.close()

    thread = threading.Thread(target=drain, name="backscroll-worker", daemon=True)
    thread.start()
    return thread, stop
