"""Upkeep of the lexical index, in the background: folding BM25 statistics and rebuilding a
workspace's documents after its text search configuration (or speaker-name setting) changes.

Messages written without their language (migration 0022) get it detected here too, a batch at a
time, before any rebuild advances.

A change is recorded on the workspace (`ts_config_next`, `speaker_names_next`); the documents
are rebuilt into `message_search.tsv_next` in batches while search keeps answering from `tsv`
with the current configuration; new messages get both documents from the indexing trigger.
When every document is rebuilt, one transaction swaps them and the configuration together, so
no query ever mixes a query in one configuration with documents in another.

The API runs this in a thread (`Maintenance`, every `maintenance_interval_s`); `backscroll
reindex` runs a pending rebuild in the foreground with a progress bar. Several processes may
run it: folding is serialized by an advisory lock, and each batch claims its rows with SKIP LOCKED.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from ..config import LanguageSettings, SearchSettings
from ..errors import BadRequest, NotFound
from ..ingest import messages, workspaces
from ..language import SAMPLE_CHARS, detector

log = logging.getLogger("backscroll.maintenance")

FOLD_BATCH = 200_000  # term deltas folded per transaction

FOLD = "select backscroll_fold_search_stats(%(limit)s) as folded"
PENDING_DELTAS = "select count(*) as n from search_term_deltas"

TEXT_SEARCH_CONFIGS = "select cfgname::text as name from pg_ts_config order by 1"
SELECT_WORKSPACE = """
select w.id, w.slug, w.ts_config::text as ts_config, w.speaker_names,
       w.ts_config_next::text as ts_config_next, w.speaker_names_next, w.reindex_requested_at
  from workspaces w where w.slug = %(slug)s
"""
# A new request restarts the rebuild: documents built for an earlier target are dropped.
FORGET_REBUILT = "update message_search set tsv_next = null where workspace_id = %(ws)s and tsv_next is not null"
NEXT_REINDEX = """
select w.id, w.slug, w.ts_config_next::text as cfg, w.speaker_names_next as names
  from workspaces w
 where w.ts_config_next is not null
 order by w.reindex_requested_at, w.id
 limit 1
"""
PROGRESS = """
select count(*) filter (where s.tsv_next is not null) as done, count(*) as total
  from message_search s where s.workspace_id = %(ws)s
"""
REBUILD_BATCH = """
with batch as (
    select s.message_id
      from message_search s
     where s.workspace_id = %(ws)s and s.message_id > %(after)s and s.tsv_next is null
     order by s.message_id
     limit %(batch)s
       for update of s skip locked
)
update message_search s
   set tsv_next = backscroll_document(%(cfg)s::regconfig, m.language, case when %(names)s then a.display_name end,
                                      m.body)
  from batch b
  join messages m on m.id = b.message_id
  left join actors a on a.id = m.speaker_actor_id
 where s.message_id = b.message_id
returning s.message_id
"""
LOCK_WORKSPACE = """
select ts_config_next::text as cfg, speaker_names_next as names
  from workspaces where id = %(ws)s for update
"""
# Documents still missing (a message written while the request was being recorded), rebuilt
# under the workspace lock just before the swap.
REBUILD_REST = """
update message_search s
   set tsv_next = backscroll_document(%(cfg)s::regconfig, m.language, case when %(names)s then a.display_name end,
                                      m.body)
  from messages m
  left join actors a on a.id = m.speaker_actor_id
 where s.workspace_id = %(ws)s and s.tsv_next is null and m.id = s.message_id
"""
# Messages written without their language (before migration 0022, or by a path that did not
# detect it): detected here, a batch at a time. Setting it rewrites the message's document through
# the indexing trigger; vectors are not touched (nothing embedded changed).
PENDING_LANGUAGES = """
select m.id, left(m.body, %(sample)s) as body
  from messages m
 where m.language is null
 order by m.id
 limit %(batch)s
   for update of m skip locked
"""
COUNT_PENDING_LANGUAGES = "select count(*) as n from messages where language is null"
LANGUAGE_COUNTS = """
select coalesce(m.language::text, '(not yet detected)') as language, count(*) as n
  from messages m
 group by 1 order by 2 desc, 1
"""
SWAP_DOCUMENTS = """
update message_search
   set tsv = tsv_next, doc_len = backscroll_body_length(tsv_next), tsv_next = null
 where workspace_id = %(ws)s
"""


def fold(conn: psycopg.Connection, limit: int = FOLD_BATCH) -> int:
    """Fold pending BM25 deltas until none are left (or another process is folding)."""
    total = 0
    while True:
        with conn.transaction():
            n = conn.execute(FOLD, {"limit": limit}).fetchone()["folded"]
        total += n
        if n < limit:
            return total


@dataclass(frozen=True)
class Language:
    workspace_id: int
    workspace: str
    ts_config: str
    speaker_names: bool
    ts_config_next: str | None
    speaker_names_next: bool | None
    rebuilt: int
    documents: int

    @property
    def reindexing(self) -> bool:
        return self.ts_config_next is not None

    def as_dict(self) -> dict:
        return {"workspace": self.workspace, "text_search_config": self.ts_config,
                "speaker_names": self.speaker_names,
                "reindex": None if not self.reindexing else {
                    "text_search_config": self.ts_config_next, "speaker_names": self.speaker_names_next,
                    "rebuilt": self.rebuilt, "documents": self.documents}}


def language(conn: psycopg.Connection, slug: str) -> Language:
    row = conn.execute(SELECT_WORKSPACE, {"slug": slug}).fetchone()
    if row is None:
        raise NotFound(f"no workspace {slug!r}")
    progress = conn.execute(PROGRESS, {"ws": row["id"]}).fetchone() if row["ts_config_next"] else None
    return Language(row["id"], slug, row["ts_config"], row["speaker_names"], row["ts_config_next"],
                    row["speaker_names_next"], progress["done"] if progress else 0,
                    progress["total"] if progress else 0)


def check_text_search_config(conn: psycopg.Connection, cfg: str) -> str:
    """A text search configuration this server has (400 naming those it has otherwise)."""
    configs = [r["name"] for r in conn.execute(TEXT_SEARCH_CONFIGS).fetchall()]
    if cfg not in configs:
        raise BadRequest(f"unknown text search configuration {cfg!r}; this server has: {', '.join(configs)}",
                         code="invalid_text_search_config")
    return cfg


def request_reindex(conn: psycopg.Connection, slug: str, ts_config: str | None = None,
                    speaker_names: bool | None = None) -> Language:
    """Record a new text search configuration (and/or speaker-name setting) for a workspace;
    its documents are rebuilt in the background. Asking for what is already in place (and
    nothing pending) changes nothing."""
    current = language(conn, slug)
    cfg = check_text_search_config(conn, current.ts_config if ts_config is None else ts_config)
    names = current.speaker_names if speaker_names is None else speaker_names
    if not current.reindexing and (cfg, names) == (current.ts_config, current.speaker_names):
        return current
    if current.reindexing and (cfg, names) == (current.ts_config_next, current.speaker_names_next):
        return current
    with conn.transaction():
        workspaces.request_reindex(conn, current.workspace_id, cfg, names)
        conn.execute(FORGET_REBUILT, {"ws": current.workspace_id})
    log.info("workspace %s: documents will be rebuilt with %s (speaker names %s)", slug, cfg,
             "on" if names else "off")
    return language(conn, slug)


def detect_languages(conn: psycopg.Connection, batch: int, language: LanguageSettings) -> int:
    """Detect the language of up to `batch` messages written without it; how many were set."""
    detect = detector(conn, language)
    with conn.transaction():
        rows = conn.execute(PENDING_LANGUAGES, {"batch": batch, "sample": SAMPLE_CHARS}).fetchall()
        if rows:
            messages.set_languages(conn, [r["id"] for r in rows], detect.detect_all([r["body"] for r in rows]))
    return len(rows)


def language_counts(conn: psycopg.Connection) -> dict[str, int]:
    """How many messages each stemming configuration holds (`backscroll languages`), most first."""
    return {r["language"]: r["n"] for r in conn.execute(LANGUAGE_COUNTS).fetchall()}


def fill_languages(conn: psycopg.Connection, batch: int, language: LanguageSettings, *,
                   progress: bool = False) -> int:
    """Detect every missing language (`backscroll reindex`), with a progress bar if asked."""
    bar = None
    if progress:
        pending = conn.execute(COUNT_PENDING_LANGUAGES).fetchone()["n"]
        if pending:
            from tqdm import tqdm

            bar = tqdm(total=pending, unit="msg", desc="detect languages")
    total = 0
    while True:
        n = detect_languages(conn, batch, language)
        total += n
        if bar is not None:
            bar.update(n)
        if n < batch:
            break
    if bar is not None:
        bar.close()
    return total


@dataclass
class Step:
    workspace: str | None = None
    workspace_id: int | None = None
    rebuilt: int = 0
    swapped: bool = False


class Reindexer:
    """Advances pending rebuilds, a batch at a time, remembering where each workspace's walk is."""

    def __init__(self, batch: int):
        self.batch = batch
        self._after: dict[int, int] = {}

    def step(self, conn: psycopg.Connection) -> Step:
        job = conn.execute(NEXT_REINDEX).fetchone()
        if job is None:
            return Step()
        ws = job["id"]
        params = {"ws": ws, "cfg": job["cfg"], "names": job["names"], "batch": self.batch,
                  "after": self._after.get(ws, 0)}
        with conn.transaction():
            ids = [r["message_id"] for r in conn.execute(REBUILD_BATCH, params).fetchall()]
        if ids:
            self._after[ws] = max(ids)
            return Step(job["slug"], ws, len(ids))
        progress = conn.execute(PROGRESS, {"ws": ws}).fetchone()
        if params["after"] and progress["done"] < progress["total"]:
            # Rows behind the walk (locked by another rebuild, or restarted): walk again.
            self._after[ws] = 0
            return Step(job["slug"], ws, 0)
        return Step(job["slug"], ws, self._swap(conn, ws), swapped=True)

    def _swap(self, conn: psycopg.Connection, ws: int) -> int:
        with conn.transaction():
            target = conn.execute(LOCK_WORKSPACE, {"ws": ws}).fetchone()
            if target is None or target["cfg"] is None:
                return 0
            rest = conn.execute(REBUILD_REST, {"ws": ws, **target}).rowcount
            conn.execute(SWAP_DOCUMENTS, {"ws": ws})
            workspaces.swap_config(conn, ws)
        self._after.pop(ws, None)
        log.info("workspace %s: documents swapped to %s", ws, target["cfg"])
        return rest


def reindex(conn: psycopg.Connection, batch: int, *, progress: bool = False) -> list[str]:
    """Run every pending rebuild to its swap; returns the workspaces swapped."""
    done: list[str] = []
    reindexer = Reindexer(batch)
    bars: dict[str, object] = {}
    while True:
        step = reindexer.step(conn)
        if step.workspace is None:
            break
        if progress:
            bar = bars.get(step.workspace)
            if bar is None:
                from tqdm import tqdm

                total = conn.execute(PROGRESS, {"ws": step.workspace_id}).fetchone()
                bar = bars[step.workspace] = tqdm(total=total["total"], initial=total["done"], unit="doc",
                                                  desc=f"reindex {step.workspace}")
            bar.update(step.rebuilt)
        if step.swapped:
            done.append(step.workspace)
            if progress:
                bars[step.workspace].close()
    return done


class Maintenance:
    """The API's background thread: fold statistics, advance rebuilds, sleep, repeat."""

    def __init__(self, database_url: str, search: SearchSettings, language: LanguageSettings):
        self.url = database_url
        self.interval_s = search.maintenance_interval_s
        self.reindexer = Reindexer(search.reindex_batch_size)
        self.language = language
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self, conn: psycopg.Connection, budget_s: float | None = None) -> None:
        fold(conn)
        deadline = time.monotonic() + (budget_s if budget_s is not None else self.interval_s)
        while not self.stop.is_set() and time.monotonic() < deadline:
            batch = self.language.language_batch_size
            if detect_languages(conn, batch, self.language) < batch:
                break
        while not self.stop.is_set() and time.monotonic() < deadline:
            step = self.reindexer.step(conn)
            if step.workspace is None or step.swapped:
                break

    def _run(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True, row_factory=dict_row,
                                           application_name="backscroll-maintenance")
                self.run_once(conn)
            except psycopg.Error as exc:
                log.warning("maintenance: %s; retried in %.0f s", exc.__class__.__name__, self.interval_s)
                if conn is not None:
                    conn.close()
                conn = None
            except Exception:
                log.exception("maintenance failed; retried in %.0f s", self.interval_s)
            self.stop.wait(self.interval_s)
        if conn is not None:
            conn.close()

    def start(self) -> Maintenance:
        self._thread = threading.Thread(target=self._run, name="backscroll-maintenance", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
