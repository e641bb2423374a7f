"""A TLS proxy between the operator and the real kube-apiserver: it records every request the
operator makes (method, path, query, answer), and it can cut the operator off or send one watch to
the server with a resourceVersion the server has long forgotten.

It is not an emulator: every answer is the API server's own. It is how a test observes what the
operator asks of the server (a label selector on its watches, no write in an idle pass, no call
refused by RBAC) and puts it in situations a long-lived operator meets (a network cut; a watch
resumed from a resourceVersion etcd compacted, which the server answers with 410 Gone).

Each request is forwarded on a fresh upstream connection with `Connection: close`, so every
request is seen (no keep-alive connection hides the next one); clients reconnect, as they do.
The proxy's certificate is issued by the control plane's CA for 127.0.0.1, so the operator's
ServiceAccount kubeconfig only changes its server URL.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: dict[str, str]
    status: int
    at: float

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")

    @property
    def write(self) -> bool:
        """A request that may change what the server stores (a dry run does not)."""
        return self.method in ("POST", "PUT", "PATCH", "DELETE") and "dryRun" not in self.query

    @property
    def resource(self) -> str:
        """`deployments`, `searchindexes/status`, `leases`: the plural (and subresource) asked for."""
        parts = [p for p in self.path.split("/") if p]
        if parts[:1] == ["api"]:
            parts = parts[2:]
        elif parts[:1] == ["apis"]:
            parts = parts[3:]
        if parts[:1] == ["namespaces"] and len(parts) >= 3:
            parts = parts[2:]
        if not parts:
            return ""
        return parts[0] + (f"/{parts[2]}" if len(parts) >= 3 else "")


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {done.stderr}")


def issue_certificate(folder: Path, ca_cert: Path, ca_key: Path) -> tuple[Path, Path]:
    """A serving certificate for 127.0.0.1 signed by the control plane's CA."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ca_cert, folder / "ca.crt")
    shutil.copyfile(ca_key, folder / "ca.key")
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "proxy.key", cwd=folder)
    _openssl("req", "-new", "-key", "proxy.key", "-subj", "/CN=backscroll-test-proxy", "-out", "proxy.csr", cwd=folder)
    (folder / "proxy.ext").write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                                      "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "proxy.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "30",
             "-sha256", "-extfile", "proxy.ext", "-out", "proxy.crt", cwd=folder)
    (folder / "ca.key").unlink()
    return folder / "proxy.crt", folder / "proxy.key"


class ApiProxy:
    def __init__(self, upstream: str, ca: Path, cert: Path, key: Path):
        parts = urllib.parse.urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.client_tls = ssl.create_default_context(cafile=str(ca))
        self.client_tls.set_alpn_protocols(["http/1.1"])
        self.server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_tls.load_cert_chain(str(cert), str(key))
        self.server_tls.set_alpn_protocols(["http/1.1"])
        self.calls: list[Call] = []
        self.lock = threading.Lock()
        self.cut = threading.Event()
        self.expire_next: dict[str, int] = {}   # resource -> watches to send with an old resourceVersion
        self.expired: list[str] = []            # watches sent that way
        self.open: set[socket.socket] = set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, name="api-proxy", daemon=True)

    # --- control --------------------------------------------------------------------------------

    def start(self) -> ApiProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        _shut(self.listener)  # the accept loop wakes and closes it
        self._close_all()
        self.thread.join(10)

    def disconnect(self) -> None:
        """Cut the operator off: open connections (watches) close, new ones are refused."""
        self.cut.set()
        self._close_all()

    def reconnect(self) -> None:
        self.cut.clear()

    def expire_watch(self, resource: str, times: int = 1) -> None:
        """The next `times` watches of `resource` reach the server resuming from resourceVersion 1:
        long compacted, so the server answers 410 Gone (reason Expired), as it does to an operator
        that resumes after its resourceVersion was compacted away. Open watches of it are closed,
        so the next one comes now."""
        with self.lock:
            self.expire_next[resource] = self.expire_next.get(resource, 0) + times
        self._close_all()

    def seen(self, since: float = 0.0) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.at >= since]

    # --- the proxy ------------------------------------------------------------------------------

    def _close_all(self) -> None:
        """Ends every open connection: shut down here, closed by the thread that serves it. A
        socket closed from another thread frees its descriptor while OpenSSL in the serving
        thread may still write to that number, which by then can be a subprocess's pipe."""
        with self.lock:
            sockets = list(self.open)
        for s in sockets:
            _shut(s)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                raw, _ = self.listener.accept()
            except OSError:
                break
            if self.cut.is_set():
                raw.close()
                continue
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _track(self, *sockets: socket.socket) -> None:
        with self.lock:
            self.open.update(sockets)

    def _untrack(self, *sockets: socket.socket) -> None:
        with self.lock:
            self.open.difference_update(sockets)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _serve(self, raw: socket.socket) -> None:
        upstream = client = None
        self._track(raw)
        try:
            raw.settimeout(30)
            client = self.server_tls.wrap_socket(raw, server_side=True)
            self._track(client)
            head, body = _read_request(client)
            if head is None:
                return
            request_line, *header_lines = head.split("\r\n")
            method, target, version = request_line.split(" ", 2)
            parts = urllib.parse.urlsplit(target)
            query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
            call = Call(method, parts.path, query, 0, time.monotonic())
            if call.watch:
                with self.lock:
                    if self.expire_next.get(call.resource):
                        self.expire_next[call.resource] -= 1
                        query["resourceVersion"] = "1"
                        self.expired.append(call.resource)
                        target = parts.path + "?" + urllib.parse.urlencode(query)
            headers = [h for h in header_lines if h and not h.lower().startswith(("connection:", "keep-alive:"))]
            forwarded = "\r\n".join([f"{method} {target} {version}", *headers, "Connection: close", "", ""])
            upstream = self.client_tls.wrap_socket(socket.create_connection(self.upstream, timeout=30),
                                                   server_hostname=self.upstream[0])
            self._track(upstream)
            upstream.sendall(forwarded.encode("latin-1") + body)
            client.settimeout(None)
            upstream.settimeout(None)
            first = True
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                if first:
                    first = False
                    with contextlib.suppress(ValueError, IndexError):
                        call = Call(call.method, call.path, call.query, int(chunk.split(b" ", 2)[1]), call.at)
                    with self.lock:
                        self.calls.append(call)
                client.sendall(chunk)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            self._untrack(*(s for s in (raw, client, upstream) if s is not None))


def _shut(s: socket.socket) -> None:
    # The plain socket's shutdown: SSLSocket's own would also drop its SSL object under the
    # thread that is using it.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(s, socket.SHUT_RDWR)


def _read_request(client: ssl.SSLSocket) -> tuple[str | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    length = 0
    chunked = False
    for line in text.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:  # forwarded as it came: read up to the terminating chunk
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = client.recv(65536)
            if not chunk:
                break
            rest += chunk
        return text, rest
    while len(rest) < length:
        chunk = client.recv(65536)
        if not chunk:
            break
        rest += chunk
    return text, rest
