"""The Dockerfiles, checked without Docker: pinned bases, multi-stage, non-root, and what they install."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib

import pytest

from tests.deploy.conftest import ROOT

DOCKERFILES = sorted((ROOT / "docker").glob("*.Dockerfile"))
# name:exact.version[-variant] or @sha256:digest; never a floating tag
PINNED = re.compile(r"^[\w./-]+(:\d+(\.\d+){2}[\w.-]*)?(@sha256:[0-9a-f]{64})?$")


def _instructions(path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.M)
            if not m.group(0).lstrip().startswith("#")]


def _base_images(path) -> list[str]:
    steps = _instructions(path)
    args = dict(re.match(r"(\w+)=(\S+)", v).groups() for k, v in steps if k == "ARG" and "=" in v)
    bases = []
    for kind, value in steps:
        if kind == "FROM":
            image = value.split()[0]
            bases.append(re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image))
    return bases


def test_both_images_exist():
    assert [p.name for p in DOCKERFILES] == ["api.Dockerfile", "operator.Dockerfile"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_multi_stage_on_a_pinned_base(path):
    bases = [b for b in _base_images(path)]
    assert len(bases) >= 2, "multi-stage: a build stage and a runtime stage"
    for base in bases:
        assert ":latest" not in base and PINNED.match(base) and (":" in base or "@" in base), base


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_runs_as_a_numeric_non_root_user_and_writes_no_bytecode(path):
    steps = _instructions(path)
    final = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM"):]
    users = [v for k, v in final if k == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and int(users[-1].split(":")[0]) != 0, users
    assert any(k == "ENV" and "PYTHONDONTWRITEBYTECODE=1" in v for k, v in final), "read-only root: no .pyc writes"
    assert not any(k == "ADD" for k, _ in steps), "COPY only: ADD fetches URLs and unpacks archives"


def test_api_image_serves_every_command_and_ships_the_migrations():
    steps = _instructions(ROOT / "docker/api.Dockerfile")
    assert ("COPY", "sql ./sql") in steps
    assert ("ENTRYPOINT", '["backscroll"]') in steps
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    assert setuptools["package-dir"]["backscroll.sql"] == "sql"
    assert "*.sql" in setuptools["package-data"]["backscroll.sql"]


def test_operator_image_installs_what_the_operator_imports():
    text = (ROOT / "docker/operator.Dockerfile").read_text()
    installed = {re.split(r"[<>=]", r)[0].replace("-", "_") for r in re.findall(r'"([a-z][\w-]*[<>=][^"]*)"', text)}
    imported = set()
    for source in (ROOT / "operator/backscroll_operator").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported - set(sys.stdlib_module_names) if m != "__future__"}
    # kubernetes is imported lazily, inside a function, so it is among the imports too.
    assert third_party <= installed, third_party - installed
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["operator"]
    assert {re.split(r"[<>=]", r)[0] for r in extra} <= installed


def test_dockerignore_sends_only_what_the_images_copy():
    lines = [l for l in (ROOT / ".dockerignore").read_text().splitlines() if l and not l.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!backscroll/", "!sql/", "!operator/"} <= set(lines)


def test_an_installed_package_finds_its_migrations(tmp_path):
    # The layout a wheel installs (backscroll/ with sql/ inside, no checkout around it), so
    # `backscroll migrate` works in the image.
    site = tmp_path / "site"
    pkg = site / "backscroll"
    (pkg / "store").mkdir(parents=True)
    for name in ("__init__.py", "errors.py", "store/__init__.py", "store/migrate.py"):
        (pkg / name).write_bytes((ROOT / "backscroll" / name).read_bytes())
    (pkg / "sql").mkdir()
    for sql in (ROOT / "sql").glob("*.sql"):
        (pkg / "sql" / sql.name).write_bytes(sql.read_bytes())
    code = ("from backscroll.store.migrate import load_migrations, migrations_root; "
            "print(migrations_root(), len(load_migrations()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    root, count = done.stdout.split()
    assert root == str(pkg / "sql") and int(count) == len(list((ROOT / "sql").glob("*.sql")))
