"""Every endpoint authenticates, before it looks at the request, and each accepts only its kinds of token.

The routes are enumerated from the application, so a route added later is covered here without
anyone remembering to: it must also be declared in ALLOWED (with a valid sample request), or
`test_every_route_is_declared` fails.
"""

from __future__ import annotations

import pytest

from backscroll.access.auth import TokenKind, digest, revoke_token
from tests.api.support import api_routes, assert_error, conversation_body, fill, snapshot
from tests.world import bearer, client

# workspace_admin: an admin token scoped to one workspace (acme, the fixture's): the admin routes of
# its own workspace, never the installation's (metrics, status, workspaces created or retired).
KINDS = ("reader", "runtime", "ingest", "admin", "workspace_admin", "status")
# Every kind but status, which reads /v1/status and nothing else (not even whoami).
EVERYONE = frozenset(KINDS) - {"status"}
ADMINS = frozenset({"admin", "workspace_admin"})
# The sidebar's page, script and stylesheet: fixed files a browser opens from a link, which cannot
# carry a bearer token. They hold no data (the page fetches everything with the reader's token);
# test_public_routes_are_fixed_files_that_hold_no_data holds them to that.
PUBLIC = frozenset({"public"})
# Kubernetes' liveness and readiness probes: a kubelet sends no token. Their bodies are fixed
# (test_probes_are_public_and_hold_no_data); tests/api/test_health.py covers when they fail.
PROBE = frozenset({"probe"})

ALLOWED: dict[tuple[str, str], frozenset[str]] = {
    ("GET", "/v1/agent-sessions"): frozenset({"reader"}),
    ("GET", "/v1/agent-sessions/{session_id}"): frozenset({"reader"}),
    ("POST", "/v1/conversations"): frozenset({"ingest"}),
    ("POST", "/v1/conversations/{conversation_id}/messages"): frozenset({"ingest"}),
    ("POST", "/v1/import"): frozenset({"ingest"}),
    ("PATCH", "/v1/messages/{message_id}"): frozenset({"ingest"}),
    ("DELETE", "/v1/messages/{message_id}"): frozenset({"ingest"}),
    ("DELETE", "/v1/conversations/{conversation_id}"): frozenset({"ingest"}),
    ("GET", "/v1/whoami"): EVERYONE,
    ("GET", "/v1/status"): frozenset({"admin", "status"}),
    ("GET", "/v1/openapi.json"): EVERYONE,
    ("GET", "/metrics"): frozenset({"admin"}),
    ("POST", "/v1/memories"): frozenset({"ingest"}),
    ("POST", "/v1/identity-links"): frozenset({"ingest"}),
    ("POST", "/v1/identity-links/{link_id}/revoke"): frozenset({"ingest"}),
    ("POST", "/v1/identity-links/{link_id}/verify"): frozenset({"ingest"}),
    ("PUT", "/v1/conversations/{conversation_id}/readers"): frozenset({"ingest"}),
    ("POST", "/v1/turns"): frozenset({"runtime"}),
    ("POST", "/v1/tools/search_history"): frozenset({"runtime"}),
    ("POST", "/v1/turns/{turn_id}/reply"): frozenset({"runtime"}),
    ("POST", "/v1/turns/{turn_id}/memories"): frozenset({"runtime"}),
    ("POST", "/v1/turns/{turn_id}/recheck"): frozenset({"runtime"}),
    ("GET", "/v1/turns/{turn_id}/trace"): frozenset({"runtime"}) | ADMINS,
    ("GET", "/v1/agent-sessions/{session_id}/messages"): frozenset({"reader"}),
    ("GET", "/"): PUBLIC,
    ("GET", "/c/{conversation}"): PUBLIC,
    ("GET", "/static/{name}"): PUBLIC,
    ("GET", "/v1/workspaces/{slug}/search-settings"): ADMINS,
    ("PUT", "/v1/workspaces/{slug}/search-settings"): ADMINS,
    ("POST", "/v1/admin/workspaces"): frozenset({"admin"}),
    ("GET", "/v1/admin/workspaces"): ADMINS,
    ("GET", "/v1/admin/workspaces/{slug}"): ADMINS,
    ("DELETE", "/v1/admin/workspaces/{slug}"): frozenset({"admin"}),
    ("POST", "/v1/admin/tokens"): ADMINS,
    ("GET", "/v1/admin/tokens"): ADMINS,
    ("POST", "/v1/admin/tokens/{token_id}/revoke"): ADMINS,
    ("GET", "/healthz"): PROBE,
    ("GET", "/readyz"): PROBE,
}

ROUTES = api_routes()
# A route missing from ALLOWED counts as authenticated, so it is held to the 401/403 tests too.
AUTHENTICATED = [r for r in ROUTES if ALLOWED.get(r) is not PUBLIC and ALLOWED.get(r) is not PROBE]
PUBLIC_ROUTES = [r for r in ROUTES if ALLOWED.get(r) is PUBLIC]
PROBE_ROUTES = [r for r in ROUTES if ALLOWED.get(r) is PROBE]

UNKNOWN_TOKEN = "bks_reader_" + "Q" * 43

# Authorization headers that identify nobody (values are bytes so non-ASCII can be sent as-is).
BAD_HEADERS: dict[str, dict] = {
    "no header": {},
    "empty header": {"Authorization": ""},
    "basic scheme": {"Authorization": "Basic dXNlcjpwYXNzd29yZA=="},
    "scheme only": {"Authorization": "Bearer"},
    "scheme and blanks": {"Authorization": "Bearer    "},
    "token without scheme": {"Authorization": UNKNOWN_TOKEN},
    "other scheme": {"Authorization": f"Token {UNKNOWN_TOKEN}"},
    "two words": {"Authorization": f"Bearer {UNKNOWN_TOKEN} extra"},
    "unknown token": bearer(UNKNOWN_TOKEN),
    "overlong token": bearer("bks_" + "x" * 10_000),
    "non-ASCII token": {"Authorization": "Bearer bks_reader_\xe9\xe8".encode("latin-1")},
}


def _fixture(world):
    """A conversation with a streaming message, a turn, an identity link, and a valid token of each kind."""
    conv = world.conversation("acme", "concierge", "thread-1", "Rose Room booking", creator="alice")
    msg = world.message("acme", conv, "The Rose ", role="assistant", state="streaming")
    world.actor_id("acme", "web:demo", "bob")
    world.actor_id("acme", "slack:acme", "U1")
    ids = {"conv": conv, "msg": msg, "turn": world.turn("acme", "concierge", conv, loaded=[msg]),
           "link": world.link("acme", "concierge", ("web:demo", "alice"), ("web:demo", "bob"))}
    tokens = {
        "reader": world.token("reader", "acme", actor="alice"),
        "runtime": world.token("runtime", "acme"),
        "ingest": world.token("ingest", "acme"),
        "admin": world.token("admin"),
        "workspace_admin": world.token("admin", "acme"),
        "status": world.token("status"),
    }
    spare = world.token("ingest", "acme")  # what POST /v1/admin/tokens/{token_id}/revoke revokes
    ids["token"] = world.conn.execute("select id from api_tokens where digest = %s", (digest(spare),)).fetchone()["id"]
    return ids, ids["msg"], tokens


def _sample(method: str, template: str, ids: dict, msg: int) -> tuple[str, dict | None]:
    """A request to this route that its own kind of token may make successfully."""
    if "{turn_id}" in template:
        ident = ids["turn"]
    elif "{link_id}" in template:
        ident = ids["link"]
    elif "{token_id}" in template:
        ident = ids["token"]
    elif template.startswith("/v1/messages/"):
        ident = ids["msg"]
    elif template == "/static/{name}":
        ident = "app.js"
    elif "{slug}" in template:
        ident = "acme"
    else:
        ident = ids["conv"]
    path = fill(template, ident)
    body = {
        ("POST", "/v1/conversations"): conversation_body("thread-2", "Another"),
        ("POST", "/v1/conversations/{conversation_id}/messages"): {"role": "user", "body": "hello"},
        # one NDJSON line (a JSON object is one)
        ("POST", "/v1/import"): {**conversation_body("thread-3", "Imported"),
                                 "messages": [{"external_id": "i1", "role": "user", "body": "hello"}]},
        ("PATCH", "/v1/messages/{message_id}"): {"append": "Room"},
        ("POST", "/v1/memories"): {"agent": "concierge", "body": "Alice likes the Rose Room",
                                   "audience": {"kind": "public"}},
        ("POST", "/v1/identity-links"): {"agent": "concierge", "a": {"namespace": "web:demo", "external_id": "alice"},
                                         "b": {"namespace": "slack:acme", "external_id": "U1"}, "proof": "otp-1"},
        ("POST", "/v1/identity-links/{link_id}/verify"): {"proof": "otp-2"},
        ("PUT", "/v1/conversations/{conversation_id}/readers"): {"readers": ["alice", "bob"]},
        ("POST", "/v1/turns"): {"agent": "concierge", "conversation_id": ids["conv"]},
        ("POST", "/v1/tools/search_history"): {"turn_id": ids["turn"], "query": "rose"},
        ("PUT", "/v1/workspaces/{slug}/search-settings"): {"text_search_config": "english"},
        ("POST", "/v1/admin/workspaces"): {"slug": "newco"},
        ("POST", "/v1/admin/tokens"): {"kind": "ingest", "workspace": "acme"},
        ("POST", "/v1/turns/{turn_id}/reply"): {"body": "It is booked."},
        ("POST", "/v1/turns/{turn_id}/memories"): {"body": "The Rose Room", "source_message_ids": [ids["msg"]]},
    }.get((method, template))
    return path, body


def test_every_route_is_declared():
    assert ROUTES, "route enumeration found nothing"
    assert set(ROUTES) == set(ALLOWED), (
        "routes and their allowed token kinds differ; declare new routes in ALLOWED: "
        f"undeclared {set(ROUTES) - set(ALLOWED)}, gone {set(ALLOWED) - set(ROUTES)}"
    )


def _revoke(world, secret: str) -> None:
    row = world.conn.execute("select id from api_tokens where digest = %s", (digest(secret),)).fetchone()
    assert revoke_token(world.conn, row["id"])


@pytest.mark.parametrize("method,template", AUTHENTICATED, ids=[f"{m} {p}" for m, p in AUTHENTICATED])
def test_no_valid_token_is_401_before_anything_else(db_url, world, method, template):
    conv, msg, tokens = _fixture(world)
    revoked = tokens[sorted(ALLOWED[(method, template)])[0]]
    path, body = _sample(method, template, conv, msg)
    # Without a body, with a valid one, with one that is not JSON, and with an id that is not one:
    # 401 each time, so a caller without a token learns nothing about the schema or what exists.
    attempts = [(path, {}), (path, {"content": b"{not json", "headers": {"content-type": "application/json"}})]
    if body is not None:
        attempts.append((path, {"json": body}))
    if "{" in template:
        attempts.append((fill(template, "abc"), {}))
    with client(db_url) as http:
        assert http.get("/v1/whoami", headers=bearer(revoked)).status_code == 200
        _revoke(world, revoked)
        before = snapshot(world.conn)
        for name, auth in {**BAD_HEADERS, "revoked token": bearer(revoked)}.items():
            for url, kwargs in attempts:
                headers = {**auth, **kwargs.get("headers", {})}
                r = http.request(method, url, headers=headers, **{k: v for k, v in kwargs.items() if k != "headers"})
                error = assert_error(r, 401, "unauthenticated")
                assert "details" not in error, (name, url, kwargs, error)
                assert r.headers.get("www-authenticate", "").lower().startswith("bearer"), (name, r.headers)
        assert snapshot(world.conn) == before


@pytest.mark.parametrize("method,template", AUTHENTICATED, ids=[f"{m} {p}" for m, p in AUTHENTICATED])
def test_wrong_kind_of_token_is_403_and_changes_nothing(db_url, world, method, template):
    conv, msg, tokens = _fixture(world)
    allowed = ALLOWED[(method, template)]
    path, body = _sample(method, template, conv, msg)
    with client(db_url) as http:
        before = snapshot(world.conn)
        for kind in KINDS:
            if kind in allowed:
                continue
            r = http.request(method, path, headers=bearer(tokens[kind]), json=body)
            error = assert_error(r, 403, "forbidden")
            # a workspace admin's token is an admin token: "... this one is an admin token (scoped ...)"
            assert ("admin" if kind == "workspace_admin" else kind) in error["message"], error
        assert snapshot(world.conn) == before
        # The same request with an allowed kind succeeds: the 403 was about the kind alone.
        for kind in sorted(allowed):
            r = http.request(method, path, headers=bearer(tokens[kind]), json=body)
            assert r.status_code < 300, (kind, r.status_code, r.text)


@pytest.mark.parametrize("method,template", AUTHENTICATED, ids=[f"{m} {p}" for m, p in AUTHENTICATED])
def test_wrong_kind_is_403_before_the_body_or_the_ids_are_read(db_url, world, method, template):
    """A reader token on POST /v1/conversations with `{}` got a 400 naming the missing fields."""
    conv, msg, tokens = _fixture(world)
    allowed = ALLOWED[(method, template)]
    path, _ = _sample(method, template, conv, msg)
    attempts = [(path, {"json": {}}), (path, {"json": {"unexpected": [1, 2]}}),
                (path, {"content": b"{not json", "headers": {"content-type": "application/json"}})]
    if "{" in template:
        attempts.append((fill(template, "abc"), {}))
        attempts.append((fill(template, "0"), {"json": {}}))
    with client(db_url) as http:
        before = snapshot(world.conn)
        for kind in KINDS:
            if kind in allowed:
                continue
            for url, kwargs in attempts:
                headers = {**bearer(tokens[kind]), **kwargs.get("headers", {})}
                r = http.request(method, url, headers=headers, **{k: v for k, v in kwargs.items() if k != "headers"})
                error = assert_error(r, 403, "forbidden")
                assert "details" not in error, (kind, url, error)
        assert snapshot(world.conn) == before


def test_public_routes_are_fixed_files_that_hold_no_data(db_url, world):
    assert PUBLIC_ROUTES == [("GET", "/"), ("GET", "/c/{conversation}"), ("GET", "/static/{name}")], (
        "only the sidebar's page and its static files may be public")
    conv, msg, tokens = _fixture(world)
    with client(db_url) as http:
        before = snapshot(world.conn)
        for method, template in PUBLIC_ROUTES:
            path, _ = _sample(method, template, conv, msg)
            anonymous = http.request(method, path)
            assert anonymous.status_code == 200, (path, anonymous.status_code, anonymous.text)
            assert "script-src 'self'" in anonymous.headers["content-security-policy"], anonymous.headers
            # Whoever asks, with whatever token, gets the same bytes: nothing depends on the caller.
            for kind in KINDS:
                r = http.request(method, path, headers=bearer(tokens[kind]))
                assert (r.status_code, r.content) == (200, anonymous.content), (path, kind)
            # The fixture's conversation title and message body are nowhere in what is served.
            assert b"Rose" not in anonymous.content, path
        assert http.get("/static/secret.txt").status_code == 404
        assert http.get("/static/..%2Fapi%2Froutes.py").status_code == 404
        assert snapshot(world.conn) == before


def test_probes_are_public_and_hold_no_data(db_url, world):
    assert PROBE_ROUTES == [("GET", "/healthz"), ("GET", "/readyz")], "only the two probes may be public this way"
    _, _, tokens = _fixture(world)
    with client(db_url) as http:
        before = snapshot(world.conn)
        for method, path in PROBE_ROUTES:
            anonymous = http.request(method, path)
            assert anonymous.status_code == 200, (path, anonymous.status_code, anonymous.text)
            # A verdict and nothing else: no version, no counts, nothing from the fixture's data.
            assert anonymous.json() == {"status": "ok"}, (path, anonymous.text)
            for kind in KINDS:
                r = http.request(method, path, headers=bearer(tokens[kind]))
                assert (r.status_code, r.content) == (200, anonymous.content), (path, kind)
        assert snapshot(world.conn) == before


def test_scheme_is_case_insensitive_and_whoami_describes_the_token(db_url, world):
    world.conversation("acme", "concierge", "t", creator="alice")
    token = world.token("reader", "acme", actor="alice", agents=["concierge"])
    with client(db_url) as http:
        r = http.get("/v1/whoami", headers={"Authorization": f"bearer {token}"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["kind"] == "reader"
    assert body["workspace_id"] == world.workspace("acme")
    assert body["agent_ids"] == [world.agent_id("acme", "concierge")]
    assert token not in r.text


def test_openapi_needs_a_token_and_documents_the_api(db_url, world):
    token = world.token("ingest", "acme")
    with client(db_url) as http:
        assert_error(http.get("/v1/openapi.json"), 401, "unauthenticated")
        r = http.get("/v1/openapi.json", headers=bearer(token))
        # FastAPI's own documentation pages are not served at all.
        for public in ("/docs", "/redoc", "/openapi.json"):
            assert http.get(public).status_code in (401, 404)
    assert r.status_code == 200, r.text
    schema = r.json()
    assert "/v1/agent-sessions" in schema["paths"]
    assert "/v1/conversations" in schema["paths"]
    assert "/v1/openapi.json" not in schema["paths"]


def test_metrics_for_admin_is_prometheus_text(db_url, world):
    admin = world.token("admin")
    with client(db_url) as http:
        http.get("/v1/whoami", headers=bearer(admin))
        r = http.get("/metrics", headers=bearer(admin))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    assert "# TYPE backscroll_http_requests_total counter" in r.text
    assert 'backscroll_http_requests_total{method="GET",route="/v1/whoami",status="200"}' in r.text
    assert "backscroll_http_request_duration_seconds_bucket" in r.text


def test_status_for_admin(db_url, world):
    admin = world.token("admin")
    with client(db_url) as http:
        r = http.get("/v1/status", headers=bearer(admin))
    assert r.status_code == 200, r.text
    body = r.json()
    applied = world.conn.execute("select max(version) as v from backscroll_migrations").fetchone()["v"]
    assert body["schema_version"] == applied
    assert body["mode"] in ("lexical", "hybrid", "degraded")


def test_a_status_token_reads_status_and_nothing_else(db_url, world):
    """The operator's credential: GET /v1/status, and a 403 everywhere else, admin routes included."""
    conv = world.conversation("acme", "concierge", "t", "Rose Room", creator="alice")
    world.message("acme", conv, "The Rose Room is booked")
    token = world.token("status")
    with client(db_url) as http:
        r = http.get("/v1/status", headers=bearer(token))
        assert r.status_code == 200, r.text
        assert r.json()["mode"] == "lexical"
        refused = [("GET", "/metrics", None), ("GET", "/v1/whoami", None), ("GET", "/v1/openapi.json", None),
                   ("GET", "/v1/agent-sessions?q=rose", None),
                   ("POST", "/v1/tools/search_history", {"turn_id": 1, "query": "rose"}),
                   ("GET", "/v1/workspaces/acme/search-settings", None),
                   ("PUT", "/v1/workspaces/acme/search-settings", {"text_search_config": "english"}),
                   ("POST", "/v1/conversations", conversation_body("t2", "Other"))]
        before = snapshot(world.conn)
        for method, path, body in refused:
            r = http.request(method, path, headers=bearer(token), json=body)
            error = assert_error(r, 403, "forbidden")
            assert "this one is a status token" in error["message"], (path, error)
        assert snapshot(world.conn) == before


def test_a_route_that_declares_no_token_kinds_is_refused_when_built():
    from fastapi import APIRouter

    from backscroll.api.deps import AuthenticatedRoute, requires

    router = APIRouter(route_class=AuthenticatedRoute)
    with pytest.raises(TypeError, match="declares no token kinds"):
        @router.get("/v1/forgotten")
        def forgotten():
            return {}
    with pytest.raises(TypeError):
        requires()

    @router.get("/v1/declared")
    @requires(TokenKind.reader)
    def declared():
        return {}
    assert [r.token_kinds for r in router.routes] == [(TokenKind.reader,)]
