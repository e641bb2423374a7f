"""Prometheus metrics of `backscroll worker`, served at GET /metrics by its health server (admin token).

A registry of its own (not prometheus_client's global one): the worker's series only, and a test
may build as many workers as it likes. Counters and the batch histogram are labelled by the model
the worker embeds with and move where the worker counts its `Stats`; the outbox gauges are set from
the worker's loop (one query, at most every `worker_metrics_refresh_s`), the loop's age is read at
scrape time.

- backscroll_worker_embedded_total{model}: messages embedded and stored;
- backscroll_worker_failed_total{model}: texts the embeddings server refused (an attempt spent);
- backscroll_worker_parked_total{model}: jobs parked after `worker_max_attempts` refusals;
- backscroll_worker_postponed_total{model}: jobs put back, the server unreachable (no attempt spent);
- backscroll_worker_reconnects_total{model}: reconnections after the database went away;
- backscroll_worker_batch_seconds{model}: duration of a batch that claimed jobs (claim, embed, store);
- backscroll_worker_outbox_jobs{model, state="pending|due|parked"}: the outbox (every worker of a
  database sees the same one);
- backscroll_worker_outbox_oldest_due_seconds{model}: how long the oldest job that is due and not
  parked has been queued (0: none is due), the worker's lag;
- backscroll_worker_loop_age_seconds: since the worker's loop last came round (GET /healthz fails
  past `worker_health_stale_s`).
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

OUTBOX_STATES = ("pending", "due", "parked")
# An embeddings request of a batch takes tens of milliseconds to seconds; a batch retried text by
# text, or waiting on a slow server, takes up to minutes.
BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class WorkerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, loop_age: Callable[[], float] | None = None):
        r = self.registry = CollectorRegistry()
        self.embedded = Counter("backscroll_worker_embedded_total", "Messages embedded and stored by the worker.",
                                ["model"], registry=r)
        self.failed = Counter("backscroll_worker_failed_total",
                              "Texts the embeddings server refused (each spends one attempt of its job).",
                              ["model"], registry=r)
        self.parked = Counter("backscroll_worker_parked_total",
                              "Outbox jobs parked after worker_max_attempts refusals.", ["model"], registry=r)
        self.postponed = Counter("backscroll_worker_postponed_total",
                                 "Outbox jobs put back while the embeddings server was unreachable.",
                                 ["model"], registry=r)
        self.reconnects = Counter("backscroll_worker_reconnects_total",
                                  "Reconnections to the database after it went away.", ["model"], registry=r)
        self.batch_seconds = Histogram("backscroll_worker_batch_seconds",
                                       "Duration of a batch that claimed jobs: claim, embed, store.",
                                       ["model"], buckets=BATCH_BUCKETS, registry=r)
        self.outbox_jobs = Gauge("backscroll_worker_outbox_jobs",
                                 "Outbox jobs: pending (not parked), due (pending and due now), parked.",
                                 ["model", "state"], registry=r)
        self.outbox_oldest_due_seconds = Gauge(
            "backscroll_worker_outbox_oldest_due_seconds",
            "How long the oldest due, unparked outbox job has been queued (0: none is due): the worker's lag.",
            ["model"], registry=r)
        self.loop_age_seconds = Gauge("backscroll_worker_loop_age_seconds",
                                      "Seconds since the worker's loop last came round.", registry=r)
        if loop_age is not None:
            self.loop_age_seconds.set_function(loop_age)

    def start(self, model: str) -> None:
        """Every series of `model` at 0, so that rate() sees the first increment."""
        for counter in (self.embedded, self.failed, self.parked, self.postponed, self.reconnects):
            counter.labels(model=model)
        self.batch_seconds.labels(model=model)

    def outbox(self, model: str, queue: dict) -> None:
        for state in OUTBOX_STATES:
            self.outbox_jobs.labels(model=model, state=state).set(queue[state])
        self.outbox_oldest_due_seconds.labels(model=model).set(queue["oldest_due_s"])

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict | None = None) -> float | None:
        """One sample's value (None when absent), for tests and the command line."""
        return self.registry.get_sample_value(name, labels or {})
