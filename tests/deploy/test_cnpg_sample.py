"""The CloudNativePG sample runs on a maintained image that carries pgvector (issue 31, item 4):
CNPG's `standard` family at a pinned minor, not the deprecated rolling `system` tag (`:17`)."""

from __future__ import annotations

import re

import yaml

from tests.deploy.conftest import ROOT

SAMPLE = ROOT / "k8s/samples/cnpg/cluster.yaml"
# <major>.<minor>-standard-<debian>: the standard family is the one with pgvector (minimal has
# none); the rolling `17` and `17-…` tags move under a cluster.
PINNED_STANDARD = re.compile(r"^ghcr\.io/cloudnative-pg/postgresql:(\d+)\.(\d+)-standard-(bookworm|trixie)$")


def test_cnpg_sample_pins_a_standard_image_with_pgvector():
    (cluster,) = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d and d["kind"] == "Cluster"]
    image = cluster["spec"]["imageName"]
    assert PINNED_STANDARD.match(image), f"{image}: pin <major>.<minor>-standard-<debian> (pgvector)"
    # docs/cnpg.md says which tag and why: the same one.
    assert f"`{image}`" in (ROOT / "docs/cnpg.md").read_text()
