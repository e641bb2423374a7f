"""Release engineering, operator side: an operator upgrade rolls a Deployment's pods only when that
Deployment's own pod template changes. The applied-hash annotation (which covers the whole
manifest, and so moves with any change of the operator's hash scheme or of a field elsewhere)
lives on the Deployment's metadata, never on its pod template: re-applying a Deployment whose
template is byte-identical changes no pod (Kubernetes rolls out on a template change only)."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from backscroll_operator import builders, rollout
from backscroll_operator.names import HASH_ANNOTATION, Owner
from backscroll_operator.spec import parse

OWNER = Owner(name="search", namespace="team", uid="uid-1")
SPEC = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}},
        "api": {"replicas": 2}, "worker": {"replicas": 1},
        "embeddings": {"model": "multilingual-e5-small", "dimensions": 384,
                       "server": {"modelId": "intfloat/multilingual-e5-small", "replicas": 1}}}


def _deployments(raw: dict) -> dict[str, dict]:
    spec = parse(raw)
    plan = rollout.plan(spec, rollout.Observed(migrated=True, backfilled=frozenset([spec.embeddings.model])))
    return {"api": builders.api_deployment(OWNER, spec, plan, "db:uid-1:1"),
            "worker": builders.worker_deployment(OWNER, spec, plan, "db:uid-1:1"),
            "embeddings": builders.embeddings_deployment(OWNER, spec, spec.embeddings)}


def _template_bytes(deployment: dict) -> bytes:
    return json.dumps(deployment["spec"]["template"], sort_keys=True, separators=(",", ":")).encode()


def test_the_applied_hash_is_on_the_deployment_not_on_its_pod_template():
    for name, deployment in _deployments(SPEC).items():
        assert HASH_ANNOTATION in deployment["metadata"]["annotations"], name
        template = json.dumps(deployment["spec"]["template"])
        assert HASH_ANNOTATION not in template, name
        assert deployment["metadata"]["annotations"][HASH_ANNOTATION] not in template, name


def test_a_new_hash_scheme_changes_no_pod_template(monkeypatch):
    """An operator release that hashes differently (another function, length or annotation key)
    re-applies every child once, and rolls no pod."""
    before = _deployments(SPEC)
    monkeypatch.setattr(builders, "HASH_ANNOTATION", "search.backscroll.dev/applied-hash-v2")
    monkeypatch.setattr(builders, "short_hash", lambda value, length=8: hashlib.blake2b(
        json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:length])
    after = _deployments(SPEC)
    for name in before:
        assert after[name]["metadata"]["annotations"] != before[name]["metadata"]["annotations"], name
        assert _template_bytes(after[name]) == _template_bytes(before[name]), name


def _with(path: str, value) -> dict:
    raw = copy.deepcopy(SPEC)
    *parents, leaf = path.split(".")
    node = raw
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return raw


# A spec change, and the Deployments whose pod templates it must leave byte-identical.
ELSEWHERE = {
    "deletionPolicy": ("deletionPolicy", "delete", ["api", "worker", "embeddings"]),
    "embeddings.rollout.minCoverage": ("embeddings.rollout.minCoverage", 0.5, ["api", "worker", "embeddings"]),
    "api.replicas": ("api.replicas", 3, ["api", "worker", "embeddings"]),
    "worker.replicas": ("worker.replicas", 2, ["api", "worker", "embeddings"]),
    "embeddings.server.replicas": ("embeddings.server.replicas", 2, ["api", "worker", "embeddings"]),
    "embeddings.backfill.rate": ("embeddings.backfill.rate", 25, ["api", "worker", "embeddings"]),
}


@pytest.mark.parametrize("path,value,untouched", ELSEWHERE.values(), ids=ELSEWHERE.keys())
def test_a_change_outside_a_pod_templates_inputs_leaves_it_byte_identical(path, value, untouched):
    before, after = _deployments(SPEC), _deployments(_with(path, value))
    changed = [name for name in before if before[name] != after[name]]
    assert changed or path in ("deletionPolicy", "embeddings.rollout.minCoverage", "embeddings.backfill.rate"), path
    for name in untouched:
        assert _template_bytes(after[name]) == _template_bytes(before[name]), (path, name)


def test_a_change_to_a_pod_templates_inputs_does_roll_it():
    """The converse, so the test above cannot pass by comparing nothing: the image rolls the API and
    the worker (not the server), the server's model id rolls the server."""
    before = _deployments(SPEC)
    image = _deployments(_with("image", "backscroll:2"))
    assert _template_bytes(image["api"]) != _template_bytes(before["api"])
    assert _template_bytes(image["worker"]) != _template_bytes(before["worker"])
    assert _template_bytes(image["embeddings"]) == _template_bytes(before["embeddings"])
    model = _deployments(_with("embeddings.server", {"modelId": "intfloat/multilingual-e5-base", "replicas": 1}))
    assert _template_bytes(model["embeddings"]) != _template_bytes(before["embeddings"])
