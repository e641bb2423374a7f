"""Bulk loading through the product's write path, against the physical limit of this design.

    .venv/bin/python bench/bench_load.py                      # 100,000 messages
    .venv/bin/python bench/bench_load.py --messages 1000000

The same rows are COPYed into the same tables twice, into fresh databases of one server:

- **plain**: triggers off (`session_replication_role = replica`): the rows and the tables' own
  indexes, nothing else. No design that keeps a search index can load faster;
- **product**: the triggers on, as every write path runs them: the search sidecar (documents in
  the workspace's configuration, its GIN and recency indexes), the BM25 statistics deltas, the
  conversations' last activity. Then the deltas are folded, as the maintenance thread would.

The corpus (bench/corpus.py: skewed workspaces and agents, three languages, the product's default
`multilingual` configuration) is generated once and written to a COPY file first, so the
generator's Python time is in neither figure. Prints the rate of each, their ratio (issue 19's
target: the product at least half of plain), the delta rows and the sizes, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import corpus  # noqa: E402
from bench_sessions import fresh_database, loadavg, log  # noqa: E402
from backscroll.search import maintenance  # noqa: E402
from backscroll.store.db import start_embedded  # noqa: E402

PARENTS = ["workspaces", "agents", "connectors", "actors", "conversations"]
MESSAGE_COLUMNS = ["id", "conversation_id", "external_id", "speaker_actor_id", "role", "body", "state",
                   "audience_kind", "audience_namespace", "audience_readers", "created_at", "updated_at", "language"]
SIZES = """
select c.relname as name, pg_total_relation_size(c.oid) as bytes
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = 'public' and c.relkind = 'r'
   and c.relname in ('messages', 'message_search', 'search_term_deltas', 'search_term_stats')
"""


def export(url: str, folder: Path) -> dict[str, Path]:
    """Each table the corpus fills, as a COPY file (text: a regconfig travels by name)."""
    files = {}
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        for table in [*PARENTS, "messages"]:
            columns = MESSAGE_COLUMNS if table == "messages" else None
            target = folder / f"{table}.copy"
            what = sql.SQL("copy {} {} to stdout (format text)").format(
                sql.Identifier(table),
                sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Identifier, columns))) if columns else sql.SQL(""))
            with target.open("wb") as out, cur.copy(what) as copy:
                for chunk in copy:
                    out.write(chunk)
            files[table] = target
    return files


def copy_in(cur: psycopg.Cursor, table: str, path: Path, columns: list[str] | None = None) -> None:
    what = sql.SQL("copy {} {} from stdin (format text)").format(
        sql.Identifier(table),
        sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Identifier, columns))) if columns else sql.SQL(""))
    with path.open("rb") as f, cur.copy(what) as copy:
        while block := f.read(1 << 20):
            copy.write(block)


def load(url: str, files: dict[str, Path], triggers: bool) -> dict:
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction(), conn.cursor() as cur:
            for table in PARENTS:
                copy_in(cur, table, files[table])
        out: dict = {}
        started = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            if not triggers:
                cur.execute("set local session_replication_role = replica")
            copy_in(cur, "messages", files["messages"], MESSAGE_COLUMNS)
        out["copy_s"] = time.perf_counter() - started
        out["delta_rows"] = conn.execute("select count(*) from search_term_deltas").fetchone()[0]
        out["documents"] = conn.execute("select count(*) from message_search").fetchone()[0]
        if triggers:
            started = time.perf_counter()
            with psycopg.connect(url, autocommit=True, row_factory=dict_row) as folding:
                maintenance.fold(folding)
            out["fold_s"] = time.perf_counter() - started
        out["sizes"] = {r[0]: r[1] for r in conn.execute(SIZES).fetchall()}
        out["messages"] = conn.execute("select count(*) from messages").fetchone()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--database-url", default=None, help="a PostgreSQL server instead of an embedded one")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "load")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    load_start = loadavg()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = args.database_url or start_embedded(args.out / "pg")
    spec = corpus.Spec(messages=args.messages, seed=args.seed)
    results = {}
    with tempfile.TemporaryDirectory(dir=args.out) as scratch:
        url = fresh_database(server_url, "backscroll_bench_load_source")
        log(f"generating {args.messages:,} messages (triggers off; the generator's time is not measured)")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("set session_replication_role = replica")
            corpus.load(conn, spec, progress=lambda m: log("  " + m))
        files = export(url, Path(scratch))
        log(f"messages file: {files['messages'].stat().st_size / 1e6:.0f} MB")
        for mode, triggers in (("plain", False), ("product", True)):
            target = fresh_database(server_url, f"backscroll_bench_load_{mode}")
            log(f"{mode}: COPY {args.messages:,} messages, triggers {'on' if triggers else 'off'}")
            results[mode] = load(target, files, triggers)
            log(f"{mode}: {results[mode]['copy_s']:.1f} s")
    rate = {m: r["messages"] / r["copy_s"] for m, r in results.items()}
    end_load = loadavg()
    lines = [f"## Bulk load, {args.messages:,} messages — {time.strftime('%Y-%m-%d %H:%M')} UTC", "",
             f"Machine: {os.cpu_count()} cores; load average (1 / 5 / 15 min) {load_start} at the start, "
             f"{end_load} at the end. One COPY of every message, in one transaction.", "",
             "| write path | COPY s | messages/s | × plain | documents | BM25 delta rows (per message) | fold s |"
             " messages + sidecar + deltas |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, r in results.items():
        size = sum(r["sizes"].values()) / 1e6
        per = r["delta_rows"] / max(r["messages"], 1)
        lines.append(f"| {mode} | {r['copy_s']:.1f} | {rate[mode]:,.0f} | {rate[mode] / rate['plain']:.2f} | "
                     f"{r['documents']:,} | {r['delta_rows']:,} ({per:.2f}) | "
                     f"{r.get('fold_s', 0):.1f} | {size:,.0f} MB |")
    ratio = rate["product"] / rate["plain"]
    lines += ["", f"Target (issue 19): the product at least half the rate of plain COPY: "
                  f"{ratio:.2f} {'met' if ratio >= 0.5 else 'missed'}.", ""]
    text = "\n".join(lines)
    print(text)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps({"messages": args.messages, "results": results,
                                                       "load": [load_start, end_load]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
