"""Fixtures for the operator suite: a Kubernetes API (kmock), an API status endpoint, the operator.

Nothing here replaces the operator's own parts: kopf runs for real (KopfRunner), talks HTTP to
the emulator through a kubeconfig, and reads status over HTTP from a local server. The tests play
the parts no emulator has: the Deployment and Job controllers (they patch status over HTTP) and
the Backscroll API (the status server answers what the test sets).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import kopf
import pytest
from kopf.testing import KopfRunner

from backscroll_operator.config import OperatorConfig
from backscroll_operator.handlers import register

from .emulator import GROUP, PLURAL, VERSION, Cluster

NS = "default"
TOKEN = "bks_status_test"
PATHS = {
    "searchindexes": f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{PLURAL}",
    "deployments": f"/apis/apps/v1/namespaces/{NS}/deployments",
    "jobs": f"/apis/batch/v1/namespaces/{NS}/jobs",
    "services": f"/api/v1/namespaces/{NS}/services",
    "secrets": f"/api/v1/namespaces/{NS}/secrets",
    "events": f"/api/v1/namespaces/{NS}/events",
}


class Api:
    """The test's own kubectl: plain HTTP to the emulator."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.http = httpx.Client(base_url=cluster.url, timeout=10)

    def get(self, resource: str, name: str) -> dict | None:
        response = self.http.get(f"{PATHS[resource]}/{name}")
        return None if response.status_code == 404 else response.raise_for_status().json()

    def list(self, resource: str) -> list[dict]:
        return self.http.get(PATHS[resource]).raise_for_status().json().get("items") or []

    def names(self, resource: str) -> set[str]:
        return {i["metadata"]["name"] for i in self.list(resource)}

    def create(self, resource: str, body: dict) -> dict:
        return self.http.post(PATHS[resource], json=body).raise_for_status().json()

    def patch(self, resource: str, name: str, body: dict, subresource: str = "") -> dict:
        path = f"{PATHS[resource]}/{name}" + (f"/{subresource}" if subresource else "")
        return self.http.patch(path, json=body,
                               headers={"Content-Type": "application/merge-patch+json"}).raise_for_status().json()

    def delete(self, resource: str, name: str) -> None:
        self.http.delete(f"{PATHS[resource]}/{name}").raise_for_status()

    def secret(self, name: str, **data: str) -> None:
        self.create("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
                                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})

    # --- standing in for Kubernetes' controllers ---

    def complete_job(self, name: str) -> None:
        self.patch("jobs", name, {"status": {"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True"}]}}, subresource="status")

    def fail_job(self, name: str) -> None:
        self.patch("jobs", name, {"status": {"failed": 4, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}, subresource="status")

    def roll_out(self, name: str, available: int | None = None) -> None:
        deployment = self.get("deployments", name)
        replicas = deployment["spec"]["replicas"] if available is None else available
        self.patch("deployments", name, {"status": {
            "observedGeneration": deployment["metadata"].get("generation", 1), "replicas": replicas,
            "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}},
            subresource="status")

    def events(self, involving: str) -> list[dict]:
        return [e for e in self.list("events") if (e.get("involvedObject") or {}).get("name") == involving]

    def writes_to_children(self) -> list[tuple]:
        return [w for w in self.cluster.emulator.writes if w[1] in ("deployments", "jobs", "services")]


class StatusServer:
    """Stands in for the Backscroll API's GET /v1/status (a registered token required, as there)."""

    def __init__(self):
        self.reports: dict[str, dict] = {}   # SearchIndex name -> the JSON to answer
        self.seen_tokens: list[str] = []
        self.tokens: set[str] = {TOKEN}      # what the API would accept (a test adds registered ones)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                _, namespace, name, *rest = self.path.split("/")
                outer.seen_tokens.append(self.headers.get("Authorization", ""))
                if self.headers.get("Authorization") not in {f"Bearer {t}" for t in outer.tokens}:
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


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    with Cluster() as running:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
            "clusters": [{"name": "kmock", "cluster": {"server": running.url}}],
            "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "namespace": NS}}],
            "users": [{"name": "kmock", "user": {"token": "test"}}]}))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        yield running


@pytest.fixture
def api(cluster):
    client = Api(cluster)
    client.secret("db", uri="postgresql://backscroll@db/backscroll")
    client.secret("status-token", token=TOKEN)
    yield client
    client.http.close()


@pytest.fixture
def status_server():
    server = StatusServer()
    server.thread.start()
    yield server
    server.server.shutdown()


@pytest.fixture
def operator(cluster, status_server):
    """A function that runs the real operator (kopf, fresh registry) as a context manager."""
    defaults = dict(interval_s=0.3, retry_delay_s=0.5, status_timeout_s=2,
                    status_url=status_server.url + "/{namespace}/{name}/v1/status")

    @contextmanager
    def run(**settings_overrides):
        """`interval_s=600` proves a reaction comes from a watch, not from the resync."""
        config = OperatorConfig(**{**defaults, **settings_overrides})
        registry = kopf.OperatorRegistry()
        register(registry, config)
        settings = kopf.OperatorSettings()
        settings.watching.server_timeout = 10
        # kmock cannot parse /api/v1/namespaces (it reads "namespaces" as the start of a
        # namespaced path), and the namespace is given exactly: no need to discover namespaces.
        settings.scanning.disabled = True
        settings.queueing.idle_timeout = 0.5
        settings.queueing.exit_timeout = 1
        settings.posting.idle_timeout = 0.2
        runner = KopfRunner(["run", "--standalone", "--verbose", "--namespace", NS], registry=registry,
                            settings=settings, timeout=20)
        try:
            with runner:
                yield runner
        finally:
            if runner.future.done() and not runner.future.exception():
                print(runner.output[-20000:])  # shown by pytest when the test fails
        assert runner.exit_code == 0, runner.output
        assert runner.exception is None, runner.output

    return run


def eventually(check, timeout: float = 10.0, interval: float = 0.1):
    """The check's value once it is truthy, or AssertionError with its last value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (AssertionError, KeyError, TypeError, StopIteration) as exc:
            value = exc
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout} s; last: {value!r}")
        time.sleep(interval)


@pytest.fixture
def kubectl(cluster, tmp_path):
    """The real kubectl against the emulator: `kubectl("get", "sidx")` returns stdout and raises
    with stdout and stderr on failure; `kubectl.json("get", "sidx", "x")`, `kubectl.run(...)`."""
    from .kubectl import Kubectl

    return Kubectl(tmp_path / "kubeconfig", tmp_path / "kubectl-cache")
