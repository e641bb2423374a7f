"""Mutation check: the privacy tests must fail, by name, when a narrowing predicate is weakened.

For each mutant the project is copied to a scratch directory, one predicate is replaced with
`true` there, and tests run against the copy. A mutant that no test notices is a hole in the
tests, and fails this check.

Two modes:

- `--full` (`make mutation-full`): every mutant runs its full suites (its file's, SUITES_FOR, or
  its own `suites`), and tests/mutation/killers.json is rewritten: for each mutant killed, the
  tests that failed under it (pytest node ids, with how long each took). A mutant's entry is
  keyed by its name and a hash of (file, constant, old, new), so a changed mutant has none.
- the default (`make mutation`, CI): only the mutants a change touches run. Each entry of the map
  carries a fingerprint of what its verdict rests on: the mutated constant's text (its anchor) and
  the files of the tests that killed it. A mutant whose fingerprint is unchanged since the map was
  written was killed, by those names, on that very text, and is reported as such without running;
  `--all` (`make mutation-all`) runs every mutant instead. A mutant that runs, with an entry,
  runs only a few of its recorded
  killers (the fastest; the one its `named` asks for; every test marked `privacy` for an
  `all_privacy` mutant). If they fail under the mutant it is killed, by those names. If it has no
  entry, or its recorded killers no longer kill it (or no longer exist, or fail on the unmutated
  tree), it falls back to its full suites, and the run says so; only a mutant its full suites do
  not kill either fails the check. The `exactly_lineage` mutant always runs its full suites: its
  verdict is about every test there (no other test may fail).

Either way a test counts as a kill only if it passes on the unmutated tree: the recorded killers a
run uses are run once, together, on an unmutated copy beside the mutants (a mutant killed from the
map only by tests that fail there too runs its full suites after all), and the tests that killed
mutants in full-suite runs are checked the same way after them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KILLERS = HERE / "killers.json"
sys.path.insert(0, str(HERE))

from history_mutants import HISTORY_MUTANTS  # noqa: E402
from mutants import MUTANTS, Mutant  # noqa: E402

SUITES = ["tests/db", "tests/api", "tests/semantic"]
# Each mutant runs the suites that exercise the file it edits (CI has 2 cores and 90 minutes;
# every suite for every mutant would take most of it). A mutant the narrower suites miss
# fails the check, so narrowing can only make the check stricter, never quietly weaker.
SUITES_FOR = {
    "backscroll/search/sessions_sql.py": ["tests/db/test_sessions.py", "tests/api/test_sessions_api.py",
                               "tests/api/test_bad_input.py", "tests/api/test_demo.py",
                               "tests/semantic/test_hybrid_sessions.py"],
    "backscroll/search/history_sql.py": ["tests/db/test_history_contract.py", "tests/db/test_history_property.py",
                              "tests/db/test_fail_closed.py",
                              "tests/api/test_history_api.py", "tests/api/test_external_audiences.py",
                              "tests/semantic/test_hybrid_history.py"],
}
SUITES_FOR["backscroll/search/turns.py"] = SUITES_FOR["backscroll/search/history_sql.py"]
# A mutated definitions file is applied, like every definitions file, by the copy's own migrate
# (each run's database is new), over whatever the migrations defined before it.
for _sql in ("sql/definitions/20_disclosure.sql", "sql/definitions/30_lineage.sql"):
    SUITES_FOR[_sql] = SUITES_FOR["backscroll/search/history_sql.py"]
SUITES_FOR["backscroll/web/transcript.py"] = ["tests/browser/test_page_http.py", "tests/api/test_read_replica.py"]
SUITES_FOR["backscroll/access/auth.py"] = SUITES_FOR["backscroll/ingest/workspaces.py"] = ["tests/api/test_admin_api.py"]

# From the map, a mutant runs at most this many of its recorded killers (fastest first); more
# would only cost time, one failing test by name is a kill.
FROM_MAP_AT_MOST = 3


class MutantTextError(Exception):
    """A mutant's anchor is gone: its constant, or its text exactly once inside it."""


def suites_for(mutant: Mutant) -> list[str]:
    return list(getattr(mutant, "suites", ())) or SUITES_FOR.get(mutant.file, SUITES)


def mutant_key(mutant: Mutant) -> str:
    """The mutant's entry in the killers map: its name and a hash of what it does."""
    what = json.dumps([mutant.file, mutant.constant, mutant.old, mutant.new])
    return f"{mutant.name} [{hashlib.sha256(what.encode()).hexdigest()[:12]}]"


def fingerprint(mutant: Mutant, killers) -> str:
    """What a recorded kill rests on: the anchor's text (the constant the mutant edits, as it is
    now) and the files of the tests that killed it."""
    source = (ROOT / mutant.file).read_text()
    lo, hi = constant_region(source, mutant.constant, sql=mutant.file.endswith(".sql"))
    h = hashlib.sha256(source[lo:hi].encode())
    for rel in sorted({t.split("::")[0] for t in killers}):
        path = ROOT / rel
        h.update(b"\0" + rel.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"(gone)"))
    return h.hexdigest()[:16]


def test_name(node_id: str) -> str:
    return node_id.rsplit("::", 1)[-1]


def constant_region(source: str, constant: str, sql: bool = False) -> tuple[int, int]:
    """Where a named Python constant (or, named `def NAME`, a module-level function), or a SQL
    function's definition, starts and ends."""
    if sql:
        start = re.search(rf"^create (or replace )?function {constant}\(", source, re.M)
        following = re.compile(r"^create ", re.M)
    elif constant.startswith("def "):
        start = re.search(rf"^{constant}\(", source, re.M)
        following = re.compile(r"^[A-Za-z_][A-Za-z0-9_]* = |^def |^class |^@", re.M)
    else:
        start = re.search(rf"^{constant} = ", source, re.M)
        following = re.compile(r"^[A-Za-z_][A-Za-z0-9_]* = |^def |^class |^@", re.M)
    if start is None:
        raise MutantTextError(f"mutant refers to {constant}, which no longer exists")
    end = following.search(source, start.end())
    return start.start(), end.start() if end else len(source)


def mutated(mutant: Mutant, source: str) -> str:
    lo, hi = constant_region(source, mutant.constant, sql=mutant.file.endswith(".sql"))
    region = source[lo:hi]
    if region.count(mutant.old) != 1:
        raise MutantTextError(f"mutant {mutant.name!r}: expected its text exactly once in {mutant.constant}, "
                              f"found {region.count(mutant.old)}; update tests/mutation/mutants.py")
    return source[:lo] + region.replace(mutant.old, mutant.new) + source[hi:]


def apply(mutant: Mutant, tree: Path) -> None:
    path = tree / mutant.file
    path.write_text(mutated(mutant, path.read_text()))


def anchor_problem(mutant: Mutant) -> str | None:
    path = ROOT / mutant.file
    if not path.exists():
        return f"mutant {mutant.name!r}: {mutant.file} no longer exists"
    try:
        mutated(mutant, path.read_text())
    except MutantTextError as e:
        return f"mutant {mutant.name!r}: {e}" if "refers to" in str(e) else str(e)
    return None


def copy_project(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@dataclass
class Report:
    """One pytest run: each test's outcome and seconds, and what was collected."""
    tests: dict[str, dict]
    collected: set[str]

    def failed(self) -> list[str]:
        return sorted(t for t, r in self.tests.items() if r["outcome"] == "failed")

    def passed(self) -> set[str]:
        return {t for t, r in self.tests.items() if r["outcome"] == "passed"}


def run_pytest(tree: Path, work: Path, targets: list[str], select: list[str] | None = None) -> Report:
    """pytest in `tree` (which must be what gets imported) on `targets`; with `select`, only those
    node ids among the targets' tests."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / "report.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(HERE)]), PYTHONDONTWRITEBYTECODE="1",
               BACKSCROLL_MUTATION_REPORT=str(report))
    env.pop("BACKSCROLL_MUTATION_SELECT", None)
    where = subprocess.run([sys.executable, "-c", "import backscroll; print(backscroll.__file__)"], cwd=tree,
                           env=env, check=True, capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"the copy is not what gets imported ({where}); the check would prove nothing")
    if select is not None:
        (work / "select.json").write_text(json.dumps(sorted(select)))
        env["BACKSCROLL_MUTATION_SELECT"] = str(work / "select.json")
        # A file that is gone would stop pytest before it runs anything: its tests are simply
        # not collected, and reported so.
        targets = sorted({t.split("::")[0] for t in select if (tree / t.split("::")[0]).is_file()})
        if not targets:
            return Report({}, set())
    # A basetemp of its own: pytest prunes old run directories under /tmp/pytest-of-*, which
    # would pull a live embedded PostgreSQL out from under a concurrent run.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "killers_plugin",
                           f"--basetemp={work / 'pytest'}", *targets],
                          cwd=tree, env=env, capture_output=True, text=True)
    if not report.exists():
        raise SystemExit(f"pytest produced no report (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    data = json.loads(report.read_text())
    return Report(data["tests"], set(data["collected"]))


def collected(marker: str, suites: list[str]) -> set[str]:
    """Node ids of the tests carrying a marker."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", marker, *suites], cwd=ROOT, capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if "::" in line and not line.startswith(" ")}


def verdict(mutant: Mutant, failed: list[str], privacy: set[str], lineage_marked: set[str]) -> str | None:
    """None when the mutant was caught as it must be; otherwise what went wrong."""
    expect = getattr(mutant, "expect", "any")
    failed_set = set(failed)
    if not failed_set:
        return "no test noticed"
    if expect == "all_privacy":
        missed = privacy - failed_set
        if not privacy:
            return "no tests are marked privacy"
        if missed:
            return f"privacy tests that did not fail: {sorted(missed)}"
    named = getattr(mutant, "named", "")
    if named and not any(named in test_name(t) for t in failed_set):
        return f"no test named *{named}* failed (the tests written for this case)"
    if expect == "exactly_lineage":
        named = {t for t in failed_set | privacy | lineage_marked if "lineage" in test_name(t)}
        missed = named - failed_set
        extra = failed_set - named - lineage_marked
        if missed or extra:
            return f"lineage tests that did not fail: {sorted(missed)}; other tests that failed: {sorted(extra)}"
    return None


@dataclass
class Plan:
    """What a mutant runs first: a few recorded killers, or (select None) its full suites, and why."""
    select: list[str] | None
    why_full: str = ""


def plan_from_map(mutant: Mutant, entry: dict | None, privacy: set[str]) -> Plan:
    expect = getattr(mutant, "expect", "any")
    if expect == "exactly_lineage":
        return Plan(None, "its verdict covers every test of its suites (exactly the lineage tests fail)")
    if entry is None:
        return Plan(None, "no entry in the killers map")
    if expect == "all_privacy":
        # Every test marked privacy must fail: run them all (a new one too), nothing else.
        return Plan(sorted(privacy)) if privacy else Plan(None, "no tests are marked privacy")
    killers = {t: s for t, s in entry["killers"].items() if "::" in t}
    ranked = sorted(killers, key=lambda t: (killers[t], t))
    if not ranked:
        return Plan(None, "no recorded killers")
    named = getattr(mutant, "named", "")
    first = next((t for t in ranked if named in test_name(t)), None)  # named "": the fastest
    if first is None:
        return Plan(None, f"no recorded killer is named *{named}*")
    # A spare or two, in case one stops failing; none much slower than the first.
    spares = [t for t in ranked if t != first and killers[t] <= max(5.0, 2 * killers[first])]
    return Plan([first, *spares[:FROM_MAP_AT_MOST - 1]])


@dataclass
class Outcome:
    mutant: Mutant
    from_map: bool
    failed: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # each failed test's, for the map
    problem: str | None = None
    why_full: str = ""
    wall: float = 0.0
    full_wall: float | None = None  # the full suites' run, when it ran


def fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def unmutated(tests: set[str], label: str) -> set[str]:
    """Run `tests` once, together, on an unmutated copy; the ones that pass."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="backscroll-unmutated-") as scratch:
        tree = Path(scratch) / "tree"
        copy_project(tree)
        report = run_pytest(tree, Path(scratch) / "work", [], select=sorted(tests))
    passed = report.passed() & tests
    print(f"{label}: {len(tests)} test(s) on the unmutated tree in {fmt(time.monotonic() - t0)}, "
          f"{len(passed)} pass", flush=True)
    for t in sorted(tests - passed):
        print(f"      {t}: {report.tests.get(t, {}).get('outcome', 'not found')} (cannot count as a kill)", flush=True)
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", help="only mutants whose name contains this text")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("BACKSCROLL_MUTATION_JOBS", os.cpu_count() or 1)),
                        help="mutants run at once (default: BACKSCROLL_MUTATION_JOBS, else the CPU count)")
    parser.add_argument("--full", action="store_true",
                        help="run every mutant against its full suites and rewrite tests/mutation/killers.json "
                             "(make mutation-full)")
    parser.add_argument("--missing", action="store_true",
                        help="as --full, but only for the mutants the killers map has no entry for; the other "
                             "entries stay (make mutation-missing: after adding or changing a mutant)")
    parser.add_argument("--record", action="store_true",
                        help="as the default, then record each mutant killed in this run in the killers map: the "
                             "tests that killed it, on the text it was killed on (make mutation-record: after a "
                             "change that moved anchors or edited killing tests, so that the next run finds them "
                             "untouched instead of running them again)")
    parser.add_argument("--all", action="store_true",
                        help="run every mutant (from the map where it has an entry), not only those a change "
                             "touches (make mutation-all)")
    args = parser.parse_args()
    args.full = args.full or args.missing
    started = time.monotonic()
    everything = [*MUTANTS, *HISTORY_MUTANTS]
    chosen = [m for m in everything if not args.k or args.k in m.name]
    if not chosen:
        print(f"no mutant's name contains {args.k!r}")
        return 1
    known = json.loads(KILLERS.read_text())["mutants"] if KILLERS.exists() else {}
    keys = {m.name: mutant_key(m) for m in everything}
    if args.missing:
        chosen = [m for m in chosen if keys[m.name] not in known]
        if not chosen:
            print("every mutant has an entry in the killers map")
            return 0
    mode = "full suites for every mutant; rewrites tests/mutation/killers.json" if args.full else \
        f"recorded killers from {KILLERS.relative_to(ROOT)} ({len(known)} entries), else full suites"
    print(f"mutation check: {len(chosen)} mutant(s), {args.jobs} at a time; {mode}", flush=True)

    # A mutant whose text is gone fails loudly, up front; the others still run.
    broken = {}
    for mutant in chosen:
        problem = anchor_problem(mutant)
        if problem:
            broken[mutant.name] = problem
            print(f"!! {problem}", flush=True)
    runnable = [m for m in chosen if m.name not in broken]
    # Untouched since the map was written: killed then, by the recorded names, on this very text.
    untouched = []
    if not (args.full or args.all):
        for mutant in runnable:
            entry = known.get(keys[mutant.name])
            if entry and entry.get("fingerprint") == fingerprint(mutant, entry["killers"]):
                untouched.append(mutant)
        runnable = [m for m in runnable if m not in untouched]
        print(f"{len(untouched)} mutant(s) untouched since the killers map was written (anchor and killing tests "
              f"unchanged; --all runs them too), {len(runnable)} to run", flush=True)
    if not args.full:
        stale = sorted(set(known) - set(keys.values()))
        if stale:
            print(f"note: {len(stale)} entr{'y' if len(stale) == 1 else 'ies'} of the killers map match no mutant "
                  f"(make mutation-full rewrites it): {stale}")

    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    # Which tests carry the markers some verdicts read, per suite set (collected side by side).
    marker_jobs = {}
    for mutant in runnable:
        suites = tuple(suites_for(mutant))
        if getattr(mutant, "expect", "any") != "any" and suites not in marker_jobs:
            marker_jobs[suites] = (pool.submit(collected, "privacy", list(suites)),
                                   pool.submit(collected, "lineage", list(suites)))
    marked = {suites: (privacy.result(), lineage.result()) for suites, (privacy, lineage) in marker_jobs.items()}

    def markers(mutant: Mutant) -> tuple[set[str], set[str]]:
        return marked.get(tuple(suites_for(mutant)), (set(), set()))

    plans = {m.name: Plan(None, "--full") if args.full else plan_from_map(m, known.get(keys[m.name]), markers(m)[0])
             for m in runnable}

    def run_one(mutant: Mutant, plan: Plan) -> Outcome:
        t0 = time.monotonic()
        suites = suites_for(mutant)
        privacy, lineage_marked = markers(mutant)
        outcome = Outcome(mutant, from_map=plan.select is not None, why_full=plan.why_full)
        with tempfile.TemporaryDirectory(prefix="backscroll-mutant-") as scratch:
            tree = Path(scratch) / "tree"
            copy_project(tree)
            try:
                apply(mutant, tree)
            except MutantTextError as e:
                outcome.problem = str(e)
                return outcome
            if plan.select is not None:
                report = run_pytest(tree, Path(scratch) / "map", [], select=plan.select)
                failed = [t for t in report.failed() if t in plan.select]
                problem = verdict(mutant, failed, privacy, lineage_marked)
                if problem is None:
                    outcome.failed = failed
                    outcome.wall = time.monotonic() - t0
                    return outcome
                outcome.from_map = False
                gone = sorted(set(plan.select) - report.collected)
                outcome.why_full = f"its recorded killers no longer kill it ({problem}" + \
                    (f"; no longer collected: {gone})" if gone else ")")
            t1 = time.monotonic()
            report = run_pytest(tree, Path(scratch) / "full", suites)
            outcome.full_wall = time.monotonic() - t1
        outcome.failed = report.failed()
        outcome.seconds = {t: report.tests[t]["seconds"] for t in outcome.failed}
        outcome.problem = verdict(mutant, outcome.failed, privacy, lineage_marked)
        outcome.wall = time.monotonic() - t0
        return outcome

    def expected_cost(mutant: Mutant) -> float:
        """Longest first, so the last mutant to finish is a short one."""
        plan, entry = plans[mutant.name], known.get(keys[mutant.name]) or {}
        if plan.select is None:
            return entry.get("seconds", 10_000.0)
        return sum(entry.get("killers", {}).get(t, 5.0) for t in plan.select)

    finished = 0

    def report_outcome(outcome: Outcome) -> None:
        nonlocal finished
        finished += 1
        state = "killed" if outcome.problem is None else "SURVIVED"
        how = "from the map" if outcome.from_map else "full suites" if args.full else f"full suites: {outcome.why_full}"
        print(f"[{finished}/{len(runnable)}] {outcome.mutant.name}: {state} by {len(outcome.failed)} test(s) "
              f"in {fmt(outcome.wall)} ({how})", flush=True)
        for name in outcome.failed:
            print(f"      {name}")
        if outcome.problem is not None:
            print(f"      !! {outcome.problem}")

    # The recorded killers this run uses must pass on the unmutated tree, or they prove nothing:
    # one pytest run for all of them, beside the mutants, judged when both are done.
    # Mutants run side by side (each in its own copy, with its own PostgreSQL and pytest base
    # folder): most of a run waits on the database, so two at a time on two cores take about
    # two thirds of the time of one after the other.
    wanted = set().union(*(set(p.select) for p in plans.values() if p.select))
    baseline = pool.submit(unmutated, wanted, "baseline: the recorded killers this run uses") if wanted else None
    outcomes: dict[str, Outcome] = {}
    futures = [pool.submit(run_one, m, plans[m.name]) for m in sorted(runnable, key=expected_cost, reverse=True)]
    for future in as_completed(futures):
        outcome = future.result()
        outcomes[outcome.mutant.name] = outcome
        report_outcome(outcome)
    checked: set[str] = set(wanted)  # tests run on the unmutated tree
    passing: set[str] = baseline.result() if baseline else set()  # of those, the ones that passed

    # A mutant killed from the map only by tests that fail on the unmutated tree too runs its
    # full suites after all.
    again = []
    for outcome in list(outcomes.values()):
        bad = [t for t in outcome.failed if t not in passing]
        if outcome.from_map and bad:
            failed = [t for t in outcome.failed if t in passing]
            problem = verdict(outcome.mutant, failed, *markers(outcome.mutant))
            if problem is None:
                outcome.failed = failed
            else:
                why = f"its recorded killers {bad} fail on the unmutated tree too"
                print(f"!! {outcome.mutant.name}: {why}; its full suites run", flush=True)
                again.append((outcome.mutant, Plan(None, why)))
    if again:
        finished -= len(again)
        for future in as_completed([pool.submit(run_one, m, plan) for m, plan in again]):
            outcome = future.result()
            outcomes[outcome.mutant.name] = outcome
            report_outcome(outcome)
    pool.shutdown()

    # Tests that counted as kills in a full-suite run and have not been run on the unmutated
    # tree yet: once, together, now. One that fails there too was no kill.
    counted = set().union(*(set(o.failed) for o in outcomes.values() if o.problem is None and not o.from_map))
    unchecked = {t for t in counted - checked if "::" in t}
    if unchecked:
        passing |= unmutated(unchecked, "after: the tests that killed mutants in full-suite runs")
        checked |= unchecked
    for outcome in outcomes.values():
        bad = [t for t in outcome.failed if t in checked and t not in passing]
        if outcome.problem is None and not outcome.from_map and bad:
            outcome.failed = [t for t in outcome.failed if t not in bad]
            outcome.seconds = {t: s for t, s in outcome.seconds.items() if t not in bad}
            outcome.problem = verdict(outcome.mutant, outcome.failed, *markers(outcome.mutant))
            if outcome.problem is not None:
                outcome.problem += f" (discounting {bad}, which fail on the unmutated tree too)"
                print(f"!! {outcome.mutant.name}: {outcome.problem}", flush=True)

    survivors = [(o.mutant.name, o.problem) for o in outcomes.values() if o.problem is not None]
    survivors += list(broken.items())
    if args.full:
        write_map(known, keys, chosen, list(outcomes.values()), partial=bool(args.k) or args.missing)
    elif args.record and not survivors:
        record_map(known, keys, list(outcomes.values()))

    total = time.monotonic() - started
    mapped = [o for o in outcomes.values() if o.from_map]
    fell = [o for o in outcomes.values() if not o.from_map]
    print(f"\ntime: {fmt(total)} in all; {len(mapped)} mutant(s) from the map "
          f"({fmt(sum(o.wall for o in mapped))} of mutant time), {len(fell)} on full suites "
          f"({fmt(sum(o.wall for o in fell))} of mutant time)")
    if fell and not args.full:
        print("on full suites:")
        for o in sorted(fell, key=lambda o: o.mutant.name):
            print(f"  - {o.mutant.name}: {o.why_full} ({fmt(o.wall)})")
    if survivors:
        print(f"\n{len(survivors)} mutant(s) not caught as required:")
        for name, problem in survivors:
            print(f"  - {name}: {problem}")
        return 1
    print(f"\nall {len(chosen)} mutants killed" + (f" ({len(untouched)} of them as recorded, untouched since)"
                                                    if untouched else ""))
    return 0


def write_map(known: dict, keys: dict[str, str], chosen: list[Mutant], outcomes: list[Outcome], partial: bool) -> None:
    """Rewrite killers.json from a full run: an entry for each mutant killed (with -k, the other
    mutants' entries stay; without, entries that match no mutant go)."""
    entries = dict(known) if partial else {k: v for k, v in known.items() if k in keys.values()}
    for mutant in chosen:
        entries.pop(keys[mutant.name], None)
    for o in outcomes:
        if o.problem is None:
            entries[keys[o.mutant.name]] = {
                "seconds": round(o.full_wall or o.wall, 1),
                "fingerprint": fingerprint(o.mutant, o.seconds),
                "killers": {t: round(s, 2) for t, s in sorted(o.seconds.items())},
            }
    document = {
        "about": "Written by `make mutation-full` (tests/mutation/run.py --full): for each mutant, keyed by its "
                 "name and a hash of (file, constant, old, new), the tests that killed it in the last full run, "
                 "with each test's seconds, and the full run's seconds. `make mutation` runs a few of these "
                 "instead of the mutant's suites, falling back to the suites when they no longer kill it. "
                 "Regenerate after changing tests or mutants.",
        "mutants": dict(sorted(entries.items())),
    }
    part = KILLERS.with_suffix(".json.part")
    part.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    part.replace(KILLERS)
    print(f"wrote {KILLERS.relative_to(ROOT)}: {len(entries)} entries")


def record_map(known: dict, keys: dict[str, str], outcomes: list[Outcome]) -> None:
    """The kills of this run, recorded: each killed mutant's entry names the tests that killed it
    here (each with its recorded seconds where the map had them) and the fingerprint of the text
    they killed it on. A verdict from the map rests on exactly that, so a later run that finds the
    anchor and those test files unchanged may report the mutant killed without running it."""
    entries = dict(known)
    for o in outcomes:
        if o.problem is not None or not o.failed:
            continue
        key = keys[o.mutant.name]
        old = entries.get(key) or {}
        recorded = old.get("killers", {})
        killers = {t: round(o.seconds.get(t, recorded.get(t, 5.0)), 2) for t in sorted(o.failed)}
        entries[key] = {"seconds": round(o.full_wall or old.get("seconds", o.wall), 1),
                        "fingerprint": fingerprint(o.mutant, killers), "killers": killers}
    document = json.loads(KILLERS.read_text()) if KILLERS.exists() else {"about": ""}
    document["mutants"] = dict(sorted(entries.items()))
    part = KILLERS.with_suffix(".json.part")
    part.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    part.replace(KILLERS)
    print(f"recorded {sum(1 for o in outcomes if o.problem is None and o.failed)} kill(s) in "
          f"{KILLERS.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
