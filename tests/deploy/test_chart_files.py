"""The chart is single-sourced from k8s/base/crd: same CRD bytes, values schema derived from it
(`make chart-sync` rewrites both)."""

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


def test_values_schema_holds_the_crds_spec_schema():
    current = (CHART / "values.schema.json").read_text()
    expected = sync_chart.render(sync_chart.synced_schema(json.loads(current), CRD.read_text()))
    assert current == expected, "values.schema.json is behind the CRD: run `make chart-sync`"


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
