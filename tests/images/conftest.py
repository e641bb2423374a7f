"""Fixtures for the built images (tests/images): both images, built once per session by the
script `make images` runs (docker/build-images.sh: buildah on the Debian base, every layer cached
outside the repository, so a session after the first reuses them), and podman configured as
docker/containers/ says. Missing buildah, podman or runc fails these tests, never skips them:
`make image-deps` installs them (Debian packages).

The control plane comes from tests/conftest.py (one per session), helm from tests/deploy's fixture."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass

import pytest

from tests.deploy.conftest import helm  # noqa: F401
from tests.images.support import ROOT, TOOLS, Podman, UnixToTcp, container_env


@dataclass(frozen=True)
class Images:
    api: str
    operator: str
    build_seconds: float


@pytest.fixture(scope="session")
def container_tools_env() -> dict[str, str]:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: `make image-deps` installs them (apt-get)", pytrace=False)
    return container_env()


@pytest.fixture(scope="session")
def images(container_tools_env) -> Images:
    """Both images, fully qualified (REGISTRY's default, pyproject's version)."""
    env = {**container_tools_env, "REGISTRY": os.environ.get("BACKSCROLL_TEST_REGISTRY", "ghcr.io/backscroll")}
    started = time.monotonic()
    done = subprocess.run([str(ROOT / "docker/build-images.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=3600)
    if done.returncode != 0:
        pytest.fail(f"make images failed ({done.returncode}):\n{done.stderr[-6000:]}", pytrace=False)
    api, operator = done.stdout.split()
    return Images(api=api, operator=operator, build_seconds=time.monotonic() - started)


@pytest.fixture
def podman(container_tools_env):
    runner = Podman(container_tools_env)
    yield runner
    runner.stop_all()


@pytest.fixture(scope="session")
def pg_doors():
    """TCP doors to the embedded PostgreSQL's Unix socket, by socket path (support.tcp_url)."""
    doors: dict[str, UnixToTcp] = {}
    yield doors
    for door in doors.values():
        door.close()
