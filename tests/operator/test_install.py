"""The two documented installs, on the real control plane, each to `kubectl wait
--for=condition=Ready` with the pinned kubectl: `helm install` of the chart (the quickstart values)
and `kubectl apply -k k8s/base`. What they create is what runs: the operator runs in this process
as the ServiceAccount the install made, with the Roles it made, configured as its Deployment is
(the namespaces it watches, its Lease's namespace); only the status URL points at the stand-in
for the API (no container runs on KWOK's nodes)."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager

import yaml

from backscroll_operator.config import OperatorConfig

from .conftest import CHART, ROOT, Operator, eventually, forbidden, report, through


def env_of(deployment: dict) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


@contextmanager
def operator_as(cp, namespace: str, account: str, env: dict, lease_namespace: str, status_server, proxy, tmp_path,
                monkeypatch):
    """The operator as `account`'s pods run it: its token, the Deployment's namespaces."""
    token = cp.service_account_kubeconfig(namespace, account, tmp_path / f"{account}.kubeconfig", duration="3h")
    monkeypatch.setenv("KUBECONFIG", str(through(token, proxy, tmp_path / "operator.kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    namespaces = json.loads(env.get("BACKSCROLL_OPERATOR_NAMESPACES") or "[]")
    replica = Operator(OperatorConfig(interval_s=2, retry_delay_s=1, status_timeout_s=2, identity=account,
                                      lease_namespace=lease_namespace,
                                      status_url=status_server.url + "/{namespace}/{name}/v1/status"),
                       namespaces).start()
    try:
        yield replica
    finally:
        replica.stop()
        print(replica.output[-20000:])
    assert forbidden(proxy) == [], "the install's RBAC refused a call the operator made"


def test_helm_install_of_the_quickstart_to_ready(control_plane, helm, namespace, status_server, proxy, kubectl,
                                                 tmp_path, monkeypatch):
    cp, release = control_plane, "quick"
    helm_env = {**os.environ, "HELM_CACHE_HOME": str(tmp_path / "helm/cache"),
                "HELM_CONFIG_HOME": str(tmp_path / "helm/config"), "HELM_DATA_HOME": str(tmp_path / "helm/data")}
    def helm_run(*args: str) -> str:
        done = subprocess.run([helm, f"--kubeconfig={cp.kubeconfig}", *args], capture_output=True, text=True,
                              env=helm_env, timeout=300)
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    # A tenant declared in the values, as docs/operator.md "Tenants as code" shows it.
    tenant = [{"name": "acme", "spec": {"slug": "acme", "tokens": [
        {"name": "slack-connector", "kind": "ingest", "secret": {"name": "acme-slack-ingest"}}]}}]
    helm_run("install", release, str(CHART), "-n", namespace, "-f", str(CHART / "examples/quickstart.yaml"),
             "--set", "operator.replicas=1", "--set-json", f"workspaces={json.dumps(tenant)}")
    try:
        status_server.reports["search"] = report("lexical")
        manifest = [d for d in yaml.safe_load_all(helm_run("get", "manifest", release, "-n", namespace)) if d]
        (deployment,) = [d for d in manifest if d["kind"] == "Deployment"]
        # The quickstart database's Secret comes from the chart's Job, played here (KWOK runs no container).
        from .test_chart_jobs import of_component, play_chart_job
        played = play_chart_job(cp, of_component(manifest, "Job", "quickstart-password"), namespace, tmp_path)
        assert played.returncode == 0, played.stdout + played.stderr
        # The chart's own pods passed the restricted profile (KWOK runs them as placeholders).
        kubectl("wait", "--for=condition=Available", f"deployment/{deployment['metadata']['name']}",
                "--timeout=180s", timeout=200)
        kubectl("rollout", "status", f"statefulset/{release}-backscroll-postgresql", "--timeout=180s", timeout=200)
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        with operator_as(cp, namespace, account, env_of(deployment), namespace, status_server, proxy, tmp_path,
                         monkeypatch):
            out = kubectl("wait", "--for=condition=Ready", "searchindex/search", "--timeout=300s", timeout=320)
            assert out.strip() == "searchindex.search.backscroll.dev/search condition met"
            # With its own status token, registered by its Job: no manual step.
            assert kubectl("get", "secret", "search-status-token", "-o", "name").strip() == "secret/search-status-token"
            # The tenant the release declared, to Ready under the install's RBAC: its registration Job
            # made, its token Secret written (KWOK's placeholder pod completes the Job without running
            # the command; test_workspaces.py runs it against a real database and uses the tokens).
            out = kubectl("wait", "--for=condition=Ready", "searchworkspace/acme", "--timeout=120s", timeout=140)
            assert out.strip() == "searchworkspace.search.backscroll.dev/acme condition met"
            assert kubectl("get", "searchworkspace/acme", "-o", "jsonpath={.spec.indexRef.name}") == "search"
            assert kubectl("get", "jobs", "-l", "app.kubernetes.io/component=workspace-register", "-o", "name")
            assert kubectl("get", "secret", "acme-slack-ingest", "-o", "name").strip() == "secret/acme-slack-ingest"
    finally:
        helm_run("uninstall", release, "-n", namespace, "--wait=false")


def test_kubectl_apply_k_of_the_base_to_ready(control_plane, status_server, proxy, tmp_path, monkeypatch):
    """k8s/base: the operator in backscroll-system watching `default` (a Role there)."""
    cp = control_plane
    base = ROOT / "k8s/base"
    rendered = [d for d in yaml.safe_load_all(cp.kubectl("kustomize", str(base)).stdout) if d]
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    own = deployment["metadata"]["namespace"]
    cp.kubectl("label", "namespace", "default", "--overwrite", "pod-security.kubernetes.io/enforce=restricted")
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(base))
    try:
        cp.kubectl("wait", "-n", own, "--for=condition=Available", f"deployment/{deployment['metadata']['name']}",
                   "--timeout=180s", timeout=200)
        cp.kubectl("create", "secret", "generic", "backscroll-db", "-n", "default",
                   "--from-literal=uri=postgresql://u:p@db/backscroll")
        status_server.reports["search-lexical"] = report("lexical")
        cp.kubectl("apply", "-n", "default", "-f", str(ROOT / "k8s/samples/searchindex-lexical.yaml"))
        with operator_as(cp, own, deployment["spec"]["template"]["spec"]["serviceAccountName"], env_of(deployment),
                         own, status_server, proxy, tmp_path, monkeypatch):
            out = cp.kubectl("wait", "-n", "default", "--for=condition=Ready", "searchindex/search-lexical",
                             "--timeout=300s", timeout=320).stdout
            assert out.strip() == "searchindex.search.backscroll.dev/search-lexical condition met"
    finally:
        cp.kubectl("delete", "-n", "default", "searchindex/search-lexical", "secret/backscroll-db",
                   "--ignore-not-found", "--wait=false", check=False)
        # Everything but the CRD, which the rest of the session's tests use.
        for part in ("operator", "watched"):
            cp.kubectl("delete", "-k", str(base / part), "--ignore-not-found", "--wait=false", check=False)
        cp.kubectl("delete", "namespace", own, "--ignore-not-found", "--wait=false", check=False)
        cp.kubectl("label", "namespace", "default", "pod-security.kubernetes.io/enforce-", check=False)
