"""The OpenAPI document is the API (issue 20): schemathesis generates requests from it, valid and
not, for every operation and every kind of token, and checks that each answer's status, content
type, headers and body are the ones the document declares, and that none is a server error.

Bounded: a few examples per operation and kind (BACKSCROLL_CONFORMANCE_EXAMPLES, default 8), no
shrinking past the first failure, no deadline (a busy machine is slow, not wrong).
"""

from __future__ import annotations

import os

import hypothesis
import pytest
import schemathesis
from schemathesis.specs.openapi.checks import (
    content_type_conformance, response_headers_conformance, response_schema_conformance,
    status_code_conformance,
)
from schemathesis.checks import not_a_server_error

from backscroll.app import create_app
from tests.world import client, settings_for

EXAMPLES = int(os.environ.get("BACKSCROLL_CONFORMANCE_EXAMPLES", "8"))
# workspace_admin: an admin token scoped to the fixture's workspace (acme)
KINDS = ("reader", "ingest", "runtime", "admin", "workspace_admin", "status")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]

# The document does not depend on the database: read from an application that never starts.
_URL = "postgresql://schema-only/none"
RAW = create_app(settings_for(_URL), _URL).openapi()
schema = schemathesis.openapi.from_dict(RAW)


class Served:
    """What schemathesis calls (over ASGI): the module's application, once the fixture started it."""

    target = None

    async def __call__(self, scope, receive, send):
        await self.target(scope, receive, send)


SERVED = Served()
schema.app = SERVED


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value):
    """POST /v1/import's body: lines of JSON, sent as generated (a string, or anything else as JSON)."""
    import json

    return (value if isinstance(value, str) else json.dumps(value)).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def served(pg_url, template_url):
    """One database and one running application for the module, with a token of each kind."""
    import psycopg

    from tests.world import open_world

    name = "bs_conformance"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
        conn.execute(f"create database {name} template backscroll_template strategy file_copy")
    url = psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    world = open_world(url)
    # The fixture's tokens get ids a generated revoke (POST /v1/admin/tokens/{token_id}/revoke, ids
    # drawn small) is unlikely to hit, so the kinds tested after it are not answered 401 throughout.
    world.conn.execute("select setval(pg_get_serial_sequence('api_tokens', 'id'), 7919)")
    conv = world.conversation("acme", "concierge", "thread-1", "Rose Room booking", creator="alice")
    world.message("acme", conv, "The Rose Room is booked", speaker="alice")
    tokens = {"reader": world.token("reader", "acme", actor="alice"), "ingest": world.token("ingest", "acme"),
              "runtime": world.token("runtime", "acme"), "admin": world.token("admin"),
              "workspace_admin": world.token("admin", "acme"), "status": world.token("status")}
    with client(url) as http:  # started: its lifespan ran
        SERVED.target = http.app
        yield tokens
    world.conn.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


@pytest.mark.parametrize("kind", KINDS)
@schema.parametrize()
@hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                     phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_every_answer_is_the_one_the_document_declares(served, kind, case):
    case.call_and_validate(headers={"Authorization": f"Bearer {served[kind]}"}, checks=CHECKS)


def test_the_document_declares_errors_not_422():
    responses = [(path, method, status) for path, ops in RAW["paths"].items() for method, op in ops.items()
                 for status in op["responses"]]
    assert responses and not [r for r in responses if r[2] == "422"]
    for path, ops in RAW["paths"].items():
        for method, op in ops.items():
            assert {"401", "503"} <= set(op["responses"]), (method, path)
            assert op["responses"]["401"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert "200" in RAW["paths"]["/v1/conversations"]["post"]["responses"]  # an existing conversation
    assert "text/plain" in RAW["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
