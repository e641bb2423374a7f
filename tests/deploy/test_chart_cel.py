"""The CRD's CEL rules, mirrored into values.schema.json by `make chart-sync`: Helm refuses what the
API server would, before anything reaches the cluster."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re

import jsonschema
import pytest
import yaml

from tests.deploy.conftest import CHART, CRD, ROOT, run

spec = importlib.util.spec_from_file_location("sync_chart", ROOT / "charts/sync_chart.py")
sync_chart = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sync_chart)


def _crd_rules() -> list[str]:
    rules: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            rules.extend(v["rule"] for v in node.get("x-kubernetes-validations") or [])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    # The spec's rules: values.schema.json describes searchIndex.spec (the rule on metadata.name is
    # searchIndex.name's pattern there, written by hand).
    for version in yaml.safe_load(CRD.read_text())["spec"]["versions"]:
        walk(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return sorted(set(rules))


def _cel_holds(rule: str, present: set[str]) -> bool:
    """The rule evaluated the way CEL does for an object with exactly the fields `present`."""
    expression = re.sub(r"has\(self\.(\w+)\)", lambda m: str(m.group(1) in present), rule)
    expression = expression.replace("&&", " and ").replace("||", " or ")
    expression = re.sub(r"!(?!=)", " not ", expression)
    return eval(expression, {"__builtins__": {}})  # noqa: S307 - only True/False/and/or/not/==/!= remain


# The API server alone checks SERVER_ONLY_RULES (each listed with why Helm cannot).
@pytest.mark.parametrize("rule", [r for r in _crd_rules() if "oldSelf" not in r and r not in sync_chart.SERVER_ONLY_RULES])
def test_each_presence_rule_means_the_same_in_json_schema(rule):
    """Every combination of the fields the rule names: the schema holds exactly when CEL does."""
    assert rule not in sync_chart.SERVER_ONLY_RULES
    rule = sync_chart.HELM_CHECKS_PART.get(rule, (rule, ""))[0]
    schema = sync_chart.cel_to_schema(rule)
    names = sorted(set(re.findall(r"has\(self\.(\w+)\)", rule)))
    assert names, rule
    for flags in itertools.product([False, True], repeat=len(names)):
        present = {n for n, on in zip(names, flags) if on}
        expected = _cel_holds(rule, present)
        assert jsonschema.Draft7Validator(schema).is_valid({n: {} for n in present}) == expected, (rule, present)
        # A field set to null is absent (the API server prunes it; helm lint keeps a values file's nulls).
        nulls = {**{n: None for n in names if n not in present}, **{n: {} for n in present}}
        assert jsonschema.Draft7Validator(schema).is_valid(nulls) == expected, (rule, present, "nulls")


def test_translation_of_the_forms_cel_writes():
    def has(*names):
        return {"required": list(names), "properties": {n: {"not": {"type": "null"}} for n in names}}

    assert sync_chart.cel_to_schema("has(self.a) != has(self.b)") == {"oneOf": [has("a"), has("b")]}
    assert sync_chart.cel_to_schema("!(has(self.a) && has(self.b))") == {"not": has("a", "b")}
    assert sync_chart.cel_to_schema("has(self.a) || !has(self.b)") == {"anyOf": [has("a"), {"not": has("b")}]}


def test_a_rule_it_cannot_translate_stops_the_sync():
    with pytest.raises(sync_chart.UntranslatableRule, match="SERVER_ONLY_RULES"):
        sync_chart.cel_to_schema("self.minReplicas <= self.maxReplicas")
    crd = yaml.safe_load(CRD.read_text())
    storage = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    storage["schema"]["openAPIV3Schema"]["properties"]["spec"].setdefault("x-kubernetes-validations", []).append(
        {"rule": "size(self.image) < 300", "message": "too long"})
    with pytest.raises(sync_chart.UntranslatableRule):
        sync_chart.spec_schema(yaml.safe_dump(crd))


def test_what_helm_checks_only_in_part_is_said_and_the_rest_left_to_the_api_server():
    (rule,) = sync_chart.HELM_CHECKS_PART
    part, why = sync_chart.HELM_CHECKS_PART[rule]
    assert rule in _crd_rules() and "helm lint" in why
    # The part Helm checks follows from the rule: whatever breaks the part breaks the rule.
    for present in ({"secretRef"}, {"cnpgClusterRef"}, {"secretRef", "cnpgClusterRef"}, set()):
        assert _cel_holds(rule, present) <= _cel_holds(part, present)


def test_the_values_schema_carries_every_rule_with_its_message():
    spec_schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["searchIndex"]["properties"]["spec"]
    database, embeddings = spec_schema["properties"]["database"], spec_schema["properties"]["embeddings"]
    assert [r["$comment"] for r in database["allOf"]] == [
        "give either secretRef or cnpgClusterRef",
        "cnpgClusterRef chooses the read service itself (readService): drop readReplicaSecretRef"]
    assert [r["$comment"] for r in embeddings["allOf"]] == ["give either server or external, not both"]


EMBEDDINGS = ["searchIndex.spec.embeddings.model=m", "searchIndex.spec.embeddings.dimensions=3"]
# --set pairs that break a rule, and the helm commands that must refuse them.
VIOLATIONS = {
    # `helm lint` ignores a null that drops a default (it validates values.yaml's secretRef still):
    # only template and install see that nothing is left.
    "neither secretRef nor cnpgClusterRef": (["searchIndex.spec.database.secretRef=null"], ["template"]),
    "cnpgClusterRef with readReplicaSecretRef": ([
        "searchIndex.spec.database.secretRef=null", "searchIndex.spec.database.cnpgClusterRef.name=pg",
        "searchIndex.spec.database.readReplicaSecretRef.name=replica"], ["lint", "template"]),
    "embeddings server and external": ([
        *EMBEDDINGS, "searchIndex.spec.embeddings.server.replicas=1",
        "searchIndex.spec.embeddings.external.url=https://emb.example/v1"], ["lint", "template"]),
}
# The same values one step away from the violation, which Helm accepts.
ACCEPTED = {
    "neither secretRef nor cnpgClusterRef": [],
    "cnpgClusterRef instead of secretRef": ["searchIndex.spec.database.secretRef=null",
                                            "searchIndex.spec.database.cnpgClusterRef.name=pg"],
    "cnpgClusterRef with readReplicaSecretRef": ["searchIndex.spec.database.readReplicaSecretRef.name=replica"],
    "embeddings server and external": [*EMBEDDINGS, "searchIndex.spec.embeddings.external.url=https://emb.example/v1"],
}


def _set(pairs: list[str]) -> list[str]:
    return [arg for pair in ["searchIndex.enabled=true", *pairs] for arg in ("--set", pair)]


CHECKS = [(case, command) for case, (_, commands) in VIOLATIONS.items() for command in commands]


@pytest.mark.parametrize("case,command", CHECKS, ids=[f"{command}-{case}" for case, command in CHECKS])
def test_values_breaking_a_cel_rule_fail_helm(helm, case, command):
    args = [helm, "lint", "--strict", str(CHART)] if command == "lint" else [helm, "template", "rel", str(CHART)]
    done = run(*args, *_set(VIOLATIONS[case][0]))
    assert done.returncode != 0, f"{case} was accepted by helm {command}"
    output = done.stdout + done.stderr
    # The schema refused it, at the object the rule sits on (the CRD's message is the $comment).
    assert re.search(r"searchIndex\.spec\.(database|embeddings): Must (not )?validate", output), output


@pytest.mark.parametrize("case", ACCEPTED, ids=ACCEPTED.keys())
def test_the_values_next_to_each_violation_pass(helm, case):
    done = run(helm, "template", "rel", str(CHART), *_set(ACCEPTED[case]))
    assert done.returncode == 0, done.stderr
