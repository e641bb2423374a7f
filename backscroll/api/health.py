"""Probes for Kubernetes: `GET /healthz` (liveness) and `GET /readyz` (readiness).

Both are public, because a kubelet sends no token, and so both answer a fixed body that depends
on nothing but the verdict: no version, no counts, no error text (tests/api/test_auth.py holds
them to that). Liveness never touches the database: a database outage must take pods out of the
Service, not restart every API pod in a loop.
"""

from __future__ import annotations

from functools import lru_cache

import psycopg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ..store.migrate import applied_versions, load_migrations

# A readiness check that waits longer than the kubelet's probe timeout (1 s by default) reads as
# a failure anyway; waiting less frees the thread sooner when the pool is exhausted.
POOL_WAIT_S = 1.0

router = APIRouter(include_in_schema=False)

OK = {"status": "ok"}
UNAVAILABLE = {"status": "unavailable"}


@lru_cache(maxsize=1)
def required_versions() -> frozenset[int]:
    """The migrations this build ships: a pod is ready only on a schema that has all of them, so a
    new image rolled out before its migration Job finished gets no traffic."""
    return frozenset(m.version for m in load_migrations())


def _ready(request: Request) -> bool:
    try:
        with request.app.state.service.pool.connection(timeout=POOL_WAIT_S) as conn:
            return required_versions() <= set(applied_versions(conn))
    except psycopg.Error:  # PoolTimeout and PoolClosed are psycopg errors too
        return False


@router.get("/healthz")
def healthz() -> JSONResponse:
    return JSONResponse(OK)


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    return JSONResponse(OK) if _ready(request) else JSONResponse(UNAVAILABLE, status_code=503)
