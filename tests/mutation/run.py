"""Mutation check: the privacy tests must fail, by name, when a narrowing predicate is weakened.

For each mutant the project is copied to a scratch directory, one predicate is replaced with
`true` there, and the test suites run against the copy. A mutant that no test notices is a
hole in the tests, and fails this check.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

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
SUITES_FOR["backscroll/search/turns.py"] = SUITES_FOR["sql/0004_disclosure.sql"] = SUITES_FOR["backscroll/search/history_sql.py"]
for _sql in ("sql/0007_history_candidates.sql", "sql/0012_lineage_verdicts.sql", "sql/0018_fail_closed.sql",
             "sql/0027_audience_statistics.sql", "sql/0028_external_into_members.sql"):
    SUITES_FOR[_sql] = SUITES_FOR["backscroll/search/history_sql.py"]
SUITES_FOR["backscroll/web/transcript.py"] = ["tests/browser/test_page_http.py", "tests/api/test_read_replica.py"]


def suites_for(mutant: Mutant) -> list[str]:
    return list(getattr(mutant, "suites", ())) or SUITES_FOR.get(mutant.file, SUITES)


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
        raise SystemExit(f"mutant refers to {constant}, which no longer exists")
    end = following.search(source, start.end())
    return start.start(), end.start() if end else len(source)


def apply(mutant: Mutant, tree: Path) -> None:
    path = tree / mutant.file
    source = path.read_text()
    lo, hi = constant_region(source, mutant.constant, sql=mutant.file.endswith(".sql"))
    region = source[lo:hi]
    if region.count(mutant.old) != 1:
        raise SystemExit(f"mutant {mutant.name!r}: expected its text exactly once in {mutant.constant}, "
                         f"found {region.count(mutant.old)}; update tests/mutation/mutants.py")
    path.write_text(source[:lo] + region.replace(mutant.old, mutant.new) + source[hi:])


def copy_project(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def failing_tests(tree: Path, report: Path, suites: list[str]) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    where = subprocess.run([sys.executable, "-c", "import backscroll; print(backscroll.__file__)"], cwd=tree,
                           env=env, check=True, capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"the mutated copy is not what gets imported ({where}); the check would prove nothing")
    # A basetemp of its own: pytest prunes old run directories under /tmp/pytest-of-*, which
    # would pull a live embedded PostgreSQL out from under a concurrent run.
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--basetemp={report.parent / 'pytest'}", f"--junitxml={report}", *suites],
                   cwd=tree, env=env, capture_output=True, text=True)
    if not report.exists():
        raise SystemExit("pytest produced no report")
    failed = []
    for case in ET.parse(report).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return failed


def collected(marker: str, suites: list[str]) -> set[str]:
    """Test ids (module::name) carrying a marker, in the junit report's spelling."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", marker, *suites], cwd=ROOT, capture_output=True, text=True).stdout
    ids = set()
    for line in out.splitlines():
        if "::" in line:
            path, _, name = line.partition("::")
            ids.add(f"{path.removesuffix('.py').replace('/', '.')}::{name}")
    return ids


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
    if named and not any(named in t.partition("::")[2] for t in failed_set):
        return f"no test named *{named}* failed (the tests written for this case)"
    if expect == "exactly_lineage":
        named = {t for t in failed_set | privacy | lineage_marked if "lineage" in t.partition("::")[2]}
        missed = named - failed_set
        extra = failed_set - named - lineage_marked
        if missed or extra:
            return f"lineage tests that did not fail: {sorted(missed)}; other tests that failed: {sorted(extra)}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", help="only mutants whose name contains this text")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("BACKSCROLL_MUTATION_JOBS", os.cpu_count() or 1)),
                        help="mutants run at once (default: BACKSCROLL_MUTATION_JOBS, else the CPU count)")
    args = parser.parse_args()
    survivors = []
    chosen = [m for m in [*MUTANTS, *HISTORY_MUTANTS] if not args.k or args.k in m.name]
    marked: dict[tuple[str, ...], tuple[set[str], set[str]]] = {}
    for mutant in chosen:
        suites = tuple(suites_for(mutant))
        if suites not in marked:
            marked[suites] = collected("privacy", list(suites)), collected("lineage", list(suites))

    def run_one(mutant: Mutant) -> tuple[list[str], str | None]:
        suites = suites_for(mutant)
        privacy, lineage_marked = marked[tuple(suites)]
        with tempfile.TemporaryDirectory(prefix="backscroll-mutant-") as scratch:
            tree = Path(scratch) / "tree"
            copy_project(tree)
            apply(mutant, tree)
            failed = failing_tests(tree, Path(scratch) / "report.xml", suites)
        return failed, verdict(mutant, failed, privacy, lineage_marked)

    # Mutants run side by side (each in its own copy, with its own PostgreSQL and pytest base
    # folder): most of a run waits on the database, so two at a time on two cores take about
    # two thirds of the time of one after the other.
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, mutant): mutant for mutant in chosen}
        for number, future in enumerate(as_completed(futures), start=1):
            mutant = futures[future]
            failed, problem = future.result()
            state = "killed" if problem is None else "SURVIVED"
            print(f"[{number}/{len(chosen)}] {mutant.name}: {state} by {len(failed)} test(s)", flush=True)
            for name in failed:
                print(f"      {name}")
            if problem is not None:
                print(f"      !! {problem}")
                survivors.append(mutant.name)
    if survivors:
        print(f"\n{len(survivors)} mutant(s) not caught as required:")
        for name in survivors:
            print(f"  - {name}")
        return 1
    print(f"\nall {len(chosen)} mutants killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
