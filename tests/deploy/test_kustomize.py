"""k8s/: every kustomization builds with `kubectl kustomize`, what it builds is valid for the oldest
supported Kubernetes, and broken SearchIndexes are refused by the CRD's schema."""

from __future__ import annotations

import copy
import os

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from tests.deploy.conftest import OLDEST_KUBERNETES, ROOT, documents, of_kind, run
from tests.deploy.manifests import problems

KUSTOMIZATIONS = sorted(p.parent for p in (ROOT / "k8s").rglob("kustomization.yaml")
                        if "components" not in p.parts)
SAMPLES = sorted((ROOT / "k8s/samples").glob("*.yaml"))


def build(kubectl: str, path) -> list[dict]:
    done = run(kubectl, "kustomize", str(path))
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_kustomization_builds_valid_manifests(kubectl, crd_schema, path):
    docs = build(kubectl, path)
    assert docs
    assert problems(docs, crd_schema, OLDEST_KUBERNETES) == []


def test_the_base_holds_the_operator_and_both_crds(kubectl):
    kinds = [d["kind"] for d in build(kubectl, ROOT / "k8s/base")]
    assert sorted(kinds) == sorted(["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                                    "CustomResourceDefinition",  # SearchWorkspace
                                    "ClusterRoleBinding", "Deployment", "Service",
                                    "PodDisruptionBudget",  # two replicas: a drain takes one at a time
                                    "Role", "RoleBinding",  # the operator's metrics; its Lease
                                    "Role", "RoleBinding"])  # what it does in the namespace it watches


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_are_valid_manifests(crd_schema, sample):
    assert problems(documents(sample.read_text()), crd_schema, OLDEST_KUBERNETES) == []


def test_overlay_uses_the_embeddings_component_and_its_own_images(kubectl):
    docs = build(kubectl, ROOT / "k8s/overlays/example")
    (index,) = of_kind(docs, "SearchIndex")
    assert index["metadata"]["namespace"] == "team-search"
    assert index["spec"]["embeddings"]["server"]["modelId"] == "intfloat/multilingual-e5-small"
    assert index["spec"]["worker"] == {"replicas": 1}
    assert index["spec"]["api"]["replicas"] == 2, "the component adds embeddings and keeps the rest"
    (operator,) = of_kind(docs, "Deployment")
    container = operator["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/backscroll-operator:0.1.0"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["BACKSCROLL_OPERATOR_NAMESPACES"] == '["team-search"]'


def test_component_turns_a_lexical_index_hybrid_and_nothing_else(kubectl, tmp_path):
    (tmp_path / "index.yaml").write_text((ROOT / "k8s/samples/searchindex-lexical.yaml").read_text())
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["index.yaml"],
        "components": [os.path.relpath(ROOT / "k8s/components/embeddings", tmp_path)]}))
    (index,) = build(kubectl, tmp_path)
    lexical = yaml.safe_load((ROOT / "k8s/samples/searchindex-lexical.yaml").read_text())
    assert index["metadata"] == lexical["metadata"]
    assert {k: v for k, v in index["spec"].items() if k not in ("embeddings", "worker")} == lexical["spec"]
    assert index["spec"]["embeddings"]["dimensions"] == 384


def _broken(sample: str, change) -> dict:
    body = copy.deepcopy(yaml.safe_load((ROOT / "k8s/samples" / sample).read_text()))
    change(body["spec"])
    return body


BROKEN = {
    "no database": ("searchindex-lexical.yaml", lambda s: s.pop("database")),
    "no image": ("searchindex-lexical.yaml", lambda s: s.pop("image")),
    "empty image": ("searchindex-lexical.yaml", lambda s: s.update(image="")),
    "replicas as text": ("searchindex.yaml", lambda s: s["api"].update(replicas="two")),
    "dimensions over pgvector's HNSW limit": ("searchindex.yaml", lambda s: s["embeddings"].update(dimensions=4096)),
    "embeddings without a model": ("searchindex.yaml", lambda s: s["embeddings"].pop("model")),
    "external URL not http": ("searchindex-external.yaml",
                              lambda s: s["embeddings"]["external"].update(url="ftp://emb.example")),
    "key secret without its key": ("searchindex-external.yaml",
                                   lambda s: s["embeddings"]["external"]["apiKeySecretRef"].pop("key")),
    "unknown pull policy": ("searchindex-lexical.yaml", lambda s: s.update(imagePullPolicy="Sometimes")),
}


@pytest.mark.parametrize("sample,change", BROKEN.values(), ids=BROKEN.keys())
def test_broken_samples_are_refused(crd_schema, sample, change):
    body = _broken(sample, change)
    assert not OAS30Validator(crd_schema).is_valid(body)
    assert problems([body], crd_schema, OLDEST_KUBERNETES) != []


def test_validation_refuses_a_broken_builtin_manifest(kubectl, crd_schema):
    # The same check as above, shown to bite on what kubernetes-validate covers.
    (deployment,) = of_kind(build(kubectl, ROOT / "k8s/base"), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    deployment["spec"]["replicas"] = "one"
    assert len(problems([deployment], crd_schema, OLDEST_KUBERNETES)) >= 1
