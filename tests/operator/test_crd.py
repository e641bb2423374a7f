"""The CRDs and values.schema.json are what the operator's models generate (`make chart-sync`),
the CRD says what the operator reads, and the samples hold against both."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from openapi_schema_validator import OAS30Validator
from pydantic import BaseModel

from backscroll_operator import index_crd, spec
from backscroll_operator.spec import SearchIndexSpec, SpecError, parse

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml"
# SearchIndex samples; the SearchWorkspace ones are checked by test_workspace_crd.py.
SAMPLES = sorted((ROOT / "k8s/samples").glob("searchindex*.yaml"))
SYNC = ROOT / "charts/sync_chart.py"
_loader = importlib.util.spec_from_file_location("sync_chart", SYNC)
sync_chart = importlib.util.module_from_spec(_loader)
_loader.loader.exec_module(sync_chart)


def test_every_generated_file_is_what_its_model_generates(tmp_path):
    """Both CRDs in k8s/base/crd and in the chart, and values.schema.json, regenerated in a scratch
    folder: a committed file that differs is named with where it differs."""
    written = sync_chart.write(tmp_path)
    assert len(written) == 5, written
    assert sync_chart.drift(tmp_path) == [], "the committed files drifted from the models: run `make chart-sync`"


def test_a_changed_model_field_is_named_as_drift(tmp_path):
    """The bite: the model's k1 default changed in a copy of the operator, `sync_chart.py --check`
    names every file that now differs and where."""
    package = tmp_path / "backscroll_operator"
    shutil.copytree(ROOT / "operator/backscroll_operator", package, ignore=shutil.ignore_patterns("__pycache__"))
    model = package / "spec.py"
    text = model.read_text()
    assert text.count("k1: float = Field(default=1.2,") == 1
    model.write_text(text.replace("k1: float = Field(default=1.2,", "k1: float = Field(default=1.5,"))
    done = subprocess.run([sys.executable, str(SYNC), "--check"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    where = (".spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.ranking.properties.k1.default: "
             "1.5 != 1.2")
    assert sorted(done.stdout.splitlines()) == sorted([
        f"drifted from the model: charts/backscroll/crds/searchindexes.search.backscroll.dev.yaml: {where}",
        f"drifted from the model: k8s/base/crd/searchindexes.search.backscroll.dev.yaml: {where}",
        "drifted from the model: charts/backscroll/values.schema.json: "
        ".properties.searchIndex.properties.spec.properties.ranking.properties.k1.default: 1.5 != 1.2"]), done.stdout


def _rules(node) -> list[tuple[str, str]]:
    if isinstance(node, list):
        return [r for child in node for r in _rules(child)]
    if not isinstance(node, dict):
        return []
    own = [(v["rule"], v["message"]) for v in node.get("x-kubernetes-validations") or []]
    return own + [r for child in node.values() for r in _rules(child)]


# A spec each CEL rule refuses; the operator, for an API server without the rule, refuses it too.
DB = {"secretRef": {"name": "db"}}
REFUSED_BY_RULE = [
    (spec.ONE_SOURCE, {"database": {}}),
    (spec.CNPG_READS, {"database": {"cnpgClusterRef": {"name": "pg"}, "readReplicaSecretRef": {"name": "ro"}}}),
    (spec.BACKUP_NEEDS_CNPG, {"database": {**DB, "backupBeforeMigration": True}}),
    (spec.ONE_ENDPOINT, {"database": DB, "embeddings": {"model": "m", "dimensions": 8, "server": {},
                                                        "external": {"url": "https://e.example/v1"}}}),
    (spec.ONE_CLAIM_REPLICA, {"database": DB, "embeddings": {"model": "m", "dimensions": 8, "server": {
        "replicas": 2, "modelCache": {"claimName": "weights"}}}}),
]


@pytest.mark.parametrize("rule, body", REFUSED_BY_RULE, ids=lambda v: getattr(v, "cel", ""))
def test_the_operator_refuses_with_each_cel_rule_s_own_message(rule, body):
    with pytest.raises(SpecError) as refused:
        parse({"image": "ghcr.io/backscroll/backscroll:0.1.0", **body})
    assert refused.value.message == rule.message


def test_every_cel_rule_on_the_spec_has_its_operator_check():
    """A rule added to the model without the check in its validator fails here (the transition
    rule is parse's `registered`: tests/operator/test_spec.py)."""
    rules = set(_rules(index_crd.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]))
    assert rules == {(r.cel, r.message) for r, _ in REFUSED_BY_RULE} | {(spec.SAME_DIMENSIONS.cel,
                                                                          spec.SAME_DIMENSIONS.message)}


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
