"""Every failure answers as JSON `{"error": {"code", "message"}}`; nothing leaks a stack trace."""

from __future__ import annotations

import logging

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import BackscrollError, Busy

log = logging.getLogger("backscroll.api")


def error_response(status: int, code: str, message: str, **extra) -> JSONResponse:
    body = {"error": {"code": code, "message": message, **extra}}
    headers = {"cache-control": "no-store"}
    if status == 401:
        headers["www-authenticate"] = 'Bearer realm="backscroll"'  # RFC 6750
    return JSONResponse(body, status_code=status, headers=headers)


def _describe(errors: list[dict]) -> tuple[str, list[dict]]:
    details = []
    for err in errors:
        if err.get("type") == "json_invalid":
            # Its loc is ("body", character offset): say where, not a field named after a number.
            where = err.get("loc", ("body", "?"))[-1]
            reason = (err.get("ctx") or {}).get("error", "JSON decode error")
            details.append({"field": "body", "problem": f"{reason} at character {where}"})
            continue
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
        # Never echo the input back: it may be 10 KB, or a secret pasted by mistake.
        details.append({"field": ".".join(loc) or "body", "problem": err.get("msg", "invalid")})
    if any(err.get("type") == "json_invalid" for err in errors):
        return "the request body is not valid JSON", details
    first = details[0] if details else {"field": "request", "problem": "invalid"}
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return f"{first['field']}: {first['problem']}{more}", details


def install(app: FastAPI) -> None:
    @app.exception_handler(BackscrollError)
    async def _backscroll(_: Request, exc: BackscrollError):
        return error_response(exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError):
        message, details = _describe(exc.errors())
        return error_response(400, "invalid_request", message, details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(psycopg.errors.QueryCanceled)
    async def _timeout(_: Request, exc: Exception):
        return error_response(503, "query_timeout", "the query took too long and was cancelled; narrow it and retry")

    @app.exception_handler(PoolTimeout)
    async def _busy(_: Request, exc: Exception):
        return error_response(Busy.status, Busy.code, "no database connection was free in time; retry shortly")

    @app.exception_handler(psycopg.OperationalError)
    async def _db_down(_: Request, exc: Exception):
        log.error("database unavailable: %s", type(exc).__name__)
        return error_response(503, "database_unavailable", "the database is unavailable; retry shortly")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "an unexpected error occurred; it has been logged")
