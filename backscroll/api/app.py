"""The FastAPI application."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from prometheus_client import Counter, Histogram

from .. import __version__
from ..config import Settings
from ..db import make_pool
from . import errors
from .routes import router
from .service import Service

MAX_REQUEST_BYTES = 8 * 1024 * 1024

REQUESTS = Counter("backscroll_http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram(
    "backscroll_http_request_duration_seconds", "HTTP request latency", ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


def create_app(settings: Settings, database_url: str) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool = make_pool(database_url, settings)
        app.state.service = Service(settings, pool)
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(
        title="Backscroll",
        version=__version__,
        summary="Authorized search over the history of conversations between people and AI agents.",
        lifespan=lifespan,
        # Every endpoint authenticates, the schema included: it is served at /v1/openapi.json.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    errors.install(app)
    app.include_router(router)

    @app.middleware("http")
    async def guard_and_measure(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_REQUEST_BYTES):
            return errors.error_response(413, "too_large", f"request bodies are limited to {MAX_REQUEST_BYTES} bytes")
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        template = getattr(route, "path", "unmatched")
        LATENCY.labels(request.method, template).observe(time.perf_counter() - started)
        REQUESTS.labels(request.method, template, str(response.status_code)).inc()
        return response

    return app
