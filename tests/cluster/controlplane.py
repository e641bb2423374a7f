"""A real Kubernetes control plane on 127.0.0.1, from the binaries tests/cluster/build.sh pins.

etcd, kube-apiserver (TLS, client certificates, ServiceAccount tokens, Node+RBAC authorization,
the default admission plugins with PodSecurity), kube-controller-manager (every default
controller, each under its own ServiceAccount), kube-scheduler and KWOK (fake nodes; pods become
Ready, a Job's pods complete), all in one state folder: PKI, kubeconfigs, etcd's data, logs, pid
files and cluster.json (ports, binaries). Two state folders never collide: each picks free ports.

    python3 -m tests.cluster.controlplane up   [--state DIR]   # build (cached), start, wait Ready
    python3 -m tests.cluster.controlplane env  [--state DIR]   # export KUBECONFIG=... and PATH
    python3 -m tests.cluster.controlplane down [--state DIR] [--purge]

`down` stops exactly the processes this folder's pid files name (SIGTERM, SIGKILL after a grace)
and removes nothing else unless --purge is given. Standard library and the openssl CLI only, so
it runs without the project's virtualenv.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_STATE = REPO / ".cluster"
BUILD = HERE / "build.sh"
STAGES = HERE / "kwok-stages.yaml"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service's ClusterIP: the first of SERVICE_CIDR
ISSUER = "https://kubernetes.default.svc.cluster.local"
NODES = ("kwok-node-0", "kwok-node-1")
# Started in this order, stopped in the reverse one.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# Nothing may depend on a quiet machine: every wait is long and polls.
TIMEOUT = float(os.environ.get("BACKSCROLL_CLUSTER_TIMEOUT", "180"))


class ControlPlaneError(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)


def build(quiet: bool = False) -> Path:
    """Build the binaries (instant when cached) and return their folder. Raises when the build
    fails: a test that needs the control plane must fail then, never skip."""
    done = subprocess.run(["bash", str(BUILD)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if quiet else None, text=True)
    if done.returncode != 0:
        raise ControlPlaneError(f"tests/cluster/build.sh failed (exit {done.returncode})"
                                + (f":\n{done.stderr[-4000:]}" if quiet else ""))
    return Path(done.stdout.strip().splitlines()[-1])


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on now, all different (the sockets stay bound until all are found)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


# --- PKI ------------------------------------------------------------------------------------------

def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


def _ec_key(pki: Path, name: str) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=pki)


def _issue(pki: Path, name: str, subject: str, usage: str, sans: list[str] | None = None, ca: str = "ca") -> None:
    """A leaf certificate signed by the CA: `usage` is serverAuth or clientAuth."""
    _ec_key(pki, name)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=pki)
    ext = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if sans:
        ext.append("subjectAltName=" + ",".join(sans))
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "3650", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki)
    (pki / f"{name}.csr").unlink()
    (pki / f"{name}.ext").unlink()


CLIENTS = {
    # file name: (CN, O). admin is a cluster administrator through the system:masters group; the
    # controller-manager and the scheduler run as the identities the bootstrap RBAC roles name.
    "admin": ("backscroll-admin", "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager", None),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kwok": ("kwok-controller", "system:masters"),
}


def _make_ca(pki: Path, name: str, cn: str) -> None:
    _ec_key(pki, name)
    _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-subj", f"/CN={cn}", "-days", "3650",
             "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", f"{name}.crt", cwd=pki)


def make_front_proxy_pki(pki: Path) -> None:
    """The request-header (front proxy) CA and the API server's client certificate under it: the
    controller-manager and scheduler read this CA from the extension-apiserver-authentication
    ConfigMap (without it they log an error each time), and aggregated APIs need it."""
    _make_ca(pki, "front-proxy-ca", "backscroll-test-front-proxy-ca")
    _issue(pki, "front-proxy-client", "/CN=front-proxy-client", "clientAuth", ca="front-proxy-ca")
    for key in pki.glob("front-proxy*.key"):
        key.chmod(0o600)


def make_pki(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    _make_ca(pki, "ca", "backscroll-test-ca")
    _issue(pki, "kube-apiserver", "/CN=kube-apiserver", "serverAuth", [
        "IP:127.0.0.1", f"IP:{SERVICE_IP}", "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    for name, (cn, org) in CLIENTS.items():
        _issue(pki, name, f"/CN={cn}" + (f"/O={org}" if org else ""), "clientAuth")
    # The ServiceAccount token signing pair (RS256).
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=pki)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    for key in pki.glob("*.key"):
        key.chmod(0o600)


def kubeconfig(server: str, ca: Path, *, cert: Path | None = None, key: Path | None = None,
               token: str | None = None, user: str = "admin") -> str:
    """A kubeconfig (JSON is YAML) with everything inline, so it can be copied anywhere."""
    data = lambda p: base64.b64encode(p.read_bytes()).decode()  # noqa: E731
    creds: dict = {"token": token} if token else {
        "client-certificate-data": data(cert), "client-key-data": data(key)}
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "backscroll",
        "clusters": [{"name": "backscroll", "cluster": {"server": server, "certificate-authority-data": data(ca)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": "backscroll", "context": {"cluster": "backscroll", "user": user}}],
    }, indent=2) + "\n"


# --- the control plane ----------------------------------------------------------------------------

@dataclass
class ControlPlane:
    """One control plane in one state folder. `up()` starts it (or finds it running); `down()`
    stops what its pid files name. Use as a context manager to do both."""

    state: Path = DEFAULT_STATE
    bin_dir: Path | None = None
    die_with_parent: bool = False  # the pytest fixture: components end if the test process dies
    ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self.state = Path(self.state).resolve()
        self._bin_given = self.bin_dir is not None
        saved = self.state / "cluster.json"
        if saved.exists():
            info = json.loads(saved.read_text())
            self.ports = self.ports or info["ports"]
            self.bin_dir = self.bin_dir or Path(info["bin"])

    # paths
    pki = property(lambda self: self.state / "pki")
    logs = property(lambda self: self.state / "logs")
    pids = property(lambda self: self.state / "pids")
    kubeconfig = property(lambda self: self.state / "admin.kubeconfig")
    ca = property(lambda self: self.pki / "ca.crt")
    admin_cert = property(lambda self: self.pki / "admin.crt")
    admin_key = property(lambda self: self.pki / "admin.key")
    server = property(lambda self: f"https://127.0.0.1:{self.ports['kube-apiserver']}")

    @property
    def kubectl_path(self) -> Path:
        return self.binary("kubectl")

    def binary(self, name: str) -> Path:
        if self.bin_dir is None:
            self.bin_dir = build()
        return Path(self.bin_dir) / name

    def __enter__(self) -> ControlPlane:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # --- start -----------------------------------------------------------------------------------

    def up(self, timeout: float = TIMEOUT) -> ControlPlane:
        if not self._bin_given:  # the binaries the pins name now (instant when cached)
            self.bin_dir = build()
        running = [c for c in COMPONENTS if self.pid(c)]
        if running == list(COMPONENTS):
            log(f"already running in {self.state}")
            return self
        if running:
            raise ControlPlaneError(f"{self.state} has {', '.join(running)} running but not the rest; "
                                    "stop it first (down)")
        for d in (self.state, self.logs, self.pids):
            d.mkdir(parents=True, exist_ok=True)
        if not self.ports:
            names = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
            self.ports = dict(zip(names, free_ports(len(names))))
        busy = [f"{n} {p}" for n, p in self.ports.items() if port_in_use(p)]
        if busy:
            raise ControlPlaneError(f"ports of {self.state} are in use ({', '.join(busy)}): another process "
                                    "holds them; stop it, or use another state folder")
        (self.state / "cluster.json").write_text(json.dumps(
            {"bin": str(self.bin_dir), "ports": self.ports}, indent=2) + "\n")
        if not (self.pki / "sa.pub").exists():
            log("generating PKI")
            make_pki(self.pki)
        if not (self.pki / "front-proxy-client.crt").exists():
            make_front_proxy_pki(self.pki)
        self._write_configs()
        t0 = time.monotonic()
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_controllers(timeout)
            self._start_kwok(timeout)
            self._wait(lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
                       "the default ServiceAccount in default", timeout)
        except BaseException:
            self.dump_logs()
            self.down()
            raise
        log(f"control plane ready in {time.monotonic() - t0:.0f} s: {self.server}")
        return self

    def _write_configs(self) -> None:
        for name in CLIENTS:
            path = self.state / f"{name}.kubeconfig"
            path.write_text(kubeconfig(self.server, self.ca, cert=self.pki / f"{name}.crt",
                                       key=self.pki / f"{name}.key", user=name))
            path.chmod(0o600)
        # kwok's options are its flags (a KwokConfiguration here would replace its defaults whole)
        shutil.copyfile(STAGES, self.state / "kwok.yaml")

    def _spawn(self, name: str, args: list[str], env: dict | None = None) -> None:
        binary = self.binary("kwok" if name == "kwok" else name)
        logfile = open(self.logs / f"{name}.log", "ab")
        preexec = _die_with_parent if self.die_with_parent else None
        proc = subprocess.Popen([str(binary), *args], stdin=subprocess.DEVNULL, stdout=logfile,
                                stderr=subprocess.STDOUT, cwd=self.state, start_new_session=True,
                                env={**os.environ, **(env or {})}, preexec_fn=preexec)
        logfile.close()
        (self.pids / f"{name}.pid").write_text(f"{proc.pid}\n")
        self._procs = getattr(self, "_procs", {})
        self._procs[name] = proc

    def _start_etcd(self, timeout: float) -> None:
        client, peer = self.ports["etcd"], self.ports["etcd-peer"]
        log(f"starting etcd on 127.0.0.1:{client}")
        self._spawn("etcd", [
            "--name=backscroll", f"--data-dir={self.state / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client}", f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=backscroll=http://127.0.0.1:{peer}",
            # a test cluster: durability across a power cut is not worth fsync's latency on a busy disk
            "--unsafe-no-fsync=true", "--log-level=warn"])
        self._wait(lambda: b'"health":"true"' in (_http(f"http://127.0.0.1:{client}/health") or b""),
                   "etcd /health", timeout, "etcd")

    def _start_apiserver(self, timeout: float) -> None:
        pki = self.pki
        log(f"starting kube-apiserver on {self.server}")
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['kube-apiserver']}",
            f"--tls-cert-file={pki / 'kube-apiserver.crt'}", f"--tls-private-key-file={pki / 'kube-apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--authorization-mode=Node,RBAC",
            # privileged containers are allowed by the server, so Pod Security admission is what refuses them
            "--allow-privileged=true",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # the `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints refuse; no pod
            # here reaches the API through that Service anyway
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.state / 'apiserver-certs'}", "--profiling=false", "--v=1"])
        self._wait(lambda: self._get("/readyz", raw=True) == b"ok", "kube-apiserver /readyz", timeout,
                   "kube-apiserver")

    def _start_controllers(self, timeout: float) -> None:
        pki = self.pki
        kcm = self.state / "kube-controller-manager.kubeconfig"
        log("starting kube-controller-manager and kube-scheduler")
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={kcm}", f"--authentication-kubeconfig={kcm}", f"--authorization-kubeconfig={kcm}",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports['kube-controller-manager']}",
            f"--cert-dir={self.state / 'kcm-certs'}",
            "--controllers=*", "--use-service-account-credentials=true", "--leader-elect=false",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false", "--v=1"])
        sched = self.state / "kube-scheduler.kubeconfig"
        self._spawn("kube-scheduler", [
            f"--kubeconfig={sched}", f"--authentication-kubeconfig={sched}", f"--authorization-kubeconfig={sched}",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports['kube-scheduler']}",
            f"--cert-dir={self.state / 'scheduler-certs'}", "--leader-elect=false", "--profiling=false", "--v=1"])
        for name in ("kube-controller-manager", "kube-scheduler"):
            url = f"https://127.0.0.1:{self.ports[name]}/healthz"
            self._wait(lambda: _http(url, insecure=True) == b"ok", f"{name} /healthz", timeout, name)

    def _start_kwok(self, timeout: float) -> None:
        log(f"starting kwok with nodes {', '.join(NODES)}")
        home = self.state / "kwok-home"  # kwok also reads ~/.kwok/kwok.yaml: not the user's
        home.mkdir(exist_ok=True)
        self._spawn("kwok", [
            f"--kubeconfig={self.state / 'kwok.kubeconfig'}", f"--config={self.state / 'kwok.yaml'}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-lease-duration-seconds=40"], env={"HOME": str(home)})
        for node in NODES:
            if self._get(f"/api/v1/nodes/{node}") is None:
                self.request("POST", "/api/v1/nodes", {
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                 "labels": {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                                            "kubernetes.io/arch": "amd64", "type": "kwok"}}})
        for node in NODES:
            self._wait(lambda: _ready(self._get(f"/api/v1/nodes/{node}")), f"node {node} Ready", timeout, "kwok")

    def _wait(self, check, what: str, timeout: float, component: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if component and getattr(self, "_procs", {}).get(component) is not None:
                code = self._procs[component].poll()
                if code is not None:
                    raise ControlPlaneError(f"{component} exited {code} while waiting for {what}")
            try:
                if check():
                    return
            except (OSError, urllib.error.URLError, ControlPlaneError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)

    # --- talk to it ------------------------------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        return ctx

    def request(self, method: str, path: str, body=None, content_type: str = "application/json",
                token: str | None = None) -> tuple[int, dict | bytes]:
        """One API call as the admin (or with a bearer token): (status, JSON body or bytes)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        ctx = ssl.create_default_context(cafile=str(self.ca)) if token else self._context()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def _get(self, path: str, raw: bool = False):
        status, body = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise ControlPlaneError(f"GET {path}: {status} {body!r:.300}")
        return body if not raw or isinstance(body, bytes) else json.dumps(body).encode()

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
        """The pinned kubectl as the admin (or with another kubeconfig); raises on a non-zero exit
        when check, with stdout and stderr in the message."""
        home = self.state / "kubectl-home"
        home.mkdir(exist_ok=True)
        cmd = [str(self.kubectl_path), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        done = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                              env={"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        if check and done.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} exited {done.returncode}\n--- stdout\n"
                                    f"{done.stdout}\n--- stderr\n{done.stderr}")
        return done

    def token(self, namespace: str, service_account: str, duration: str = "1h",
              audience: str | None = None) -> str:
        """A ServiceAccount token from the TokenRequest API (`kubectl create token`)."""
        args = ["create", "token", service_account, "-n", namespace, f"--duration={duration}"]
        if audience:
            args.append(f"--audience={audience}")
        return self.kubectl(*args).stdout.strip()

    def service_account_kubeconfig(self, namespace: str, service_account: str, path: Path | None = None,
                                   *, create: bool = False, duration: str = "1h") -> Path:
        """A kubeconfig that authenticates as system:serviceaccount:NAMESPACE:NAME with a fresh
        TokenRequest token (what a pod of that ServiceAccount gets). create: make the
        ServiceAccount first when it does not exist."""
        if create and self._get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}") is None:
            self.kubectl("create", "serviceaccount", service_account, "-n", namespace)
        path = Path(path or self.state / "serviceaccounts" / f"{namespace}.{service_account}.kubeconfig")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kubeconfig(self.server, self.ca, token=self.token(namespace, service_account, duration),
                                   user=f"system:serviceaccount:{namespace}:{service_account}"))
        path.chmod(0o600)
        return path

    # --- stop ------------------------------------------------------------------------------------

    def pid(self, name: str) -> int | None:
        """The pid in NAME's pid file when that process is alive and is ours (its command line
        names this state folder: a recycled pid is not)."""
        try:
            pid = int((self.pids / f"{name}.pid").read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            return None
        if str(self.state) not in cmdline:
            return None
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return None  # a zombie: exited, not yet reaped
        return pid

    def down(self, grace: float = 15) -> list[str]:
        """Stop the components this folder's pid files name, newest first; returns what it
        stopped. Removes the pid files of stopped components, nothing else."""
        stopped = []
        for name in reversed(COMPONENTS):
            pid = self.pid(name)
            if pid is None:
                (self.pids / f"{name}.pid").unlink(missing_ok=True)
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.pid(name) and time.monotonic() < deadline:
                self._reap(name)
                time.sleep(0.2)
            if self.pid(name):
                log(f"{name} ({pid}) did not stop in {grace:.0f} s: SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._reap(name, block=True)
            (self.pids / f"{name}.pid").unlink(missing_ok=True)
            stopped.append(name)
        return stopped

    def _reap(self, name: str, block: bool = False) -> None:
        proc = getattr(self, "_procs", {}).get(name)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5 if block else 0.01)

    def dump_logs(self, lines: int = 40) -> None:
        for name in COMPONENTS:
            path = self.logs / f"{name}.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                print(f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail), file=sys.stderr)

    def env(self) -> str:
        return (f"export KUBECONFIG={self.kubeconfig}\n"
                f"export PATH={self.kubectl_path.parent}:$PATH  # the pinned kubectl: {self.kubectl_path}\n")


def _die_with_parent() -> None:
    """In the child: SIGKILL when the process that started it dies (Linux prctl PR_SET_PDEATHSIG): the
    emergency path, when the test process died without stopping them (kube-apiserver hangs in its
    graceful shutdown when etcd goes at the same moment)."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def _http(url: str, insecure: bool = False) -> bytes | None:
    ctx = None
    if insecure:  # the controller-manager's and scheduler's self-signed serving certificates
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            return resp.read()
    except (OSError, urllib.error.URLError):
        return None


def _ready(node: dict | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.cluster.controlplane", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("build", "up", "down", "env", "status"))
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("BACKSCROLL_CLUSTER_STATE", DEFAULT_STATE)),
                        help="state folder (default .cluster/ in the repository)")
    parser.add_argument("--purge", action="store_true", help="down: also delete the state folder")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds to wait for each component")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build())
            return 0
        cp = ControlPlane(args.state)
        if args.command == "up":
            cp.up(args.timeout)
            print(f"\nThe control plane runs in {cp.state} ({cp.server}). Next:\n\n{cp.env()}"
                  f"kubectl get nodes\n\nStop it with `make cluster-down`.")
        elif args.command == "env":
            if not (cp.state / "cluster.json").exists():
                raise ControlPlaneError(f"no control plane in {cp.state}: run `make cluster` first")
            print(cp.env(), end="")
        elif args.command == "status":
            for name in COMPONENTS:
                pid = cp.pid(name)
                print(f"{name:24} {'running, pid ' + str(pid) if pid else 'stopped'}")
        elif args.command == "down":
            stopped = cp.down()
            log(f"stopped {', '.join(stopped)}" if stopped else f"nothing running in {cp.state}")
            if args.purge and args.state.exists():
                shutil.rmtree(args.state)
                log(f"removed {args.state}")
    except ControlPlaneError as e:
        log(str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
