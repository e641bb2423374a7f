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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutants import MUTANTS, Mutant  # noqa: E402

SUITES = ["tests/db", "tests/api"]


def constant_region(source: str, constant: str) -> tuple[int, int]:
    start = re.search(rf"^{constant} = ", source, re.M)
    if start is None:
        raise SystemExit(f"mutant refers to {constant}, which no longer exists")
    following = re.compile(r"^[A-Za-z_][A-Za-z0-9_]* = |^def |^class |^@", re.M)
    end = following.search(source, start.end())
    return start.start(), end.start() if end else len(source)


def apply(mutant: Mutant, tree: Path) -> None:
    path = tree / mutant.file
    source = path.read_text()
    lo, hi = constant_region(source, mutant.constant)
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


def failing_tests(tree: Path, report: Path) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    where = subprocess.run([sys.executable, "-c", "import backscroll; print(backscroll.__file__)"], cwd=tree,
                           env=env, check=True, capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"the mutated copy is not what gets imported ({where}); the check would prove nothing")
    # A basetemp of its own: pytest prunes old run directories under /tmp/pytest-of-*, which
    # would pull a live embedded PostgreSQL out from under a concurrent run.
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--basetemp={report.parent / 'pytest'}", f"--junitxml={report}", *SUITES],
                   cwd=tree, env=env, capture_output=True, text=True)
    if not report.exists():
        raise SystemExit("pytest produced no report")
    failed = []
    for case in ET.parse(report).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", help="only mutants whose name contains this text")
    args = parser.parse_args()
    survivors = []
    chosen = [m for m in MUTANTS if not args.k or args.k in m.name]
    for number, mutant in enumerate(chosen, start=1):
        with tempfile.TemporaryDirectory(prefix="backscroll-mutant-") as scratch:
            tree = Path(scratch) / "tree"
            copy_project(tree)
            apply(mutant, tree)
            failed = failing_tests(tree, Path(scratch) / "report.xml")
        verdict = "killed" if failed else "SURVIVED"
        print(f"[{number}/{len(chosen)}] {mutant.name}: {verdict} by {len(failed)} test(s)", flush=True)
        for name in failed:
            print(f"      {name}")
        if not failed:
            survivors.append(mutant.name)
    if survivors:
        print(f"\n{len(survivors)} mutant(s) survived — the tests do not notice:")
        for name in survivors:
            print(f"  - {name}")
        return 1
    print(f"\nall {len(chosen)} mutants killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
