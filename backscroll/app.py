"""The FastAPI application."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from prometheus_client import Counter, Histogram
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from . import __version__
from .api import errors, openapi
from .api import admin_routes, health, history_routes
from .api.routes import router
from .api.service import Service
from .config import Settings
from .search.maintenance import Maintenance
from .store.db import make_pool
from .vocabulary import MAX_REQUEST_BYTES
from .web import routes as web_routes

REQUESTS = Counter("backscroll_http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram(
    "backscroll_http_request_duration_seconds", "HTTP request latency", ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


def protect(response: Response) -> None:
    """Headers every answer carries: nothing is stored by a cache on the way (a transcript or a
    search names people and what they said), unless a route chose otherwise, and no browser
    guesses a content type other than the one declared."""
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers["X-Content-Type-Options"] = "nosniff"


class BodyLimit:
    """Refuses request bodies over `limit` bytes: by Content-Length before reading anything, and by
    counting what arrives, since a chunked request declares no length at all."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    def _error(self) -> HTTPException:
        return HTTPException(413, f"request bodies are limited to {self.limit} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                response = errors.error_response(413, "too_large", self._error().detail)
                await response(scope, receive, send)
                return
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # FastAPI re-raises an HTTPException met while reading the body; the
                    # exception handlers answer it as JSON.
                    raise self._error()
            return message

        await self.app(scope, counted, send)


def create_app(settings: Settings, database_url: str) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool = make_pool(database_url, settings.database)
        read_pool = None
        upkeep = Maintenance(database_url, settings.search, settings.language).start()
        try:
            if settings.database.database_read_url is not None:
                read_pool = make_pool(settings.database.database_read_url.get_secret_value(), settings.database,
                                      name="backscroll-read")
            app.state.service = Service(settings, pool, read_pool)
            yield
        finally:
            upkeep.close()
            if read_pool is not None:
                read_pool.close()
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
    app.openapi = lambda: openapi.document(app)
    app.include_router(router)
    app.include_router(history_routes.router)
    app.include_router(admin_routes.router)
    # The sidebar: its page (public, no data) and the transcript endpoint it reads (a reader's).
    app.include_router(web_routes.api_router)
    app.include_router(web_routes.page_router)
    # Kubernetes' probes: public, fixed bodies (see health.py).
    app.include_router(health.router)
    app.add_middleware(BodyLimit, limit=MAX_REQUEST_BYTES)

    @app.middleware("http")  # added last, so it is outermost and sees every answer
    async def every_answer(request: Request, call_next):
        started = time.perf_counter()
        response = await call_next(request)
        protect(response)
        route = request.scope.get("route")
        template = getattr(route, "path", "unmatched")
        LATENCY.labels(request.method, template).observe(time.perf_counter() - started)
        REQUESTS.labels(request.method, template, str(response.status_code)).inc()
        return response

    return app


def worker_app() -> FastAPI:
    """One process of `backscroll serve --workers N` (uvicorn's factory): the settings and the
    database URL from the environment, which the parent set."""
    from .config import get_settings
    from .store.db import database_url

    settings = get_settings()
    return create_app(settings, database_url(settings.database))
