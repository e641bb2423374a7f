"""The architecture the tree shows, kept by import-linter: the layers contract in pyproject.toml
(`[tool.importlinter]`) lets a package import only from the layers below it, and siblings in one
layer not from each other, so there is no import cycle between packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(cwd: Path, *, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    command = Path(sysconfig.get_path("scripts")) / "lint-imports"
    env = None
    if pythonpath is not None:
        env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([str(command), "--no-cache", "--no-logo"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def lint_with_import(tmp_path: Path, module: str, statement: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the tree whose `module` (under backscroll/) gained `statement`."""
    shutil.copytree(ROOT / "backscroll", tmp_path / "backscroll", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "backscroll" / module
    path.write_text(path.read_text() + f"\n{statement}  # noqa: E402,F401\n")
    return lint_imports(tmp_path, pythonpath=tmp_path)


def test_the_layers_contract_is_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_an_import_from_a_lower_layer_to_a_higher_one_breaks_it(tmp_path):
    """The contract bites: the store importing the search (a copy of the tree) is reported."""
    result = lint_with_import(tmp_path, "store/db.py", "from ..search import sessions")
    assert result.returncode != 0, result.stdout
    assert "backscroll.store.db -> backscroll.search.sessions" in result.stdout, result.stdout


def test_ingest_does_not_import_search(tmp_path):
    """search sits above ingest (issue 33): a turn's reply and memories are written by ingest, so
    ingest reaching up into search is reported."""
    result = lint_with_import(tmp_path, "ingest/links.py", "from ..search import turns")
    assert result.returncode != 0, result.stdout
    assert "backscroll.ingest.links -> backscroll.search.turns" in result.stdout, result.stdout


def test_every_package_of_the_tree_is_declared():
    """setuptools' explicit `packages` list is what a wheel ships: a package folder missing from
    it would import from a checkout and be absent from the image."""
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    tree = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "backscroll").rglob("__init__.py")}
    assert tree <= declared, sorted(tree - declared)
