"""The API under load, over loopback HTTP, beside what the same work costs in process.

    .venv/bin/python bench/bench_http.py                           # 50,000 messages, 8 s a cell
    .venv/bin/python bench/bench_http.py --messages 300000 --seconds 15 --workers 2

`backscroll serve --workers N` is started on a free loopback port over the generated corpus
(bench/corpus.py). For each operation — session search for a rare word and a common one,
search_history, one-message ingestion — clients on threads (keep-alive connections) send
requests back to back for `--seconds` at concurrency 1, 4 and 16; the table gives requests/s,
p50/p99 and errors. Beside it, the in-process cost: the same call on one connection, single
threaded, its p50; `cores / that` is the CPU bound the HTTP rate is compared with (issue 19's
target: at least 70% of it at concurrency 16, no errors). Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import httpx
import psycopg

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import corpus  # noqa: E402
from bench_sessions import fresh_database, loadavg, log  # noqa: E402
from backscroll.access.auth import TokenKind, authenticate, create_token  # noqa: E402
from backscroll.cli import available_cpus  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.search import history, maintenance, sessions, turns  # noqa: E402
from backscroll.search.cursor import CursorCodec  # noqa: E402
from backscroll.store.db import connect, session_kwargs, start_embedded  # noqa: E402

DB_NAME = "backscroll_bench_http"
CONCURRENCY = (1, 4, 16)
LIMITS = sessions.Limits.of(Settings.declared().search)


def prepare(server_url: str, messages: int) -> tuple[str, dict]:
    url = fresh_database(server_url, DB_NAME)
    with psycopg.connect(url, autocommit=True) as raw:
        loaded = corpus.load(raw, corpus.Spec(messages=messages), progress=lambda m: log("  " + m))
    with connect(url, autocommit=True) as conn:
        maintenance.fold(conn)
        conn.execute("vacuum (analyze)")
        ws = loaded.workspace_ids[0]
        agents = loaded.agent_ids[0]
        _, reader = create_token(conn, TokenKind.reader, workspace_id=ws, actor_id=loaded.reader_actor_id,
                                 agent_ids=agents[:2])
        _, runtime = create_token(conn, TokenKind.runtime, workspace_id=ws, agent_ids=[agents[0]])
        _, ingest = create_token(conn, TokenKind.ingest, workspace_id=ws)
        agent_slug = conn.execute("select slug from agents where id = %s", (agents[0],)).fetchone()["slug"]
        dest = conn.execute("select id from conversations where agent_id = %s order by id limit 1",
                            (agents[0],)).fetchone()["id"]
    return url, {"reader": reader, "runtime": runtime, "ingest": ingest, "agent": agent_slug, "dest": dest,
                 "workspace_id": ws}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_api(url: str, workers: int, port: int, out: Path) -> subprocess.Popen:
    env = {**os.environ, "BACKSCROLL_DATABASE_URL": url, "BACKSCROLL_POOL_MAX_SIZE": "20"}
    log_file = (out / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from backscroll.cli import main; raise SystemExit(main())", "serve",
         "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=out, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
        if proc.poll() is not None:
            break
    raise RuntimeError(f"the API did not start; see {out / 'serve.log'}")


def operations(base: str, t: dict) -> dict[str, tuple[str, object]]:
    """label -> a function of (client, i) sending one request."""
    reader = {"Authorization": f"Bearer {t['reader']}"}
    runtime = {"Authorization": f"Bearer {t['runtime']}"}
    ingest = {"Authorization": f"Bearer {t['ingest']}"}
    turn = httpx.post(f"{base}/v1/turns", headers=runtime, json={"agent": t["agent"], "conversation_id": t["dest"]},
                      timeout=30).json()["id"]
    conv = httpx.post(f"{base}/v1/conversations", headers=ingest, timeout=30, json={
        "agent": t["agent"], "connector": {"type": "web", "name": "bench"}, "external_id": "http-bench",
        "audience": {"kind": "workspace"}}).json()["id"]
    return {
        "session search, rare word": lambda c, i: c.get(f"{base}/v1/agent-sessions", headers=reader,
                                                        params={"q": corpus.RARE_TERM}),
        "session search, common word": lambda c, i: c.get(f"{base}/v1/agent-sessions", headers=reader,
                                                          params={"q": corpus.COMMON_TERM}),
        "search_history, rare word": lambda c, i: c.post(f"{base}/v1/tools/search_history", headers=runtime,
                                                         json={"turn_id": turn, "query": corpus.RARE_TERM,
                                                               "limit": 5}),
        "ingest one message": lambda c, i: c.post(f"{base}/v1/conversations/{conv}/messages", headers=ingest,
                                                  json={"role": "user", "body": f"load test message {i}"}),
    }


def load(send, concurrency: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    counter = iter(range(10**9))

    def client() -> None:
        nonlocal errors
        with httpx.Client(timeout=30) as c:
            while time.monotonic() < stop:
                i = next(counter)
                t0 = time.perf_counter()
                try:
                    ok = send(c, i).status_code < 400
                except httpx.HTTPError:
                    ok = False
                dt = (time.perf_counter() - t0) * 1000
                with lock:
                    latencies.append(dt)
                    errors += not ok

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    started = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    return {"rps": len(latencies) / elapsed, "p50": statistics.median(latencies) if latencies else 0,
            "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0,
            "errors": errors, "requests": len(latencies)}


def in_process(url: str, t: dict, repeat: int = 30) -> dict[str, float]:
    """Each operation's p50 in process, on one connection (authentication included)."""
    codec = CursorCodec(b"bench-http" * 4)
    out = {}
    # Opened as the API opens its connections (statements prepared only where the product asks).
    with psycopg.connect(url, **session_kwargs()) as conn:

        def run(call) -> float:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                with conn.transaction():
                    call()
                times.append((time.perf_counter() - t0) * 1000)
            return statistics.median(times)

        def session(q):
            principal = authenticate(conn, f"Bearer {t['reader']}")
            scope = sessions.resolve_scope(conn, principal, None)
            sessions.search(conn, scope, codec, q, None, 20, LIMITS, settings=Settings.declared())

        def search_history():
            principal = authenticate(conn, f"Bearer {t['runtime']}")
            turn = turns.register_turn(conn, t["workspace_id"], principal.agent_ids,
                                       turns.TurnIn(agent=t["agent"], conversation_id=t["dest"]))
            history.search_history(conn, t["workspace_id"], principal.agent_ids,
                                   history.SearchRequest(turn_id=turn, query=corpus.RARE_TERM, limit=5), None,
                                       settings=Settings.declared())

        out["session search, rare word"] = run(lambda: session(corpus.RARE_TERM))
        out["session search, common word"] = run(lambda: session(corpus.COMMON_TERM))
        out["search_history, rare word"] = run(search_history)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=8.0, help="per cell (operation x concurrency)")
    ap.add_argument("--workers", type=int, default=0, help="serve --workers (0: one per CPU)")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "http")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    workers = args.workers or available_cpus()
    start_load = loadavg()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = start_embedded(args.out / "pg")
    log(f"loading {args.messages:,} messages")
    url, tokens = prepare(server_url, args.messages)
    costs = in_process(url, tokens)
    port = free_port()
    proc = start_api(url, workers, port, args.out)
    rows = []
    try:
        ops = operations(f"http://127.0.0.1:{port}", tokens)
        for label, send in ops.items():
            for c in CONCURRENCY:
                r = load(send, c, args.seconds)
                rows.append((label, c, r))
                log(f"{label} x{c}: {r['rps']:.0f} req/s p50 {r['p50']:.1f} p99 {r['p99']:.1f} errors {r['errors']}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    cores = available_cpus()
    lines = [f"## The API under load, {args.messages:,} messages — {time.strftime('%Y-%m-%d %H:%M')} UTC", "",
             f"Machine: {os.cpu_count()} cores ({cores} usable); `serve --workers {workers}`; load average "
             f"(1 / 5 / 15 min) {start_load} at the start, {loadavg()} at the end; {args.seconds:g} s a cell; the "
             "clients run on the same machine (their CPU is taken from the server's).", "",
             "| operation | clients | req/s | p50 ms | p99 ms | errors | in process p50 ms | CPU bound req/s | × bound |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, c, r in rows:
        cost = costs.get(label)
        bound = cores * 1000 / cost if cost else None
        lines.append(f"| {label} | {c} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['errors']} | "
                     + (f"{cost:.1f} | {bound:.0f} | {r['rps'] / bound:.2f} |" if bound else " | | |"))
    text = "\n".join(lines) + "\n"
    print(text)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps({"rows": rows, "in_process": costs}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
