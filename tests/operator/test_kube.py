"""The operator's Kubernetes client against the emulator, and its credentials errors."""

from __future__ import annotations

import pytest

from backscroll_operator.kube import Conflict, Kube, NoCredentials, configuration

from .conftest import NS


def deployment(name: str, component: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": {"app.kubernetes.io/component": component}},
            "spec": {"replicas": 1}}


def test_crud_and_client_side_label_filtering(cluster):
    kube = Kube()
    assert kube.get("deployments", NS, "a") is None
    created = kube.create("deployments", NS, deployment("a", "api"))
    assert created["metadata"]["uid"]
    kube.create("deployments", NS, deployment("b", "worker"))
    with pytest.raises(Conflict):
        kube.create("deployments", NS, deployment("a", "api"))
    patched = kube.patch("deployments", NS, "a", {"spec": {"replicas": 3}})
    assert patched["spec"]["replicas"] == 3
    # kmock ignores label selectors; the client must not return the worker for component=api.
    assert [d["metadata"]["name"] for d in kube.list("deployments", NS, {"app.kubernetes.io/component": "api"})] == ["a"]
    assert kube.delete("deployments", NS, "a") is True
    assert kube.delete("deployments", NS, "a") is False
    assert kube.get("deployments", NS, "a") is None


def test_no_kubeconfig_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(NoCredentials) as err:
        configuration()
    assert str(tmp_path / "missing") in str(err.value) and "KUBECONFIG" in str(err.value)
