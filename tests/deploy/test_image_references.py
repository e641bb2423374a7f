"""Every image reference the chart, the kustomize trees and the samples render is fully qualified:
a registry host (with a dot or a port, or `localhost`) and a tag or a digest. CRI-O refuses short
names in its enforcing short-name mode, and a name without a tag floats to `latest`."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.deploy.conftest import CHART, EXAMPLES, ROOT, documents
from tests.deploy.test_kustomize import KUSTOMIZATIONS, SAMPLES, build

# host[:port]/path[:tag][@sha256:digest], host with a dot or a port, or localhost
QUALIFIED = re.compile(
    r"^(?P<host>localhost(:\d+)?|[a-z0-9-]+(\.[a-z0-9-]+)+(:\d+)?|[a-z0-9-]+:\d+)"
    r"/(?P<path>[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*)"
    r"(?P<tag>:[\w][\w.-]{0,127})?(?P<digest>@sha256:[0-9a-f]{64})?$")


def qualified(reference: str) -> bool:
    found = QUALIFIED.match(reference)
    return bool(found and (found.group("tag") or found.group("digest")))


def image_references(node, where: str = "") -> list[tuple[str, str]]:
    """(where, reference) for each `image` and `imageName` string (containers, SearchIndex specs,
    CNPG clusters) and each default of an `image` property in a CRD's schema."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}"
            if key in ("image", "imageName") and isinstance(value, str):
                found.append((here, value))
            elif key == "image" and isinstance(value, dict) and isinstance(value.get("default"), str):
                found.append((here + ".default", value["default"]))
            else:
                found += image_references(value, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found += image_references(item, f"{where}[{i}]")
    return found


def _of(docs: list[dict]) -> list[tuple[str, str]]:
    return [(f"{d.get('kind')}/{d.get('metadata', {}).get('name')}{where}", ref)
            for d in docs for where, ref in image_references(d)]


@pytest.mark.parametrize("reference,ok", [
    ("ghcr.io/backscroll/backscroll:0.1.0", True),
    ("localhost/backscroll-base:bookworm-105874ed86d3", True),
    ("registry.example.com:5000/team/backscroll-operator@sha256:" + "a" * 64, True),
    ("docker.io/pgvector/pgvector:0.8.0-pg17", True),
    ("backscroll:0.1.0", False),                     # short name
    ("pgvector/pgvector:0.8.0-pg17", False),          # short name with a path
    ("ghcr.io/backscroll/backscroll", False),         # no tag: floats to latest
    ("Ghcr.io/backscroll/backscroll:1", False),
])
def test_the_rule(reference, ok):
    assert qualified(reference) is ok


def test_the_charts_images_are_fully_qualified(render):
    seen = []
    # The defaults (with the CRD) and each example (hybrid-external.yaml leaves spec.image to the
    # chart's default).
    renders = [render(include_crds=True)] + [render(path) for path in EXAMPLES]
    for docs in renders:
        seen += _of(docs)
    kinds = {where.split("/")[0] for where, _ in seen}
    assert {"Deployment", "StatefulSet", "SearchIndex", "CustomResourceDefinition"} <= kinds, kinds
    assert [(where, ref) for where, ref in seen if not qualified(ref)] == []
    defaults = {ref for where, ref in seen if where.startswith("SearchIndex/")}
    assert "ghcr.io/backscroll/backscroll:0.1.0" in defaults


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_kustomize_trees_images_are_fully_qualified(kubectl, path):
    seen = _of(build(kubectl, path))
    assert [(where, ref) for where, ref in seen if not qualified(ref)] == []


def test_the_samples_and_the_crd_name_fully_qualified_images():
    seen = []
    paths = {*SAMPLES, *(ROOT / "k8s/samples").rglob("*.yaml"), ROOT / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml"}
    for path in sorted(paths):
        seen += _of(documents(path.read_text()))
    assert len({ref for _, ref in seen}) >= 3
    assert [(where, ref) for where, ref in seen if not qualified(ref)] == []


def test_the_base_and_the_overlay_name_the_operator_image_as_make_images_does():
    base = yaml.safe_load((ROOT / "k8s/base/operator/deployment.yaml").read_text())
    (container,) = base["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "ghcr.io/backscroll/backscroll-operator:0.1.0"
    overlay = yaml.safe_load((ROOT / "k8s/overlays/example/kustomization.yaml").read_text())
    # kustomize's `images:` matches by name: it must be the base's full name to retag it.
    assert [i["name"] for i in overlay["images"]] == ["ghcr.io/backscroll/backscroll-operator"]
    makefile = (ROOT / "Makefile").read_text()
    assert "REGISTRY ?= ghcr.io/backscroll" in makefile
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["operator"]["image"]["repository"] == "ghcr.io/backscroll/backscroll-operator"
