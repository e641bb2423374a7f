"""The operator image reconciles a SearchIndex on the real control plane (tests/cluster), and the
API image runs what it asked for.

The operator's RBAC, ServiceAccount and Deployment come from the chart (`helm template`), in a
namespace labelled for the restricted Pod Security profile. KWOK's nodes run no containers, so the
test is the kubelet: the operator's pod template becomes a `podman run` of the built operator
image, authenticated by its ServiceAccount's projected token exactly as in a pod; the Jobs and the
API Deployment the operator creates become `podman run`s of the built API image, with their env
(Secrets resolved), user, read-only root and dropped capabilities. The SearchIndex is Ready when
the operator has read the API container's GET /v1/status with its own status token, which the
register Job (run here) stored. Host networking: the ports a host already uses are the only
values replaced (BACKSCROLL_PORT, the operator's metrics port), and the operator reads the status
at 127.0.0.1 (BACKSCROLL_OPERATOR_STATUS_URL, its setting for running outside the cluster's
network)."""

from __future__ import annotations

import json
import secrets
import subprocess
import time

import yaml

from tests.deploy.conftest import CHART, ROOT, documents, run
from tests.images.support import free_port, pod_run_options, tcp_url, wait_http

DEADLINE_S = 300
CRD = "searchindexes.search.backscroll.dev"


def _objects(cp, kind: str, namespace: str, selector: str = "") -> list[dict]:
    args = ["get", kind, "-n", namespace, "-o", "json"] + (["-l", selector] if selector else [])
    return json.loads(cp.kubectl(*args).stdout)["items"]


def _condition(index: dict, kind: str) -> dict:
    return next((c for c in index.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def test_the_operator_image_reconciles_a_searchindex_on_the_real_control_plane(
        images, podman, control_plane, cluster_namespace, helm, empty_db_url, pg_doors, tmp_path):
    cp, ns = control_plane, cluster_namespace
    cp.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    release = f"img{secrets.token_hex(3)}"
    repository, tag = images.operator.rsplit(":", 1)
    rendered = run(helm, "template", release, str(CHART), "--namespace", ns, "--include-crds",
                   "--set", f"operator.image.repository={repository}", "--set", f"operator.image.tag={tag}",
                   "--set", "operator.replicas=1", "--set", "operator.intervalSeconds=3",
                   "--set", "operator.retryDelaySeconds=2")
    assert rendered.returncode == 0, rendered.stderr
    docs = documents(rendered.stdout)
    for crd in (d for d in docs if d["kind"] == "CustomResourceDefinition"):
        # Installed once per control plane; another suite may have done it (helm install).
        created = cp.kubectl("create", "-f", "-", input=json.dumps(crd), check=False)
        assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
        cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
    cluster_wide = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    namespaced = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding")]
    (deployment,) = [d for d in namespaced if d["kind"] == "Deployment"]
    operator_pod = deployment["spec"]["template"]["spec"]
    (operator_container,) = operator_pod["containers"]
    assert operator_container["image"] == images.operator

    api_port, metrics_port = free_port(), free_port()
    index_name = "search-lexical"
    started: dict[str, str] = {}
    try:
        cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": cluster_wide}))
        cp.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                    "items": namespaced}))
        # The restricted profile admitted the chart's operator pod (KWOK runs it as a placeholder).
        cp.kubectl("wait", "-n", ns, "--for=condition=Available", f"deployment/{deployment['metadata']['name']}",
                   "--timeout=180s", timeout=200)

        operator = podman.start(images.operator, *operator_container.get("args", []), options=tuple(pod_run_options(
            cp, ns, operator_pod, operator_container, f"{release}-operator-podman", tmp_path, {
                "BACKSCROLL_OPERATOR_METRICS_PORT": str(metrics_port),
                "BACKSCROLL_OPERATOR_STATUS_URL": f"http://127.0.0.1:{api_port}/v1/status"})))
        started["operator"] = operator

        database = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "backscroll-db"},
                    "stringData": {"uri": tcp_url(empty_db_url, pg_doors)}}
        index = yaml.safe_load((ROOT / "k8s/samples/searchindex-lexical.yaml").read_text())
        assert index["metadata"]["name"] == index_name and index["spec"]["image"] == images.api
        cp.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                    "items": [database, index]}))

        ran: dict[str, int] = {}
        deadline = time.monotonic() + DEADLINE_S
        while True:
            # Jobs as a kubelet would run them: migrations first, then the status token's registration.
            jobs = _objects(cp, "jobs", ns, f"app.kubernetes.io/instance={index_name}")
            jobs.sort(key=lambda j: j["metadata"]["labels"].get("app.kubernetes.io/component") != "migrate")
            for job in jobs:
                name = job["metadata"]["name"]
                if name in ran:
                    continue
                pod = job["spec"]["template"]["spec"]
                (container,) = pod["containers"]
                assert container["image"] == images.api, container["image"]
                done = podman.run(images.api, *container.get("args", []), check=False, timeout=300,
                                  options=tuple(pod_run_options(cp, ns, pod, container, f"{name}-podman", tmp_path)))
                assert done.returncode == 0, f"job {name}:\n{done.stdout}\n{done.stderr}"
                ran[name] = done.returncode
            if "api" not in started and ran:
                api = [d for d in _objects(cp, "deployments", ns, f"app.kubernetes.io/instance={index_name}")
                       if d["metadata"]["labels"].get("app.kubernetes.io/component") == "api"]
                if api:
                    pod = api[0]["spec"]["template"]["spec"]
                    (container,) = pod["containers"]
                    assert container["image"] == images.api
                    started["api"] = podman.start(images.api, *container.get("args", []), options=tuple(pod_run_options(
                        cp, ns, pod, container, f"{index_name}-api-podman", tmp_path,
                        {"BACKSCROLL_HOST": "127.0.0.1", "BACKSCROLL_PORT": str(api_port)})))
            current = json.loads(cp.kubectl("get", "searchindex", index_name, "-n", ns, "-o", "json").stdout)
            if _condition(current, "Ready").get("status") == "True":
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"SearchIndex not Ready in {DEADLINE_S} s: {json.dumps(current.get('status'), indent=1)}\n"
                    f"jobs run: {sorted(ran)}\n--- operator\n{podman.logs(operator)[-6000:]}"
                    + (f"\n--- api\n{podman.logs(started['api'])[-3000:]}" if "api" in started else ""))
            time.sleep(1)

        assert _condition(current, "Ready")["reason"] == "Ready", current["status"]
        assert _condition(current, "MigrationsApplied")["status"] == "True"
        assert any(n.startswith(f"{index_name}-migrate") for n in ran), ran
        # The operator that did this is the container: its own metrics port answers.
        assert wait_http(f"http://127.0.0.1:{metrics_port}/healthz")[0] == 200
        assert wait_http(f"http://127.0.0.1:{api_port}/readyz")[0] == 200
        # The children were applied by the operator (its field manager).
        deployments = json.loads(cp.kubectl("get", "deployments", "-n", ns, "-l", f"app.kubernetes.io/instance={index_name}",
                                            "--show-managed-fields", "-o", "json").stdout)["items"]
        assert deployments and all("backscroll-operator" in {m["manager"] for m in d["metadata"]["managedFields"]}
                                   for d in deployments)
    finally:
        # The operator removes its finalizer while it still runs; then everything stops.
        cp.kubectl("delete", "searchindex", index_name, "-n", ns, "--ignore-not-found", "--timeout=60s",
                   check=False, timeout=90)
        podman.stop_all()
        for doc in cluster_wide:
            cp.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found", check=False)
