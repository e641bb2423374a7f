"""RBAC equals what the operator does: no call without its verb, no verb without a call.

What the operator's own client calls is recorded, not listed by hand: `converge` runs against a
recording stand-in of its Kube client through every path (create, roll out, switch to an external
endpoint, change the model, drop the embeddings). kopf's calls come from the framework and are
listed in KOPF with where kopf makes them.
"""

from __future__ import annotations

import base64
import copy
from collections import defaultdict

import pytest
import yaml

from backscroll_operator import kube as kube_module
from backscroll_operator.config import OperatorConfig
from backscroll_operator.kube import NotFound
from backscroll_operator.leader import Leader
from backscroll_operator.names import Owner
from backscroll_operator.reconcile import converge
from backscroll_operator.spec import parse
from tests.deploy.conftest import CHART, ROOT, of_kind, run

# (apiGroup, resource) -> verbs kopf itself uses in the watched namespaces
KOPF = {
    ("search.backscroll.dev", "searchindexes"): {"list", "watch", "patch"},  # watch-stream; annotations
    ("", "events"): {"create"},  # kopf._cogs.clients.events.post_event (its own warnings)
    # handlers.py's child watches (kopf.on.event on each child kind)
    ("apps", "deployments"): {"list", "watch"},
    ("", "services"): {"list", "watch"},
    ("batch", "jobs"): {"list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("autoscaling", "horizontalpodautoscalers"): {"list", "watch"},
    ("networking.k8s.io", "networkpolicies"): {"list", "watch"},
}
# handlers.Passes, around each converge: the fresh SearchIndex, the resync's list, the status,
# the operator's finalizer, its Events.
PASSES = {
    ("search.backscroll.dev", "searchindexes"): {"get", "list", "patch"},
    ("search.backscroll.dev", "searchindexes/status"): {"patch"},
    ("", "events"): {"create"},
}
# cluster-wide: kopf's resource observer lists and watches CRDs; with named namespaces its
# namespace observer lists and watches namespaces.
KOPF_CLUSTER = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}}
KOPF_NAMESPACE_SCAN = {("", "namespaces"): {"list", "watch"}}


class LeaseStore:
    """The Leader's client: one Lease in memory, noting the verb of each request."""

    VERBS = {"GET": "get", "POST": "create", "PUT": "update"}

    def __init__(self):
        self.lease: dict | None = None
        self.calls: set[tuple[str, str]] = set()

    def _send(self, method, path, body=None, params=None, content_type=None):
        self.calls.add((self.VERBS[method], "leases"))
        if method == "GET":
            if self.lease is None:
                raise NotFound(404, path)
            return copy.deepcopy(self.lease)
        self.lease = copy.deepcopy(body)
        return body


def leader_needs() -> dict[tuple[str, str], set[str]]:
    """leader.py's calls in the operator's namespace: acquire, renew, take over, release."""
    store = LeaseStore()
    leader = Leader(store, "backscroll-system", "backscroll-operator", "a", duration_s=1, renew_s=0.1)
    assert leader.tick() and leader.tick()  # created, renewed
    store.lease["spec"]["holderIdentity"] = "b"  # b took over meanwhile
    assert not leader.tick() and not leader.held()
    leader._observed_at -= 100  # and stopped renewing long ago: a takeover
    assert leader.tick() and store.lease["spec"]["holderIdentity"] == "a"
    assert store.lease["spec"]["leaseTransitions"] == 1
    leader.release()
    assert store.lease["spec"]["holderIdentity"] is None
    return {("coordination.k8s.io", "leases"): {verb for verb, _ in store.calls}}


class Recording:
    """The operator's Kube client over an in-memory store, noting (verb, resource) of each call."""

    def __init__(self):
        self.objects: dict[tuple[str, str], dict] = {}
        self.calls: set[tuple[str, str]] = set()

    def get(self, resource, namespace, name):
        self.calls.add(("get", resource))
        return copy.deepcopy(self.objects.get((resource, name)))

    def list(self, resource, namespace, labels):
        self.calls.add(("list", resource))
        return [copy.deepcopy(o) for (r, _), o in self.objects.items() if r == resource and
                all(o["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())]

    def create(self, resource, namespace, body):
        self.calls.add(("create", resource))
        body = copy.deepcopy(body)
        body["metadata"].setdefault("uid", f"uid-{body['metadata']['name']}")
        self.objects[(resource, body["metadata"]["name"])] = body
        return copy.deepcopy(body)

    def apply(self, resource, namespace, name, body):
        # An apply that creates is authorized as a create (the API server checks both).
        if (resource, name) not in self.objects:
            self.calls.add(("create", resource))
        self.calls.add(("patch", resource))
        self.objects[(resource, name)] = copy.deepcopy(body)
        return body

    def patch(self, resource, namespace, name, body, subresource="", content_type=None):
        self.calls.add(("patch", f"{resource}/{subresource}" if subresource else resource))
        return body

    def delete(self, resource, namespace, name):
        self.calls.add(("delete", resource))
        return self.objects.pop((resource, name), None) is not None


BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}
IN_CLUSTER = {**BASE, "embeddings": {"model": "e5", "dimensions": 384}}
EXTERNAL = {**BASE, "embeddings": {"model": "m2", "dimensions": 256, "external": {
    "url": "https://emb.example/v1", "apiKeySecretRef": {"name": "key", "key": "k"}}}}

NEW_PORT = {**BASE, "api": {"service": {"port": 9090}}}
GIVEN_TOKEN = {**BASE, "api": {"statusTokenSecretRef": {"name": "status"}}}
CNPG = {"image": "backscroll:1", "database": {"cnpgClusterRef": {"name": "pg"}}}
AUTOSCALED = {**BASE, "api": {"autoscaling": {"minReplicas": 2}}}
ONE_REPLICA = {**BASE, "api": {"replicas": 1}, "networkPolicy": {"enabled": False}}
HIBERNATING = {**IN_CLUSTER, "hibernate": True}


def operator_client_needs() -> dict[tuple[str, str], set[str]]:
    client = Recording()
    for name in ("db", "status", "key", "pg-app"):
        data = {"uri": "x", "token": base64.b64encode(b"t").decode(), "k": "x", "username": "u", "password": "p",
                "dbname": "app"}
        client.objects[("secrets", name)] = {"metadata": {"name": name}, "data": data}
    owner = Owner(name="search", namespace="team", uid="uid-1")
    # Nothing listens there: the status read fails at once, as the operator tolerates.
    config = OperatorConfig(status_url="http://127.0.0.1:9/v1/status", status_timeout_s=0.2)
    for spec in (BASE, IN_CLUSTER, IN_CLUSTER, EXTERNAL, NEW_PORT, BASE, GIVEN_TOKEN, CNPG, AUTOSCALED, ONE_REPLICA,
                 IN_CLUSTER, HIBERNATING, BASE):
        converge(client, owner, parse(spec), config)
        for (resource, _), obj in client.objects.items():  # the Jobs finish between passes
            if resource == "jobs":
                obj["status"] = {"succeeded": 1}
    needs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for verb, resource in client.calls:
        group = kube_module.RESOURCES[resource].removeprefix("/apis/").removeprefix("/api").rsplit("/", 1)[0]
        needs[(group.strip("/"), resource)].add(verb)
    return dict(needs)


@pytest.fixture(scope="module")
def needs() -> dict[tuple[str, str], set[str]]:
    recorded = operator_client_needs()
    # Every path ran: each kind's full set of calls, including patches, lists and deletes.
    assert recorded[("apps", "deployments")] >= {"get", "create", "patch", "delete"}
    assert recorded[("batch", "jobs")] >= {"list", "delete"}
    assert recorded[("", "services")] >= {"get", "create", "patch", "delete"}
    for kind in (("policy", "poddisruptionbudgets"), ("autoscaling", "horizontalpodautoscalers"),
                 ("networking.k8s.io", "networkpolicies")):
        assert recorded[kind] >= {"get", "create", "patch", "delete"}, kind
    merged = defaultdict(set, {k: set(v) for k, v in recorded.items()})
    for key, verbs in [*KOPF.items(), *PASSES.items()]:
        merged[key] |= verbs
    return dict(merged)


def granted(rules: list[dict]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out[(group, resource)] |= set(rule["verbs"])
    return dict(out)


def test_recording_sees_what_the_operator_client_does():
    recorded = operator_client_needs()
    assert recorded[("", "secrets")] == {"get", "create"}, "Secrets are read, and only its own token created"
    assert "patch" not in recorded[("batch", "jobs")], "Jobs are immutable: never patched"


def operator_env(docs: list[dict]) -> dict:
    (deployment,) = of_kind(docs, "Deployment")
    return {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


def no_secrets_cluster_wide(docs: list[dict]) -> bool:
    return all(("", "secrets") not in granted(role["rules"]) for role in of_kind(docs, "ClusterRole"))


def test_default_chart_reads_secrets_only_in_the_release_namespace(render, needs):
    """The default install watches its release namespace alone: a Role there with the namespaced
    rules, and cluster-wide only kopf's discovery. No Secret outside it is readable."""
    docs = render()
    assert operator_env(docs)["BACKSCROLL_OPERATOR_NAMESPACES"] == '["backscroll"]'
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in of_kind(docs, "Role")}
    assert set(roles) == {("backscroll", "rel-backscroll"), ("backscroll", "rel-backscroll-leader")}
    assert granted(roles["backscroll", "rel-backscroll"]["rules"]) == needs
    assert granted(roles["backscroll", "rel-backscroll-leader"]["rules"]) == leader_needs()
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**KOPF_CLUSTER, **KOPF_NAMESPACE_SCAN}
    assert no_secrets_cluster_wide(docs)
    (account,) = of_kind(docs, "ServiceAccount")
    subject = [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "backscroll"}]
    bindings = {b["metadata"]["name"]: b for b in of_kind(docs, "RoleBinding")}
    assert bindings["rel-backscroll"]["metadata"]["namespace"] == "backscroll"
    assert bindings["rel-backscroll"]["roleRef"]["name"] == "rel-backscroll"
    assert all(b["subjects"] == subject for b in [*bindings.values(), *of_kind(docs, "ClusterRoleBinding")])


def test_cluster_wide_chart_grants_exactly_what_is_needed(render, needs):
    docs = render(sets=("operator.clusterWide=true",))
    assert "BACKSCROLL_OPERATOR_NAMESPACES" not in operator_env(docs), "every namespace"
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    assert granted(roles["rel-backscroll"]["rules"]) == needs
    assert granted(roles["rel-backscroll-discovery"]["rules"]) == KOPF_CLUSTER
    (leader,) = of_kind(docs, "Role")
    assert leader["metadata"]["namespace"] == "backscroll" and granted(leader["rules"]) == leader_needs()
    bound = {b["roleRef"]["name"]: b["subjects"] for b in of_kind(docs, "ClusterRoleBinding")}
    (account,) = of_kind(docs, "ServiceAccount")
    for subjects in bound.values():
        assert subjects == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "backscroll"}]
    assert set(bound) == set(roles)


REFUSED = {
    "clusterWide with a namespace list": (("operator.clusterWide=true", "operator.watchNamespaces={team-a}"),
                                          "leave operator.watchNamespaces empty"),
    "a SearchIndex where the operator does not watch": (
        ("searchIndex.enabled=true", "searchIndex.namespace=elsewhere"), "elsewhere is not watched"),
}


@pytest.mark.parametrize("sets,message", REFUSED.values(), ids=REFUSED.keys())
def test_chart_refuses_a_scope_that_does_not_add_up(helm, sets, message):
    done = run(helm, "template", "rel", str(CHART), "--namespace", "backscroll",
               *[arg for pair in sets for arg in ("--set", pair)])
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_namespaced_chart_grants_the_same_in_each_namespace_only(render, needs):
    docs = render(CHART / "examples/namespaced.yaml")
    roles = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] != "rel-backscroll-leader"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert granted(role["rules"]) == needs
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**KOPF_CLUSTER, **KOPF_NAMESPACE_SCAN}
    assert sorted(b["metadata"]["namespace"] for b in of_kind(docs, "RoleBinding")
                  if b["metadata"]["name"] != "rel-backscroll-leader") == ["team-a", "team-b"]
    (leader,) = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] == "rel-backscroll-leader"]
    assert leader["metadata"]["namespace"] == "backscroll" and granted(leader["rules"]) == leader_needs()


def kustomize(kubectl: str, path: str) -> list[dict]:
    done = run(kubectl, "kustomize", str(ROOT / path))
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_kustomize_base_reads_secrets_only_in_the_namespace_it_watches(kubectl, needs):
    """k8s/base watches `default`: a Role there with the namespaced rules; cluster-wide only
    kopf's discovery; the Lease's Role in the operator's namespace."""
    docs = kustomize(kubectl, "k8s/base")
    assert operator_env(docs)["BACKSCROLL_OPERATOR_NAMESPACES"] == '["default"]'
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**KOPF_CLUSTER, **KOPF_NAMESPACE_SCAN}
    assert no_secrets_cluster_wide(docs)
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in of_kind(docs, "Role")}
    assert set(roles) == {("default", "backscroll-operator"), ("backscroll-system", "backscroll-operator-leader")}
    assert granted(roles["default", "backscroll-operator"]["rules"]) == needs
    assert granted(roles["backscroll-system", "backscroll-operator-leader"]["rules"]) == leader_needs()
    subject = [{"kind": "ServiceAccount", "name": "backscroll-operator", "namespace": "backscroll-system"}]
    for binding in of_kind(docs, "RoleBinding"):
        key = (binding["metadata"]["namespace"], binding["roleRef"]["name"])
        assert key in roles and binding["roleRef"]["kind"] == "Role" and binding["subjects"] == subject
    assert len(of_kind(docs, "RoleBinding")) == len(roles)


def test_kustomize_cluster_wide_overlay_is_the_wider_mode(kubectl, needs):
    """k8s/overlays/cluster-wide: every namespace, so the namespaced rules in a ClusterRole, no
    namespace list, and no Role left in `default`."""
    docs = kustomize(kubectl, "k8s/overlays/cluster-wide")
    assert "BACKSCROLL_OPERATOR_NAMESPACES" not in operator_env(docs)
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**needs, **KOPF_CLUSTER}
    (binding,) = of_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == cluster["metadata"]["name"]
    (leader,) = of_kind(docs, "Role")
    assert leader["metadata"]["name"] == "backscroll-operator-leader"
    assert granted(leader["rules"]) == leader_needs()
    (leader_binding,) = of_kind(docs, "RoleBinding")
    assert leader_binding["roleRef"]["name"] == leader["metadata"]["name"]


def test_kustomize_overlay_grants_in_the_watched_namespace_only(kubectl, needs):
    """k8s/overlays/example watches team-search: a Role there with the namespaced rules, and
    cluster-wide only what kopf reads there (CRDs, namespace names): no Secrets outside it."""
    done = run(kubectl, "kustomize", str(ROOT / "k8s/overlays/example"))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    env = {e["name"]: e.get("value") for d in of_kind(docs, "Deployment")
           for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BACKSCROLL_OPERATOR_NAMESPACES"] == '["team-search"]'
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**KOPF_CLUSTER, **KOPF_NAMESPACE_SCAN}
    for binding in of_kind(docs, "ClusterRoleBinding"):
        assert binding["roleRef"]["name"] == cluster["metadata"]["name"]
    (role,) = [r for r in of_kind(docs, "Role") if r["metadata"]["namespace"] == "team-search"]
    assert granted(role["rules"]) == needs
    (binding,) = [b for b in of_kind(docs, "RoleBinding") if b["metadata"]["namespace"] == "team-search"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "backscroll-operator",
                                    "namespace": "backscroll-system"}]
    # The base's Role in `default` is gone: the operator reads nothing there.
    for kind in ("Role", "RoleBinding"):
        assert {r["metadata"]["namespace"] for r in of_kind(docs, kind)} == {"team-search", "backscroll-system"}
    (index,) = of_kind(docs, "SearchIndex")
    assert index["metadata"]["namespace"] == "team-search"
