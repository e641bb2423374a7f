"""Fixtures for the deployables' checks: helm and kubectl, rendering, the CRD's schema.

They run offline. A missing helm or kubectl fails these tests, here as in CI: `make helm` installs
helm into .tools/, and kubectl comes with the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts/backscroll"
CRD = ROOT / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml"
EXAMPLES = sorted((CHART / "examples").glob("*.yaml"))
# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion): CRD validation rules are GA there.
OLDEST_KUBERNETES = "1.29.0"


def _tool(name: str, *candidates: Path) -> str:
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} not found (`make helm` installs helm into .tools/; kubectl comes from your OS)"
    pytest.fail(message)


@pytest.fixture(scope="session")
def helm() -> str:
    env = os.environ.get("HELM")
    return _tool("helm", *([Path(env)] if env else []), ROOT / ".tools/helm")


@pytest.fixture(scope="session")
def kubectl() -> str:
    return _tool("kubectl")


def run(*args: str) -> subprocess.CompletedProcess:
    # HOME and XDG dirs in a scratch place: helm must not read or write the developer's config.
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/backscroll-helm/cache",
           "HELM_CONFIG_HOME": "/tmp/backscroll-helm/config", "HELM_DATA_HOME": "/tmp/backscroll-helm/data"}
    return subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=60)


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="session")
def render(helm):
    """helm template of the chart with values files and --set pairs; the documents, or a failure."""
    def _render(*values: Path, sets: tuple[str, ...] = (), include_crds: bool = False,
                namespace: str = "backscroll") -> list[dict]:
        args = [helm, "template", "rel", str(CHART), "--namespace", namespace]
        args += ["--include-crds"] if include_crds else []
        for path in values:
            args += ["-f", str(path)]
        for pair in sets:
            args += ["--set", pair]
        done = run(*args)
        assert done.returncode == 0, done.stderr
        return documents(done.stdout)
    return _render


@pytest.fixture(scope="session")
def crd_schema() -> dict:
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def of_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d.get("kind") == kind]
