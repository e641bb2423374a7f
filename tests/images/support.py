"""Running the built images as Kubernetes would, with podman: a pod's container (its command,
env with Secrets and the downward API resolved, securityContext, emptyDir volumes, the
ServiceAccount token when the pod mounts one) becomes one `podman run` on the host's network.
And a TCP door to the tests' embedded PostgreSQL, which listens on a Unix socket only."""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("buildah", "podman", "runc")


def container_env() -> dict[str, str]:
    """The environment docker/containers/env.sh sets up (the project's containers.conf,
    registries.conf and storage), as `make images` uses it."""
    done = subprocess.run(["bash", "-c", f"source {ROOT}/docker/containers/env.sh && env -0"],
                          capture_output=True, text=True, check=True)
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Podman:
    env: dict[str, str]
    started: list[str] = field(default_factory=list)

    def __call__(self, *args: str, check: bool = True, timeout: float = 300,
                 input: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, input=input)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} exited {done.returncode}\n--- stdout\n{done.stdout}"
                                 f"\n--- stderr\n{done.stderr}")
        return done

    def run(self, image: str, *args: str, options: tuple[str, ...] = (), check: bool = True,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """A container to completion, on the host's network (it reaches 127.0.0.1)."""
        return self("run", "--rm", "--network", "host", *options, image, *args, check=check, timeout=timeout)

    def start(self, image: str, *args: str, options: tuple[str, ...] = (), name: str | None = None) -> str:
        """A detached container on the host's network; removed by stop_all()."""
        name = name or f"backscroll-test-{secrets.token_hex(4)}"
        self.started.append(name)
        self("run", "--detach", "--name", name, "--network", "host", *options, image, *args)
        return name

    def logs(self, name: str) -> str:
        done = self("logs", name, check=False)
        return done.stdout + done.stderr

    def stop_all(self) -> None:
        for name in reversed(self.started):
            self("rm", "--force", "--time", "5", name, check=False, timeout=60)
        self.started.clear()


def wait_http(url: str, timeout: float = 90, headers: dict | None = None, why=lambda: "") -> tuple[int, bytes]:
    """GET url until it answers (any status); (status, body)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            last = e
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in {timeout:g} s ({last})\n{why()}")


def http(method: str, url: str, token: str | None = None, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


# --- PostgreSQL over TCP ---------------------------------------------------------------------------

class UnixToTcp:
    """Listens on 127.0.0.1:port and pipes each connection to a Unix socket (the embedded
    PostgreSQL's; it listens on no TCP port). Connections arrive as `local` ones."""

    def __init__(self, path: str):
        self.path = path
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            try:
                upstream.connect(self.path)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        self.server.close()


def tcp_url(url: str, doors: dict[str, UnixToTcp]) -> str:
    """The same database as a postgresql://…@127.0.0.1:PORT/… URL a container can use."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    host, port = info.get("host") or "", info.get("port") or "5432"
    if host.startswith("/"):
        path = f"{host}/.s.PGSQL.{port}"
        if path not in doors:
            doors[path] = UnixToTcp(path)
        host, port = "127.0.0.1", str(doors[path].port)
    password = f":{info['password']}" if info.get("password") else ""
    return f"postgresql://{info.get('user', 'postgres')}{password}@{host}:{port}/{info['dbname']}"


# --- a pod's container as `podman run` ----------------------------------------------------------------

def _secret(kubectl, namespace: str, name: str, key: str) -> str:
    data = json.loads(kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout)
    return base64.b64decode(data["data"][key]).decode()


def pod_run_options(cp, namespace: str, pod: dict, container: dict, pod_name: str, workdir: Path,
                    overrides: dict[str, str] = {}) -> list[str]:
    """podman options that run `container` of `pod` (a pod spec) the way a kubelet would on a
    host-network node; `overrides` replaces environment values (a port the host has in use)."""
    options: list[str] = []
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace,
              "spec.serviceAccountName": pod.get("serviceAccountName", "default"),
              "status.podIP": "127.0.0.1", "spec.nodeName": "podman"}
    env: dict[str, str] = {}
    assert not container.get("envFrom"), "envFrom is not resolved here"
    for item in container.get("env", []):
        source = item.get("valueFrom")
        if source is None:
            env[item["name"]] = item.get("value", "")
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[item["name"]] = _secret(cp.kubectl, namespace, ref["name"], ref["key"])
        elif "fieldRef" in source:
            env[item["name"]] = fields[source["fieldRef"]["fieldPath"]]
        else:
            raise AssertionError(f"env {item['name']}: {source} is not resolved here")
    # The ServiceAccount token a kubelet projects, and the API server's address as its env.
    if pod.get("automountServiceAccountToken", True):
        account = workdir / f"{pod_name}-serviceaccount"
        account.mkdir(parents=True, exist_ok=True)
        account.chmod(0o755)
        (account / "token").write_text(cp.token(namespace, fields["spec.serviceAccountName"]))
        (account / "ca.crt").write_text(Path(cp.ca).read_text())
        (account / "namespace").write_text(namespace)
        for f in account.iterdir():
            f.chmod(0o644)
        options += ["--volume", f"{account}:/var/run/secrets/kubernetes.io/serviceaccount:ro"]
        port = cp.server.rsplit(":", 1)[1]
        env |= {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
    env |= overrides
    for name, value in env.items():
        options += ["--env", f"{name}={value}"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        assert "emptyDir" in volume, f"volume {volume} is not run here"
        options += ["--tmpfs", f"{mount['mountPath']}:rw,mode=1777"]
    security = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    if "runAsUser" in security:
        options += ["--user", f"{security['runAsUser']}:{security.get('runAsGroup', security['runAsUser'])}"]
    if security.get("readOnlyRootFilesystem"):
        options.append("--read-only")
    if "ALL" in security.get("capabilities", {}).get("drop", []):
        options += ["--cap-drop", "ALL"]
    if security.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    if container.get("command"):
        options += ["--entrypoint", json.dumps(container["command"])]
    return options
