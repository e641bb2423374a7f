"""The operator's Prometheus metrics and its health: one small HTTP server for both.

Each operator (`handlers.register`) has its own registry, so that two operators in one process
(the HA tests) do not share counters. Per SearchIndex gauges are set from the status a pass
publishes: mode and rollout phase one-hot, coverage per model, and a backfill rate derived from
successive readings of a model's embedded count (delta / elapsed), with an ETA of what is left
at that rate.

`/healthz` answers 503 when the operator has not listed SearchIndexes successfully for longer
than its bound: kopf's own liveness endpoint answers 200 while its watches fail. `/readyz` also
answers 503 until the first successful list: during a rolling update (`maxUnavailable: 0`) the old
replica is only stopped once the new one has reached the API server with its credentials.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

MODES = ("lexical", "hybrid", "degraded", "hibernated")
PHASES = ("Lexical", "Migrating", "Backfilling", "CatchingUp", "Switching", "Complete")

log = logging.getLogger(__name__)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.passes = Counter("backscroll_operator_reconcile_passes", "Reconcile passes, by trigger and outcome",
                              ["trigger", "outcome"], registry=r)
        self.errors = Counter("backscroll_operator_errors", "Errors talking to Kubernetes or an API, by where",
                              ["where"], registry=r)
        self.duration = Histogram("backscroll_operator_pass_duration_seconds", "Duration of a reconcile pass",
                                  ["trigger"], registry=r,
                                  buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.leader = Gauge("backscroll_operator_leader", "1 while this replica holds the leader Lease",
                            registry=r)
        self.last_list = Gauge("backscroll_operator_last_successful_list_timestamp_seconds",
                               "When the resync last listed SearchIndexes successfully", registry=r)
        labels = ["namespace", "name"]
        self.mode = Gauge("backscroll_searchindex_mode", "The index's search mode (one-hot)", labels + ["mode"],
                          registry=r)
        self.phase = Gauge("backscroll_searchindex_rollout_phase", "The index's model rollout phase (one-hot)",
                           labels + ["phase"], registry=r)
        self.coverage = Gauge("backscroll_searchindex_coverage_ratio", "Share of messages embedded, per model",
                              labels + ["model"], registry=r)
        self.remaining = Gauge("backscroll_searchindex_backfill_remaining", "Messages not embedded yet, per model",
                               labels + ["model"], registry=r)
        self.rate = Gauge("backscroll_searchindex_backfill_rate", "Messages embedded per second, per model "
                          "(from successive coverage readings)", labels + ["model"], registry=r)
        self.eta = Gauge("backscroll_searchindex_backfill_eta_seconds", "Seconds until the backfill finishes "
                         "at the current rate, per model (absent while the rate is 0)", labels + ["model"], registry=r)
        # One series per condition type, its reason a label (the PrometheusRule's alerts select on
        # both: Ready not True, MigrationsApplied with reason MigrationFailed).
        self.condition = Gauge("backscroll_searchindex_condition", "1 while the condition's status is True, "
                               "else 0; reason says why", labels + ["type", "reason"], registry=r)
        self._reasons: dict[tuple[str, str, str], str] = {}
        self._readings: dict[tuple[str, str, str], tuple[float, int]] = {}
        self._models: dict[tuple[str, str], set[str]] = {}
        self._guard = threading.Lock()
        self._last_ok = time.monotonic()  # the bound starts at startup: a slow first list is not dead
        self._listed_once = False

    # --- recording -------------------------------------------------------------------------------

    def pass_done(self, trigger: str, outcome: str, seconds: float) -> None:
        self.passes.labels(trigger, outcome).inc()
        self.duration.labels(trigger).observe(seconds)

    def listed(self) -> None:
        """The resync listed SearchIndexes: the operator can reach and read the API server."""
        self._last_ok = time.monotonic()
        self._listed_once = True
        self.last_list.set_to_current_time()

    def index(self, namespace: str, name: str, status: dict, now: float | None = None) -> None:
        """Per index gauges from the status a pass published (merged over the old one)."""
        now = time.monotonic() if now is None else now
        mode = status.get("mode")
        for m in MODES:
            self.mode.labels(namespace, name, m).set(1 if m == mode else 0)
        phase = (status.get("rollout") or {}).get("phase")
        for p in PHASES:
            self.phase.labels(namespace, name, p).set(1 if p == phase else 0)
        for condition in status.get("conditions") or []:
            key, reason = (namespace, name, condition["type"]), condition.get("reason") or ""
            before = self._reasons.get(key)
            if before is not None and before != reason:
                self._drop(self.condition, (*key, before))
            self._reasons[key] = reason
            self.condition.labels(*key, reason).set(1 if condition.get("status") == "True" else 0)
        with self._guard:
            seen = set()
            for entry in status.get("models") or []:
                model, embedded, total = entry.get("model"), entry.get("embedded"), entry.get("total")
                if not model or embedded is None or total is None:
                    continue
                seen.add(model)
                if entry.get("coverage") is not None:
                    self.coverage.labels(namespace, name, model).set(entry["coverage"])
                left = max(total - embedded, 0)
                self.remaining.labels(namespace, name, model).set(left)
                key = (namespace, name, model)
                before = self._readings.get(key)
                if before is None or embedded < before[1]:
                    self._readings[key] = (now, embedded)  # a first reading, or a reset (a purge)
                    if left == 0:
                        self.rate.labels(*key).set(0)
                        self.eta.labels(*key).set(0)
                    continue
                elapsed = now - before[0]
                if embedded == before[1] and left > 0 and elapsed < 300:
                    continue  # no news yet: keep the last rate until a reading moves (or it stalls)
                rate = (embedded - before[1]) / elapsed if elapsed > 0 else 0.0
                self._readings[key] = (now, embedded)
                self.rate.labels(*key).set(rate)
                if left == 0:
                    self.eta.labels(*key).set(0)
                elif rate > 0:
                    self.eta.labels(*key).set(left / rate)
                else:
                    self._drop(self.eta, key)
            for model in self._models.get((namespace, name), set()) - seen:
                self._forget_model(namespace, name, model)
            self._models[namespace, name] = seen

    def forget(self, namespace: str, name: str) -> None:
        """The index is gone: its series go too."""
        with self._guard:
            for model in self._models.pop((namespace, name), set()):
                self._forget_model(namespace, name, model)
            for m in MODES:
                self._drop(self.mode, (namespace, name, m))
            for p in PHASES:
                self._drop(self.phase, (namespace, name, p))
            for key in [k for k in self._reasons if k[:2] == (namespace, name)]:
                self._drop(self.condition, (*key, self._reasons.pop(key)))

    def forget_all(self) -> None:
        """Leadership lost: the new leader publishes the indexes' gauges, this replica none."""
        with self._guard:
            indexes = list(self._models)
        for namespace, name in indexes:
            self.forget(namespace, name)

    def _forget_model(self, namespace: str, name: str, model: str) -> None:
        key = (namespace, name, model)
        self._readings.pop(key, None)
        for gauge in (self.coverage, self.remaining, self.rate, self.eta):
            self._drop(gauge, key)

    @staticmethod
    def _drop(gauge: Gauge, key: tuple) -> None:
        try:
            gauge.remove(*key)
        except KeyError:
            pass

    # --- health ----------------------------------------------------------------------------------

    def health(self, stale_s: float) -> tuple[bool, dict]:
        age = time.monotonic() - self._last_ok
        ok = age <= stale_s
        return ok, {"ok": ok, "lastSuccessfulListAgeSeconds": round(age, 3), "boundSeconds": stale_s}

    def readiness(self, stale_s: float) -> tuple[bool, dict]:
        """Healthy, and has listed SearchIndexes at least once (a follower is ready too: it
        watches and can take the Lease over)."""
        ok, report = self.health(stale_s)
        if not self._listed_once:
            report = {**report, "ok": False, "lastSuccessfulListAgeSeconds": None,
                      "reason": "SearchIndexes not listed yet"}
        return ok and self._listed_once, report


class Server:
    """`/metrics` (Prometheus text), `/healthz` and `/readyz` on one port, in a daemon thread."""

    def __init__(self, metrics: Metrics, host: str, port: int, stale_s: float,
                 health_path: str = "/healthz", metrics_path: str = "/metrics", ready_path: str = "/readyz"):
        outer = self
        self.metrics, self.stale_s = metrics, stale_s
        self.health_path, self.metrics_path, self.ready_path = health_path, metrics_path, ready_path

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                path = self.path.split("?")[0]
                if path == outer.metrics_path:
                    return self._send(200, generate_latest(outer.metrics.registry), CONTENT_TYPE_LATEST)
                if path == outer.health_path:
                    ok, report = outer.metrics.health(outer.stale_s)
                    return self._send(200 if ok else 503, json.dumps(report).encode(), "application/json")
                if path == outer.ready_path:
                    ok, report = outer.metrics.readiness(outer.stale_s)
                    return self._send(200 if ok else 503, json.dumps(report).encode(), "application/json")
                return self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, data: bytes, content_type: str):
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)

    def start(self) -> Server:
        self.thread.start()
        log.info("serving /metrics and %s on port %d", self.health_path, self.port)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
