"""Writes every file generated from the operator's models: `make chart-sync` runs this, and
tests/operator/test_crd.py fails when a committed file differs from what it would write.

From the models (operator/backscroll_operator: spec.py and index_crd.py for the SearchIndex,
workspaces.py for the SearchWorkspace, crdgen.py the generator they share):
- each CRD, the same bytes in k8s/base/crd/ (kustomize) and charts/backscroll/crds/ (Helm installs
  crds/ as they are);
- values.schema.json's `searchIndex.spec` and `workspaces[].spec` are their CRD's spec schema,
  closed (additionalProperties: false) wherever the CRD lists properties, so a typo in values
  fails `helm install` instead of being pruned silently by the API server;
- the CRD's CEL rules (x-kubernetes-validations) become JSON-schema constructs beside them, so
  `helm install` refuses what the API server would (e.g. server and external together). The rules
  translated are the presence logic CEL writes with has(): `has(self.a) != has(self.b)` (exactly
  one: oneOf), `!(has(self.a) && has(self.b))` (not both: not/required), with `!`, `&&`, `||`,
  `==`, `!=` and parentheses. Transition rules (they read oldSelf) have no counterpart in values and
  are left to the API server. Any other rule stops the sync: translate it here, or list it in
  SERVER_ONLY_RULES with the reason Helm cannot check it.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tempfile
from pathlib import Path

import yaml
from backscroll_operator import crdgen, index_crd, workspaces
from backscroll_operator import spec as index_spec
from backscroll_operator.names import GROUP

ROOT = Path(__file__).resolve().parents[1]
VALUES_SCHEMA = "charts/backscroll/values.schema.json"
CRD_FOLDERS = ("k8s/base/crd", "charts/backscroll/crds")


# CEL rules values.schema.json cannot express (rule text -> why); the API server still checks them.
SERVER_ONLY_RULES: dict[str, str] = {
    index_spec.ONE_CLAIM_REPLICA.cel:
        "it compares a value (replicas) and reads a nested field; the operator's spec check refuses it too",
    index_spec.BACKUP_NEEDS_CNPG.cel:
        "it reads a value (backupBeforeMigration); the operator's spec check refuses it too",
}
# Rules Helm checks only in part (rule text -> (the part Helm checks, why)); the API server checks all.
HELM_CHECKS_PART: dict[str, tuple[str, str]] = {
    index_spec.ONE_SOURCE.cel: (
        "has(self.secretRef) || has(self.cnpgClusterRef)",
        "values.yaml sets secretRef, and a values file drops it with `secretRef: null`, which `helm lint` "
        "ignores (it validates the default beside cnpgClusterRef; template and install drop it): Helm "
        "checks that one is given, the API server that exactly one is"),
}

_TOKEN = re.compile(r"\s*(has\(self\.([A-Za-z_][A-Za-z0-9_]*)\)|&&|\|\||!=|==|!|\(|\))")


class UntranslatableRule(ValueError):
    pass


def _has(name: str) -> dict:
    # A key set to null is no field: the API server prunes it, and `helm lint` keeps the nulls a
    # values file writes to drop a default (`secretRef: null`) where `helm template` removes them.
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def cel_to_schema(rule: str) -> dict:
    """The JSON schema that holds exactly when the CEL presence rule does (see the module's doc)."""
    tokens, pos, text = [], 0, rule.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise UntranslatableRule(f"cannot translate the CEL rule {rule!r} into values.schema.json: add it to "
                                     f"SERVER_ONLY_RULES in charts/sync_chart.py, or teach cel_to_schema its form")
        tokens.append(("has", match.group(2)) if match.group(2) else (match.group(1), None))
        pos = match.end()
    tokens.append(("end", None))
    at = 0

    def take(kind: str | None = None) -> tuple[str, str | None]:
        nonlocal at
        token = tokens[at]
        if kind is not None and token[0] != kind:
            raise UntranslatableRule(f"cannot translate the CEL rule {rule!r}: expected {kind}, found {token[0]}")
        at += 1
        return token

    def unary() -> dict:
        kind, name = take()
        if kind == "!":
            return {"not": unary()}
        if kind == "(":
            inner = disjunction()
            take(")")
            return inner
        if kind == "has":
            return _has(name)
        raise UntranslatableRule(f"cannot translate the CEL rule {rule!r}: unexpected {kind}")

    def equality() -> dict:
        left = unary()
        if tokens[at][0] in ("!=", "=="):
            op, _ = take()
            right = unary()
            if op == "!=":
                return {"oneOf": [left, right]}  # exactly one of two booleans holds
            return {"anyOf": [{"allOf": [left, right]}, {"allOf": [{"not": left}, {"not": right}]}]}
        return left

    def conjunction() -> dict:
        parts = [equality()]
        while tokens[at][0] == "&&":
            take()
            parts.append(equality())
        if len(parts) > 1 and all(set(p) == {"required", "properties"} for p in parts):
            return {"required": [n for p in parts for n in p["required"]],
                    "properties": {n: s for p in parts for n, s in p["properties"].items()}}
        return parts[0] if len(parts) == 1 else {"allOf": parts}

    def disjunction() -> dict:
        parts = [conjunction()]
        while tokens[at][0] == "||":
            take()
            parts.append(conjunction())
        return parts[0] if len(parts) == 1 else {"anyOf": parts}

    schema = disjunction()
    take("end")
    return schema


def _rules(node: dict) -> list[dict]:
    """The node's CEL rules as JSON schemas, each with the rule's message as its $comment."""
    translated = []
    for validation in node.get("x-kubernetes-validations") or []:
        rule = validation["rule"]
        if "oldSelf" in rule or rule in SERVER_ONLY_RULES:
            continue
        rule = HELM_CHECKS_PART.get(rule, (rule, ""))[0]
        translated.append({"$comment": validation.get("message", rule), **cel_to_schema(rule)})
    return translated


def _close(node: dict) -> dict:
    rules = _rules(node)
    node = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if rules:
        node["allOf"] = [*node.get("allOf", []), *rules]
    if "properties" in node:
        node["properties"] = {name: _close(child) for name, child in node["properties"].items()}
        node["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        node["items"] = _close(node["items"])
    return node


# Required fields the chart's templates fill in when values leave them out, by kind.
CHART_FILLS = {
    "SearchIndex": ("image",),  # from searchIndex.image
    "SearchWorkspace": ("indexRef",),  # the release's SearchIndex (templates/searchworkspaces.yaml)
}


def spec_schema(crd: str | dict) -> dict:
    """values.schema.json's spec of a kind from its CRD (a document, or its YAML)."""
    crd = yaml.safe_load(crd) if isinstance(crd, str) else crd
    # The values describe the storage version's spec (every served version has the same schema
    # while conversion is None: tests/operator/test_crd.py holds them to it).
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec = _close(copy.deepcopy(version["schema"]["openAPIV3Schema"]["properties"]["spec"]))
    filled = CHART_FILLS[crd["spec"]["names"]["kind"]]
    spec["required"] = [r for r in spec.get("required", []) if r not in filled]
    return spec


def synced_schema(values_schema: dict, index: dict, workspace: dict) -> dict:
    """values.schema.json with searchIndex.spec and each workspaces[].spec from the CRDs."""
    schema = copy.deepcopy(values_schema)
    schema["properties"]["searchIndex"]["properties"]["spec"] = spec_schema(index)
    schema["properties"]["workspaces"]["items"]["properties"]["spec"] = spec_schema(workspace)
    return schema


def render(schema: dict) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def generated(values_schema_text: str) -> dict[str, str]:
    """Every generated file's text by its path in the repository; values.schema.json's other parts
    (written by hand) come from `values_schema_text`."""
    files = {}
    for kind in (index_crd, workspaces):
        text = kind.crd_yaml()
        for folder in CRD_FOLDERS:
            files[f"{folder}/{kind.NAMES.plural}.{GROUP}.yaml"] = text
    files[VALUES_SCHEMA] = render(synced_schema(json.loads(values_schema_text), index_crd.crd(), workspaces.crd()))
    return files


def write(out: Path) -> list[str]:
    """Writes the generated files under `out` (the repository, or a folder to compare it with)."""
    files = generated((ROOT / VALUES_SCHEMA).read_text())
    for path, text in files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
    return sorted(files)


def drift(generated_in: Path, committed_in: Path = ROOT) -> list[str]:
    """Each generated file that differs from its committed copy, with where it first differs."""
    found = []
    for path in generated((ROOT / VALUES_SCHEMA).read_text()):
        expected, committed = generated_in / path, committed_in / path
        if not committed.exists():
            found.append(f"{path}: missing")
        elif expected.read_bytes() != committed.read_bytes():
            where = crdgen.difference(yaml.safe_load(expected.read_text()), yaml.safe_load(committed.read_text()))
            found.append(f"{path}: {where or 'the same document, written differently'}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="where to write them (default: the repository)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; list the committed files that differ from their models and fail")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as scratch:
            write(Path(scratch))
            found = drift(Path(scratch))
        for line in found:
            print(f"drifted from the model: {line}")
        return 1 if found else 0
    for path in write(args.out):
        print(f"wrote {args.out / path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
