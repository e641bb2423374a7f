"""A cluster someone else runs (kind, for a team with Docker), in the shape of ControlPlane.

`make e2e-kind` runs the control-plane suites against a kind cluster by pointing
BACKSCROLL_TEST_KUBECONFIG at its admin kubeconfig (and BACKSCROLL_TEST_CA_KEY at its CA's key,
which tests/operator's API proxy signs its serving certificate with): the `control_plane` fixture
then yields an ExternalControlPlane instead of starting one, and every scenario runs unchanged.

What it adds to that cluster is what the scenarios rely on and a stock cluster lacks: the pinned
KWOK with the same two fake nodes (their gates, a node label and a nodeSelector, hold a Job
running or let it finish), started only when those nodes are not already kept Ready by another
KWOK. Tests about the project's own control plane (its pids, its pinned server version, its only
nodes) carry the `own_control_plane` marker and are deselected there.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

from tests.cluster.controlplane import (NODES, STAGES, TIMEOUT, ControlPlane, ControlPlaneError, _ready, build,
                                        kubeconfig, log)


class ExternalControlPlane(ControlPlane):
    """The admin kubeconfig of a running cluster, unpacked into this state folder's pki/ (so cp.ca,
    cp.admin_cert, cp.admin_key, cp.server and cp.kubeconfig mean what they mean for ours); up()
    starts only KWOK, down() stops only what up() started."""

    def __init__(self, state: Path, source_kubeconfig: Path, ca_key: Path | None = None, **kwargs):
        self.source_kubeconfig = Path(source_kubeconfig)
        self.ca_key = Path(ca_key) if ca_key else None
        self._server = ""
        super().__init__(state, **kwargs)

    server = property(lambda self: self._server)
    components = ("kwok",)

    def unpack(self) -> None:
        """The kubeconfig's current context: server, CA and client certificate, as files."""
        try:
            config = json.loads(subprocess.run(
                [str(self.kubectl_path), "config", "view", "--raw", "--flatten", "--minify", "-o", "json",
                 f"--kubeconfig={self.source_kubeconfig}"],
                capture_output=True, text=True, check=True, timeout=60).stdout)
            cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
            files = {self.ca: cluster["certificate-authority-data"], self.admin_cert: user["client-certificate-data"],
                     self.admin_key: user["client-key-data"]}
        except (subprocess.CalledProcessError, KeyError, IndexError, ValueError) as e:
            raise ControlPlaneError(f"{self.source_kubeconfig}: no server, CA and client certificate in its "
                                    f"current context ({e!r}); the suites need an admin kubeconfig with a "
                                    "client certificate, as kind writes") from e
        self.pki.mkdir(parents=True, exist_ok=True)
        for path, data in files.items():
            path.write_bytes(base64.b64decode(data))
            path.chmod(0o600)
        if self.ca_key is not None:
            shutil.copyfile(self.ca_key, self.pki / "ca.key")
            (self.pki / "ca.key").chmod(0o600)
        self._server = cluster["server"]
        self.kubeconfig.write_text(kubeconfig(self.server, self.ca, cert=self.admin_cert, key=self.admin_key))
        self.kubeconfig.chmod(0o600)

    def up(self, timeout: float | None = None) -> ExternalControlPlane:
        timeout = timeout or TIMEOUT
        if not self._bin_given:
            self.bin_dir = build()
        for d in (self.state, self.logs, self.pids):
            d.mkdir(parents=True, exist_ok=True)
        self.unpack()
        self._wait(lambda: self._get("/readyz", raw=True) is not None, f"{self.server}/readyz", timeout)
        if all(_ready(self._get(f"/api/v1/nodes/{n}")) for n in NODES):
            log(f"{', '.join(NODES)} are Ready already (another KWOK keeps them): not starting one")
        else:
            (self.state / "kwok.kubeconfig").write_text(self.kubeconfig.read_text())
            shutil.copyfile(STAGES, self.state / "kwok.yaml")
            self._start_kwok(timeout)
        log(f"using the cluster at {self.server} ({self.source_kubeconfig})")
        return self

    def pid(self, name: str) -> int | None:
        return super().pid(name) if name in self.components else None

    def down(self, grace: float = 15) -> list[str]:
        """Stops the KWOK it started (its fake nodes stay; the next run's KWOK takes them over)."""
        return super().down(grace)
