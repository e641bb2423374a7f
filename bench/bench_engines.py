"""Backscroll's search_history beside the physical limit of its design and a dedicated engine.

    .venv/bin/python bench/bench_history.py --messages 1000000      # builds the corpus first
    .venv/bin/python bench/bench_engines.py --messages 1000000      # the same database, reused

Over bench_history's corpus and database (built by it when missing or different), for its
destinations (a DM, a public channel, a private room) of one agent and a rare and a common word,
three rows in one run, taken round-robin:

- **sidecar anchor**: the seed's raw-SQL design, one statement: the sidecar's `GIN(tsv)` and
  `btree(agent_id)` combined in a BitmapAnd, a plain audience predicate on the conversation
  (public or workspace, the destination itself, or members whose readers include all of the
  destination's), top 10 by ts_rank. What one indexed statement costs: no disclosure rule (no
  lineage, evidence or identity links), no BM25, no audit;
- **tantivy**: BM25 in an embedded search library (`tantivy` from PyPI, in process, no round
  trip), the same documents (the sidecar's: finished user and assistant messages) with the
  agent, the conversation, its audience and readers as indexed filter fields, and the same
  narrowing as the anchor; its index built here, timed;
- **Backscroll**: `history.search_history` as bench_history times it (a fresh turn, every
  predicate, the evidence and the audit row written, committed).

Prints a table (p50 / p95 ms, × anchor) with the load average; writes results.md and
results.json under --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import corpus  # noqa: E402
from bench_history import (  # noqa: E402
    TERMS, Timed, Variant, build, call, connect, destinations, percentile, start_server,
)
from bench_sessions import fmt, loadavg, log, machine  # noqa: E402

try:
    import tantivy
except ImportError:  # pragma: no cover - the bench extra
    tantivy = None

ANCHOR = """
select s.message_id
  from message_search s
  join conversations c on c.id = s.conversation_id
 where s.agent_id = %(agent)s
   and s.tsv @@ plainto_tsquery(%(cfg)s::regconfig, %(term)s)
   and (c.audience_kind in ('public', 'workspace')
        or c.id = %(dest)s
        or (c.audience_kind = 'members' and c.audience_readers @> %(readers)s::text[]))
 order by ts_rank(s.tsv, plainto_tsquery(%(cfg)s::regconfig, %(term)s)) desc, s.message_id desc
 limit 10
"""
DOCUMENTS = """
select s.message_id, s.agent_id, s.conversation_id, c.audience_kind::text as audience,
       c.audience_readers as readers, left(m.body, 100000) as body
  from message_search s
  join conversations c on c.id = s.conversation_id
  join messages m on m.id = s.message_id
 where s.workspace_id = %(ws)s
"""


class Engine:
    """The workspace's documents in a tantivy index, searched with the anchor's narrowing."""

    def __init__(self, conn, ws: int, folder: Path):
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("message_id", stored=True, indexed=True, fast=True)
        builder.add_integer_field("agent_id", indexed=True, fast=True)
        builder.add_integer_field("conversation_id", indexed=True, fast=True)
        builder.add_text_field("audience", tokenizer_name="raw")
        builder.add_text_field("readers", tokenizer_name="raw")
        builder.add_text_field("body", tokenizer_name="en_stem")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(folder))
        started = time.perf_counter()
        writer = self.index.writer(heap_size=256_000_000, num_threads=1)
        self.docs = 0
        with conn.transaction(), conn.cursor(name="documents") as cur:
            cur.itersize = 20_000
            cur.execute(DOCUMENTS, {"ws": ws})
            for r in cur:
                writer.add_document(tantivy.Document(
                    message_id=r["message_id"], agent_id=r["agent_id"], conversation_id=r["conversation_id"],
                    audience=r["audience"], readers=list(r["readers"] or []), body=r["body"]))
                self.docs += 1
                if self.docs % 200_000 == 0:
                    log(f"  tantivy: {self.docs:,} documents")
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.build_s = time.perf_counter() - started
        self.size_mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6
        self.searcher = self.index.searcher()

    def query(self, agent: int, dest: int, readers: list[str], term: str):
        Occur, Query = tantivy.Occur, tantivy.Query
        term_q = lambda field, value: Query.term_query(self.schema, field, value)  # noqa: E731
        members = Query.boolean_query([(Occur.Must, term_q("audience", "members")),
                                       *[(Occur.Must, term_q("readers", r)) for r in readers]])
        audience = Query.boolean_query([(Occur.Should, term_q("audience", "public")),
                                        (Occur.Should, term_q("audience", "workspace")),
                                        (Occur.Should, term_q("conversation_id", dest)),
                                        (Occur.Should, members)])
        return Query.boolean_query([(Occur.Must, self.index.parse_query(term, ["body"])),
                                    (Occur.Must, term_q("agent_id", agent)),
                                    (Occur.Must, audience)])

    def search(self, query) -> list[int]:
        hits = self.searcher.search(query, 10).hits
        return [self.searcher.doc(address)["message_id"][0] for _, address in hits]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000, help="messages in bench_history's corpus")
    ap.add_argument("--seed", type=int, default=1, help="corpus seed")
    ap.add_argument("--repeat", type=int, default=30, help="timed rounds per (destination, term)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    ap.add_argument("--destinations", default="dm,public,room", help="from: dm, public, room")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "history",
                    help="bench_history's folder (its database is reused); results go to engines/ inside")
    args = ap.parse_args(argv)
    if tantivy is None:
        raise SystemExit("tantivy is not installed: pip install -e '.[bench]'")
    out = args.out / "engines"
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = start_server(args.out / "pg")
    url, info = build(server_url, corpus.Spec(messages=args.messages, seed=args.seed), corpus.Disclosure(), True)
    facts = info["corpus"]
    ws, agent, agent_slug = facts["workspace_ids"][0], facts["agent_ids"][0][0], corpus.AGENTS[0]
    conn = connect(url)
    mach = machine(conn)
    cfg = conn.execute("select ts_config::text as cfg from workspaces where id = %s", (ws,)).fetchone()["cfg"]
    dests = destinations(conn, agent, agent_slug, facts["reader_actor_id"], 30,
                         [d.strip() for d in args.destinations.split(",")])

    folder = Path(tempfile.mkdtemp(prefix="tantivy-", dir=out))
    try:
        log("tantivy: indexing the workspace's documents")
        engine = Engine(conn, ws, folder)
        log(f"tantivy: {engine.docs:,} documents in {engine.build_s:.1f} s, {engine.size_mb:.0f} MB")
        product = Variant("product", "Backscroll search_history", "product", {})
        history_conn = connect(url)
        history_timed = Timed(history_conn)
        rows = []
        load_start = loadavg()
        for d in dests:
            readers = list(d.row["readers"] or [])
            for term_key, term in TERMS:
                params = {"agent": agent, "cfg": cfg, "term": term, "dest": d.conversation_id, "readers": readers}
                query = engine.query(agent, d.conversation_id, readers, term)
                runs = {
                    "anchor": lambda params=params: conn.execute(ANCHOR, params).fetchall(),
                    "tantivy": lambda query=query: engine.search(query),
                    "product": lambda d=d, term=term: call(history_conn, history_timed, ws, d, term, product, None),
                }
                for _ in range(args.warmup):
                    for fn in runs.values():
                        fn()
                samples: dict[str, list[float]] = {k: [] for k in runs}
                results: dict[str, object] = {}
                for _ in range(args.repeat):  # round-robin: load from elsewhere lands on all alike
                    for k, fn in runs.items():
                        started = time.perf_counter()
                        results[k] = fn()
                        samples[k].append((time.perf_counter() - started) * 1000.0)
                anchor_p50 = statistics.median(samples["anchor"])
                hits = {"anchor": len(results["anchor"]), "tantivy": len(results["tantivy"]),
                        "product": len(results["product"].result["hits"])}
                for k in runs:
                    rows.append({"destination": d.key, "label": d.label, "term": term_key, "engine": k,
                                 "p50": statistics.median(samples[k]), "p95": percentile(samples[k], 0.95),
                                 "x_anchor": statistics.median(samples[k]) / anchor_p50, "hits": hits[k]})
                    log(f"  {d.key:6} {term_key:6} {k:8} p50 {fmt(rows[-1]['p50']):>7} ms  "
                        f"× anchor {rows[-1]['x_anchor']:.2f}  hits {hits[k]}")
        load_end = loadavg()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    names = {"anchor": "sidecar anchor (one statement: GIN + btree BitmapAnd, plain audience predicate, ts_rank)",
             "tantivy": "tantivy BM25, in process (agent, audience, readers as filter fields)",
             "product": "Backscroll search_history (every predicate, evidence and audit written)"}
    lines = [f"### Engines beside Backscroll (bench/bench_engines.py --messages {args.messages})\n",
             f"Machine: {mach['nproc']} CPUs; load average (1 / 5 / 15 min) {load_start} at the start, {load_end} at "
             f"the end. Corpus: bench_history's, {facts['messages']:,} messages; agent `{agent_slug}`. tantivy "
             f"{getattr(tantivy, '__version__', '')}: {engine.docs:,} documents of the workspace indexed in "
             f"{engine.build_s:.0f} s (one thread), {engine.size_mb:.0f} MB. {args.repeat} rounds, round-robin; "
             "p50 / p95 ms.\n",
             "| destination | word | engine | p50 / p95 ms | × anchor | hits |", "|---|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['term']} | {names[r['engine']]} | {fmt(r['p50'])} / {fmt(r['p95'])} | "
                     f"{r['x_anchor']:.2f} | {r['hits']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps({"machine": mach, "load_average": [load_start, load_end],
                                                  "tantivy": {"documents": engine.docs, "build_s": engine.build_s,
                                                              "size_mb": engine.size_mb},
                                                  "rows": rows}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
