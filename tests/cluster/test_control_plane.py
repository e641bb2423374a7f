"""The control plane is real: admission, controllers, RBAC, defaulting and canonical quantities
behave as on any Kubernetes, which is what an emulator cannot promise (issue 30)."""

from __future__ import annotations

import json
import time

import pytest

from tests.cluster.controlplane import NODES

WAIT = "--timeout=180s"  # a busy machine: controllers settle when they settle

RESTRICTED_POD_SECURITY = {
    "runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def deployment(name: str, *, replicas: int | None = None, container: dict | None = None) -> dict:
    spec = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"securityContext": RESTRICTED_POD_SECURITY, "containers": [{
                "name": "app", "image": "registry.example/app:1.0",
                "securityContext": RESTRICTED_CONTAINER_SECURITY, **(container or {})}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


@pytest.mark.own_control_plane
def test_nodes_are_kwok_nodes_and_ready(control_plane):
    nodes = json.loads(control_plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(NODES)
    for node in nodes:
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["status"]["conditions"]
        assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")
    version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == version["clientVersion"]["gitVersion"] == "v1.37.2"


def test_restricted_namespace_refuses_a_privileged_pod_and_runs_a_compliant_deployment(control_plane, cluster_namespace):
    ns = cluster_namespace
    cp = control_plane
    cp.kubectl("label", "ns", ns, "pod-security.kubernetes.io/enforce=restricted")
    privileged = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                 "securityContext": {"privileged": True}}]},
    }
    refused = cp.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(privileged), check=False)
    assert refused.returncode != 0
    # Pod Security admission refused it (the server itself allows privileged containers here)
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr
    assert "privileged" in refused.stderr

    cp.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(deployment("web", replicas=2)))
    cp.kubectl("wait", "-n", ns, "--for=condition=Available", "deployment/web", WAIT, timeout=240)
    pods = json.loads(cp.kubectl("get", "pods", "-n", ns, "-l", "app=web", "-o", "json").stdout)["items"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] in NODES  # placed by the scheduler on a kwok node
        assert pod["status"]["phase"] == "Running"
        assert {"type": "Ready", "status": "True"}.items() <= next(
            c for c in pod["status"]["conditions"] if c["type"] == "Ready").items()
    assert cp.request("GET", f"/api/v1/namespaces/{ns}/pods/privileged")[0] == 404


def test_a_job_runs_to_completion(control_plane, cluster_namespace):
    ns = cluster_namespace
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
        "spec": {"completions": 2, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "migrate", "image": "registry.example/app:1.0"}]}}},
    }
    control_plane.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(job))
    control_plane.kubectl("wait", "-n", ns, "--for=condition=Complete", "job/migrate", WAIT, timeout=240)
    status = json.loads(control_plane.kubectl("get", "job/migrate", "-n", ns, "-o", "json").stdout)["status"]
    assert status["succeeded"] == 2


def test_a_service_account_is_forbidden_until_a_role_binding_allows_it(control_plane, cluster_namespace):
    ns = cluster_namespace
    cp = control_plane
    kubeconfig = cp.service_account_kubeconfig(ns, "reader", create=True)
    denied = cp.kubectl("get", "deployments", "-n", ns, kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr, denied.stderr
    assert f'User "system:serviceaccount:{ns}:reader" cannot list resource "deployments"' in denied.stderr
    token = cp.token(ns, "reader")
    status, body = cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments", token=token)
    assert status == 403, body

    cp.kubectl("create", "role", "read-deployments", "-n", ns, "--verb=get,list,watch",
               "--resource=deployments.apps")
    cp.kubectl("create", "rolebinding", "reader", "-n", ns, "--role=read-deployments",
               f"--serviceaccount={ns}:reader")
    deadline = time.monotonic() + 60  # the authorizer sees the binding through its informer
    while (status := cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments", token=token)[0]) == 403:
        assert time.monotonic() < deadline, "the RoleBinding never took effect"
        time.sleep(0.5)
    assert status == 200
    cp.kubectl("get", "deployments", "-n", ns, kubeconfig=kubeconfig)
    # and nothing more than the Role says
    status, _ = cp.request("GET", f"/api/v1/namespaces/{ns}/secrets", token=token)
    assert status == 403


def test_server_side_apply_without_replicas_defaults_them_to_one(control_plane, cluster_namespace):
    ns = cluster_namespace
    cp = control_plane
    apply = ["apply", "--server-side", "--field-manager=builder", "-n", ns, "-f", "-"]
    cp.kubectl(*apply, input=json.dumps(deployment("api")))
    get = ["get", "deployment/api", "-n", ns, "-o", "jsonpath={.spec.replicas}"]
    assert cp.kubectl(*get).stdout == "1"
    # a manager that owned replicas and applies again without them: the server resets the field
    # to its default, it does not keep the old value (the handover issue 30 describes)
    cp.kubectl(*apply, input=json.dumps(deployment("api", replicas=3)))
    assert cp.kubectl(*get).stdout == "3"
    cp.kubectl(*apply, input=json.dumps(deployment("api")))
    assert cp.kubectl(*get).stdout == "1"


def test_quantities_are_stored_canonical(control_plane, cluster_namespace):
    ns = cluster_namespace
    cp = control_plane
    resources = {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": "1.0", "memory": "2048Mi"}}
    cp.kubectl("apply", "--server-side", "-n", ns, "-f", "-",
               input=json.dumps(deployment("sized", container={"resources": resources})))
    stored = json.loads(cp.kubectl("get", "deployment/sized", "-n", ns, "-o", "json").stdout)
    container = stored["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"},
                                      "limits": {"cpu": "1", "memory": "2Gi"}}


def test_deleting_a_deployment_collects_its_replica_set_and_pods(control_plane, cluster_namespace):
    cp, ns = control_plane, cluster_namespace
    cp.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(deployment("gone", replicas=2)))
    cp.kubectl("wait", "-n", ns, "--for=condition=Available", "deployment/gone", WAIT, timeout=240)
    assert cp.kubectl("get", "replicasets,pods", "-n", ns, "-l", "app=gone", "-o", "name").stdout.strip()
    cp.kubectl("delete", "deployment/gone", "-n", ns, "--cascade=background")
    # the garbage collector deletes the ReplicaSet, then its pods; kwok finishes the pods' deletion
    cp.kubectl("wait", "-n", ns, "--for=delete", "replicasets,pods", "-l", "app=gone", WAIT, timeout=240)
    assert cp.kubectl("get", "replicasets,pods", "-n", ns, "-l", "app=gone", "-o", "name").stdout.strip() == ""
