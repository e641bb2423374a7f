"""Keeps the chart single-sourced from k8s/base/crd: `make chart-sync` runs this, and
tests/deploy/test_chart_files.py fails when it has not been run after a CRD change.

Two things are derived from the CRD:
- charts/backscroll/crds/ holds the CRD file byte for byte (Helm installs crds/ as they are);
- values.schema.json's `searchIndex.spec` is the CRD's spec schema, closed (additionalProperties:
  false) wherever the CRD lists properties, so a typo in values fails `helm install` instead of
  being pruned silently by the API server.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml"
CHART = ROOT / "charts/backscroll"
CHART_CRD = CHART / "crds" / CRD.name
VALUES_SCHEMA = CHART / "values.schema.json"


def _close(node: dict) -> dict:
    node = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if "properties" in node:
        node["properties"] = {name: _close(child) for name, child in node["properties"].items()}
        node["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        node["items"] = _close(node["items"])
    return node


def spec_schema(crd_text: str) -> dict:
    crd = yaml.safe_load(crd_text)
    (version,) = crd["spec"]["versions"]
    spec = _close(copy.deepcopy(version["schema"]["openAPIV3Schema"]["properties"]["spec"]))
    # The chart fills spec.image from searchIndex.image when values leave it out.
    spec["required"] = [r for r in spec.get("required", []) if r != "image"]
    return spec


def synced_schema(values_schema: dict, crd_text: str) -> dict:
    schema = copy.deepcopy(values_schema)
    schema["properties"]["searchIndex"]["properties"]["spec"] = spec_schema(crd_text)
    return schema


def render(schema: dict) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    shutil.copyfile(CRD, CHART_CRD)
    current = json.loads(VALUES_SCHEMA.read_text())
    VALUES_SCHEMA.write_text(render(synced_schema(current, CRD.read_text())))
    print(f"synced {CHART_CRD.relative_to(ROOT)} and {VALUES_SCHEMA.relative_to(ROOT)} from {CRD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
