"""What a real API server does that the operator must live with (issue 30, item 3), each on the
real control plane: the replicas handover to an autoscaler, quantities in the server's canonical
form, names every child can carry, the CRD's defaults and rules as the server applies them,
watches resumed after 410 Gone, and child watches selected on the server."""

from __future__ import annotations

import json
import time

import pytest

from backscroll_operator.spec import parse

from .conftest import (CHILD_KINDS, ApiError, Versions, child_writes, eventually, forbidden, install_rbac, report,
                       through)
from .test_scenarios import IMAGE, MODEL, available, bring_up, condition, listed_after, passes_after, searchindex


class ReplicasSeen(Versions):
    """Every spec.replicas the API server holds for a Deployment from now on, from a watch."""

    def __init__(self, api, name: str):
        self.first = api.get("deployments", name)["spec"].get("replicas")
        self.name = name
        super().__init__(api, "deployments")

    def close(self) -> list[int | None]:
        return [self.first] + [(o.get("spec") or {}).get("replicas") for o in super().close()
                               if (o.get("metadata") or {}).get("name") == self.name]


def test_replicas_handed_to_an_autoscaler_stay_where_they_were(api, operator, status_server, kubectl):
    """`manageReplicas: false` and `api.autoscaling` leave `replicas` out of the applied manifest.
    A real API server resets a field its only manager stops applying to the default, 1: the API
    would drop to one pod. The operator hands the field over first, as Kubernetes' documentation
    describes for an HPA (a second field manager applies the current value, then the manifest
    without it), so the Deployment keeps its pods until the autoscaler changes them."""
    with operator() as replica:
        bring_up(api, status_server, embeddings=False, api={"replicas": 3, "statusTokenSecretRef": {"name": "status-token"}})
        seen = ReplicasSeen(api, "search-api")
        try:
            api.patch("searchindexes", "search", {"spec": {"api": {"manageReplicas": False}}})
            eventually(lambda: condition(api, "search", "Ready").get("observedGeneration") == 2)
            passes_after(replica, 3)
            assert api.get("deployments", "search-api")["spec"]["replicas"] == 3
            kubectl("scale", "deployment/search-api", "--replicas=4")  # what an autoscaler does
            passes_after(replica, 3)
            assert api.get("deployments", "search-api")["spec"]["replicas"] == 4, "the operator took it back"

            # The operator manages them again, then hands them to its own HPA (minReplicas 3).
            api.patch("searchindexes", "search", {"spec": {"api": {"manageReplicas": True}}})
            eventually(lambda: api.get("deployments", "search-api")["spec"]["replicas"] == 3)
            api.patch("searchindexes", "search", {"spec": {"api": {"autoscaling": {"minReplicas": 3, "maxReplicas": 6}}}})
            eventually(lambda: api.get("horizontalpodautoscalers", "search-api"))
            passes_after(replica, 3)
            assert api.get("deployments", "search-api")["spec"]["replicas"] == 3
        finally:
            values = seen.close()
        assert 1 not in values and None not in values, f"the Deployment's replicas went {values}"
        managers = {m["manager"] for m in api.get("deployments", "search-api")["metadata"]["managedFields"]
                    if "f:replicas" in json.dumps(m.get("fieldsV1", {}))}
        assert "backscroll-operator" not in managers, managers


def test_quantities_in_the_servers_canonical_form_are_not_applied_again(api, operator, status_server, proxy):
    """`cpu: 0.5` is stored as `500m` and `memory: 1024Mi` as `1Gi`: the live object never holds
    the manifest's text, so a literal comparison re-applied every child on every pass."""
    resources = {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": "1000m", "memory": "2048Mi"}}
    with operator(interval_s=1) as replica:
        bring_up(api, status_server, api={"replicas": 2, "statusTokenSecretRef": {"name": "status-token"},
                                          "resources": resources},
                 worker={"resources": resources})
        container = api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"},
                                          "limits": {"cpu": "1", "memory": "2Gi"}}, "the server's own forms"
        passes_after(replica, 2)
        # The Job controller's own status writes (a backfill finishing) are not the operator's: the
        # versions are compared once every Job is done.
        eventually(lambda: all(any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                                   for c in (job.get("status") or {}).get("conditions") or [])
                               for job in api.list("jobs", "app.kubernetes.io/instance=search")))
        before = api.versions(*CHILD_KINDS)
        since, start = time.monotonic(), replica.passes_run("resync")
        eventually(lambda: replica.passes_run("resync") >= start + 10)
        assert child_writes(proxy, since) == [], "ten idle passes re-applied children"
        assert api.versions(*CHILD_KINDS) == before
        # A real change is still applied: the comparison is with what the server would store.
        api.patch("searchindexes", "search", {"spec": {"api": {"resources": {
            "requests": {"cpu": "0.25", "memory": "1024Mi"}, "limits": {"cpu": "1000m", "memory": "2048Mi"}}}}})
        eventually(lambda: api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]
                   ["resources"]["requests"]["cpu"] == "250m")


LONGEST = "s" + "0123456789" * 6 + "z"   # 62 characters
NAMES = ["a", "search-v2", LONGEST + "x", "search.v2", "1search", "x" * 64, "s" * 120]


def test_every_name_the_crd_accepts_gives_valid_children(api, operator, status_server):
    """A SearchIndex's name becomes its children's names (a Service's is a DNS-1035 label: no dot,
    a letter first, 63 characters at most) and their `app.kubernetes.io/instance` label (63 at
    most). Whatever name the server accepts, every child is accepted too; the rest the server
    refuses when the SearchIndex is created, naming metadata.name."""
    accepted, refused = [], {}
    for name in NAMES:
        body = searchindex(name)
        body["spec"]["embeddings"]["server"]["modelId"] = "intfloat/multilingual-e5-small"
        try:
            api.create("searchindexes", body)
            accepted.append(name)
            status_server.reports[name] = report("hybrid", MODEL, embedded=1, total=1)
        except ApiError as refusal:
            refused[name] = refusal
    assert {"a", "search-v2", LONGEST + "x"} <= set(accepted), "the rule refuses ordinary names"
    for name, refusal in refused.items():
        assert refusal.status == 422 and "metadata.name" in refusal.text, (name, refusal.text)
    with operator():
        for name in accepted:
            eventually(lambda: condition(api, name, "Ready").get("status") == "True", timeout=180)
            kinds = {resource for resource in CHILD_KINDS if api.list(resource, f"app.kubernetes.io/instance={name}")}
            assert kinds >= {"deployments", "services", "jobs", "poddisruptionbudgets", "networkpolicies"}, (name, kinds)


def test_the_server_applies_the_crds_defaults_and_rules(api, kubectl):
    minimal = {"image": IMAGE, "database": {"secretRef": {"name": "db"}}}
    created = api.create("searchindexes", {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
                                           "metadata": {"name": "minimal"}, "spec": minimal})
    stored = created["spec"]
    assert stored["api"]["replicas"] == 2 and stored["deletionPolicy"] == "retain", "defaults applied by the server"
    assert parse(stored).model_dump() == parse(minimal).model_dump(), "the operator reads the defaults as the server"

    def refused(spec: dict, *words: str) -> None:
        with pytest.raises(ApiError) as err:
            api.create("searchindexes", {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
                                         "metadata": {"name": "refused"}, "spec": spec})
        assert err.value.status == 422 and all(w in err.value.text for w in words), err.value.text

    refused({**minimal, "embeddings": {"model": "m", "dimensions": 5000}}, "spec.embeddings.dimensions")
    refused({**minimal, "database": {"secretRef": {"name": "db"}, "cnpgClusterRef": {"name": "pg"}}},
            "give either secretRef or cnpgClusterRef")
    refused({**minimal, "embeddings": {"model": "m", "dimensions": 8, "server": {}, "external": {"url": "https://x/v1"}}},
            "give either server or external")
    # An unknown field: refused by a strict client, pruned otherwise (never kept).
    unknown = {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
               "metadata": {"name": "unknown"}, "spec": {**minimal, "colour": "blue"}}
    strict = kubectl.run("create", "--validate=strict", "-f", "-", input=json.dumps(unknown))
    assert strict.returncode != 0 and 'unknown field "spec.colour"' in strict.stderr, strict.stderr
    pruned = api.create("searchindexes", unknown)
    assert "colour" not in pruned["spec"]
    # A model's dimensions do not change under its name (a transition rule).
    api.patch("searchindexes", "minimal", {"spec": {"embeddings": {"model": "m", "dimensions": 8}}})
    with pytest.raises(ApiError) as err:
        api.patch("searchindexes", "minimal", {"spec": {"embeddings": {"dimensions": 16}}})
    assert err.value.status == 422 and "dimensions" in err.value.text


def test_watches_resume_after_410_gone(api, operator, status_server, proxy, kubectl):
    """A watch resumed from a resourceVersion the server no longer has is answered 410 Gone
    (reason Expired): kopf lists again and watches on. Here the proxy sends the operator's next
    watch of SearchIndexes to the real server from resourceVersion 1, long compacted: the server
    answers 410, kopf restarts the stream, and the operator still acts on a change within seconds
    (the resync is 10 minutes away). The next watch of Deployments goes from resourceVersion 1 too:
    a young server's watch cache still holds all of its history and replays it, which the operator
    takes in its stride as well."""
    with operator():
        bring_up(api, status_server, embeddings=False)
    with operator(interval_s=600) as replica:
        eventually(lambda: any(c.watch and c.resource == "deployments" for c in proxy.seen()))
        proxy.expire_watch("searchindexes")
        proxy.expire_watch("deployments")
        eventually(lambda: {"searchindexes", "deployments"} <= set(proxy.expired))
        eventually(lambda: "Restarting the watch-stream for searchindexes" in replica.output)
        api.patch("searchindexes", "search", {"spec": {"api": {"replicas": 3}}})
        eventually(lambda: api.get("deployments", "search-api")["spec"]["replicas"] == 3)
        kubectl("scale", "deployment/search-api", "--replicas=5")
        eventually(lambda: api.get("deployments", "search-api")["spec"]["replicas"] == 3)


def test_child_watches_select_the_operators_children_on_the_server(control_plane, helm, namespace, status_server,
                                                                   proxy, tmp_path, monkeypatch, api):
    """Cluster-wide (the chart's operator.clusterWide), the operator watches Deployments, Services,
    Jobs, ... in every namespace: each list and watch asks the server for its own children only
    (`labelSelector=app.kubernetes.io/managed-by=backscroll-operator`), so the rest of the
    cluster's objects never reach it."""
    from backscroll_operator.config import OperatorConfig

    from .conftest import Operator

    install = install_rbac(control_plane, helm, namespace, tmp_path, "operator.clusterWide=true")
    try:
        assert install.namespaces == []
        monkeypatch.setenv("KUBECONFIG", str(through(install.kubeconfig, proxy, tmp_path / "operator.kubeconfig")))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        replica = Operator(OperatorConfig(interval_s=2, retry_delay_s=1, status_timeout_s=2, lease_namespace=namespace,
                                          identity="cluster-wide",
                                          status_url=status_server.url + "/{namespace}/{name}/v1/status"), []).start()
        try:
            bring_up(api, status_server, embeddings=False)
            listed_after(replica)
        finally:
            replica.stop()
        calls = [c for c in proxy.seen() if c.method == "GET" and c.resource in CHILD_KINDS and
                 "/namespaces/" not in c.path]
        assert {c.resource for c in calls if c.watch} == set(CHILD_KINDS), "watched cluster-wide"
        unselected = [f"{c.path}?{c.query}" for c in calls
                      if "app.kubernetes.io/managed-by=backscroll-operator" not in c.query.get("labelSelector", "")]
        assert unselected == [], "lists and watches of every object of a kind in the cluster"
        assert [f for f in forbidden(proxy) if f"/namespaces/{namespace}/" in f or "/namespaces/" not in f] == []
    finally:
        for doc in install.cluster_scoped:
            control_plane.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found",
                                  check=False)
