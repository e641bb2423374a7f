"""Two revisions of Backscroll, one benchmark, one run: is a change latency-neutral?

A restructuring that claims to change no behaviour should also change no latency. Timing the
two revisions on different days measures the machine's mood, not the change; this runs each
revision's own benchmark script against the same PostgreSQL server and the same corpus,
alternating (A B B A ...) so that drift in the machine's load falls on both alike, and prints
each case's p50 and p95 side by side with the load average of every run.

    .venv/bin/python bench/ab_revisions.py --before 9f0df67 sessions --messages 300000
    .venv/bin/python bench/ab_revisions.py --before 9f0df67 history --messages 300000

The before revision is checked out in a scratch worktree and imported through PYTHONPATH; the
after revision is this checkout (uncommitted changes included) unless --after names one. Both
must build the same corpus (the same bench/corpus.py and CORPUS_VERSION), which the second
benchmark's --reuse then finds; one whose corpus differs rebuilds it and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from bench_sessions import loadavg, log  # noqa: E402

# Flags each benchmark takes to time the product alone (no baselines, prototypes or EXPLAIN:
# they are not what changes between two revisions of the product).
PRODUCT_ONLY = {
    "sessions": ["--no-baselines", "--no-prototypes", "--no-explain"],
    "history": ["--variants", "all", "--no-explain"],
}


def checkout(rev: str, scratch: Path) -> tuple[Path, str]:
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = scratch / f"tree-{sha}"
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), sha], cwd=ROOT, check=True)
    return tree, sha


def cases(bench: str, results: dict) -> dict[str, tuple[str, float, float]]:
    """(label, p50, p95) per case of one run's results.json."""
    out = {}
    if bench == "sessions":
        for r in results["readers"]:
            for key, s in r["results"].items():
                out[f"{r['key']}/{key}"] = (f"{r['label']}: {s['label']}", s["p50"], s["p95"])
    else:
        for s in results["results"]:
            key = f"{s['destination']}/{s['term']}/{s['variant']}"
            out[key] = (f"{s['destination']}, `{s['term']}`, {s['variant']}", s["p50"], s["p95"])
    return out


def run_one(bench: str, tree: Path, url: str, out: Path, extra: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(tree / "bench" / f"bench_{bench}.py"), "--database-url", url, "--reuse",
           "--out", str(out), *PRODUCT_ONLY[bench], *extra]
    log(f"{tree.name}: {' '.join(cmd[1:])}")
    load_before = loadavg()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    results = json.loads((out / "results.json").read_text())
    results["_load"] = (load_before, loadavg())
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the baseline revision (any git revision)")
    ap.add_argument("--after", default=None, help="the revision under test (default: this checkout)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each revision, alternating A B B A")
    ap.add_argument("--out", type=Path, default=None,
                    help="scratch: worktrees, data, results (default bench/out/ab-BENCH)")
    ap.add_argument("--database-url", default=None, help="a PostgreSQL server instead of an embedded one")
    ap.add_argument("--report-only", action="store_true",
                    help="print the table of the runs already under --out (no benchmark is run)")
    ap.add_argument("bench", choices=sorted(PRODUCT_ONLY), help="which benchmark")
    args, extra = ap.parse_known_args(argv)
    args.out = args.out or BENCH_DIR / "out" / f"ab-{args.bench}"
    args.out.mkdir(parents=True, exist_ok=True)

    trees: list[tuple[str, Path, str]] = []
    scratch_trees = []
    for role, rev in (("before", args.before), ("after", args.after)):
        if rev is None:
            trees.append((role, ROOT, "this checkout"))
        elif args.report_only:
            trees.append((role, ROOT, rev))
        else:
            tree, sha = checkout(rev, args.out)
            scratch_trees.append(tree)
            trees.append((role, tree, sha))
    if args.report_only:
        runs = {"before": [], "after": []}
        for role in runs:
            for path in sorted(args.out.glob(f"{role}-*/results.json"),
                               key=lambda p: int(p.parent.name.rsplit("-", 1)[1])):
                results = json.loads(path.read_text())
                results["_load"] = results.get("load_average", ["?", "?"])
                runs[role].append(results)
        print(report(args, trees, runs))
        return 0

    if args.database_url:
        url = args.database_url
    else:
        from backscroll.store.db import start_embedded
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            url = start_embedded(args.out / "pg")

    runs: dict[str, list[dict]] = {"before": [], "after": []}
    order = []
    for i in range(args.rounds):
        pair = trees if i % 2 == 0 else trees[::-1]
        order.extend(pair)
    try:
        for n, (role, tree, _) in enumerate(order):
            runs[role].append(run_one(args.bench, tree, url, args.out / f"{role}-{n}", extra))
    finally:
        for tree in scratch_trees:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)

    print(report(args, trees, runs))
    return 0


def report(args, trees, runs) -> str:
    by_role = {role: [cases(args.bench, r) for r in rs] for role, rs in runs.items()}
    keys = list(by_role["before"][0])
    lines = [f"# bench_{args.bench}: {trees[0][2]} (before) against {trees[1][2]} (after)", ""]
    lines.append(f"Machine: {os.cpu_count()} cores. Runs alternate A B B A; each cell is the median over the runs of "
                 "that revision of the run's p50 (p95).")
    lines.append("")
    lines.append("Load average (1 / 5 / 15 min) at the start and end of each run: " + "; ".join(
        f"{role} {r['_load'][0]} → {r['_load'][1]}" for role in ("before", "after") for r in runs[role]))
    lines.append("")
    lines.append("| case | before p50 ms | after p50 ms | after/before | before p95 ms | after p95 ms |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    ratios = []
    for k in keys:
        if not all(k in c for cs in by_role.values() for c in cs):
            continue
        label = by_role["before"][0][k][0]
        b50 = statistics.median(c[k][1] for c in by_role["before"])
        a50 = statistics.median(c[k][1] for c in by_role["after"])
        b95 = statistics.median(c[k][2] for c in by_role["before"])
        a95 = statistics.median(c[k][2] for c in by_role["after"])
        ratio = a50 / b50 if b50 else float("nan")
        ratios.append(ratio)
        lines.append(f"| {label} | {b50:.2f} | {a50:.2f} | {ratio:.2f} | {b95:.2f} | {a95:.2f} |")
    if ratios:
        lines.append("")
        lines.append(f"Median after/before over {len(ratios)} cases: {statistics.median(ratios):.2f} "
                     f"(min {min(ratios):.2f}, max {max(ratios):.2f}).")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
