"""pytest fixtures for a real control plane (tests/cluster/controlplane.py).

tests/conftest.py imports them once, for every suite: a suite that imported them into its own
conftest.py would start a second control plane.

`control_plane` (session scope) builds the pinned binaries (cached outside the repository; the
first build on a machine takes many minutes, `make cluster-build` does it ahead) and starts
etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok in the session's tmp folder
on free ports; it stops them at the end of the session, and they also end when the test process
dies. When the binaries cannot be built or the control plane does not come up, every test that
asks for it fails (never skips). It yields a ControlPlane:

    cp.kubeconfig                 admin kubeconfig (system:masters), a Path
    cp.server, cp.ca, cp.admin_cert, cp.admin_key
    cp.kubectl_path               the pinned kubectl
    cp.kubectl("get", "nodes")    runs it as the admin; raises ControlPlaneError on failure
    cp.request("GET", "/api/v1/nodes", token=None)   -> (status, body)
    cp.service_account_kubeconfig(ns, name, create=True)  -> Path (TokenRequest token)

`cluster_namespace` (function scope) is a fresh namespace for one test, deleted afterwards.

With BACKSCROLL_TEST_KUBECONFIG set (`make e2e-kind`), `control_plane` is that cluster instead
(tests/cluster/external.py): the same suites, unchanged, on a cluster someone else runs; tests
marked `own_control_plane` are about ours and are deselected there.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import pytest

from tests.cluster.controlplane import ControlPlane, ControlPlaneError
from tests.cluster.external import ExternalControlPlane

EXTERNAL = "BACKSCROLL_TEST_KUBECONFIG"
EXTERNAL_CA_KEY = "BACKSCROLL_TEST_CA_KEY"


def make_control_plane(state: Path, environ=os.environ) -> ControlPlane:
    """Ours, or the cluster BACKSCROLL_TEST_KUBECONFIG names."""
    if environ.get(EXTERNAL):
        return ExternalControlPlane(state, Path(environ[EXTERNAL]), environ.get(EXTERNAL_CA_KEY) or None,
                                    die_with_parent=True)
    return ControlPlane(state, die_with_parent=True)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    cp = make_control_plane(tmp_path_factory.mktemp("cluster"))
    try:
        cp.up()
    except ControlPlaneError as e:
        pytest.fail(f"the control plane did not start: {e}", pytrace=False)
    try:
        yield cp
    finally:
        cp.down()


@pytest.fixture
def cluster_namespace(control_plane, request) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{secrets.token_hex(3)}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
