"""The CRD in k8s/base/crd against the operator's spec model, and the samples against the CRD."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from openapi_schema_validator import OAS30Validator
from pydantic import BaseModel

from backscroll_operator.spec import SearchIndexSpec, parse

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml"
# SearchIndex samples; the SearchWorkspace ones are checked by test_workspace_crd.py.
SAMPLES = sorted((ROOT / "k8s/samples").glob("searchindex*.yaml"))


@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD.read_text())


@pytest.fixture(scope="module")
def schema(crd) -> dict:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def _walk(node: dict, path: str):
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{name}")
    if "items" in node:
        yield from _walk(node["items"], f"{path}[]")


def test_names_scope_and_status(crd):
    assert crd["metadata"]["name"] == "searchindexes.search.backscroll.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["shortNames"] == ["sidx"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert columns == ["Mode", "Model", "Coverage", "Ready", "Age"]
    wide = [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority")]
    assert wide == ["Rollout", "Target", "Reason"]
    (reason,) = [c for c in version["additionalPrinterColumns"] if c["name"] == "Reason"]
    assert reason["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason' and reason["priority"] == 1


def test_each_condition_has_its_own_observed_generation(schema):
    condition = schema["properties"]["status"]["properties"]["conditions"]["items"]
    assert condition["properties"]["observedGeneration"]["type"] == "integer"
    assert set(condition["properties"]) == {"type", "status", "reason", "message", "lastTransitionTime",
                                            "observedGeneration"}, "the fields of a metav1.Condition"


def test_the_versions_are_what_the_versioning_policy_says(crd):
    """docs/operator.md's Versioning section: v1alpha1 alone, served and stored, no conversion
    webhook; a second version comes with its own conversion strategy and this test changes with it."""
    versions = [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]]
    assert versions == [("v1alpha1", True, True)]
    assert crd["spec"].get("conversion", {"strategy": "None"}) == {"strategy": "None"}
    policy = (ROOT / "docs/operator.md").read_text().split("\n## Versioning\n", 1)[1].split("\n## ", 1)[0]
    for promise in ("v1beta1", "storedVersions", "conversion", "deprecat"):
        assert promise in policy, promise


def test_every_field_says_what_it_is(schema):
    missing = [path for path, node in _walk(schema, "") if path not in ("", ".metadata") and not path.endswith("[]")
               and not node.get("description")]
    assert missing == []


def _fields(model: type[BaseModel]) -> dict[str, object]:
    return {(f.alias or name): f for name, f in model.model_fields.items()}


def _nested(annotation) -> type[BaseModel] | None:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _compare(model: type[BaseModel], node: dict, path: str, problems: list[str]) -> None:
    fields = _fields(model)
    props = node.get("properties") or {}
    if set(fields) != set(props):
        problems.append(f"{path}: operator {sorted(fields)} vs CRD {sorted(props)}")
    for name, field in fields.items():
        if name not in props:
            continue
        child = _nested(field.annotation)
        if child is not None and "properties" in props[name]:
            _compare(child, props[name], f"{path}.{name}", problems)
        elif "default" in props[name] and not field.is_required():
            default = field.get_default(call_default_factory=True)
            if default != props[name]["default"]:
                problems.append(f"{path}.{name}: operator default {default!r} vs CRD {props[name]['default']!r}")


def test_crd_and_operator_agree_on_fields_and_defaults(schema):
    problems: list[str] = []
    _compare(SearchIndexSpec, schema["properties"]["spec"], "spec", problems)
    assert problems == []


def test_cel_rules_guard_what_the_operator_guards(schema):
    spec = schema["properties"]["spec"]
    assert "oldSelf.embeddings.dimensions" in spec["x-kubernetes-validations"][0]["rule"]
    embeddings = spec["properties"]["embeddings"]
    assert embeddings["x-kubernetes-validations"][0]["rule"] == "!(has(self.server) && has(self.external))"
    assert embeddings["properties"]["dimensions"]["maximum"] == 2000


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_are_valid(sample, schema):
    body = yaml.safe_load(sample.read_text())
    OAS30Validator(schema).validate(body)
    parse(body["spec"])


def test_schema_refuses_what_it_should(schema):
    body = yaml.safe_load(SAMPLES[0].read_text())
    body["spec"]["embeddings"]["dimensions"] = 4096
    assert not OAS30Validator(schema).is_valid(body)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_operator_and_its_crd():
    out = subprocess.run(["kubectl", "kustomize", str(ROOT / "k8s/base")], capture_output=True, text=True, check=True)
    kinds = [d["kind"] for d in yaml.safe_load_all(out.stdout) if d]
    assert sorted(kinds) == sorted(["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                                    "CustomResourceDefinition",  # SearchWorkspace
                                    "ClusterRoleBinding", "Deployment", "Service",
                                    "PodDisruptionBudget",  # two replicas: a drain takes one at a time
                                    "Role", "RoleBinding",  # the operator's metrics; its Lease
                                    "Role", "RoleBinding"])  # what it does in the namespace it watches
