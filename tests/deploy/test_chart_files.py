"""The chart is single-sourced from the operator's models: the same CRD bytes as k8s/base/crd, the
values schema derived from the CRDs (`make chart-sync` writes them all; tests/operator/test_crd.py
fails when any of them drifted)."""

from __future__ import annotations

import importlib.util
import json

from tests.deploy.conftest import CHART, CRD, ROOT

spec = importlib.util.spec_from_file_location("sync_chart", ROOT / "charts/sync_chart.py")
sync_chart = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sync_chart)


def test_chart_crds_are_the_same_bytes_as_the_kustomize_crds():
    kustomize = sorted(p.name for p in CRD.parent.glob("*.yaml") if p.name != "kustomization.yaml")
    assert CRD.name in kustomize and len(kustomize) == 2, kustomize  # SearchIndex, SearchWorkspace
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == kustomize
    for name in kustomize:
        assert (CHART / "crds" / name).read_bytes() == (CRD.parent / name).read_bytes(), f"{name}: run `make chart-sync`"


def test_derived_spec_schema_is_closed_where_the_crd_lists_fields():
    spec = sync_chart.spec_schema(CRD.read_text())
    assert spec["additionalProperties"] is False
    assert spec["properties"]["database"]["properties"]["secretRef"]["additionalProperties"] is False
    assert "image" not in spec["required"] and "database" in spec["required"]
    # Free-form Kubernetes objects (affinity) stay open, as the CRD keeps them; resources are typed.
    assert "additionalProperties" not in spec["properties"]["api"]["properties"]["pod"]["properties"]["affinity"]
    requests = spec["properties"]["api"]["properties"]["resources"]["properties"]["requests"]
    assert requests["additionalProperties"]["pattern"].startswith("^")
    assert "x-kubernetes-validations" not in json.dumps(spec)
