"""The operator's /metrics and /healthz: served by the real operator on the real control plane."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from backscroll_operator.main import settings
from backscroll_operator.metrics import Metrics

from .conftest import eventually, report
from .test_scenarios import MODEL, bring_up

NS = "default"  # the pure tests' namespace label


def scrape(replica) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} from the replica's /metrics."""
    text = httpx.get(f"{replica.url}/metrics", timeout=10).raise_for_status().text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, metric: str, /, **labels) -> float | None:
    return samples.get((metric, tuple(sorted(labels.items()))))


def total(samples: dict, metric: str, /, **labels) -> float:
    """The sum over every series of the metric with these labels (and any others)."""
    return sum(v for (name, have), v in samples.items() if name == metric and set(labels.items()) <= set(have))


def health(replica) -> int:
    return httpx.get(f"{replica.url}/healthz", timeout=10).status_code


def test_backfill_rate_and_eta_from_successive_readings():
    metrics = Metrics()
    status = {"mode": "hybrid", "rollout": {"phase": "Backfilling"},
              "models": [{"model": "m", "embedded": 100, "total": 1000, "coverage": 0.1}]}
    metrics.index(NS, "search", status, now=0.0)
    metrics.index(NS, "search", {**status, "models": [{"model": "m", "embedded": 300, "total": 1000,
                                                       "coverage": 0.3}]}, now=10.0)
    get = metrics.registry.get_sample_value
    labels = {"namespace": NS, "name": "search", "model": "m"}
    assert get("backscroll_searchindex_backfill_rate", labels) == 20.0
    assert get("backscroll_searchindex_backfill_eta_seconds", labels) == 35.0
    assert get("backscroll_searchindex_backfill_remaining", labels) == 700
    assert get("backscroll_searchindex_coverage_ratio", labels) == 0.3
    assert get("backscroll_searchindex_mode", {"namespace": NS, "name": "search", "mode": "hybrid"}) == 1
    assert get("backscroll_searchindex_mode", {"namespace": NS, "name": "search", "mode": "degraded"}) == 0
    assert get("backscroll_searchindex_rollout_phase",
               {"namespace": NS, "name": "search", "phase": "Backfilling"}) == 1
    # An unchanged reading keeps the rate; a model that is gone takes its series with it.
    metrics.index(NS, "search", {**status, "models": [{"model": "m", "embedded": 300, "total": 1000,
                                                       "coverage": 0.3}]}, now=11.0)
    assert get("backscroll_searchindex_backfill_rate", labels) == 20.0
    metrics.index(NS, "search", {**status, "models": []}, now=12.0)
    assert get("backscroll_searchindex_coverage_ratio", labels) is None
    metrics.forget(NS, "search")
    assert get("backscroll_searchindex_mode", {"namespace": NS, "name": "search", "mode": "hybrid"}) is None


def test_metrics_of_passes_and_indexes(api, operators, status_server):
    ns = api.ns
    replica = operators("replica-a", metrics_port=0, metrics_host="127.0.0.1")
    eventually(lambda: replica.passes.server is not None)
    bring_up(api, status_server)
    eventually(lambda: value(scrape(replica), "backscroll_searchindex_mode",
                             namespace=ns, name="search", mode="hybrid") == 1)
    samples = scrape(replica)
    assert value(samples, "backscroll_searchindex_mode", namespace=ns, name="search", mode="lexical") == 0
    assert value(samples, "backscroll_searchindex_coverage_ratio", namespace=ns, name="search", model=MODEL) == 1
    assert value(samples, "backscroll_operator_leader") == 1
    for trigger in ("change", "child"):
        assert total(samples, "backscroll_operator_reconcile_passes_total", trigger=trigger) > 0, trigger
    eventually(lambda: value(scrape(replica), "backscroll_operator_reconcile_passes_total",
                             trigger="resync", outcome="ok"))
    assert value(scrape(replica), "backscroll_operator_pass_duration_seconds_count", trigger="resync") > 0

    # A second model backfills: its rate comes from the embedded counts the API reports.
    status_server.reports["search"] = report("hybrid", MODEL, embedded=120, total=120)
    status_server.reports["search"]["models"].append(
        {"model": "next", "dimensions": 768, "current": False, "embedded": 10, "total": 1000,
         "coverage": 0.01, "backfill": {"state": "running"}})
    eventually(lambda: value(scrape(replica), "backscroll_searchindex_backfill_remaining",
                             namespace=ns, name="search", model="next") == 990)
    status_server.reports["search"]["models"][1].update(embedded=500, coverage=0.5)
    rate = eventually(lambda: value(scrape(replica), "backscroll_searchindex_backfill_rate",
                                    namespace=ns, name="search", model="next"))
    eta = value(scrape(replica), "backscroll_searchindex_backfill_eta_seconds",
                namespace=ns, name="search", model="next")
    assert rate > 0 and eta > 0


def test_liveness_fails_while_the_api_server_is_unreachable(operators, proxy):
    replica = operators("replica-a", metrics_port=0, metrics_host="127.0.0.1", liveness_stale_s=4,
                        leader_election=False)
    eventually(lambda: replica.passes.server is not None)
    eventually(lambda: health(replica) == 200)
    proxy.disconnect()  # the operator's connections to the API server drop, new ones are refused
    try:
        eventually(lambda: health(replica) == 503)
        body = httpx.get(f"{replica.url}/healthz", timeout=10).json()
        assert body["ok"] is False and body["boundSeconds"] == 4
        assert value(scrape(replica), "backscroll_operator_errors_total", where="resync") > 0
    finally:
        proxy.reconnect()
    eventually(lambda: health(replica) == 200)


def test_a_replica_that_loses_the_lease_drops_its_index_gauges():
    metrics = Metrics()
    metrics.index(NS, "a", {"mode": "lexical"})
    metrics.index(NS, "b", {"mode": "hybrid", "models": [{"model": "m", "embedded": 1, "total": 2, "coverage": 0.5}]})
    metrics.forget_all()
    names = {s.name for m in metrics.registry.collect() for s in m.samples}
    assert not {n for n in names if n.startswith("backscroll_searchindex_")}


def test_the_command_line_chooses_the_metrics_and_liveness_port(monkeypatch):
    monkeypatch.setenv("BACKSCROLL_OPERATOR_METRICS_PORT", "9100")
    _, config = settings([])
    assert (config.metrics_port, config.liveness_path) == (9100, "/healthz")
    _, config = settings(["--metrics", "http://127.0.0.1:9090"])
    assert (config.metrics_host, config.metrics_port) == ("127.0.0.1", 9090)
    _, config = settings(["--liveness", "http://0.0.0.0:8081/livez"])
    assert (config.metrics_port, config.liveness_path) == (8081, "/livez")
    with pytest.raises(SystemExit):
        settings(["--metrics", "http://0.0.0.0:9090", "--liveness", "http://0.0.0.0:8081/healthz"])
