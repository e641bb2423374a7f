"""The path `make e2e-kind` takes (tests/deploy/e2e_kind.sh): the suites run on a cluster handed
over as an admin kubeconfig (BACKSCROLL_TEST_KUBECONFIG) instead of starting one. kind cannot run
here (no Docker engine), so the cluster handed over is this session's own control plane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.controlplane import REPO, ControlPlane, ControlPlaneError, kubeconfig
from tests.cluster.external import ExternalControlPlane
from tests.cluster.fixtures import EXTERNAL, EXTERNAL_CA_KEY, make_control_plane


def handed_over(control_plane, tmp_path: Path) -> ExternalControlPlane:
    return ExternalControlPlane(tmp_path / "external", control_plane.kubeconfig, control_plane.pki / "ca.key",
                                bin_dir=control_plane.bin_dir)


def test_the_handed_over_kubeconfig_decides_which_cluster(tmp_path):
    ours = make_control_plane(tmp_path / "a", environ={})
    theirs = make_control_plane(tmp_path / "b", environ={EXTERNAL: "/some/kubeconfig", EXTERNAL_CA_KEY: ""})
    assert type(ours) is ControlPlane
    assert isinstance(theirs, ExternalControlPlane)
    assert theirs.source_kubeconfig == Path("/some/kubeconfig") and theirs.ca_key is None


def test_a_handed_over_cluster_is_used_as_is_and_left_running(control_plane, cluster_namespace, tmp_path):
    cp = handed_over(control_plane, tmp_path).up()
    assert cp.server == control_plane.server
    assert (cp.pki / "ca.key").read_bytes() == (control_plane.pki / "ca.key").read_bytes()
    # Its nodes are kept Ready by the KWOK already there: no second one is started.
    assert cp.pid("kwok") is None
    nodes = json.loads(cp.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert {n["metadata"]["name"] for n in nodes} >= {"kwok-node-0", "kwok-node-1"}
    # A ServiceAccount's kubeconfig authenticates as that account on that cluster.
    path = cp.service_account_kubeconfig(cluster_namespace, "e2e", create=True)
    who = cp.kubectl("auth", "whoami", "-o", "json", kubeconfig=path).stdout
    assert json.loads(who)["status"]["userInfo"]["username"] == f"system:serviceaccount:{cluster_namespace}:e2e"
    assert cp.down() == []  # nothing of the cluster is ours to stop
    assert control_plane.request("GET", "/readyz")[0] == 200


def test_a_kubeconfig_without_a_client_certificate_is_refused_clearly(control_plane, cluster_namespace, tmp_path):
    token = tmp_path / "token.kubeconfig"
    token.write_text(kubeconfig(control_plane.server, control_plane.ca, token="not-a-certificate"))
    cp = ExternalControlPlane(tmp_path / "external", token, bin_dir=control_plane.bin_dir)
    with pytest.raises(ControlPlaneError, match="client certificate"):
        cp.up()


def test_the_suites_run_unchanged_on_a_handed_over_cluster(control_plane, tmp_path):
    """One scenario in a pytest run of its own, given only the kubeconfig and the CA's key, as
    e2e_kind.sh gives kind's; the own_control_plane test is deselected as it is there."""
    env = dict(os.environ, **{EXTERNAL: str(control_plane.kubeconfig), EXTERNAL_CA_KEY: str(control_plane.pki / "ca.key")})
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'run'}",
         "-m", "not own_control_plane", "tests/cluster/test_control_plane.py::test_a_job_runs_to_completion",
         "tests/cluster/test_control_plane.py::test_nodes_are_kwok_nodes_and_ready"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "1 passed, 1 deselected" in out, out[-4000:]
    assert "are Ready already" in out, out[-4000:]  # it used the cluster handed over
