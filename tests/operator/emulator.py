"""A Kubernetes API server emulator, on kmock's HTTP server and object store, that the real
`kubectl` and the operator (kopf, server-side apply) can both talk to.

kmock alone sets no uid, resourceVersion, generation or creationTimestamp, has no PUT, label or
field selectors, server-side apply, Table output, OpenAPI or garbage collection, and misparses
/api/v1/namespaces. This subclass answers every Kubernetes path itself and keeps kmock for the
HTTP plumbing and `self.objects` (each object's history, for assertions). What it models:

- discovery (legacy, not aggregated: kubectl falls back to it), OpenAPI v2/v3 stubs that tell
  kubectl the server validates fields (so it does not need real schemas), Table output with
  the CRD's printer columns, read from the CRD file at start;
- create/get/list/watch/PUT/PATCH (JSON, merge, strategic merge, apply)/DELETE with
  resourceVersion, generation (spec changes only), managedFields, no-op writes that write
  nothing, status and scale subresources, finalizers, ownerReference garbage collection;
- label and field selectors on lists and watches, watches resumed from a resourceVersion.

`writes` lists every write request (action, plural, name, subresource); `changes` only those
that changed an object, so "a second pass writes nothing" holds for no-op applies too.

Not modelled: controllers (tests stand in for them), admission, defaulting beyond a few fields,
schema validation, pagination, RBAC.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp.web
import jsonpatch
import kmock
import yaml

GROUP, VERSION, PLURAL = "search.backscroll.dev", "v1alpha1", "searchindexes"
CRD_FILE = Path(__file__).resolve().parents[2] / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml"
WRITE_METHODS = {"POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}

# Lists Kubernetes merges item by item (x-kubernetes-list-type: map) and their keys, by field
# name: close enough for the kinds here. Every other list is atomic (replaced whole).
LIST_KEYS = {"containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
             "env": ("name",), "volumes": ("name",), "volumeMounts": ("mountPath",),
             "conditions": ("type",), "imagePullSecrets": ("name",), "ownerReferences": ("uid",)}
SET_LISTS = {"finalizers"}  # x-kubernetes-list-type: set
# Set by the server, never owned by a field manager.
SERVER_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
               "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}


def _list_keys(name: str | None, items: list) -> tuple[str, ...] | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    if name == "ports":  # a container's ports by containerPort, a Service's by port
        return ("containerPort",) if "containerPort" in items[0] else ("port",)
    return LIST_KEYS.get(name or "")


def _key_of(item: dict, keys: tuple[str, ...]) -> str:
    return json.dumps({k: item.get(k) for k in keys}, sort_keys=True, separators=(",", ":"))


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "details": self.details, "code": self.code}


@dataclass
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    singular: str = ""
    namespaced: bool = True
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    subresources: tuple[str, ...] = ()
    columns: list[dict] = field(default_factory=list)  # CRD additionalPrinterColumns
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> kmock.resource:
        return kmock.resource(self.group, self.version, self.plural)

    def prefix(self, namespace: str | None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{root}/namespaces/{namespace}/{self.plural}" if namespace and self.namespaced \
            else f"{root}/{self.plural}"


BUILTINS = [
    # (group, version, plural, kind, short names, categories, subresources, namespaced)
    ("", "v1", "namespaces", "Namespace", ["ns"], [], ("status",), False),
    ("", "v1", "pods", "Pod", ["po"], ["all"], ("status",), True),
    ("", "v1", "services", "Service", ["svc"], ["all"], ("status",), True),
    ("", "v1", "secrets", "Secret", [], [], (), True),
    ("", "v1", "configmaps", "ConfigMap", ["cm"], [], (), True),
    ("", "v1", "events", "Event", ["ev"], [], (), True),
    ("", "v1", "serviceaccounts", "ServiceAccount", ["sa"], [], (), True),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", ["pvc"], [], ("status",), True),
    ("apps", "v1", "deployments", "Deployment", ["deploy"], ["all"], ("status", "scale"), True),
    ("apps", "v1", "statefulsets", "StatefulSet", ["sts"], ["all"], ("status", "scale"), True),
    ("apps", "v1", "replicasets", "ReplicaSet", ["rs"], ["all"], ("status", "scale"), True),
    ("batch", "v1", "jobs", "Job", [], ["all"], ("status",), True),
    ("batch", "v1", "cronjobs", "CronJob", ["cj"], ["all"], ("status",), True),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", ["pdb"], [], ("status",), True),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", ["netpol"], [], (), True),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", ["ing"], [], ("status",), True),
    ("coordination.k8s.io", "v1", "leases", "Lease", [], [], (), True),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", ["hpa"], ["all"], ("status",), True),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
     ["crd", "crds"], ["api-extensions"], ("status",), False),
]


# --- small helpers over plain JSON values -----------------------------------------------------

def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, the AGE kubectl shows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: dict) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration((datetime.now(UTC) - then).total_seconds())


def jsonpath(value, expr: str) -> list:
    """The values a Kubernetes JSONPath (the subset CRD printer columns use) selects:
    `.a.b`, `['a']`, `[0]`, `[*]`, `..`-free filters `[?(@.type=="Ready")]` with == and !=."""
    expr = expr.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1]
    expr = expr.lstrip("$")
    nodes, i = [value], 0
    while i < len(expr):
        if expr[i] == ".":
            match = re.match(r"\.([^.\[]+)", expr[i:])
            if not match:
                i += 1
                continue
            name, i = match.group(1), i + match.end()
            if name == "*":
                nodes = [v for n in nodes for v in (n.values() if isinstance(n, dict) else n if isinstance(n, list) else [])]
            else:
                nodes = [n[name] for n in nodes if isinstance(n, dict) and name in n]
        elif expr[i] == "[":
            depth, j, quote = 0, i, None
            while j < len(expr):
                c = expr[j]
                if quote:
                    quote = None if c == quote else quote
                elif c in "'\"":
                    quote = c
                elif c in "[(":
                    depth += 1
                elif c in "])":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            inner, i = expr[i + 1:j].strip(), j + 1
            if inner == "*":
                nodes = [v for n in nodes for v in (n if isinstance(n, list) else n.values() if isinstance(n, dict) else [])]
            elif inner.startswith("?(") and inner.endswith(")"):
                cond = inner[2:-1].strip()
                match = re.match(r"@((?:\.[\w\-]+)+)\s*(==|!=)\s*(.+)$", cond)
                items = [v for n in nodes if isinstance(n, list) for v in n]
                if match:
                    path, op, literal = match.groups()
                    literal = literal.strip()
                    want = literal[1:-1] if literal[:1] in "'\"" else json.loads(literal)
                    nodes = [v for v in items if ((jsonpath(v, path) or [None])[0] == want) == (op == "==")]
                else:  # existence: [?(@.field)]
                    nodes = [v for v in items if jsonpath(v, cond.lstrip("@"))]
            elif inner[:1] in "'\"":
                name = inner[1:-1]
                nodes = [n[name] for n in nodes if isinstance(n, dict) and name in n]
            elif re.fullmatch(r"-?\d+", inner):
                k = int(inner)
                nodes = [n[k] for n in nodes if isinstance(n, list) and -len(n) <= k < len(n)]
            else:
                nodes = []
        else:
            i += 1
    return nodes


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


DELETE = object()


def strategic_merge(live, patch, name: str | None = None):
    """A strategic merge patch (the parts kubectl sends): maps merge, keyed lists merge by key,
    `$patch: delete|replace`, `$retainKeys`, `$setElementOrder/`, `$deleteFromPrimitiveList/`."""
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        if directive == "delete":
            return DELETE
        plain = {k: v for k, v in patch.items() if not k.startswith("$")}
        if directive == "replace":
            return _strip_directives(plain)
        out = dict(live) if isinstance(live, dict) else {}
        for k, v in plain.items():
            if v is None:
                out.pop(k, None)
                continue
            merged = strategic_merge(out.get(k), v, k)
            if merged is DELETE:
                out.pop(k, None)
            else:
                out[k] = merged
        for k, v in patch.items():
            if k.startswith("$deleteFromPrimitiveList/"):
                key = k.split("/", 1)[1]
                out[key] = [x for x in out.get(key) or [] if x not in v]
        for k, order in patch.items():
            if k.startswith("$setElementOrder/") and isinstance(out.get(k.split("/", 1)[1]), list):
                key = k.split("/", 1)[1]
                keys = _list_keys(key, order) if order and isinstance(order[0], dict) else None
                rank = {(_key_of(o, keys) if keys else json.dumps(o)): n for n, o in enumerate(order)}
                out[key] = sorted(out[key], key=lambda x: rank.get(_key_of(x, keys) if keys else json.dumps(x), len(rank)))
        if "$retainKeys" in patch:
            out = {k: v for k, v in out.items() if k in patch["$retainKeys"]}
        return out
    if isinstance(patch, list):
        if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
            return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
        keys = _list_keys(name, [p for p in patch if isinstance(p, dict)] or live or [])
        if keys and isinstance(live, list) and all(isinstance(p, dict) for p in patch):
            out = list(live)
            for item in patch:
                found = next((n for n, x in enumerate(out) if isinstance(x, dict) and _key_of(x, keys) == _key_of(item, keys)), None)
                if item.get("$patch") == "delete":
                    if found is not None:
                        out.pop(found)
                elif found is None:
                    out.append(_strip_directives(item))
                else:
                    out[found] = strategic_merge(out[found], item)
            return out
        if name in SET_LISTS and isinstance(live, list):
            return live + [x for x in patch if x not in live]
        return _strip_directives(patch)
    return copy.deepcopy(patch)


def _strip_directives(value):
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _strip_nulls(value):
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


# --- field sets (managedFields' fieldsV1), as path tuples of "f:", "k:" and "v:" elements -----

MARK = object()  # a keyed-list item itself, as opposed to a leaf's value


def field_values(value, path: tuple = (), name: str | None = None) -> dict:
    """path -> value for every leaf (scalar, atomic list, empty map) and keyed-list item."""
    out: dict = {}
    if isinstance(value, dict):
        if not value and path:
            out[path] = {}
        for k, v in value.items():
            out.update(field_values(v, path + (f"f:{k}",), k))
        return out
    if isinstance(value, list):
        keys = _list_keys(name, value)
        if keys and all(all(k in i for k in keys[:1]) for i in value):
            for item in value:
                item_path = path + (f"k:{_key_of(item, keys)}",)
                out[item_path] = MARK
                out.update(field_values(item, item_path))
            return out
        if name in SET_LISTS and all(not isinstance(v, (dict, list)) for v in value):
            for v in value:
                out[path + (f"v:{json.dumps(v)}",)] = MARK
            return out
    out[path] = value
    return out


def owned_fields(obj: dict, scope: str) -> dict:
    """The part of an object field managers own through one endpoint ("" main, "status")."""
    if scope == "status":
        return field_values({"status": obj.get("status")}) if obj.get("status") is not None else {}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_META}
    if meta:
        body["metadata"] = meta
    else:
        body.pop("metadata", None)
    return field_values(body)


def fields_to_v1(paths) -> dict:
    tree: dict = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    members = set(paths)

    def mark(node, path):
        for k, child in node.items():
            if child and path + (k,) in members:
                child["."] = {}
            mark(child, path + (k,))
    mark(tree, ())
    return tree


def fields_from_v1(tree: dict, path: tuple = ()) -> set:
    out = set()
    for k, child in (tree or {}).items():
        if k == ".":
            out.add(path)
        elif child:
            out |= fields_from_v1(child, path + (k,))
        else:
            out.add(path + (k,))
    return out


def _locate(obj, path):
    """(container, index or key) holding the value at path, or None."""
    parent, at = None, None
    node = obj
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f" and isinstance(node, dict) and rest in node:
            parent, at, node = node, rest, node[rest]
        elif kind == "k" and isinstance(node, list):
            want = json.loads(rest)
            found = next((n for n, i in enumerate(node) if isinstance(i, dict)
                          and all(i.get(k) == v for k, v in want.items())), None)
            if found is None:
                return None
            parent, at, node = node, found, node[found]
        elif kind == "v" and isinstance(node, list) and json.loads(rest) in node:
            return node, node.index(json.loads(rest))
        else:
            return None
    return (parent, at) if parent is not None else None


def _remove_path(obj: dict, path: tuple) -> None:
    located = _locate(obj, path)
    if located is None:
        return
    parent, at = located
    if isinstance(parent, list):
        parent.pop(at)
    else:
        del parent[at]
    if len(path) > 1:  # a map or list emptied by the removal goes too, as the API server prunes it
        located = _locate(obj, path[:-1])
        if located and located[1] is not None and located[0][located[1]] in ({}, []):
            _remove_path(obj, path[:-1])


def _apply_merge(live, applied, name: str | None = None):
    """Merge an applied configuration into the live object: maps and keyed lists by key."""
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for k, v in applied.items():
            out[k] = _apply_merge(live.get(k), v, k)
        return out
    if isinstance(live, list) and isinstance(applied, list):
        keys = _list_keys(name, applied) or _list_keys(name, live)
        if keys and all(isinstance(i, dict) for i in live + applied):
            out = list(live)
            for item in applied:
                found = next((n for n, x in enumerate(out) if _key_of(x, keys) == _key_of(item, keys)), None)
                if found is None:
                    out.append(copy.deepcopy(item))
                else:
                    out[found] = _apply_merge(out[found], item)
            return out
        if name in SET_LISTS:
            return live + [x for x in applied if x not in live]
    return copy.deepcopy(applied)


def parse_label_selector(text: str):
    terms = []
    for part in re.split(r",(?![^()]*\))", text or ""):
        part = part.strip()
        if not part:
            continue
        if m := re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", part):
            terms.append((m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}))
        elif m := re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)", part):
            terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
        elif m := re.fullmatch(r"!\s*([\w./-]+)", part):
            terms.append((m.group(1), "!", None))
        elif re.fullmatch(r"[\w./-]+", part):
            terms.append((part, "exists", None))
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
    return terms


def labels_match(obj: dict, terms) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, value in terms:
        have = labels.get(key)
        if op in ("exists", "!"):
            ok = (key in labels) == (op == "exists")
        elif op in ("in", "notin"):
            ok = (have in value) == (op == "in")
        else:
            ok = (have == value) == (op == "=")
        if not ok:
            return False
    return True


def parse_field_selector(text: str):
    terms = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        m = re.fullmatch(r"\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector: {part!r}")
        terms.append((m.group(1), m.group(2) != "!=", m.group(3)))
    return terms


def fields_match(obj: dict, terms) -> bool:
    for path, equal, value in terms:
        node = obj
        for element in path.split("."):
            node = node.get(element) if isinstance(node, dict) else None
        if ((str(node) if node is not None else "") == value) != equal:
            return False
    return True


def _go_json(value) -> str:
    """JSON as Go's encoding/json writes it (sorted keys, <>& escaped), as kubectl compares it."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _same(a: dict, b: dict) -> bool:
    """Equal as the API server compares before writing: resourceVersion and managed-field
    timestamps aside."""
    def norm(o):
        o = copy.deepcopy(o)
        meta = o.get("metadata") or {}
        meta.pop("resourceVersion", None)
        for entry in meta.get("managedFields") or []:
            entry.pop("time", None)
        return o
    return norm(a) == norm(b)


# --- protobuf, for the few bodies kubectl sends that way ---------------------------------------

def _fields_pb(data: bytes) -> list[tuple[int, object]]:
    """(field number, value) pairs of one protobuf message: ints for varints, bytes otherwise."""
    out, i = [], 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value
    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            size = varint()
            out.append((number, data[i:i + size]))
            i += size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            out.append((number, data[i:i + size]))
            i += size
        else:
            raise ApiError(400, "BadRequest", f"unsupported protobuf wire type {wire}")
    return out


def _map_pb(entries: list[bytes], binary: bool) -> dict:
    out = {}
    for entry in entries:
        pair = dict(_fields_pb(entry))
        value = pair.get(2, b"")
        out[pair.get(1, b"").decode()] = base64.b64encode(value).decode() if binary else value.decode()
    return out


def _meta_pb(data: bytes) -> dict:
    fields = _fields_pb(data)
    meta: dict = {}
    for number, key in ((1, "name"), (2, "generateName"), (3, "namespace")):
        value = next((v for n, v in fields if n == number), b"").decode()
        if value:
            meta[key] = value
    for number, key in ((11, "labels"), (12, "annotations")):
        entries = [v for n, v in fields if n == number]
        if entries:
            meta[key] = _map_pb(entries, binary=False)
    finalizers = [v.decode() for n, v in fields if n == 14]
    if finalizers:
        meta["finalizers"] = finalizers
    return meta


def decode_protobuf(body: bytes) -> dict:
    """A Secret or ConfigMap in Kubernetes' protobuf envelope ("k8s\\0" + runtime.Unknown)."""
    if not body.startswith(b"k8s\x00"):
        raise ApiError(400, "BadRequest", "a protobuf body without the k8s envelope")
    envelope = dict(_fields_pb(body[4:]))
    type_meta = dict(_fields_pb(envelope.get(1, b"")))
    api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
    fields = _fields_pb(envelope.get(2, b""))

    def entries(number):
        return [v for n, v in fields if n == number]
    obj = {"apiVersion": api_version, "kind": kind,
           "metadata": _meta_pb(next(iter(entries(1)), b""))}
    if (api_version, kind) == ("v1", "Secret"):
        if entries(2):
            obj["data"] = _map_pb(entries(2), binary=True)
        if entries(3) and entries(3)[0]:
            obj["type"] = entries(3)[0].decode()
        if entries(4):
            obj["stringData"] = _map_pb(entries(4), binary=False)
    elif (api_version, kind) == ("v1", "ConfigMap"):
        if entries(2):
            obj["data"] = _map_pb(entries(2), binary=False)
        if entries(3):
            obj["binaryData"] = _map_pb(entries(3), binary=True)
    else:
        raise ApiError(415, "UnsupportedMediaType", f"the emulator decodes protobuf for Secrets and ConfigMaps "
                       f"only, not {api_version} {kind}: send JSON")
    return obj


# --- printing ----------------------------------------------------------------------------------

NAME_COLUMN = {"name": "Name", "type": "string", "format": "name", "priority": 0,
               "description": "Name must be unique within a namespace."}
AGE_COLUMN = {"name": "Age", "type": "string", "format": "", "priority": 0,
              "description": "CreationTimestamp is a timestamp representing the server time when this object was created."}


def _builtin_columns(kind: str) -> list[tuple[dict, object]]:
    """(column definition, cell function) for the builtin kinds' tables, as kubectl prints them."""
    def col(name, fn, priority=0, type_="string"):
        return ({"name": name, "type": type_, "format": "", "description": name, "priority": priority}, fn)

    def containers(o):
        return (((o.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    if kind == "Deployment":
        return [col("Ready", lambda o: f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 1)}"),
                col("Up-to-date", lambda o: (o.get("status") or {}).get("updatedReplicas", 0), type_="integer"),
                col("Available", lambda o: (o.get("status") or {}).get("availableReplicas", 0), type_="integer"),
                col("Containers", lambda o: ",".join(c.get("name", "") for c in containers(o)), 1),
                col("Images", lambda o: ",".join(c.get("image", "") for c in containers(o)), 1),
                col("Selector", lambda o: ",".join(f"{k}={v}" for k, v in (((o.get("spec") or {}).get("selector") or {})
                                                                        .get("matchLabels") or {}).items()), 1)]
    if kind == "Job":
        def status(o):
            conditions = {c.get("type"): c.get("status") for c in (o.get("status") or {}).get("conditions") or []}
            return "Complete" if conditions.get("Complete") == "True" else "Failed" \
                if conditions.get("Failed") == "True" else "Running"
        return [col("Status", status),
                col("Completions", lambda o: f"{(o.get('status') or {}).get('succeeded', 0)}/{(o.get('spec') or {}).get('completions', 1)}")]
    if kind == "Service":
        return [col("Type", lambda o: (o.get("spec") or {}).get("type", "ClusterIP")),
                col("Cluster-IP", lambda o: (o.get("spec") or {}).get("clusterIP", "<none>")),
                col("Port(s)", lambda o: ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}"
                                                  for p in (o.get("spec") or {}).get("ports") or []) or "<none>")]
    if kind == "Event":
        def seen(o):
            stamp = o.get("lastTimestamp") or o.get("eventTime") or (o.get("metadata") or {}).get("creationTimestamp")
            return _age({"metadata": {"creationTimestamp": (stamp or "")[:19] + "Z"}}) if stamp else "<unknown>"

        def involved(o):
            ref = o.get("involvedObject") or {}
            return f"{(ref.get('kind') or '').lower()}/{ref.get('name', '')}"
        return [col("Last Seen", seen), col("Type", lambda o: o.get("type", "")),
                col("Reason", lambda o: o.get("reason", "")), col("Object", involved),
                col("Message", lambda o: o.get("message", ""))]
    if kind == "Secret":
        return [col("Type", lambda o: o.get("type", "Opaque")),
                col("Data", lambda o: len(o.get("data") or {}), type_="integer")]
    return []


# --- the emulator ------------------------------------------------------------------------------

class Emulator(kmock.KubernetesEmulator):
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._versions = itertools.count(1)
        # Every write request, effective or not: (action, plural, name, subresource).
        self.writes: list[tuple[str, str, str | None, str]] = []
        # Writes that changed an object (what a watch would see), same shape.
        self.changes: list[tuple[str, str, str | None, str]] = []
        self.kinds: dict[tuple[str, str, str], Kind] = {}
        # Failure injection: while set, every /api and /apis request is answered with this code
        # (an API server outage, as a client sees it).
        self.failing: int | None = None
        for group, version, plural, kind, short, categories, subresources, namespaced in BUILTINS:
            self.kinds[group, version, plural] = Kind(group, version, plural, kind, kind.lower(), namespaced,
                                                      short, categories, subresources)
        self._log: list[tuple[int, tuple, dict]] = []  # (resourceVersion, kind key, watch event)
        self._changed = asyncio.Event()
        for name in ("default", "kube-system"):
            self._create(self.kinds["", "v1", "namespaces"], None, {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                "spec": {"finalizers": ["kubernetes"]}}, "kube-apiserver", False)
        # The CRD as if `kubectl apply -f` had installed it, so that applying the file again
        # (client- or server-side) finds what it expects.
        crd = yaml.safe_load(CRD_FILE.read_text())
        crd.setdefault("metadata", {}).setdefault("annotations", {})  # kubectl records it so
        crd["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = \
            _go_json(crd) + "\n"
        self._create(self.kinds["apiextensions.k8s.io", "v1", "customresourcedefinitions"], None, crd,
                     "kubectl-client-side-apply", False)

    # --- routing --------------------------------------------------------------------------------

    async def __call__(self, raw_request):
        # kmock's own request parsing fails on /api/v1/namespaces (it reads "namespaces" as the
        # start of a namespaced path), and this class routes Kubernetes paths itself anyway.
        body = await raw_request.read()
        request = kmock.Request(id=len(self._requests), raw_request=raw_request, url=raw_request.url,
                                method=raw_request.method, params=dict(raw_request.query),
                                headers=dict(raw_request.headers), body=body,
                                text=body.decode(errors="replace"))
        self._requests.append(request)
        try:
            return await self._handle(request)
        except Exception as exc:  # a bug here: answer 500 with the traceback, as kmock does
            self._errors[-1].append(exc) if self._errors else None
            return await self._render_error(exc)

    async def _handle(self, request):
        path = request.url.path.rstrip("/") or "/"
        raw = request._raw_request
        headers = raw.headers if raw is not None else {k.lower(): v for k, v in request.headers.items()}
        try:
            if path == "/version":
                return self._json({"major": "1", "minor": "32", "gitVersion": "v1.32.0-kmock",
                                   "platform": "linux/amd64", "goVersion": "go1.23"})
            if path.startswith("/openapi/"):
                return self._openapi(path, request.params, headers)
            if path == "/":
                return self._json({"paths": sorted({"/api", "/api/v1", "/apis", "/version", "/openapi/v2", "/openapi/v3"}
                                                   | {k.prefix(None).rsplit("/", 1)[0] for k in self.kinds.values()})})
            if self.failing and (path == "/api" or path.startswith(("/api/", "/apis"))):
                raise ApiError(self.failing, "InternalError", "injected failure")
            route = self._route(path)
            if route is None:
                return await super()._handle(request)
            if route.get("discovery"):
                return self._json(self._discovery(route))
            return await self._resource(request, route, headers)
        except ApiError as exc:
            return self._json(exc.status(), exc.code)

    @staticmethod
    def _json(body, status: int = 200):
        return aiohttp.web.json_response(body, status=status, dumps=lambda o: json.dumps(o, separators=(",", ":")))

    def _route(self, path: str) -> dict | None:
        parts = path.strip("/").split("/")
        if parts[0] == "api":
            group, rest = "", parts[1:]
        elif parts[0] == "apis":
            if len(parts) < 3:
                return {"discovery": True, "group": parts[1] if len(parts) > 1 else None, "version": None}
            group, rest = parts[1], parts[2:]
        else:
            return None
        if not rest:
            return {"discovery": True, "group": "", "version": None}
        version, rest = rest[0], rest[1:]
        if not rest:
            return {"discovery": True, "group": group, "version": version}
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        kind = self.kinds.get((group, version, rest[0]))
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": kind, "namespace": namespace, "name": rest[1] if len(rest) > 1 else None,
                "subresource": "/".join(rest[2:])}

    # --- discovery and OpenAPI ------------------------------------------------------------------

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for k in self.kinds.values():
            if k.group and k.version not in groups.setdefault(k.group, []):
                groups[k.group].append(k.version)
        return groups

    def _group_doc(self, group: str, versions: list[str]) -> dict:
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": listed, "preferredVersion": listed[0]}

    def _discovery(self, route: dict) -> dict:
        group, version = route["group"], route["version"]
        if group is None:
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group_doc(g, v) for g, v in self._groups().items()]}
        if version is None and group == "":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if version is None:
            if group not in self._groups():
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group_doc(group, self._groups()[group])}
        kinds = [k for k in self.kinds.values() if k.group == group and k.version == version]
        if not kinds:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resources = []
        for k in kinds:
            resources.append({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced,
                              "kind": k.kind, "shortNames": k.short_names, "categories": k.categories,
                              "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                                        "update", "watch"],
                              "storageVersionHash": hashlib.sha1(k.plural.encode()).hexdigest()[:12]})
            for sub in k.subresources:
                entry = {"name": f"{k.plural}/{sub}", "singularName": "", "namespaced": k.namespaced,
                         "kind": k.kind, "verbs": ["get", "patch", "update"]}
                if sub == "scale":
                    entry.update(kind="Scale", group="autoscaling", version="v1")
                resources.append(entry)
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": kinds[0].api_version,
                "resources": resources}

    def _openapi_v3_doc(self, group: str, version: str) -> dict:
        """A document just rich enough for kubectl: every kind's PATCH declares fieldValidation,
        so kubectl leaves validation to the server instead of needing real schemas."""
        paths, schemas = {}, {}
        params = [{"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
                  for n in ("dryRun", "fieldManager", "fieldValidation", "force")]
        for k in self.kinds.values():
            if (k.group, k.version) != (group, version):
                continue
            gvk = {"group": k.group, "version": k.version, "kind": k.kind}
            name = f"{(k.group or 'core')}.{k.version}.{k.kind}"
            schemas[name] = {"type": "object", "x-kubernetes-group-version-kind": [gvk],
                             "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                            "metadata": {"type": "object"}},
                             "x-kubernetes-preserve-unknown-fields": True}
            item = k.prefix("{namespace}" if k.namespaced else None) + "/{name}"
            operation = {"x-kubernetes-group-version-kind": gvk, "parameters": params,
                         "responses": {"200": {"description": "OK"}}}
            paths[item] = {"get": {**operation, "x-kubernetes-action": "get"},
                           "put": {**operation, "x-kubernetes-action": "put"},
                           "patch": {**operation, "x-kubernetes-action": "patch"}}
            paths[item.rsplit("/", 1)[0]] = {"post": {**operation, "x-kubernetes-action": "post"}}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
                "paths": paths, "components": {"schemas": schemas}}

    def _openapi(self, path: str, params, headers):
        if path == "/openapi/v3":
            listed = {}
            for group, version in {(k.group, k.version) for k in self.kinds.values()}:
                key = f"apis/{group}/{version}" if group else f"api/{version}"
                digest = hashlib.sha1(json.dumps(self._openapi_v3_doc(group, version)).encode()).hexdigest()
                listed[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest.upper()}"}
            return self._json({"paths": listed})
        if path.startswith("/openapi/v3/"):
            parts = path[len("/openapi/v3/"):].split("/")
            group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else \
                (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else (None, None)
            if group is None or not any((k.group, k.version) == (group, version) for k in self.kinds.values()):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._json(self._openapi_v3_doc(group, version))
        if path == "/openapi/v2":
            if "protobuf" in headers.get("Accept", ""):
                # gnostic's openapi_v2.Document {swagger: "2.0", info: {title, version}}, the
                # smallest one kubectl parses; it finds no schemas and uses its compiled-in types.
                def text(field_no, value):
                    data = value.encode()
                    return bytes([field_no << 3 | 2, len(data)]) + data
                info = text(1, "Kubernetes") + text(6, "v1.32.0")
                body = text(1, "2.0") + bytes([2 << 3 | 2, len(info)]) + info
                return aiohttp.web.Response(body=body, content_type="application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
            return self._json({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
                               "paths": {}, "definitions": {}})
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # --- storage --------------------------------------------------------------------------------

    def _load(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        key = (kind.resource, namespace if kind.namespaced else None, name)
        if key in self.objects and not self.objects[key].deleted:
            return copy.deepcopy(self.objects[key].raw)
        return None

    def _all(self, kind: Kind, namespace: str | None) -> list[dict]:
        out = []
        for (resource, ns, _), obj in self.objects.items():
            if (resource.group, resource.version, resource.plural) == (kind.group, kind.version, kind.plural) \
                    and not obj.deleted and (namespace is None or ns == namespace):
                out.append(copy.deepcopy(obj.raw))
        return out

    def _store(self, kind: Kind, namespace: str | None, name: str, old: dict | None, new: dict | None,
               manager: str = "", subresource: str = "") -> dict | None:
        """Write one object (None: remove it); a write that changes nothing writes nothing."""
        if new is not None and old is not None and _same(old, new):
            return old
        if new is not None and old is not None and new["metadata"].get("deletionTimestamp") \
                and not new["metadata"].get("finalizers"):
            return self._remove(kind, namespace, name, new)  # the last finalizer went: DELETED only
        namespace = namespace if kind.namespaced else None
        key = (kind.resource, namespace, name)
        version = next(self._versions)
        if new is None:
            event, new = "DELETED", copy.deepcopy(old)
        else:
            event = "ADDED" if old is None else "MODIFIED"
            meta = new.setdefault("metadata", {})
            if old is None:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", _now())
                meta["generation"] = 1
            else:
                # The API server counts spec changes only (and deletion, which kopf ignores).
                spec_changed = new.get("spec") != old.get("spec")
                meta["generation"] = (old["metadata"].get("generation") or 1) + (1 if spec_changed else 0)
        new["metadata"]["resourceVersion"] = str(version)
        if event == "DELETED":
            self.objects[key].delete()
        elif key in self.objects:
            if self.objects[key].deleted:
                self.objects[key].create(new)
            else:
                self.objects[key].history.append(new)
        else:
            self.objects[key] = new
        self.changes.append((event.lower(), kind.plural, name, subresource))
        self._log.append((version, (kind.group, kind.plural), {"type": event, "object": copy.deepcopy(new)}))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        if kind.plural == "customresourcedefinitions" and event != "DELETED":
            self._register_crd(new)
        return new

    def _remove(self, kind: Kind, namespace: str | None, name: str, obj: dict, propagation: str = "Background") -> dict:
        self._store(kind, namespace, name, obj, None)
        uid = obj["metadata"].get("uid")
        # Garbage collection: what the removed object owned goes too (or is let go: Orphan).
        for other_kind in list(self.kinds.values()):
            for child in self._all(other_kind, None):
                refs = child["metadata"].get("ownerReferences") or []
                if not any(r.get("uid") == uid for r in refs):
                    continue
                child_ns, child_name = child["metadata"].get("namespace"), child["metadata"]["name"]
                rest = [r for r in refs if r.get("uid") != uid]
                alive = [r for r in rest if self._uid_exists(r.get("uid"))]
                if propagation == "Orphan" or alive:
                    updated = copy.deepcopy(child)
                    updated["metadata"]["ownerReferences"] = rest
                    if not rest:
                        del updated["metadata"]["ownerReferences"]
                    self._store(other_kind, child_ns, child_name, child, updated, manager="garbage-collector")
                else:
                    self._delete_object(other_kind, child_ns, child_name, child, "Background")
        return obj

    def _uid_exists(self, uid: str | None) -> bool:
        return any(not o.deleted and (o.raw.get("metadata") or {}).get("uid") == uid for _, o in self.objects.items())

    def _delete_object(self, kind: Kind, namespace, name, obj: dict, propagation: str) -> dict:
        if obj["metadata"].get("finalizers"):
            if obj["metadata"].get("deletionTimestamp"):
                return obj
            updated = copy.deepcopy(obj)
            updated["metadata"]["deletionTimestamp"] = _now()
            updated["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._store(kind, namespace, name, obj, updated)
        return self._remove(kind, namespace, name, obj, propagation)

    def _register_crd(self, crd: dict) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            self.kinds[spec["group"], version["name"], names["plural"]] = Kind(
                spec["group"], version["name"], names["plural"], names["kind"],
                names.get("singular") or names["kind"].lower(), spec.get("scope", "Namespaced") == "Namespaced",
                list(names.get("shortNames") or []), list(names.get("categories") or []),
                tuple(s for s in ("status", "scale") if s in (version.get("subresources") or {})),
                list(version.get("additionalPrinterColumns") or []), builtin=False)

    # --- managed fields -------------------------------------------------------------------------

    @staticmethod
    def _entries(obj: dict | None) -> list[dict]:
        out = []
        for e in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
            out.append({**e, "fields": fields_from_v1(e.get("fieldsV1") or {})})
        return out

    @staticmethod
    def _set_entries(obj: dict, entries: list[dict], kind: Kind, writer: dict | None, old_entries) -> None:
        previous = {(e["manager"], e["operation"], e.get("subresource", "")): e for e in old_entries}
        out = []
        for e in entries:
            if not e["fields"]:
                continue
            ident = (e["manager"], e["operation"], e.get("subresource", ""))
            before = previous.get(ident)
            stamp = e.get("time") or _now()
            if e is writer or before is None or before["fields"] != e["fields"]:
                stamp = _now()
            entry = {"manager": e["manager"], "operation": e["operation"], "apiVersion": kind.api_version,
                     "time": stamp, "fieldsType": "FieldsV1", "fieldsV1": fields_to_v1(e["fields"])}
            if e.get("subresource"):
                entry["subresource"] = e["subresource"]
            out.append(entry)
        obj.setdefault("metadata", {})["managedFields"] = out
        if not out:
            del obj["metadata"]["managedFields"]

    def _record_update(self, kind: Kind, old: dict | None, new: dict, manager: str, subresource: str) -> None:
        """Ownership after a write that is not an apply: the writer owns what it changed."""
        scope = "status" if subresource == "status" else ""
        before = owned_fields(old, scope) if old else {}
        after = owned_fields(new, scope)
        changed = {p for p, v in after.items() if p not in before or (v is not MARK and before[p] != v)}
        gone = set(before) - set(after)
        entries = self._entries(old)
        writer = next((e for e in entries if (e["manager"], e["operation"], e.get("subresource", ""))
                       == (manager, "Update", subresource)), None)
        if writer is None and changed:
            writer = {"manager": manager, "operation": "Update", "subresource": subresource, "fields": set()}
            entries.append(writer)
        for e in entries:
            e["fields"] = e["fields"] - gone - (changed if e is not writer else set())
        if writer is not None:
            writer["fields"] = writer["fields"] | changed
        if old is not None and _same({**old, "metadata": {**old["metadata"], "managedFields": None}},
                                     {**new, "metadata": {**new["metadata"], "managedFields": None}}):
            new["metadata"]["managedFields"] = old["metadata"].get("managedFields")
            if not new["metadata"]["managedFields"]:
                new["metadata"].pop("managedFields")
            return
        self._set_entries(new, entries, kind, writer, self._entries(old))

    # --- resources ------------------------------------------------------------------------------

    async def _resource(self, request, route: dict, headers):
        kind: Kind = route["kind"]
        namespace, name, sub = route["namespace"], route["name"], route["subresource"]
        method, params = str(request.method.value).upper(), request.params
        if method in WRITE_METHODS:
            self.writes.append((WRITE_METHODS[method], kind.plural, name, sub))
        if sub and sub not in kind.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if kind.namespaced is False:
            namespace = None
        elif namespace is None and method not in ("GET", "POST"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        manager = params.get("fieldManager") or (headers.get("User-Agent") or "unknown").split("/")[0]
        dry_run = bool(params.get("dryRun"))
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await self._watch(request, kind, namespace, name, params)
        if method == "GET" and name is None:
            items = self._select(kind, namespace, params)
            body = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                    "metadata": {"resourceVersion": str(self._version())}, "items": items}
            return self._json(self._table(kind, items, params) if "as=Table" in headers.get("Accept", "") else body)
        if method == "POST" and name is None:
            body = self._body(request, headers)
            obj = self._create(kind, namespace, body, manager, dry_run)
            return self._json(obj, 201)
        if name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} on a collection is not supported here")
        live = self._load(kind, namespace, name)
        if method == "GET":
            if live is None:
                raise self._not_found(kind, name)
            if sub == "scale":
                return self._json(self._scale(live))
            return self._json(self._table(kind, [live], params) if "as=Table" in headers.get("Accept", "") else live)
        if method == "DELETE":
            if live is None:
                raise self._not_found(kind, name)
            options = self._body(request, headers, required=False) or {}
            propagation = params.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != live["metadata"].get("uid") or \
                    pre.get("resourceVersion") and pre["resourceVersion"] != live["metadata"].get("resourceVersion"):
                raise ApiError(409, "Conflict", f"Precondition failed for {kind.plural} {name!r}")
            if dry_run:
                return self._json(live)
            return self._json(self._delete_object(kind, namespace, name, live, propagation))
        content_type = (headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if method == "PATCH" and content_type == "application/apply-patch+yaml":
            obj, created = self._apply(kind, namespace, name, live, self._body(request, headers), params, sub, dry_run)
            return self._json(obj, 201 if created else 200)
        if live is None:
            raise self._not_found(kind, name)
        if sub == "scale":
            return self._json(self._write_scale(kind, namespace, name, live, request, headers, method,
                                                content_type, manager, dry_run))
        if method == "PUT":
            new = self._body(request, headers)
            self._check_version(kind, name, live, new)
        else:
            new = self._patched(kind, live, request, headers, content_type)
        new = self._scoped(kind, live, new, sub)
        self._record_update(kind, live, new, manager, sub)
        return self._json(live if dry_run else self._store(kind, namespace, name, live, new, manager, sub))

    def _version(self) -> int:
        return self._log[-1][0] if self._log else 0

    def _not_found(self, kind: Kind, name: str) -> ApiError:
        resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
        return ApiError(404, "NotFound", f'{resource} "{name}" not found',
                        {"name": name, "group": kind.group, "kind": kind.plural})

    def _body(self, request, headers, required: bool = True):
        if "protobuf" in (headers.get("Content-Type") or ""):
            # kubectl's typed commands (`kubectl create secret ...`) send protobuf, with no JSON
            # fallback on 415: the kinds they create here are decoded, the rest refused.
            return decode_protobuf(request.body)
        text = request.body.decode() if request.body else ""
        if not text.strip():
            if required:
                raise ApiError(400, "BadRequest", "the request has no body")
            return None
        try:
            return json.loads(text)
        except ValueError:
            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ApiError(400, "BadRequest", f"the body is neither JSON nor YAML: {exc}") from None

    def _select(self, kind: Kind, namespace: str | None, params) -> list[dict]:
        labels = parse_label_selector(params.get("labelSelector", ""))
        fields = parse_field_selector(params.get("fieldSelector", ""))
        return [o for o in self._all(kind, namespace) if labels_match(o, labels) and fields_match(o, fields)]

    def _check_identity(self, kind: Kind, namespace: str | None, body: dict, name: str | None = None) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body is not an object")
        if body.get("kind") and body["kind"] != kind.kind or \
                body.get("apiVersion") and body["apiVersion"] != kind.api_version:
            raise ApiError(400, "BadRequest", f"the body is a {body.get('apiVersion')} {body.get('kind')}, "
                                              f"the path is for {kind.api_version} {kind.kind}")
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
        meta = body.setdefault("metadata", {}) or {}
        body["metadata"] = meta
        if name is not None:
            if meta.get("name") and meta["name"] != name:
                raise ApiError(400, "BadRequest", f"the name in the body ({meta['name']}) is not the one in the path ({name})")
            meta["name"] = name
        if kind.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                                                  "the namespace sent on the request")
            meta["namespace"] = namespace or meta.get("namespace")
            if not meta["namespace"]:
                raise ApiError(400, "BadRequest", f"a {kind.kind} needs a namespace")
        else:
            meta.pop("namespace", None)
        if kind.kind == "Secret" and body.get("stringData"):  # as the API server does
            body.setdefault("data", {}).update({k: base64.b64encode(str(v).encode()).decode()
                                                for k, v in body.pop("stringData").items()})
        return body

    def _create(self, kind: Kind, namespace: str | None, body: dict, manager: str, dry_run: bool) -> dict:
        body = self._check_identity(kind, namespace, body)
        meta = body["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        for k in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "managedFields", "generation"):
            meta.pop(k, None)
        if self._load(kind, namespace, meta["name"]) is not None:
            resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
            raise ApiError(409, "AlreadyExists", f'{resource} "{meta["name"]}" already exists',
                           {"name": meta["name"], "group": kind.group, "kind": kind.plural})
        if "status" in kind.subresources:
            body.pop("status", None)  # a create through the main endpoint sets no status
        self._record_update(kind, None, body, manager, "")
        if dry_run:
            return body
        return self._store(kind, namespace, meta["name"], None, body, manager)

    def _check_version(self, kind: Kind, name: str, live: dict, body: dict) -> None:
        wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != live["metadata"]["resourceVersion"]:
            resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": the object '
                                            f"has been modified; please apply your changes to the latest version and try again")

    def _patched(self, kind: Kind, live: dict, request, headers, content_type: str) -> dict:
        body = self._body(request, headers)
        if content_type == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "a JSON patch is a list of operations")
            try:
                return jsonpatch.apply_patch(live, body, in_place=False)
            except jsonpatch.JsonPatchTestFailed as exc:
                raise ApiError(422, "Invalid", f"the JSON patch's test failed: {exc}") from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise ApiError(422, "Invalid", f"the JSON patch does not apply: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "a merge patch is an object")
        self._check_version(kind, live["metadata"]["name"], live, body)
        if content_type == "application/strategic-merge-patch+json":
            if not kind.builtin:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                               "accepted media types include: application/json-patch+json, "
                               "application/merge-patch+json, application/apply-patch+yaml")
            return strategic_merge(live, body)
        if content_type in ("application/merge-patch+json", "application/json"):
            return merge_patch(live, body)
        raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")

    def _scoped(self, kind: Kind, live: dict, new: dict, sub: str) -> dict:
        """What a write through one endpoint may change: /status the status only, the main
        endpoint all but the status (where the kind has a status subresource)."""
        new = self._check_identity(kind, live["metadata"].get("namespace"), copy.deepcopy(new), live["metadata"]["name"])
        if sub == "status":
            out = copy.deepcopy(live)
            out["status"] = new.get("status")
            if out["status"] is None:
                out.pop("status")
            return out
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "resourceVersion"):
            if k in live["metadata"]:
                new["metadata"][k] = live["metadata"][k]
            else:
                new["metadata"].pop(k, None)
        new["metadata"]["managedFields"] = live["metadata"].get("managedFields")
        if not new["metadata"]["managedFields"]:
            new["metadata"].pop("managedFields")
        if "status" in kind.subresources:
            if "status" in live:
                new["status"] = live["status"]
            else:
                new.pop("status", None)
        return new

    @staticmethod
    def _scale(live: dict) -> dict:
        meta = live["metadata"]
        selector = ((live.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta},
                "spec": {"replicas": (live.get("spec") or {}).get("replicas", 1)},
                "status": {"replicas": (live.get("status") or {}).get("replicas", 0),
                           "selector": ",".join(f"{k}={v}" for k, v in selector.items())}}

    def _write_scale(self, kind, namespace, name, live, request, headers, method, content_type, manager, dry_run):
        scale = self._scale(live)
        if method == "PUT":
            body = self._body(request, headers)
            self._check_version(kind, name, live, body)
            scale = body
        elif content_type == "application/json-patch+json":
            scale = jsonpatch.apply_patch(scale, self._body(request, headers), in_place=False)
        else:
            scale = merge_patch(scale, self._body(request, headers))
        new = copy.deepcopy(live)
        new.setdefault("spec", {})["replicas"] = (scale.get("spec") or {}).get("replicas", 1)
        # The scale subresource's writer owns spec.replicas (a subresource "scale" entry).
        self._record_update(kind, live, new, manager, "scale")
        stored = live if dry_run else self._store(kind, namespace, name, live, new, manager, "scale")
        return self._scale(stored)

    def _apply(self, kind: Kind, namespace, name, live, applied, params, sub: str, dry_run: bool):
        """Server-side apply, after structured-merge-diff: the manager's applied fields become
        its set; fields it applied before and no longer does are removed unless someone else
        owns them; a field another manager owns and this apply changes is a conflict unless
        force=true, which takes it over."""
        manager = params.get("fieldManager")
        if not manager:
            raise ApiError(400, "BadRequest", "PATCH with the apply content type must specify a fieldManager")
        force = params.get("force") in ("true", "1")
        applied = _strip_nulls(self._check_identity(kind, namespace, applied, name))
        if live is None:
            if sub:
                raise self._not_found(kind, name)
            body = copy.deepcopy(applied)
            if "status" in kind.subresources:
                body.pop("status", None)
            for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
                body["metadata"].pop(k, None)
            fields = set(owned_fields(body, ""))
            self._set_entries(body, [{"manager": manager, "operation": "Apply", "subresource": "", "fields": fields}],
                              kind, None, [])
            if dry_run:
                return body, True
            return self._store(kind, namespace, name, None, body, manager), True
        self._check_version(kind, name, live, applied)
        scope = "status" if sub == "status" else ""
        if scope == "status":
            applied = {"apiVersion": applied["apiVersion"], "kind": applied["kind"],
                       "metadata": {"name": name}, **({"status": applied["status"]} if "status" in applied else {})}
        elif "status" in kind.subresources:
            applied.pop("status", None)
        applied_values = owned_fields(applied, scope)
        live_values = owned_fields(live, scope)
        entries = self._entries(live)
        old_entries = self._entries(live)
        mine = next((e for e in entries if (e["manager"], e["operation"], e.get("subresource", ""))
                     == (manager, "Apply", sub)), None)
        if mine is None:
            mine = {"manager": manager, "operation": "Apply", "subresource": sub, "fields": set()}
            entries.append(mine)
        conflicts: dict[tuple, list[str]] = {}
        for p, value in applied_values.items():
            if value is MARK or p not in live_values or live_values[p] == value:
                continue
            owners = [e["manager"] for e in entries if e is not mine and p in e["fields"]]
            if owners:
                conflicts[p] = owners
        if conflicts and not force:
            def dotted(p):
                return "." + ".".join(e[2:] if e.startswith("f:") else f"[{e[2:]}]" for e in p).replace(".[", "[")
            lines = [f'conflict with "{o}": {dotted(p)}' for p, owners in conflicts.items() for o in owners]
            raise ApiError(409, "Conflict", f"Apply failed with {len(lines)} conflict{'s' if len(lines) > 1 else ''}: "
                           + "; ".join(lines),
                           {"causes": [{"reason": "FieldManagerConflict", "message": line, "field": dotted(p)}
                                       for (p, _), line in zip(conflicts.items(), lines)]})
        for e in entries:
            if e is not mine:
                e["fields"] = e["fields"] - set(conflicts)
        new = copy.deepcopy(live)
        others = set().union(*(e["fields"] for e in entries if e is not mine))
        removed: list[tuple] = []
        for p in sorted(mine["fields"] - set(applied_values), key=len):
            # A keyed item goes whole (its key fields with it), unless others own part of it.
            if any(p[:len(r)] == r for r in removed) or any(o[:len(p)] == p for o in others):
                continue
            _remove_path(new, p)
            removed.append(p)
        body = {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}
        body["metadata"] = {k: v for k, v in applied["metadata"].items() if k not in SERVER_META}
        new = _apply_merge(new, body)
        mine["fields"] = set(applied_values)
        self._set_entries(new, entries, kind, mine, old_entries)
        if _same(live, new):  # nothing to write: no new resourceVersion, no watch event
            return live, False
        if dry_run:
            return new, False
        return self._store(kind, namespace, name, live, new, manager, sub), False

    # --- tables ---------------------------------------------------------------------------------

    def _table(self, kind: Kind, items: list[dict], params) -> dict:
        if kind.columns:
            columns = [NAME_COLUMN] + [
                {"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
                 "description": c.get("description", ""), "priority": c.get("priority", 0)} for c in kind.columns]

            def cells(o):
                row = [o["metadata"]["name"]]
                for c in kind.columns:
                    values = jsonpath(o, c["jsonPath"])
                    if not values:
                        row.append(None)
                    elif c.get("type") == "date":
                        row.append(_age({"metadata": {"creationTimestamp": values[0]}}))
                    else:
                        row.append(values[0] if len(values) == 1 else ",".join(map(str, values)))
                return row
        else:
            extra = _builtin_columns(kind.kind)
            if kind.kind == "Event":  # as kubectl prints them: no NAME or AGE, LAST SEEN first
                columns = [c for c, _ in extra]

                def cells(o):
                    return [fn(o) for _, fn in extra]
            else:
                columns = [NAME_COLUMN] + [c for c, _ in extra if c["priority"] == 0] + [AGE_COLUMN] + \
                    [c for c, _ in extra if c["priority"] > 0]

                def cells(o):
                    return [o["metadata"]["name"]] + [fn(o) for c, fn in extra if c["priority"] == 0] + [_age(o)] + \
                        [fn(o) for c, fn in extra if c["priority"] > 0]
        include = params.get("includeObject", "Metadata")
        rows = []
        for o in items:
            row = {"cells": cells(o)}
            if include == "Object":
                row["object"] = o
            elif include == "Metadata":
                row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
            rows.append(row)
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": str(self._version())}, "columnDefinitions": columns, "rows": rows}

    # --- watches --------------------------------------------------------------------------------

    async def _watch(self, request, kind: Kind, namespace, name, params):
        labels = parse_label_selector(params.get("labelSelector", ""))
        fields = parse_field_selector(params.get("fieldSelector", ""))
        timeout = float(params.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout

        def wanted(obj):
            meta = obj.get("metadata") or {}
            return (namespace is None or meta.get("namespace") == namespace) and \
                (name is None or meta.get("name") == name) and labels_match(obj, labels) and fields_match(obj, fields)

        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        since = params.get("resourceVersion")
        try:
            if not since or since == "0":  # no version: the current state first, as ADDED
                for obj in self._all(kind, namespace):
                    if wanted(obj):
                        await response.write(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
                cursor = len(self._log)
            else:
                cursor = next((n for n, (v, _, _) in enumerate(self._log) if v > int(since)), len(self._log))
            while True:
                while cursor < len(self._log):
                    _, key, event = self._log[cursor]
                    cursor += 1
                    if key == (kind.group, kind.plural) and wanted(event["object"]):
                        await response.write(json.dumps(event).encode() + b"\n")
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except asyncio.TimeoutError:
                    break
            await response.write_eof()
        except ConnectionError:  # the client went away
            pass
        return response


class Cluster:
    """The emulator on its own thread and event loop, so that sync tests (and KopfRunner, which
    runs the operator on a third thread) can reach it over HTTP while they block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self.emulator: Emulator | None = None
        self.url: str = ""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with Emulator() as emulator, kmock.Server(emulator) as server:
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._started.set()
            await self._stop.wait()

    def __enter__(self) -> Cluster:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the Kubernetes emulator did not start")
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
