"""Fixtures for the operator suite: a real Kubernetes control plane (tests/cluster), the CRD and
the RBAC the chart ships, the operator running as its ServiceAccount, and a stand-in for the
Backscroll API's status endpoint.

What is real: kube-apiserver (schema, defaults, CEL, server-side apply, RBAC, Pod Security
admission, watches), the Deployment, ReplicaSet, Job, garbage-collection and HPA controllers,
the scheduler, and KWOK's nodes (pods become Ready; a Job's pods complete). The operator is the
real kopf operator (handlers.register), in this process, authenticated by a TokenRequest token of
the ServiceAccount the chart renders, bound by exactly the chart's Roles, in a namespace that
enforces the `restricted` Pod Security profile. Its requests pass through `proxy.ApiProxy`, which
records them (every answer is the API server's).

What is played: the Backscroll API's GET /v1/status (no container runs on KWOK's nodes). The
operator reads it from the local StatusServer through its documented setting for running
outside the cluster (BACKSCROLL_OPERATOR_STATUS_URL, `status_url`): a Service name does not
resolve from the host. The status server accepts the operator's generated token once a register
Job of that token's Secret has succeeded, as the API does once `backscroll tokens register` ran.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import secrets
import ssl
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import asyncio
import httpx
import kopf
import pytest
import yaml

from backscroll_operator.config import OperatorConfig
from backscroll_operator.handlers import Passes, register
from backscroll_operator.names import TOKEN_ANNOTATION
from tests.cluster.controlplane import NODES
# control_plane and cluster_namespace come from tests/conftest.py: one control plane per session.
from tests.deploy.conftest import CHART, documents, helm, run  # noqa: F401

from .proxy import ApiProxy, issue_certificate

ROOT = Path(__file__).resolve().parents[2]
CRD = CHART / "crds" / "searchindexes.search.backscroll.dev.yaml"
TOKEN = "bks_status_test"
# A busy two-core machine runs this: every wait is long and polls.
DEADLINE_S = 90.0

RESOURCES = {
    "searchindexes": "/apis/search.backscroll.dev/v1alpha1",
    "searchworkspaces": "/apis/search.backscroll.dev/v1alpha1",
    "deployments": "/apis/apps/v1",
    "replicasets": "/apis/apps/v1",
    "jobs": "/apis/batch/v1",
    "services": "/api/v1",
    "secrets": "/api/v1",
    "events": "/api/v1",
    "pods": "/api/v1",
    "configmaps": "/api/v1",
    "poddisruptionbudgets": "/apis/policy/v1",
    "horizontalpodautoscalers": "/apis/autoscaling/v2",
    "networkpolicies": "/apis/networking.k8s.io/v1",
    "leases": "/apis/coordination.k8s.io/v1",
    "clusters": "/apis/postgresql.cnpg.io/v1",
    "backups": "/apis/postgresql.cnpg.io/v1",
}
CHILD_KINDS = ("deployments", "services", "jobs", "poddisruptionbudgets", "horizontalpodautoscalers",
               "networkpolicies")


def eventually(check, timeout: float = DEADLINE_S, interval: float = 0.25):
    """The check's value once it is truthy, or AssertionError with its last value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (AssertionError, KeyError, TypeError, StopIteration, IndexError) as exc:
            value = exc
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout} s; last: {value!r}")
        time.sleep(interval)


def admin_tls(cp) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cp.ca))
    ctx.load_cert_chain(str(cp.admin_cert), str(cp.admin_key))
    return ctx


class Api:
    """The test's own client, as the cluster's administrator, in one namespace (or another's)."""

    def __init__(self, cp, namespace: str):
        self.cp, self.ns = cp, namespace
        self.http = httpx.Client(base_url=cp.server, verify=admin_tls(cp), timeout=30)

    def path(self, resource: str, name: str | None = None, namespace: str | None = None) -> str:
        base = f"{RESOURCES[resource]}/namespaces/{namespace or self.ns}/{resource}"
        return f"{base}/{name}" if name else base

    def _check(self, response: httpx.Response) -> dict:
        if response.status_code >= 400:
            raise ApiError(response.status_code, response.text)
        return response.json() if response.content else {}

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        response = self.http.get(self.path(resource, name, namespace))
        return None if response.status_code == 404 else self._check(response)

    def list(self, resource: str, selector: str = "", namespace: str | None = None) -> list[dict]:
        params = {"labelSelector": selector} if selector else None
        return self._check(self.http.get(self.path(resource, namespace=namespace), params=params)).get("items") or []

    def names(self, resource: str, selector: str = "") -> set[str]:
        return {i["metadata"]["name"] for i in self.list(resource, selector)}

    def create(self, resource: str, body: dict) -> dict:
        return self._check(self.http.post(self.path(resource), json=body))

    def patch(self, resource: str, name: str, body, subresource: str = "",
              content_type: str = "application/merge-patch+json") -> dict:
        path = self.path(resource, name) + (f"/{subresource}" if subresource else "")
        return self._check(self.http.patch(path, content=json.dumps(body), headers={"Content-Type": content_type}))

    def delete(self, resource: str, name: str) -> None:
        response = self.http.delete(self.path(resource, name))
        if response.status_code != 404:
            self._check(response)

    def secret(self, name: str, **data: str) -> dict:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
        if self.get("secrets", name) is None:
            return self.create("secrets", body)
        return self.patch("secrets", name, {"data": body["data"]})

    def events(self, involving: str) -> list[dict]:
        return [e for e in self.list("events") if (e.get("involvedObject") or {}).get("name") == involving]

    def condition(self, name: str, type_: str) -> dict:
        status = (self.get("searchindexes", name) or {}).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == type_), {})

    def versions(self, *resources: str) -> dict[str, str]:
        """resource/name -> resourceVersion of everything of these kinds in the namespace."""
        return {f"{r}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                for r in resources for o in self.list(r)}


class Versions:
    """Every version of every object of these kinds in the namespace from now on, as watches
    deliver them (the administrator's): what anyone with read access could have seen. Each watch
    ends by itself every few seconds and resumes until close(): its connection is only ever
    closed by its own thread."""

    def __init__(self, api: Api, *resources: str):
        self.seen: list[dict] = []
        self.stop = threading.Event()
        self.threads = []
        for resource in resources:
            thread = threading.Thread(target=self._watch, args=(api, api.path(resource)), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _watch(self, api: Api, path: str) -> None:
        with httpx.Client(base_url=api.cp.server, verify=admin_tls(api.cp), timeout=30) as client:
            since = client.get(path).raise_for_status().json()["metadata"]["resourceVersion"]
            while not self.stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    with client.stream("GET", path, params={"watch": "true", "resourceVersion": since,
                                                            "timeoutSeconds": "3"}) as response:
                        for line in response.iter_lines():
                            if line.strip():
                                body = json.loads(line).get("object") or {}
                                self.seen.append(body)
                                since = (body.get("metadata") or {}).get("resourceVersion") or since

    def close(self) -> list[dict]:
        time.sleep(1)  # the last events on their way
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        return self.seen


class ApiError(AssertionError):
    def __init__(self, status: int, text: str):
        super().__init__(f"{status}: {text[:2000]}")
        self.status, self.text = status, text


class Gate:
    """Holds pods on their way to a node: pods with `selector` as their nodeSelector stay Pending
    until the gate opens (both KWOK nodes get the label), so a Job stays running as long as a
    test needs. Closing it leaves running pods alone; new ones wait again."""

    def __init__(self, api: Api, namespace: str, name: str):
        self.api, self.key = api, f"gate.backscroll.test/{namespace}-{name}"
        self.selector = {self.key: "open"}

    def _label(self, value) -> None:
        for node in NODES:
            response = self.api.http.patch(f"/api/v1/nodes/{node}", content=json.dumps(
                {"metadata": {"labels": {self.key: value}}}), headers={"Content-Type": "application/merge-patch+json"})
            self.api._check(response)

    def open(self) -> None:
        self._label("open")

    def close(self) -> None:
        self._label(None)


class StatusServer:
    """Stands in for the Backscroll API's GET /v1/status at /{namespace}/{name}/v1/status. A
    request needs a registered `status` token: one in `tokens` (made some other way, for
    statusTokenSecretRef), or the operator's generated one once its register Job succeeded."""

    def __init__(self, cp):
        self.admin = Api(cp, "default")
        self.reports: dict[str, dict] = {}   # SearchIndex name -> the JSON to answer
        self.seen_tokens: list[str] = []
        self.tokens: set[str] = {TOKEN}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                _, namespace, name, *rest = self.path.split("/")
                presented = self.headers.get("Authorization", "")
                outer.seen_tokens.append(presented)
                if not outer.accepts(namespace, name, presented.removeprefix("Bearer ")):
                    return self._send(401, {"error": {"code": "unauthorized"}})
                if "/".join(rest) != "v1/status" or name not in outer.reports:
                    return self._send(503, {"error": {"code": "unavailable"}})
                return self._send(200, outer.reports[name])

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def accepts(self, namespace: str, name: str, token: str) -> bool:
        if token in self.tokens:
            return True
        return token != "" and token == registered_token(self.admin, namespace, name)


def token_in(secret: dict | None) -> str | None:
    data = (secret or {}).get("data") or {}
    return base64.b64decode(data["token"]).decode() if "token" in data else None


def registered_token(api: Api, namespace: str, name: str) -> str | None:
    """The operator's generated token once a register Job of its current Secret succeeded: what
    `backscroll tokens register` stores (and a newer registration revokes the older token)."""
    from backscroll_operator.builders import status_token_name
    from backscroll_operator.names import Owner

    secret = api.get("secrets", status_token_name(Owner(name, namespace, "")), namespace)
    if secret is None:
        return None
    uid = secret["metadata"]["uid"]
    jobs = api.list("jobs", f"app.kubernetes.io/instance={name},app.kubernetes.io/component=register", namespace)
    if any((j["metadata"].get("annotations") or {}).get(TOKEN_ANNOTATION) == uid
           and (j.get("status") or {}).get("succeeded") for j in jobs):
        return token_in(secret)
    return None


def report(mode: str, model: str | None = None, dimensions: int = 384, embedded: int = 0, total: int = 0,
           endpoint: str = "ok", degradation: dict | None = None) -> dict:
    """A /v1/status body shaped as backscroll/status.py shapes it."""
    models = []
    if model:
        models.append({"model": model, "dimensions": dimensions, "current": True, "embedded": embedded,
                       "total": total, "coverage": 1.0 if total == 0 else round(embedded / total, 4),
                       "backfill": {"state": "finished" if embedded >= total else "running"}})
    return {"schema_version": 7, "mode": mode, "degradation": degradation,
            "embeddings": {"model": model, "dimensions": dimensions, "endpoint": endpoint, "circuit": "closed"}
            if model else None,
            "outbox": {"pending": 0, "parked": 0}, "models": models}


# --- the chart's RBAC --------------------------------------------------------------------------

@dataclass
class Install:
    """What the chart renders for the operator in a namespace: its ServiceAccount and Roles
    applied, the namespaces its Deployment watches, and a kubeconfig for the ServiceAccount."""

    release: str
    namespace: str
    service_account: str
    namespaces: list[str]
    cluster_scoped: list[dict]
    kubeconfig: Path


def render_chart(helm_binary: str, release: str, namespace: str, *sets: str) -> list[dict]:
    args = [helm_binary, "template", release, str(CHART), "--namespace", namespace]
    for pair in sets:
        args += ["--set", pair]
    done = run(*args)
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def install_rbac(cp, helm_binary: str, namespace: str, folder: Path, *sets: str) -> Install:
    """The chart's ServiceAccount, Roles and bindings for a release in `namespace`, applied as they
    render (nothing added), and a TokenRequest kubeconfig of that ServiceAccount."""
    release = f"t{secrets.token_hex(3)}"
    docs = render_chart(helm_binary, release, namespace, *sets)
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    cp.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}))
    (account,) = [d for d in rbac if d["kind"] == "ServiceAccount"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    name = account["metadata"]["name"]
    kubeconfig = cp.service_account_kubeconfig(namespace, name, folder / f"{release}.kubeconfig", duration="3h")
    return Install(release, namespace, name, json.loads(env.get("BACKSCROLL_OPERATOR_NAMESPACES") or "[]"),
                   [d for d in rbac if d["kind"].startswith("Cluster")], kubeconfig)


def through(kubeconfig: Path, proxy: ApiProxy, path: Path) -> Path:
    """The same credentials, pointed at the proxy."""
    config = json.loads(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


# --- the operator ---------------------------------------------------------------------------------

class LogCapture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.threads: list[str] = []  # beside each line: replicas in one process share the loggers
        self.setFormatter(logging.Formatter("[%(levelname)s %(name)s] %(message)s"))

    def emit(self, record):
        with contextlib.suppress(Exception):
            self.lines.append(self.format(record))
            self.threads.append(record.threadName)


class Operator:
    """The real operator (kopf, a fresh registry, `handlers.register`) on a thread and event loop
    of its own, as `backscroll-operator` runs it (standalone, the chart's namespaces), so that two
    can run side by side and either can be stopped (its cleanup runs, as on SIGTERM)."""

    def __init__(self, config: OperatorConfig, namespaces: list[str], version: str | None = None):
        self.config, self.namespaces = config, namespaces
        self.registry = kopf.OperatorRegistry()
        # `version`: the operator release it plays (an upgrade test runs two); else the package's.
        self.passes: Passes = register(self.registry, config, namespaces, **({"version": version} if version else {}))
        self.settings = kopf.OperatorSettings()
        # Shutdown mechanics only, so that a test's operator stops in seconds.
        self.settings.queueing.idle_timeout = 1
        self.settings.queueing.exit_timeout = 2
        self.settings.posting.idle_timeout = 0.5
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.log = LogCapture()
        self.thread = threading.Thread(target=self._run, name=f"operator-{config.identity}", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(kopf.operator(registry=self.registry, settings=self.settings, standalone=True,
                                      clusterwide=not self.namespaces, namespaces=self.namespaces,
                                      stop_flag=self.stop_flag))
        except BaseException as exc:  # noqa: BLE001 (reported by stop())
            self.error = exc

    def start(self) -> Operator:
        for name in ("kopf", "backscroll_operator"):
            logging.getLogger(name).addHandler(self.log)
            logging.getLogger(name).setLevel(logging.DEBUG if name == "kopf" else logging.INFO)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(60)
        for name in ("kopf", "backscroll_operator"):
            logging.getLogger(name).removeHandler(self.log)
        assert not self.thread.is_alive(), "the operator did not stop in 60 s"
        assert self.error is None, repr(self.error)

    @property
    def output(self) -> str:
        return "\n".join(self.log.lines)

    @property
    def kopf_output(self) -> str:
        """What this replica's kopf said on its own event loop (`output` holds every replica's)."""
        return "\n".join(line for line, thread in zip(self.log.lines, self.log.threads)
                         if thread == self.thread.name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.passes.server.port}"

    def sample(self, name: str, **labels) -> float | None:
        return self.passes.metrics.registry.get_sample_value(name, labels or None)

    def passes_run(self, trigger: str | None = None) -> float:
        return sum(s.value for m in self.passes.metrics.registry.collect() for s in m.samples
                   if s.name == "backscroll_operator_reconcile_passes_total"
                   and (trigger is None or s.labels.get("trigger") == trigger))

    def own_writes(self) -> list[str]:
        """From now on, every write request the operator's own client sends (kopf's and the
        leader election's renewals aside)."""
        writes: list[str] = []

        def note(request):
            if request.method != "GET" and "dryRun" not in request.url.params and "/leases" not in request.url.path:
                writes.append(f"{request.method} {request.url.path}")
        self.passes.kube.http.event_hooks["request"].append(note)
        return writes


# --- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def crd(control_plane):
    """The SearchIndex CRD as the chart ships it (charts/backscroll/crds), installed once."""
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    # Polled, not `kubectl wait`: on a busy machine the wait can read the new CRD before it has any
    # condition, and fails on the missing list ("<nil> is of the type <nil>") instead of waiting.
    def established() -> bool:
        body = json.loads(control_plane.kubectl("get", "crd/searchindexes.search.backscroll.dev", "-o", "json").stdout)
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (body.get("status") or {}).get("conditions") or [])
    eventually(established, timeout=120, interval=0.5)
    return yaml.safe_load(CRD.read_text())


def stand_in_crd(kind: str) -> dict:
    """A CloudNativePG resource as far as the operator uses it: a CRD of CloudNativePG's group,
    version and names, with the status subresource and any fields. CloudNativePG's controller does
    not run here; a test writes the status it would."""
    plural = f"{kind.lower()}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.postgresql.cnpg.io"},
        "spec": {"group": "postgresql.cnpg.io", "scope": "Namespaced",
                 "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def install_stand_in(control_plane, kind: str) -> None:
    crd = stand_in_crd(kind)
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(crd))
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}",
                          "--timeout=120s", timeout=150)


# A Cluster: its uid and its Ready condition.
@pytest.fixture(scope="session")
def cnpg_crd(control_plane):
    install_stand_in(control_plane, "Cluster")


# A Backup: created before a migration with spec.database.backupBeforeMigration, its status.phase read.
@pytest.fixture(scope="session")
def cnpg_backup_crd(control_plane, cnpg_crd):
    install_stand_in(control_plane, "Backup")


def cnpg_cluster(api: Api, name: str, ready: bool) -> dict:
    """A CloudNativePG Cluster in the test's namespace, its Ready condition as CloudNativePG writes it."""
    if api.get("clusters", name) is None:
        api.create("clusters", {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster", "metadata": {"name": name},
                                "spec": {"instances": 1}})
    status = {"phase": "Cluster in healthy state" if ready else "Setting up primary",
              "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                              "reason": "ClusterIsReady" if ready else "ClusterIsNotReady",
                              "message": "Cluster is Ready" if ready else "Cluster Is Not Ready",
                              "lastTransitionTime": "2026-12-02T00:00:00Z"}]}
    return api.patch("clusters", name, {"status": status}, subresource="status")


def fail_pod(api: Api, job: str, log: str, exit_code: int = 1) -> None:
    """What a kubelet reports when the Job's (gated, Pending) pod ran and exited `exit_code` with
    `log` as the end of its output (terminationMessagePolicy: FallbackToLogsOnError)."""
    pod = eventually(lambda: next(p for p in api.list("pods", f"batch.kubernetes.io/job-name={job}")
                                  if (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")))
    container = pod["spec"]["containers"][0]
    api.patch("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "containerStatuses": [{
        "name": container["name"], "image": container["image"], "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": exit_code, "reason": "Error", "message": log}}}]}}, subresource="status")


@pytest.fixture(scope="session")
def proxy_certificate(control_plane, tmp_path_factory):
    return issue_certificate(tmp_path_factory.mktemp("proxy"), control_plane.ca, control_plane.pki / "ca.key")


@pytest.fixture
def namespace(control_plane, cluster_namespace, crd) -> str:
    """A fresh namespace that enforces the `restricted` Pod Security profile."""
    control_plane.kubectl("label", "namespace", cluster_namespace, "pod-security.kubernetes.io/enforce=restricted",
                          "pod-security.kubernetes.io/enforce-version=latest")
    return cluster_namespace


@pytest.fixture
def proxy(control_plane, proxy_certificate):
    running = ApiProxy(control_plane.server, control_plane.ca, *proxy_certificate).start()
    yield running
    running.stop()


@pytest.fixture
def install(control_plane, helm, namespace, tmp_path):
    """The chart's RBAC for a release in the test's namespace (which it watches)."""
    installed = install_rbac(control_plane, helm, namespace, tmp_path)
    assert installed.namespaces == [namespace]
    yield installed
    for doc in installed.cluster_scoped:
        control_plane.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found",
                              check=False)


@pytest.fixture
def api(control_plane, namespace):
    client = Api(control_plane, namespace)
    client.secret("db", uri="postgresql://backscroll@db/backscroll")
    client.secret("status-token", token=TOKEN)
    yield client
    client.http.close()


@pytest.fixture
def gate(api, namespace):
    """`gate("backfill")`: a Gate of this test's (closed until opened); all closed at the end."""
    made: dict[str, Gate] = {}

    def get(name: str = "hold") -> Gate:
        return made.setdefault(name, Gate(api, namespace, name))

    yield get
    for opened in made.values():
        opened.close()


@pytest.fixture
def status_server(control_plane):
    server = StatusServer(control_plane)
    server.thread.start()
    yield server
    server.server.shutdown()


@pytest.fixture
def operator_kubeconfig(install, proxy, tmp_path, monkeypatch) -> Path:
    """The operator's credentials (its ServiceAccount's token), through the proxy, as $KUBECONFIG."""
    path = through(install.kubeconfig, proxy, tmp_path / "operator.kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return path


def child_writes(proxy: ApiProxy, since: float) -> list[str]:
    """Writes (dry runs aside) the operator sent since `since` (time.monotonic()) to its children
    and Secrets: the ones that would change what the cluster runs."""
    return [f"{c.method} {c.path}" for c in proxy.seen(since)
            if c.write and c.resource.split("/")[0] in (*CHILD_KINDS, "secrets")]


def forbidden(proxy: ApiProxy) -> list[str]:
    return [f"{c.method} {c.path}?{c.query}" for c in proxy.seen() if c.status == 403]


@pytest.fixture
def operators(install, operator_kubeconfig, status_server, proxy, namespace):
    """`operators(identity, **settings)` starts one more replica; all stop at the end, and no
    request of theirs may have been refused by RBAC (the chart's Roles are all they have)."""
    defaults = dict(interval_s=2.0, retry_delay_s=1.0, status_timeout_s=2, lease_namespace=namespace,
                    status_url=status_server.url + "/{namespace}/{name}/v1/status")
    started: list[Operator] = []

    def start(identity: str = "replica-a", version: str | None = None, **overrides) -> Operator:
        config = OperatorConfig(**{**defaults, "identity": identity, **overrides})
        replica = Operator(config, install.namespaces, version).start()
        started.append(replica)
        return replica

    start.started = started
    yield start
    for replica in started:
        replica.stop_flag.set()
    for replica in started:
        if replica.thread.is_alive():
            replica.thread.join(60)
    assert forbidden(proxy) == [], "the chart's RBAC refused a call the operator made"


@pytest.fixture
def operator(operators):
    """A function that runs one operator as a context manager: `with operator(interval_s=600):`
    (a resync every 10 minutes: whatever happens within seconds comes from a watch)."""

    @contextmanager
    def run(**settings_overrides):
        replica = operators(**settings_overrides)
        try:
            yield replica
        finally:
            if replica.thread.is_alive():
                replica.stop()
            print(replica.output[-20000:])  # shown by pytest when the test fails
            assert replica.error is None, replica.output[-20000:]

    return run


@pytest.fixture
def kubectl(control_plane, namespace, tmp_path):
    """The pinned kubectl as the administrator, in the test's namespace: `kubectl("get", "sidx")`
    returns stdout and raises with stdout and stderr on failure; `kubectl.run(...)` does not."""
    from .kubectl import Kubectl

    config = json.loads(control_plane.kubeconfig.read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    path = tmp_path / "admin.kubeconfig"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return Kubectl(control_plane.kubectl_path, path, tmp_path / "kubectl-cache")
