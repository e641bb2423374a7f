"""The operator end to end: kopf running for real against the Kubernetes emulator."""

from __future__ import annotations

import copy

from .conftest import NS, eventually, report

MODEL = "multilingual-e5-small"


def searchindex(name: str = "search", embeddings: bool = True, **spec) -> dict:
    body = {
        "apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": "backscroll:0.1.0", "database": {"secretRef": {"name": "db"}},
                 "api": {"replicas": 2, "statusTokenSecretRef": {"name": "status-token"}},
                 **spec},
    }
    if embeddings:
        body["spec"]["embeddings"] = {"model": MODEL, "dimensions": 384,
                                      "server": {"modelId": "intfloat/multilingual-e5-small"}}
    return body


def condition(api, name: str, type_: str) -> dict:
    status = (api.get("searchindexes", name) or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), {})


def test_create_makes_children_with_owner_references(api, operator):
    with operator():
        created = api.create("searchindexes", searchindex())
        uid = created["metadata"]["uid"]
        eventually(lambda: {"search-api", "search-worker", "search-embeddings"} <= api.names("deployments"))
        eventually(lambda: {"search-api", "search-embeddings"} <= api.names("services"))
        jobs = eventually(lambda: [j for j in api.list("jobs") if j["metadata"]["name"].startswith("search-migrate-")])
        children = [*api.list("deployments"), *api.list("services"), *jobs]
        for child in children:
            refs = child["metadata"]["ownerReferences"]
            assert refs == [{"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
                             "name": "search", "uid": uid, "controller": True, "blockOwnerDeletion": True}]
        assert not any(n.startswith("search-backfill") for n in api.names("jobs")), "backfill before migration"
        eventually(lambda: condition(api, "search", "MigrationsApplied")["reason"] == "Running")
