"""The chart's RBAC is exactly what the operator does, decided by the real authorizer.

The operator runs as the chart's ServiceAccount with nothing but the chart's Roles, through every
path that calls the API server differently (an in-cluster model, a rollout to an external one with
a key, an autoscaler, hibernation, one replica without policies, the embeddings dropped, its token
rotated, a CloudNativePG cluster's index whose pre-migration Backup completed and whose migration failed, a purge on deletion). Every call it made was allowed (the `operators` fixture fails a test
on any 403), and every verb the chart grants was used: no call without its verb, no verb without
a call. tests/deploy/test_rbac.py then holds the other install modes (namespaced lists, the
cluster-wide mode, the kustomize base and overlays) to these same rules."""

from __future__ import annotations

from collections import defaultdict

from .conftest import cnpg_cluster, eventually, fail_pod, render_chart, report
from .test_scenarios import MODEL, available, condition, searchindex

NEW = "m2"
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def rbac(call) -> tuple[str, str, str] | None:
    """(apiGroup, resource[/subresource], verb) of a request, as the authorizer sees it; None for
    discovery (/api, /apis/GROUP/VERSION: every authenticated user may read it)."""
    parts = [p for p in call.path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[:1] == ["api"] else (parts[1] if len(parts) > 1 else "", parts[3:])
    if not rest:
        return None
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    verb = VERBS[call.method]
    if call.method == "GET":
        verb = "watch" if call.watch else ("get" if len(rest) > 1 else "list")
    return group, resource, verb


def used(calls) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> the RBAC verbs of these requests."""
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for call in calls:
        if rbac(call) is None:
            continue
        group, resource, verb = rbac(call)
        out[(group, resource)].add(verb)
        if call.method == "PATCH" and call.status == 201:  # a server-side apply that created: create too
            out[(group, resource)].add("create")
    return dict(out)


def granted(docs: list[dict], *kinds: str) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for doc in docs:
        if doc["kind"] in kinds:
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        out[(group, resource)] |= set(rule["verbs"])
    return dict(out)


# What only SearchWorkspaces use: held to reality by tests/operator/test_workspaces.py
# (test_the_workspace_rules_are_what_the_lifecycle_uses), not by this SearchIndex scenario.
WORKSPACE_ONLY = {("search.backscroll.dev", "searchworkspaces"): None,
                  ("search.backscroll.dev", "searchworkspaces/status"): None, ("", "secrets"): {"patch", "delete"}}


def without_workspaces(grants: dict[tuple[str, str], set[str]]) -> dict[tuple[str, str], set[str]]:
    out = {}
    for key, verbs in grants.items():
        if key in WORKSPACE_ONLY:
            verbs = set() if WORKSPACE_ONLY[key] is None else verbs - WORKSPACE_ONLY[key]
        if verbs:
            out[key] = verbs
    return out


def test_the_charts_rbac_is_what_the_operator_uses(api, operators, status_server, proxy, install, helm, kubectl,
                                                   gate, cnpg_crd, cnpg_backup_crd):
    api.secret("key", k="sk-test")
    replica = operators(interval_s=1)
    status_server.reports["search"] = report("hybrid", MODEL, embedded=10, total=10)
    api.create("searchindexes", searchindex(api={"replicas": 2}))  # its own status token
    eventually(lambda: condition(api, "search", "Ready").get("status") == "True")

    # A rollout to an external endpoint with a key (superseded Jobs deleted, a server removed).
    both = report("hybrid", MODEL, embedded=10, total=10)
    both["models"].append({**report("hybrid", NEW, dimensions=256, embedded=10, total=10)["models"][0],
                           "current": False})
    status_server.reports["search"] = both
    api.patch("searchindexes", "search", {"spec": {"embeddings": {
        "model": NEW, "dimensions": 256, "server": None,
        "external": {"url": "https://emb.example/v1", "apiKeySecretRef": {"name": "key", "key": "k"}}}}})
    eventually(lambda: "search-worker" in api.names("deployments") and any(
        e.get("value") == NEW for e in api.get("deployments", "search-api")["spec"]["template"]["spec"]
        ["containers"][0]["env"]))
    status_server.reports["search"] = report("hybrid", NEW, dimensions=256, embedded=10, total=10)
    eventually(lambda: condition(api, "search", "Ready").get("status") == "True")

    # An autoscaler, then hibernation (the HPA and budgets removed), then one replica, no policies.
    api.patch("searchindexes", "search", {"spec": {"api": {"autoscaling": {"minReplicas": 2}}}})
    eventually(lambda: api.get("horizontalpodautoscalers", "search-api"))
    api.patch("searchindexes", "search", {"spec": {"hibernate": True}})
    eventually(lambda: not api.names("horizontalpodautoscalers") and not api.names("poddisruptionbudgets"))
    api.patch("searchindexes", "search", {"spec": {"hibernate": False, "api": {"autoscaling": None, "replicas": 1},
                                                   "networkPolicy": {"enabled": False}}})
    eventually(lambda: not api.names("networkpolicies") and available(api, "search-api") == 1)

    # The embeddings dropped; the token rotated; then a purge on deletion.
    status_server.reports["search"] = report("lexical")
    api.patch("searchindexes", "search", {"spec": {"embeddings": None}})
    eventually(lambda: "search-worker" not in api.names("deployments"))
    kubectl("delete", "secret", "search-status-token")
    eventually(lambda: api.get("secrets", "search-status-token"))
    eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
    # On a CloudNativePG cluster (read for its uid and Ready condition), a migration that failed
    # (its pods read for the error).
    api.secret("pg-app", uri="postgresql://app:pw@pg-rw:5432/app", username="app", password="pw", dbname="app")
    cnpg_cluster(api, "pg", ready=True)
    status_server.reports["pg"] = report("lexical")
    held = gate("pg")
    api.create("searchindexes", searchindex("pg", embeddings=False, pod={"nodeSelector": held.selector},
                                            database={"cnpgClusterRef": {"name": "pg"}, "backupBeforeMigration": True}))
    # Its CloudNativePG Backup first (created, its phase read), completed as CloudNativePG would.
    backup = eventually(lambda: next(n for n in api.names("backups") if n.startswith("pg-premigrate-")))
    api.patch("backups", backup, {"status": {"phase": "completed"}}, subresource="status")
    job = eventually(lambda: next(n for n in api.names("jobs") if n.startswith("pg-migrate-")))
    fail_pod(api, job, "backscroll: the database refused")
    eventually(lambda: ((api.get("searchindexes", "pg").get("status") or {}).get("migration") or {}).get("lastError"))
    api.delete("searchindexes", "pg")
    api.patch("searchindexes", "search", {"spec": {"deletionPolicy": "delete"}})
    eventually(lambda: api.get("searchindexes", "search")["metadata"].get("finalizers"))
    api.delete("searchindexes", "search")
    eventually(lambda: api.get("searchindexes", "search") is None)
    replica.stop()

    calls = proxy.seen()
    docs = render_chart(helm, install.release, install.namespace)
    in_namespace = used(c for c in calls if f"/namespaces/{install.namespace}/" in c.path and c.resource != "leases"
                        and not c.resource.startswith("searchworkspaces"))
    leases = used(c for c in calls if c.resource == "leases")
    cluster = used(c for c in calls if "/namespaces/" not in c.path or c.path.endswith("/namespaces"))
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Role"}
    (leader,) = [d for name, d in roles.items() if name.endswith("-leader")]
    (watched,) = [d for name, d in roles.items() if not name.endswith("-leader")]
    assert in_namespace == without_workspaces(granted([watched], "Role")), \
        "the namespaced Role: every verb used, none missing"
    assert leases == granted([leader], "Role")
    assert cluster == granted(docs, "ClusterRole")
