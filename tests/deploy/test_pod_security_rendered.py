"""The rendered chart and kustomize trees against Pod Security `restricted`: the operator's own pod,
and every pod the operator makes of the SearchIndexes they ship (the checker is
tests/operator/test_pod_security.py's, written from the standard)."""

from __future__ import annotations

import pytest

from backscroll_operator import builders, rollout
from backscroll_operator.names import Owner
from backscroll_operator.spec import parse
from tests.deploy.conftest import CHART, ROOT, documents, of_kind, run
from tests.operator.test_pod_security import restricted_violations

CHART_CASES = [None, CHART / "examples/namespaced.yaml", CHART / "examples/production.yaml"]


def _operator_pods(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in of_kind(docs, "Deployment")}


def _index_pods(index: dict) -> dict[str, dict]:
    spec = parse(index["spec"])
    owner = Owner(name=index["metadata"]["name"], namespace=index["metadata"].get("namespace", "default"), uid="u")
    emb = spec.embeddings
    plan = rollout.plan(spec, rollout.Observed(migrated=True, backfilled=frozenset([emb.model] if emb else [])))
    manifests = [m for _, _, m in builders.desired(owner, spec, plan)]
    manifests += [builders.migration_job(owner, spec), builders.register_job(owner, spec, "uid"),
                  builders.purge_job(owner, spec)]
    if emb is not None:
        manifests += [builders.backfill_job(owner, spec, emb), builders.catchup_job(owner, spec, emb)]
    return {f"{m['kind']}/{m['metadata']['name']}": m["spec"]["template"]["spec"]
            for m in manifests if m and m["kind"] in ("Deployment", "Job")}


@pytest.mark.parametrize("values", CHART_CASES, ids=lambda p: p.stem if p else "defaults")
def test_chart_operator_and_its_index_pods_are_restricted(render, values):
    docs = render(*([values] if values else []))
    pods = _operator_pods(docs)
    for index in of_kind(docs, "SearchIndex"):
        pods.update(_index_pods(index))
    assert pods
    assert {n: restricted_violations(p) for n, p in pods.items()} == {n: [] for n in pods}


@pytest.mark.parametrize("path", ["k8s/base", "k8s/overlays/example"])
def test_kustomize_operator_and_its_index_pods_are_restricted(kubectl, path):
    done = run(kubectl, "kustomize", str(ROOT / path))
    assert done.returncode == 0, done.stderr
    docs = documents(done.stdout)
    pods = _operator_pods(docs)
    for index in of_kind(docs, "SearchIndex"):
        pods.update(_index_pods(index))
    assert pods
    assert {n: restricted_violations(p) for n, p in pods.items()} == {n: [] for n in pods}


def test_the_production_example_turns_on_what_the_checklist_asks(render):
    (index,) = of_kind(render(CHART / "examples/production.yaml"), "SearchIndex")
    pods = _index_pods(index)
    assert any(n.startswith("Deployment/search-embeddings-") for n in pods)
    spec = parse(index["spec"])
    owner = Owner(name="search", namespace="search", uid="u")
    kinds = {m["kind"] for _, _, m in builders.desired(owner, spec, rollout.plan(
        spec, rollout.Observed(migrated=True, backfilled=frozenset([spec.embeddings.model])))) if m}
    assert {"HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"} <= kinds
