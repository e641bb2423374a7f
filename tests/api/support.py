"""Helpers shared by the HTTP API tests: error shape, write detection, route enumeration."""

from __future__ import annotations

import re
from typing import Any, Iterator

import psycopg
from psycopg import sql
from starlette.routing import Route

from backscroll.app import create_app
from tests.world import settings_for

# Every table a write can touch. api_tokens is left out: authenticating stamps last_used_at.
WRITTEN_TABLES = ("workspaces", "agents", "connectors", "actors", "conversations", "messages", "message_search",
                  "message_source_evidence", "memories", "identity_links", "turns", "turn_evidence", "search_audit")

# Keys that would count what the narrowing hid (or what matched in total): never in a response.
COUNT_KEYS = re.compile(r"total|hidden|count|filtered|omitted|redacted", re.I)


def snapshot(conn: psycopg.Connection) -> dict[str, tuple[int, str]]:
    """Row count and a digest of every row of every written table: any insert, update or delete shows."""
    state = {}
    for table in WRITTEN_TABLES:
        row = conn.execute(
            sql.SQL("select count(*) as n, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as h"
                    " from {} t").format(sql.Identifier(table))
        ).fetchone()
        state[table] = (row["n"], row["h"])
    return state


def assert_error(response, status: int, code: str | None = None) -> dict:
    """The response is `{"error": {"code", "message"}}` with this status, and nothing else."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"], body
    assert isinstance(error.get("message"), str) and error["message"].strip(), body
    assert "Traceback" not in response.text and "psycopg" not in response.text, body
    if code is not None:
        assert error["code"] == code, body
    return error


def keys(obj: Any) -> Iterator[str]:
    """Every key of every object nested in a JSON value."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from keys(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from keys(value)


def assert_no_counts(body: Any) -> None:
    leaked = [k for k in keys(body) if COUNT_KEYS.search(k)]
    assert not leaked, f"a response counts something: {leaked} in {body}"


def _walk(routes, prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        if isinstance(route, Route):
            for method in route.methods or ():
                if method != "HEAD":
                    yield method, prefix + route.path
        elif hasattr(route, "original_router"):  # FastAPI >= 0.160 includes routers lazily
            context = getattr(route, "include_context", None)
            yield from _walk(route.original_router.routes, prefix + (getattr(context, "prefix", "") or ""))
        elif hasattr(route, "routes"):  # a Mount
            yield from _walk(route.routes, prefix + getattr(route, "path", ""))
        else:
            raise AssertionError(f"route enumeration does not know {type(route).__name__}; teach _walk")


def api_routes() -> list[tuple[str, str]]:
    """(method, path template) of every HTTP route the application serves, found by enumeration."""
    url = "postgresql://enumeration-only/none"
    app = create_app(settings_for(url), url)
    return sorted(set(_walk(app.routes)))


def fill(template: str, value: object) -> str:
    """A path template with every `{param}` replaced by `value`."""
    return re.sub(r"\{[^}]+\}", str(value), template)


def conversation_body(external_id: str, title: str = "", *, agent: str = "concierge", creator: str | None = "alice",
                      connector: tuple[str, str] = ("web", "demo"), **extra) -> dict:
    body: dict = {"agent": agent, "connector": {"type": connector[0], "name": connector[1]},
                  "external_id": external_id, "title": title}
    if creator is not None:
        body["creator"] = {"external_id": creator}
    body.update(extra)
    return body
