"""Routes of the sidebar: the page itself (public, it carries no data) and the transcript endpoint
(a reader's, authenticated like every other endpoint).

The page, its script and its stylesheet are fixed files read once at import. Everything a person
sees comes from the authenticated API, fetched by the script with the token the person typed in.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from ..access.auth import TokenKind
from ..api.deps import AuthenticatedRoute, Id, Svc, bearer, requires
from ..errors import NotFound
from ..search import sessions
from . import transcript

# No inline script, no eval, nothing from elsewhere: a title or message body that got past the
# page's textContent rendering as markup still could not run. connect-src 'self' keeps the token
# from being sent anywhere but this API; form-action 'none' keeps the sign-in form from ever
# submitting itself (a GET form would put the token in a URL) if the script did not run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    # The page is tiny and changes with every release; a stale script against a newer API is worse.
    "cache-control": "no-cache",
}

_STATIC = resources.files(__package__) / "static"
ASSETS = {
    "app.js": ((_STATIC / "app.js").read_bytes(), "text/javascript; charset=utf-8"),
    "app.css": ((_STATIC / "app.css").read_bytes(), "text/css; charset=utf-8"),
}
INDEX = (_STATIC / "index.html").read_bytes()

# The page's routes are public: a browser opening a link has no way to send a bearer token.
page_router = APIRouter(include_in_schema=False)


def _page() -> Response:
    return Response(INDEX, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


@page_router.get("/")
def index() -> Response:
    return _page()


@page_router.get("/c/{conversation}")
def deep_link(conversation: str) -> Response:
    # Any value gets the same page: the script reads the id from the address and asks the API,
    # so what exists is never revealed here.
    return _page()


@page_router.get("/static/{name}")
def asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFound(f"no static file {name!r}")
    body, media_type = ASSETS[name]
    return Response(body, media_type=media_type, headers=PAGE_HEADERS)


api_router = APIRouter(route_class=AuthenticatedRoute, dependencies=[Depends(bearer)])


@api_router.get("/v1/agent-sessions/{session_id}/messages", tags=["sessions"],
                summary="A session's messages in order, if the reader may see the session")
@requires(TokenKind.reader)
def session_messages(
    request: Request,
    svc: Svc,
    session_id: Id,
    after: Annotated[str | None, Query(description="The `next` cursor of the previous page")] = None,
    limit: Annotated[int | None, Query(description=f"Page size; clamped to 1..{transcript.PAGE_MAX}")] = None,
):
    size = transcript.clamp(limit)
    with svc.read_session(request) as (conn, principal):
        scope = sessions.resolve_scope(conn, principal, None)
        sessions.get_one(conn, scope, session_id)  # 404 alike for missing and not the reader's
        return transcript.messages(conn, scope, svc.codec, session_id, after, size)
