"""The OpenAPI document, made to say what the API answers (issue 20: a generated client broke on it).

FastAPI documents a 422 for every route with parameters or a body, where Backscroll answers 400
(api/errors.py), and nothing of the errors every authenticated route may answer. `document`
takes FastAPI's document and, for each operation: drops 422; declares the errors the route can
answer, each with the error body's schema (400 for a route that reads parameters or a body, 401
and 403 for every authenticated one, 404 for one that names or refers to stored things, 409 where
a write can conflict with what is stored, 413 for a body, 503 for every one); and the successes
FastAPI cannot see (200 for an idempotent create that found its resource; text for /metrics).
tests/api/test_openapi_conformance.py holds the API to it with schemathesis.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .. import __version__
from ..access.auth import TokenKind
from ..vocabulary import MAX_REQUEST_BYTES

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "description": "A stable machine-readable name: `invalid_request`, "
                                                      "`unauthenticated`, `forbidden`, `not_found`, ..."},
            "message": {"type": "string", "description": "What went wrong, for a person; never echoes the input."},
            "details": {"type": "array", "description": "For a 400: each field and its problem.",
                        "items": {"type": "object", "properties": {"field": {"type": "string"},
                                                                   "problem": {"type": "string"}}}},
        },
    }},
}
ERROR_REF = {"$ref": "#/components/schemas/Error"}
MEANING = {
    "400": "Bad input (a parameter, id, cursor or body that is not one, or text over its limit: "
           "`body_too_long`); nothing changed",
    "401": "No valid token (missing, malformed, unknown or revoked)",
    "403": "This kind of token may not use this route (or this one needs an installation-wide admin token "
           "and the caller's is scoped to a workspace)",
    "404": "No such thing, or not the caller's to see",
    "409": "Conflicts with what is stored (a finished message, a turn that has its reply, a workspace's slug "
           "taken, a retired workspace)",
    "413": f"The body is over the limit ({MAX_REQUEST_BYTES // 2**20} MiB)",
    "503": "The database is unavailable, a query ran past its time limit, no connection was free or too "
           "many bodies were being read (`busy`), or concurrent writes rolled the request back more times "
           "than it retries",
}
# Writes that can meet what is stored and refuse (errors.Conflict).
CONFLICTS = {
    ("post", "/v1/conversations/{conversation_id}/messages"),
    ("patch", "/v1/messages/{message_id}"),
    ("post", "/v1/turns/{turn_id}/reply"),
    ("post", "/v1/admin/workspaces"),
    ("post", "/v1/admin/tokens"),
}
# Creates that answer 200 when the resource was there already (an idempotent retry).
FOUND = {
    ("post", "/v1/conversations"): "The conversation existed (same connector and external id): updated",
    ("post", "/v1/conversations/{conversation_id}/messages"): "The message existed (same external id): "
                                                             "replayed or updated",
}
# Routes whose success is not JSON.
TEXT = {("get", "/metrics"): "text/plain"}
# Routes that read no stored thing by a name the caller gives.
NO_LOOKUP = {("get", "/v1/agent-sessions"), ("get", "/v1/whoami"), ("get", "/v1/status"), ("get", "/metrics"),
             ("post", "/v1/admin/workspaces")}


def _error(status: str) -> dict:
    return {"description": MEANING[status], "content": {"application/json": {"schema": ERROR_REF}}}


def _responses(method: str, path: str, op: dict, any_kind: bool) -> dict:
    responses = {k: v for k, v in op.get("responses", {}).items() if k != "422"}
    key = (method, path)
    if key in FOUND:
        responses["200"] = {"description": FOUND[key], "content": {"application/json": {"schema": {}}}}
    if key in TEXT:
        ok = responses.get("200", {"description": "Successful Response"})
        responses["200"] = {**ok, "content": {TEXT[key]: {"schema": {"type": "string"}}}}
    reads = bool(op.get("parameters")) or "requestBody" in op
    wanted = ["401", "503"] if any_kind else ["401", "403", "503"]
    if reads:
        wanted.append("400")
    if key not in NO_LOOKUP and (any(p.get("in") == "path" for p in op.get("parameters", [])) or "requestBody" in op):
        wanted.append("404")
    if key in CONFLICTS:
        wanted.append("409")
    if "requestBody" in op:
        wanted.append("413")
    for status in sorted(wanted):
        responses[status] = _error(status)
    return dict(sorted(responses.items()))


def _routes(routes):
    """Every route, through included routers (FastAPI includes them lazily) and mounts."""
    for route in routes:
        if hasattr(route, "original_router"):
            yield from _routes(route.original_router.routes)
        elif hasattr(route, "path") and hasattr(route, "methods"):
            yield route
        elif hasattr(route, "routes"):
            yield from _routes(route.routes)


def document(app: FastAPI) -> dict:
    """The application's OpenAPI document (see the module), made once."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=__version__, summary=app.summary, routes=app.routes)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Error"] = ERROR
    # A route every kind of token may use (deps.requires) never answers 403. No route is open to
    # all today: a status token may use /v1/status alone.
    open_to_all = {(m.lower(), r.path) for r in _routes(app.routes) for m in getattr(r, "methods", None) or ()
                   if set(getattr(r, "token_kinds", ())) == set(TokenKind)}
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            op["responses"] = _responses(method, path, op, (method, path) in open_to_all)
    app.openapi_schema = doc
    return doc
