"""The operator's Kubernetes client against the real API server, and its credentials errors."""

from __future__ import annotations

import pytest

from backscroll_operator.kube import Conflict, Kube, KubeError, NoCredentials, configuration


def service(name: str, component: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


def test_crud_apply_and_label_selection(control_plane, namespace, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kube, ns = Kube(), namespace
    assert kube.get("services", ns, "a") is None
    created = kube.create("services", ns, service("a", "api"))
    assert created["metadata"]["uid"]
    kube.create("services", ns, service("b", "worker"))
    with pytest.raises(Conflict):
        kube.create("services", ns, service("a", "api"))
    patched = kube.patch("services", ns, "a", {"metadata": {"labels": {"team": "x"}}})
    assert patched["metadata"]["labels"]["team"] == "x"
    assert [s["metadata"]["name"] for s in kube.list("services", ns, {"app.kubernetes.io/component": "api"})] == ["a"]
    # Server-side apply: a dry run answers what would be stored (the server's own forms) and stores nothing.
    body = {**service("a", "api"), "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}],
                                            "type": "ClusterIP"}}
    dry = kube.apply("services", ns, "a", body, dry_run=True)
    assert dry["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    assert kube.get("services", ns, "a")["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    with pytest.raises(KubeError) as refused:
        kube.apply("services", ns, "c.d", service("c.d", "api"))
    assert refused.value.status == 422
    assert kube.delete("services", ns, "a") is True
    assert kube.delete("services", ns, "a") is False
    assert kube.get("services", ns, "a") is None


def test_no_kubeconfig_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(NoCredentials) as err:
        configuration()
    assert str(tmp_path / "missing") in str(err.value) and "KUBECONFIG" in str(err.value)
