"""The request plumbing every router shares (the API's and the sidebar's): the authenticating
route class, the bearer scheme, the id path parameter and the service dependency."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Annotated

import psycopg
from prometheus_client import Counter

from fastapi import Depends, Path, Request, Response
from pydantic import BeforeValidator
from fastapi.responses import JSONResponse
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from ..vocabulary import MAX_ID
from ..access.auth import TokenKind
from ..errors import Busy, RetriesExhausted
from .service import Service, held, service


# What PostgreSQL rolls a whole transaction back for when concurrent writes meet (SQLSTATE class 40).
ROLLED_BACK = (psycopg.errors.TransactionRollback, psycopg.errors.SerializationFailure,
               psycopg.errors.DeadlockDetected)
RETRY_BACKOFF_S = 0.01  # before the first retry; doubled each time, jittered
RETRIED = Counter("backscroll_http_request_retries_total",
                  "Requests run again after a deadlock or serialization failure rolled them back")


def requires(*kinds: TokenKind, installation: bool = False):
    """The token kinds a route answers (`@requires(TokenKind.ingest)` under its `@router` line):
    checked as soon as the caller is known, before the body or the parameters are validated, so
    a wrong-kind token learns nothing of them (403, not 400). `installation=True`: an admin token
    must be installation-wide (no workspace); a workspace-scoped admin is answered 403 as early."""
    if not kinds:
        raise TypeError("requires() needs at least one token kind")

    def declare(endpoint):
        endpoint.token_kinds = kinds
        endpoint.installation_only = installation
        return endpoint

    return declare


def _carries_body(request: Request) -> bool:
    """Whether a body follows the headers (HTTP/1.1 framing: a length other than 0, or a transfer
    coding). One that does not is read at once, with nothing to wait for."""
    headers = request.headers
    return "transfer-encoding" in headers or headers.get("content-length", "0") != "0"


async def _read_body(svc: Service, request: Request) -> None:
    """Read the body, kept by the request for the handler, as one of at most
    `request_body_reads_max` at once: each may hold MAX_REQUEST_BYTES, and a slow client holds
    its slot until it is done."""
    if svc.body_reads.locked():
        # Refused at once rather than queued: a queue behind slow uploads has no bound on its
        # wait, and a client or load balancer retrying (elsewhere) is served sooner.
        raise Busy(f"{svc.settings.api.request_body_reads_max} request bodies are being read already; retry shortly")
    async with svc.body_reads:
        await request.body()


async def _release(svc: Service, request: Request) -> None:
    if svc.settled(request):
        svc.end(request)  # nothing to commit: handing the connection back is no I/O
    else:
        await run_in_threadpool(svc.end, request)


class AuthenticatedRoute(APIRoute):
    """A route that authenticates the caller, and checks the token's kind (`requires`), from the
    headers, before a byte of the body is read and before FastAPI validates the body or the
    parameters.

    Without this an unauthenticated caller would have its body buffered (up to app.BodyLimit's
    bound) before it was asked for a token, and a 400 would name the fields a body lacks (the
    schema, piece by piece) or tell which ids are well-formed. The connection the caller is
    authenticated on is the request's (Service.begin; Service.session works on it); when a body
    follows, it goes back while the body arrives, so a slow upload holds no connection, and the
    work takes one afterwards for the caller already authenticated (Service.resume). At most
    `request_body_reads_max` bodies are read at once (503 `busy` beyond). A route that declares no
    kinds is refused when the application is built: no route answers every kind by omission.
    """

    def __init__(self, path: str, endpoint, **kwargs):
        kinds = getattr(endpoint, "token_kinds", None)
        if not kinds:
            raise TypeError(f"route {path} declares no token kinds: add @requires(...) under its @router line")
        self.token_kinds: tuple[TokenKind, ...] = kinds
        self.installation_only: bool = getattr(endpoint, "installation_only", False)
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self):
        handle = super().get_route_handler()
        kinds = self.token_kinds
        installation = self.installation_only

        async def authenticated(request: Request) -> Response:
            svc = service(request)
            await run_in_threadpool(svc.begin, request)
            try:
                principal = held(request).principal.require(*kinds, installation=installation)
                if _carries_body(request):
                    await _release(svc, request)
                    await _read_body(svc, request)
                    await run_in_threadpool(svc.resume, request, principal)
                for attempt in itertools.count():
                    try:
                        return await handle(request)
                    except ROLLED_BACK:
                        # A deadlock or serialization failure rolled the whole transaction back
                        # (session() saw to it): nothing of this attempt stands, so it runs again.
                        if attempt >= svc.settings.api.request_retries:
                            raise RetriesExhausted(attempt + 1) from None
                        RETRIED.inc()
                        await asyncio.sleep(random.uniform(0.5, 1.5) * RETRY_BACKOFF_S * 2 ** attempt)
            finally:
                await _release(svc, request)

        return authenticated


# Declares the scheme in OpenAPI; authentication itself happens in AuthenticatedRoute (Service.begin).
bearer = HTTPBearer(auto_error=False, description="A Backscroll token: `Authorization: Bearer bks_...`")


def _digits(value: object) -> object:
    """An id in a path is digits and nothing else: `1%20` (`1 `), `+1` or `1_0` would otherwise be
    read as a nearby number and act on its row."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("an id is digits only")
    return value


Id = Annotated[int, Path(ge=1, le=MAX_ID), BeforeValidator(_digits)]
Svc = Annotated[Service, Depends(service)]


def answer(content: dict) -> JSONResponse:
    """A search's answer, sent as it is: its values are JSON's own (ids, text, numbers, ISO
    times), so FastAPI's generic encoder, which walks every value of a page in Python (0.3-0.6
    ms a page of sessions), has nothing to do. The route's declared responses are unchanged."""
    return JSONResponse(content)
