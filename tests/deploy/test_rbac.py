"""Every install mode grants the operator the same rules, scoped as the mode says.

What the operator needs is decided by reality, not listed here: tests/operator/test_rbac_real.py
runs the operator on a real control plane as the chart's ServiceAccount, with nothing but the
chart's default Roles, through every path; the real authorizer allowed every call, and every verb
granted was used. These fast, offline checks hold the other modes (named namespaces, the
cluster-wide mode, the kustomize base and its overlays) to those same rules.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import yaml

from tests.deploy.conftest import CHART, ROOT, of_kind, run

# cluster-wide: kopf's resource observer lists and watches CRDs; with named namespaces its
# namespace observer lists and watches namespaces.
KOPF_CLUSTER = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}}
KOPF_NAMESPACE_SCAN = {("", "namespaces"): {"list", "watch"}}


def granted(rules: list[dict]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out[(group, resource)] |= set(rule["verbs"])
    return dict(out)


@pytest.fixture(scope="module")
def default_roles(render) -> dict[str, dict]:
    """The chart's default Roles, the ones tests/operator/test_rbac_real.py holds to reality."""
    return {r["metadata"]["name"]: r for r in of_kind(render(), "Role")}


@pytest.fixture(scope="module")
def needs(default_roles) -> dict[tuple[str, str], set[str]]:
    """What the operator does in a namespace it watches."""
    needs = granted(default_roles["rel-backscroll"]["rules"])
    # Read by name, never listed or watched; created: its own status token and a SearchWorkspace's
    # token Secrets, which alone it patches (drift) and deletes (revocation).
    assert needs[("", "secrets")] == {"get", "create", "patch", "delete"}
    assert "patch" not in needs[("batch", "jobs")], "Jobs are immutable: never patched"
    return needs


@pytest.fixture(scope="module")
def leader_needs(default_roles) -> dict[tuple[str, str], set[str]]:
    """What its leader election does in its own namespace."""
    return granted(default_roles["rel-backscroll-leader"]["rules"])


def operator_env(docs: list[dict]) -> dict:
    (deployment,) = of_kind(docs, "Deployment")
    return {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


def no_secrets_cluster_wide(docs: list[dict]) -> bool:
    return all(("", "secrets") not in granted(role["rules"]) for role in of_kind(docs, "ClusterRole"))


def test_default_chart_reads_secrets_only_in_the_release_namespace(render, needs, leader_needs):
    """The default install watches its release namespace alone: a Role there with the namespaced
    rules, and cluster-wide only kopf's discovery. No Secret outside it is readable."""
    docs = render()
    assert operator_env(docs)["BACKSCROLL_OPERATOR_NAMESPACES"] == '["backscroll"]'
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in of_kind(docs, "Role")}
    assert set(roles) == {("backscroll", "rel-backscroll"), ("backscroll", "rel-backscroll-leader")}
    assert granted(roles["backscroll", "rel-backscroll"]["rules"]) == needs
    assert granted(roles["backscroll", "rel-backscroll-leader"]["rules"]) == leader_needs
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**KOPF_CLUSTER, **KOPF_NAMESPACE_SCAN}
    assert no_secrets_cluster_wide(docs)
    (account,) = of_kind(docs, "ServiceAccount")
    subject = [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "backscroll"}]
    bindings = {b["metadata"]["name"]: b for b in of_kind(docs, "RoleBinding")}
    assert bindings["rel-backscroll"]["metadata"]["namespace"] == "backscroll"
    assert bindings["rel-backscroll"]["roleRef"]["name"] == "rel-backscroll"
    assert all(b["subjects"] == subject for b in [*bindings.values(), *of_kind(docs, "ClusterRoleBinding")])


def test_cluster_wide_chart_grants_exactly_what_is_needed(render, needs, leader_needs):
    docs = render(sets=("operator.clusterWide=true",))
    assert "BACKSCROLL_OPERATOR_NAMESPACES" not in operator_env(docs), "every namespace"
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    assert granted(roles["rel-backscroll"]["rules"]) == needs
    assert granted(roles["rel-backscroll-discovery"]["rules"]) == KOPF_CLUSTER
    (leader,) = of_kind(docs, "Role")
    assert leader["metadata"]["namespace"] == "backscroll" and granted(leader["rules"]) == leader_needs
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


def test_namespaced_chart_grants_the_same_in_each_namespace_only(render, needs, leader_needs):
    docs = render(CHART / "examples/namespaced.yaml")
    # The chart's own Jobs have a Role of their own (rel-backscroll-jobs, tests/deploy/test_chart.py).
    roles = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] not in ("rel-backscroll-leader", "rel-backscroll-jobs")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert granted(role["rules"]) == needs
    (cluster,) = of_kind(docs, "ClusterRole")
    assert granted(cluster["rules"]) == {**KOPF_CLUSTER, **KOPF_NAMESPACE_SCAN}
    assert sorted(b["metadata"]["namespace"] for b in of_kind(docs, "RoleBinding")
                  if b["metadata"]["name"] not in ("rel-backscroll-leader", "rel-backscroll-jobs")) == ["team-a", "team-b"]
    (leader,) = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] == "rel-backscroll-leader"]
    assert leader["metadata"]["namespace"] == "backscroll" and granted(leader["rules"]) == leader_needs


def kustomize(kubectl: str, path: str) -> list[dict]:
    done = run(kubectl, "kustomize", str(ROOT / path))
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_kustomize_base_reads_secrets_only_in_the_namespace_it_watches(kubectl, needs, leader_needs):
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
    assert granted(roles["backscroll-system", "backscroll-operator-leader"]["rules"]) == leader_needs
    subject = [{"kind": "ServiceAccount", "name": "backscroll-operator", "namespace": "backscroll-system"}]
    for binding in of_kind(docs, "RoleBinding"):
        key = (binding["metadata"]["namespace"], binding["roleRef"]["name"])
        assert key in roles and binding["roleRef"]["kind"] == "Role" and binding["subjects"] == subject
    assert len(of_kind(docs, "RoleBinding")) == len(roles)


def test_kustomize_cluster_wide_overlay_is_the_wider_mode(kubectl, needs, leader_needs):
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
    assert granted(leader["rules"]) == leader_needs
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
