"""Nothing the operator writes is computed from a Secret's value (security issue 29, item 5).

Pods still roll when a Secret they read rotates: the pod templates carry the Secrets' names, uids
and resourceVersions (`search.backscroll.dev/secrets-version`). They once carried an unsalted,
truncated sha256 of the values, which let anyone who can read Deployments test guesses of a
database password offline.

Three views: a pass over an in-memory client (every child the operator builds, for Secrets of
known values), the same pass with other values behind the same Secret metadata (every child
identical: nothing depends on a value), and the real operator on the real control plane (every
version of every object the server held, status and Events included, and the operator's log).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json

import pytest

from backscroll_operator.config import OperatorConfig
from backscroll_operator.names import SECRETS_ANNOTATION, Owner
from backscroll_operator.reconcile import converge
from backscroll_operator.spec import parse

from .conftest import Versions, eventually, report

OWNER = Owner(name="search", namespace="team", uid="uid-owner")
# Nothing listens there: the status read fails at once, as the operator tolerates.
CONFIG = OperatorConfig(status_url="http://127.0.0.1:9/v1/status", status_timeout_s=0.2)

VALUES = {
    "db": {"uri": "postgresql://backscroll:hunter2@db.internal:5432/backscroll"},
    "replica": {"uri": "postgresql://backscroll:hunter2@replica.internal:5432/backscroll"},
    "emb-key": {"api-key": "sk-test-0123456789abcdef"},
    "pg-app": {"uri": "postgresql://app:correct-horse@pg-rw:5432/app", "username": "app",
               "password": "correct-horse", "dbname": "app"},
}
OTHER_VALUES = {
    "db": {"uri": "postgresql://backscroll:swordfish@db.internal:5432/backscroll"},
    "replica": {"uri": "postgresql://backscroll:swordfish@replica.internal:5432/backscroll"},
    "emb-key": {"api-key": "sk-test-fedcba9876543210"},
    "pg-app": {"uri": "postgresql://app:battery-staple@pg-rw:5432/app", "username": "app",
               "password": "battery-staple", "dbname": "app"},
}

BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}
EXTERNAL = {"image": "backscroll:1",
            "database": {"secretRef": {"name": "db"}, "readReplicaSecretRef": {"name": "replica"}},
            "embeddings": {"model": "m2", "dimensions": 256, "external": {
                "url": "https://emb.example/v1", "apiKeySecretRef": {"name": "emb-key", "key": "api-key"}}}}
CNPG = {"image": "backscroll:1", "database": {"cnpgClusterRef": {"name": "pg", "readService": "ro"}}}
SPECS = {"database secret": BASE, "replica and external key": EXTERNAL, "cloudnativepg": CNPG}


class Store:
    """The operator's Kube client over memory, deterministic: uids and resourceVersions count up,
    and a write that changes nothing stores nothing (as the API server does)."""

    def __init__(self, values: dict[str, dict[str, str]]):
        self.objects: dict[tuple[str, str], dict] = {}
        self._uids = itertools.count(1)
        self._versions = itertools.count(1)
        for name, data in values.items():
            self.write_secret(name, data)

    def _store(self, resource: str, body: dict) -> dict:
        body = copy.deepcopy(body)
        key = (resource, body["metadata"]["name"])
        old = self.objects.get(key)
        meta = body["metadata"]
        meta["uid"] = old["metadata"]["uid"] if old else f"uid-{next(self._uids)}"
        if old is not None:
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if old == body:
                return copy.deepcopy(old)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[key] = body
        return copy.deepcopy(body)

    def write_secret(self, name: str, data: dict[str, str], labels: dict | None = None) -> None:
        meta = {"name": name, "namespace": OWNER.namespace, **({"labels": labels} if labels else {})}
        self._store("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
                                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})

    def get(self, resource, namespace, name):
        return copy.deepcopy(self.objects.get((resource, name)))

    def read(self, resource: str, name: str) -> dict | None:
        return self.get(resource, OWNER.namespace, name)

    def list(self, resource, namespace, labels):
        return [copy.deepcopy(o) for (r, _), o in self.objects.items() if r == resource and
                all(o["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())]

    def create(self, resource, namespace, body):
        return self._store(resource, body)

    def apply(self, resource, namespace, name, body):
        return self._store(resource, body)

    def patch(self, resource, namespace, name, body, subresource="", content_type=None):
        return body

    def delete(self, resource, namespace, name):
        return self.objects.pop((resource, name), None) is not None


def reconciled(values: dict[str, dict[str, str]], raw: dict, passes: int = 3) -> Store:
    """Passes of `converge` until the API and worker run (every Job succeeds between passes)."""
    store = Store(values)
    if "cnpgClusterRef" in raw.get("database", {}):  # the migration waits for the Cluster's Ready condition
        store.create("clusters", OWNER.namespace, {
            "apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster", "metadata": {"name": "pg"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady"}]}})
    for _ in range(passes):
        converge(store, OWNER, parse(raw), CONFIG)
        for (resource, _), obj in store.objects.items():
            if resource == "jobs":
                obj["status"] = {"succeeded": 1}
    assert store.read("deployments", "search-api") is not None
    return store


def what_others_read(store: Store, values: dict) -> dict[str, dict]:
    """Every object but the user's Secrets; the operator's token Secret without its token."""
    out = {}
    for (resource, name), obj in store.objects.items():
        if resource == "secrets" and name in values:
            continue
        obj = copy.deepcopy(obj)
        if resource == "secrets":
            obj.pop("data", None), obj.pop("stringData", None)
        out[f"{resource}/{name}"] = obj
    return out


def pod_template(store: Store, name: str) -> dict:
    return store.read("deployments", name)["spec"]["template"]


HASHES = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_256", "blake2b", "blake2s")


def forbidden(values: dict[str, dict[str, str]]) -> set[str]:
    """What would give a value away: the value itself (plain, base64), and the first 8 hex digits
    of common digests of it (plain, base64, and as `NAME/KEY=VALUE` lines, the old checksum's
    input). A longer truncation contains the 8-digit one. A CloudNativePG Secret's `username` and
    `dbname` are no secrets (they are in its `uri` too, and in names): their digests only."""
    found, texts, lines = set(), [], {"plain": "", "base64": ""}
    for name, data in values.items():
        for key, value in data.items():
            encoded = base64.b64encode(value.encode()).decode()
            if key not in ("username", "dbname"):
                found |= {value, encoded}
            texts += [value, encoded, f"{name}/{key}={encoded}\n", f"{name}/{key}={value}\n"]
            lines["plain"] += f"{name}/{key}={value}\n"
            lines["base64"] += f"{name}/{key}={encoded}\n"
    for text in [*texts, *lines.values()]:  # each value alone, and all of them in one digest
        for algorithm in HASHES:
            found.add(hashlib.new(algorithm, text.encode()).hexdigest()[:8])
    return found


def leaks(text: str, values: dict) -> set[str]:
    return {f for f in forbidden(values) if f in text}


READ = {"database secret": ["db"], "replica and external key": ["db", "replica", "emb-key"],
        "cloudnativepg": ["pg-app"]}


@pytest.mark.parametrize("raw,read", [(SPECS[k], READ[k]) for k in SPECS], ids=SPECS.keys())
def test_no_child_carries_a_secret_value_or_any_digest_of_it(raw, read):
    store = reconciled(VALUES, raw)
    text = json.dumps(what_others_read(store, VALUES), sort_keys=True)
    assert leaks(text, VALUES) == set()
    # What the pod templates carry instead: each Secret's name, uid and resourceVersion.
    api = pod_template(store, "search-api")["metadata"]["annotations"][SECRETS_ANNOTATION]
    assert [part.split(":")[0] for part in api.split(",")] == read
    if store.read("deployments", "search-worker") is not None:  # with embeddings
        assert pod_template(store, "search-worker")["metadata"]["annotations"][SECRETS_ANNOTATION] == api
    for part in api.split(","):
        name, uid, version = part.split(":")
        secret = store.read("secrets", name)
        assert (uid, version) == (secret["metadata"]["uid"], secret["metadata"]["resourceVersion"])


@pytest.mark.parametrize("raw", SPECS.values(), ids=SPECS.keys())
def test_children_are_the_same_whatever_the_values_behind_the_same_secrets(raw):
    """Non-interference: with the same Secret metadata and other values, every child is identical,
    so nothing in them is computed from a value, whichever way."""
    assert what_others_read(reconciled(VALUES, raw), VALUES) == \
        what_others_read(reconciled(OTHER_VALUES, raw), OTHER_VALUES)


def test_a_rotated_secret_rolls_the_pods_and_nothing_else_changes():
    store = reconciled(VALUES, EXTERNAL)
    before = {n: pod_template(store, n) for n in ("search-api", "search-worker")}
    untouched = what_others_read(store, VALUES)
    converge(store, OWNER, parse(EXTERNAL), CONFIG)
    assert what_others_read(store, VALUES) == untouched, "a pass with nothing changed writes nothing new"

    store.write_secret("db", {"uri": "postgresql://backscroll:rotated@db.internal:5432/backscroll"})
    converge(store, OWNER, parse(EXTERNAL), CONFIG)
    for name, template in before.items():
        after = pod_template(store, name)
        assert after != template, f"{name}: a rotated database password must roll the pods"
        assert after["spec"] == template["spec"], "only the annotation changes: the pods read the Secret"
        assert after["metadata"]["annotations"][SECRETS_ANNOTATION] != \
            template["metadata"]["annotations"][SECRETS_ANNOTATION]

    # The API key too; a label-only write of a Secret also rolls them (docs/operator.md says so).
    rolled = pod_template(store, "search-api")
    store.write_secret("emb-key", VALUES["emb-key"], labels={"team": "search"})
    converge(store, OWNER, parse(EXTERNAL), CONFIG)
    assert pod_template(store, "search-api") != rolled


def test_the_operators_own_token_secret_carries_no_digest_of_its_token():
    store = reconciled(VALUES, BASE)
    secret = store.read("secrets", "search-status-token")
    token = secret["stringData"]["token"]
    assert token.startswith("bks_status_")
    rest = json.dumps({k: v for k, v in secret.items() if k not in ("data", "stringData")})
    others = json.dumps(what_others_read(store, VALUES))
    digests = {hashlib.new(a, t.encode()).hexdigest()[:8] for a in HASHES
               for t in (token, json.dumps({"token": token}))}
    assert token not in rest + others
    assert not {d for d in digests if d in rest + others}
    # Its applied-hash is of the manifest without the token: the same for any token.
    from backscroll_operator import builders

    assert builders.status_token_secret(OWNER, "bks_status_a")["metadata"] == \
        builders.status_token_secret(OWNER, "bks_status_b")["metadata"]


# --- the real operator on the real control plane ---------------------------------------------------

def everything_held(versions: list[dict]) -> str:
    """Every version of every object the server held while the operator ran (Events, ReplicaSets,
    pods and the SearchIndex's status included), Secrets without their data: what someone with
    read access to anything but Secrets could have seen at any moment."""
    seen = []
    for body in versions:
        body = copy.deepcopy(body)
        if body.get("kind") == "Secret":
            body.pop("data", None), body.pop("stringData", None)
        seen.append(body)
    return json.dumps(seen, sort_keys=True)


def test_nothing_in_the_cluster_or_the_log_is_computed_from_a_secret_value(api, operator, status_server):
    values = {"live-db": {"uri": "postgresql://backscroll:tr0ub4dor@db/backscroll"},
              "live-key": {"api-key": "sk-live-0f1e2d3c4b5a"}}
    rotated = {"live-db": {"uri": "postgresql://backscroll:rotated-pw@db/backscroll"}}
    watched = Versions(api, "searchindexes", "deployments", "replicasets", "pods", "services", "jobs", "events",
                       "secrets", "poddisruptionbudgets", "networkpolicies")
    for name, data in values.items():
        api.secret(name, **data)
    body = {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
            "metadata": {"name": "search"},
            "spec": {"image": "ghcr.io/backscroll/backscroll:0.1.0", "database": {"secretRef": {"name": "live-db"}},
                     "api": {"replicas": 2, "statusTokenSecretRef": {"name": "status-token"}},
                     "embeddings": {"model": "m2", "dimensions": 256, "external": {
                         "url": "https://emb.example/v1",
                         "apiKeySecretRef": {"name": "live-key", "key": "api-key"}}}}}

    def annotation(name: str) -> str | None:
        deployment = api.get("deployments", name) or {}
        return (deployment.get("spec", {}).get("template", {}).get("metadata", {}).get("annotations")
                or {}).get(SECRETS_ANNOTATION)

    with operator() as runner:
        api.create("searchindexes", body)
        before = eventually(lambda: annotation("search-api"))
        status_server.reports["search"] = report("hybrid", "m2", dimensions=256, embedded=10, total=10)
        eventually(lambda: (api.get("searchindexes", "search").get("status") or {}).get("mode"))
        new_uri = base64.b64encode(rotated["live-db"]["uri"].encode()).decode()
        api.patch("secrets", "live-db", {"data": {"uri": new_uri}})
        eventually(lambda: annotation("search-api") not in (None, before))
        eventually(lambda: annotation("search-worker") == annotation("search-api"))
        eventually(lambda: api.events("search"))
    output = runner.output  # once the operator stopped: its whole log
    held = everything_held(watched.close())
    assert "search-api" in held and '"kind": "Event"' in held and '"kind": "Pod"' in held
    assert leaks(held, values) == set() and leaks(held, rotated) == set()
    assert leaks(output, values) == set() and leaks(output, rotated) == set()
