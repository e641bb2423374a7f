"""Custom resource definitions generated from the operator's pydantic models, for the SearchIndex
and the SearchWorkspace alike (CloudNativePG's way: the types are the source, the YAML is output).

A model carries everything the API server's schema needs: a field's type, default, bounds,
pattern, enum and description come from its annotation and its Field; a model's CEL rules from
`validations(...)` in its model_config (the operator's own check raises the same Rule's message);
what only Kubernetes reads from the Field: `filled_in` (a server-side `default: {}`) and
NULLABLE. `make chart-sync` (charts/sync_chart.py) writes the files; tests/operator/test_crd.py
fails when a committed file differs from what its model generates.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .names import GROUP, VERSION


class Rule(NamedTuple):
    """A CEL rule of the CRD and the message both the API server and the operator refuse with."""

    cel: str
    message: str


def validations(*rules: Rule) -> dict:
    """A model_config's json_schema_extra: the model's CEL rules."""
    return {"x-kubernetes-validations": [{"rule": r.cel, "message": r.message} for r in rules]}


def filled_in(model: type[BaseModel], description: str):
    """A nested object's Field that the API server fills in as {} when it is absent, so that its
    own fields' defaults show in the stored object; the operator's default is the model's."""
    return Field(default_factory=model, json_schema_extra={"default": {}}, description=description)


# A status field the operator writes as null to clear it (a Field's json_schema_extra); in a spec
# an optional field is simply omitted.
NULLABLE = {"nullable": True}
DATE_TIME = {"format": "date-time"}


class Condition(BaseModel):
    """A metav1.Condition, as every kind's status lists them (status.merge_conditions)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    type: str = Field(description="The condition.")
    status: Literal["True", "False", "Unknown"] = Field(description="Whether it holds.")
    reason: str | None = Field(default=None, description="Why, in one CamelCase word.")
    message: str | None = Field(default=None, description="Why, in words.")
    last_transition_time: str | None = Field(default=None, json_schema_extra=DATE_TIME,
                                             description="When status last changed.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this condition was computed for (older than "
                                        "metadata.generation: the operator has not acted on the latest spec yet).")


def conditions(description: str | None = None):
    """A status's conditions: a list with one entry per type (server-side apply merges by type)."""
    return Field(default=None, description=description,
                 json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


def _resolved(node: dict, defs: dict) -> dict:
    """The node with its $ref and its Optional (anyOf X, null) replaced by X; the node's own keys
    win over X's (the field's description over the model's docstring)."""
    node = dict(node)
    if "$ref" in node:
        target = dict(defs[node.pop("$ref").rsplit("/", 1)[-1]])
        target.pop("description", None)  # a model's docstring speaks to the code's readers
        node = {**target, **node}
    options = node.get("anyOf") or []
    rest = [o for o in options if o.get("type") != "null"]
    if len(rest) == 1 and len(options) == 2:
        node.pop("anyOf")
        node = {**_resolved(rest[0], defs), **node}
    return node


def _structural(node: dict, defs: dict) -> dict:
    """pydantic's JSON schema as a structural schema the API server accepts."""
    out: dict = {}
    for key, value in _resolved(node, defs).items():
        if key in ("title", "$defs"):
            continue
        if key == "default" and value in (None, []):
            continue  # nothing, or an empty list: the operator's default, not the API server's
        if key == "additionalProperties":
            if value is True:  # dict[str, Any]: a free-form Kubernetes object (affinity, a toleration)
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out[key] = _structural(value, defs)
        elif key == "properties":
            out[key] = {name: _structural(child, defs) for name, child in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        elif key == "const":
            out["enum"] = [value]
        elif key == "x-kubernetes-validations":  # pydantic sorts keys: the rule first again
            out[key] = [{"rule": v["rule"], "message": v["message"]} for v in value]
        else:
            out[key] = value
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return dict(sorted(out.items(), key=lambda item: _rank(item[0])))


# The order a reader expects a field in (what it is, what it says, then its rules, then its
# children), where pydantic sorts keys alphabetically; the others keep their place between.
_FIRST = ("type", "description", "required", "enum", "default", "nullable", "format", "minimum", "maximum",
          "minLength", "maxLength", "maxItems", "pattern")
_LAST = ("x-kubernetes-validations", "properties", "additionalProperties", "items")


def _rank(key: str) -> int:
    if key in _FIRST:
        return _FIRST.index(key)
    return len(_FIRST) + 1 + _LAST.index(key) if key in _LAST else len(_FIRST)


def schema(model: type[BaseModel]) -> dict:
    """The model's schema as the CRD holds it: no $ref, no null, every Kubernetes keyword kept."""
    raw = model.model_json_schema(by_alias=True)
    raw.pop("description", None)  # the docstring: the CRD's caller says what the object is
    return copy.deepcopy(_structural(raw, raw.get("$defs") or {}))  # a model used twice shares nothing


class Names(NamedTuple):
    kind: str
    plural: str
    singular: str
    short_name: str


def crd(names: Names, *, spec: type[BaseModel], spec_description: str, status: type[BaseModel],
        columns: list[dict], status_description: str | None = None, required: tuple[str, ...] = (),
        root: dict | None = None) -> dict:
    """The CRD of one kind at one version (served and stored: no conversion). `root` adds keys
    to the object's schema (its description, a CEL rule on metadata)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names.plural}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"kind": names.kind, "listKind": f"{names.kind}List", "plural": names.plural,
                      "singular": names.singular, "shortNames": [names.short_name], "categories": ["backscroll"]},
            "versions": [{
                "name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": {
                    "type": "object", **({"required": list(required)} if required else {}), **(root or {}),
                    "properties": {
                        "apiVersion": {"type": "string",
                                       "description": f"The API version of this object ({GROUP}/{VERSION})."},
                        "kind": {"type": "string", "description": f"{names.kind}."},
                        "metadata": {"type": "object"},
                        "spec": {**schema(spec), "description": spec_description},
                        "status": {**schema(status),
                                   **({"description": status_description} if status_description else {})}}}},
            }],
        },
    }


def render(document: dict, source: str) -> str:
    """The YAML committed in charts/backscroll/crds and k8s/base/crd, headed by where it comes from."""
    import yaml  # only `make chart-sync` and the tests write YAML

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            return True  # every node written out, no &id001 anchors

    header = (f"# The {document['spec']['names']['kind']} custom resource, generated from {source}\n"
              f"# by `make chart-sync` (charts/sync_chart.py): edit the model, not this file.\n")
    return header + yaml.dump(document, Dumper=Dumper, sort_keys=False, width=120)


def difference(expected: Any, found: Any, path: str = "") -> str | None:
    """Where the generated document (`expected`) and a committed one first differ
    (`.spec.versions[0]....k1.default: 1.2 != 1.5`), or None."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in [*expected, *(k for k in found if k not in expected)]:
            if key not in found:
                return f"{path}.{key}: in the model, not in the file"
            if key not in expected:
                return f"{path}.{key}: in the file, not in the model"
            if (where := difference(expected[key], found[key], f"{path}.{key}")) is not None:
                return where
        return None
    if isinstance(expected, list) and isinstance(found, list) and len(expected) == len(found):
        for i, (a, b) in enumerate(zip(expected, found)):
            if (where := difference(a, b, f"{path}[{i}]")) is not None:
                return where
        return None
    if expected == found and isinstance(expected, bool) == isinstance(found, bool):  # 1 == 1.0, not True
        return None
    return f"{path or '.'}: {expected!r} != {found!r}"
