"""The chart's own Jobs on the real control plane (issue 31, item 4): the quickstart database's
password generated once in the cluster and kept, and `helm uninstall` deleting a `deletionPolicy:
delete` SearchIndex first, so the operator purges it and clears its finalizer before it goes.

KWOK runs no container: a test plays a Job by running its container's command here
(`python -m backscroll_operator.chartjobs ...`, the args as rendered) with a TokenRequest token of
the Job's own ServiceAccount, so the real authorizer decides what the chart's Role allows."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading

import yaml

from backscroll_operator.names import PURGE_FINALIZER

from .conftest import CHART, Api, eventually, render_chart, report
from .test_install import env_of, operator_as


def play_chart_job(cp, job: dict, namespace: str, folder) -> subprocess.CompletedProcess:
    """Runs the Job's container command here, as the Job's ServiceAccount (KWOK runs no container)."""
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "backscroll_operator.chartjobs"]
    account = pod["serviceAccountName"]
    kubeconfig = cp.service_account_kubeconfig(namespace, account, folder / f"{account}.kubeconfig", duration="1h")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run([sys.executable, "-m", "backscroll_operator.chartjobs", *container["args"]],
                          capture_output=True, text=True, env=env, timeout=120)


def of_component(docs: list[dict], kind: str, component: str) -> dict:
    (found,) = [d for d in docs if d and d["kind"] == kind
                and d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    return found


def test_quickstart_password_is_generated_once_and_kept(control_plane, helm, namespace, tmp_path):
    docs = render_chart(helm, "qs", namespace, "postgresql.enabled=true")
    assert not [d for d in docs if d["kind"] == "Secret"], "no password is rendered"
    jobs_rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "Role", "RoleBinding")
                 and d["metadata"]["labels"].get("app.kubernetes.io/component") == "chart-jobs"]
    control_plane.kubectl("apply", "-n", namespace, "-f", "-",
                          input=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs_rbac}))
    job = of_component(docs, "Job", "quickstart-password")
    first = play_chart_job(control_plane, job, namespace, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "created with a generated password" in first.stdout
    api = Api(control_plane, namespace)
    secret = api.get("secrets", "backscroll-db")
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert len(password) == 32 and password not in first.stdout + first.stderr
    uri = base64.b64decode(secret["data"]["uri"]).decode()
    assert uri == f"postgresql://backscroll:{password}@qs-backscroll-postgresql.{namespace}.svc:5432/backscroll"
    # The StatefulSet's PostgreSQL reads the same Secret.
    (database,) = [d for d in docs if d["kind"] == "StatefulSet"]
    env = {e["name"]: e.get("valueFrom") for e in database["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POSTGRES_PASSWORD"] == {"secretKeyRef": {"name": "backscroll-db", "key": "password"}}
    # Every later run (a sync, an upgrade's new Job) keeps it: not even a write.
    again = play_chart_job(control_plane, job, namespace, tmp_path)
    assert again.returncode == 0 and "kept" in again.stdout, again.stdout + again.stderr
    assert api.get("secrets", "backscroll-db")["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]


def test_helm_uninstall_purges_a_delete_policy_index_before_the_operator_goes(
        control_plane, helm, namespace, status_server, proxy, kubectl, gate, tmp_path, monkeypatch):
    cp, release, api = control_plane, "gone", Api(control_plane, namespace)
    api.secret("db", uri="postgresql://backscroll@db/backscroll")
    hold = gate("uninstall")  # the hook's pod waits here while the test plays it
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "operator": {"replicas": 1, "nodeSelector": hold.selector},
        "searchIndex": {"enabled": True, "uninstallTimeoutSeconds": 60,
                        "spec": {"deletionPolicy": "delete", "database": {"secretRef": {"name": "db"}}}},
        # A tenant of the release: its tokens are revoked (a Job of the operator) before the index goes.
        "workspaces": [{"name": "acme", "spec": {"slug": "acme", "tokens": [
            {"name": "connector", "kind": "ingest", "secret": {"name": "acme-ingest"}}]}}]}))
    helm_env = {**os.environ, "HELM_CACHE_HOME": str(tmp_path / "helm/cache"),
                "HELM_CONFIG_HOME": str(tmp_path / "helm/config"), "HELM_DATA_HOME": str(tmp_path / "helm/data")}
    helm_args = [helm, f"--kubeconfig={cp.kubeconfig}"]
    done = subprocess.run([*helm_args, "install", release, str(CHART), "-n", namespace, "-f", str(values)],
                          capture_output=True, text=True, env=helm_env, timeout=120)
    assert done.returncode == 0, done.stderr
    status_server.reports["search"] = report("lexical")
    manifest = subprocess.run([*helm_args, "get", "manifest", release, "-n", namespace], capture_output=True,
                              text=True, env=helm_env, timeout=60).stdout
    (deployment,) = [d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "Deployment"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    uninstall = None
    try:
        with operator_as(cp, namespace, account, env_of(deployment), namespace, status_server, proxy, tmp_path,
                         monkeypatch):
            eventually(lambda: PURGE_FINALIZER in (api.get("searchindexes", "search")["metadata"].get("finalizers")
                                                   or []))
            uninstall = subprocess.Popen([*helm_args, "uninstall", release, "-n", namespace, "--timeout", "120s"],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=helm_env)
            hook = eventually(lambda: api.get("jobs", f"{release}-backscroll-uninstall"), timeout=30)
            played = play_chart_job(cp, hook, namespace, tmp_path)
            print(played.stdout, played.stderr)
            assert played.returncode == 0, played.stdout + played.stderr
            assert f"searchindex {namespace}/search is gone" in played.stdout
            # The workspace first, while its index was there: gone through its finalizer (the revoke Job).
            said = played.stdout
            assert said.index(f"searchworkspace {namespace}/acme is gone") < said.index(f"searchindex {namespace}/search deleted")
            assert "search.backscroll.dev/revoke-tokens" in said
            assert api.get("searchworkspaces", "acme") is None
            # It held the purge finalizer when the hook deleted it: the operator, still installed, cleared it.
            assert PURGE_FINALIZER in played.stdout
        hold.open()  # the hook's pod completes, and Helm deletes the rest
        output, _ = uninstall.communicate(timeout=150)
        assert uninstall.returncode == 0, output
        assert api.get("searchindexes", "search") is None
    finally:
        if uninstall is not None and uninstall.poll() is None:
            uninstall.kill()
        threading.Thread(target=lambda: subprocess.run(
            [*helm_args, "uninstall", release, "-n", namespace, "--no-hooks", "--wait=false"],
            capture_output=True, env=helm_env, timeout=60), daemon=True).start()
