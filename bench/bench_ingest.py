"""Ingestion through the API: one message per POST against POST /v1/import (NDJSON).

    .venv/bin/python bench/bench_ingest.py                    # 2,000 messages each way
    .venv/bin/python bench/bench_ingest.py --messages 10000 --per-line 100

Both run the product's write path end to end (authentication, validation, language detection,
the triggers) in process through the ASGI application (no sockets: the difference between the
two is the product's, not the network's), into fresh databases of one embedded server. Prints
messages/s for each and their ratio (issue 19's target: bulk at least 10x one-message POSTs),
with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path


BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from fastapi.testclient import TestClient  # noqa: E402

from bench_sessions import fresh_database, loadavg, log  # noqa: E402
from backscroll.access.auth import TokenKind, create_token  # noqa: E402
from backscroll.app import create_app  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.store.db import connect, start_embedded  # noqa: E402

WORDS = ("invoice harbour booking venue dinner transfer room guest wedding menu late early quiet garden "
         "terrace price refund deposit flight arrival").split()


def body(i: int) -> str:
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 12)) + f" number {i}"


def fresh(server_url: str, name: str) -> tuple[str, str]:
    url = fresh_database(server_url, name)
    with connect(url, autocommit=True) as conn:
        ws = conn.execute("insert into workspaces (slug, name) values ('bench', 'Bench') returning id").fetchone()["id"]
        _, secret = create_token(conn, TokenKind.ingest, workspace_id=ws)
    return url, secret


def client(url: str) -> TestClient:
    """The application in this process, as the API serves it, on the benchmark's database."""
    settings = Settings().replace(database={"database_url": url})
    return TestClient(create_app(settings, url), raise_server_exceptions=False)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def conversation(key: str) -> dict:
    return {"agent": "concierge", "connector": {"type": "slack", "name": "bench"}, "external_id": key,
            "title": f"Thread {key}", "audience": {"kind": "workspace"}}


def one_by_one(url: str, token: str, messages: int, per_line: int) -> float:
    h = bearer(token)
    with client(url) as http:
        started = time.perf_counter()
        for c in range(0, messages, per_line):
            conv = http.post("/v1/conversations", json=conversation(f"c{c}"), headers=h).json()["id"]
            for i in range(c, min(c + per_line, messages)):
                r = http.post(f"/v1/conversations/{conv}/messages", headers=h, json={
                    "external_id": f"m{i}", "role": "user", "body": body(i), "speaker": {"external_id": "alice"}})
                assert r.status_code == 201, r.text
        return time.perf_counter() - started


def bulk(url: str, token: str, messages: int, per_line: int, per_request: int) -> float:
    h = {**bearer(token), "content-type": "application/x-ndjson"}
    lines = []
    for c in range(0, messages, per_line):
        lines.append(json.dumps({**conversation(f"c{c}"), "messages": [
            {"external_id": f"m{i}", "role": "user", "body": body(i), "speaker": {"external_id": "alice"}}
            for i in range(c, min(c + per_line, messages))]}))
    with client(url) as http:
        started = time.perf_counter()
        for k in range(0, len(lines), per_request):
            r = http.post("/v1/import", content="\n".join(lines[k:k + per_request]).encode(), headers=h)
            assert r.status_code == 200 and not r.json()["rejected"], r.text
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--per-line", type=int, default=50, help="messages per conversation (per NDJSON line)")
    ap.add_argument("--lines-per-request", type=int, default=20)
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "ingest")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start_load = loadavg()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = start_embedded(args.out / "pg")
    times = {}
    url, token = fresh(server_url, "backscroll_bench_ingest_single")
    log(f"one message per POST: {args.messages:,}")
    times["one message per POST"] = one_by_one(url, token, args.messages, args.per_line)
    url, token = fresh(server_url, "backscroll_bench_ingest_bulk")
    log(f"POST /v1/import: {args.messages:,} in lines of {args.per_line}, {args.lines_per_request} lines a request")
    times["POST /v1/import (NDJSON)"] = bulk(url, token, args.messages, args.per_line, args.lines_per_request)
    base = args.messages / times["one message per POST"]
    lines = [f"## Ingestion through the API, {args.messages:,} messages — {time.strftime('%Y-%m-%d %H:%M')} UTC", "",
             f"Machine: {os.cpu_count()} cores; load average (1 / 5 / 15 min) {start_load} at the start, "
             f"{loadavg()} at the end. In process (ASGI), {args.per_line} messages per conversation.", "",
             "| path | s | messages/s | × one per POST |", "|---|---:|---:|---:|"]
    for label, s in times.items():
        rate = args.messages / s
        lines.append(f"| {label} | {s:.1f} | {rate:,.0f} | {rate / base:.1f} |")
    ratio = (args.messages / times["POST /v1/import (NDJSON)"]) / base
    lines += ["", f"Target (issue 19): bulk at least 10x one-message POSTs: {ratio:.1f}x "
                  f"{'met' if ratio >= 10 else 'missed'}.", ""]
    text = "\n".join(lines)
    print(text)
    (args.out / "results.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
