"""bench/ runs on its own: its scripts import the product, each other and installed packages, never
the test suite (a benchmark that needs a helper has it in bench/; a test that needs a benchmark's
code imports it from there: one home, and the arrow points one way)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
TESTS = ROOT / "tests"


def suite_modules() -> set[str]:
    """What an import of the suite's code starts with: `tests`, or the name of a module or package
    at its top (world, migrations, ...: importable bare once tests/ is on sys.path), except names
    that bench/ or the standard library also has (tests/operator is not the `operator` module)."""
    top = {p.stem for p in TESTS.glob("*.py")} | {p.name for p in TESTS.iterdir() if (p / "__init__.py").is_file()}
    own = {p.stem for p in BENCH.glob("*.py")}
    return ({"tests"} | top) - own - set(sys.stdlib_module_names) - {"__init__"}


def imports_of_the_suite(folder: Path) -> list[str]:
    banned = suite_modules()
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            found += [f"{path.relative_to(folder.parent)}:{node.lineno}: import {name}"
                      for name in names if name.split(".")[0] in banned]
    return found


def test_no_benchmark_imports_the_test_suite():
    assert not imports_of_the_suite(BENCH)


def test_the_check_bites(tmp_path):
    """A benchmark importing a test helper, as bench_ingest.py once did, is reported by file and line."""
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "bench_x.py").write_text("import json\nimport operator\n\nfrom tests.world import client\nimport world\n")
    assert imports_of_the_suite(folder) == ["bench/bench_x.py:4: import tests.world", "bench/bench_x.py:5: import world"]
