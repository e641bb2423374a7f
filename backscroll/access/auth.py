"""Bearer tokens: created once and printed once, stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from enum import Enum

import psycopg

from ..errors import BadRequest, Conflict, Forbidden, Unauthenticated


class TokenKind(str, Enum):
    reader = "reader"    # a person reading sessions: workspace, actor, agent scope
    runtime = "runtime"  # an agent runtime calling search_history for its runs
    ingest = "ingest"    # a connector writing conversations and messages
    admin = "admin"      # operators: status, metrics, token management
    status = "status"    # GET /v1/status alone: what the Kubernetes operator polls with


# Every kind but status: the routes any API caller may use (whoami, the OpenAPI document). A
# status token is kept to /v1/status, so even these refuse it.
API_KINDS = tuple(k for k in TokenKind if k is not TokenKind.status)
# Kinds that belong to no workspace (api_tokens_workspace_check).
INSTALLATION_KINDS = (TokenKind.admin, TokenKind.status)

PREFIX = "bks_"
MAX_TOKEN_CHARS = 128
# 256 random bits are 43 base64url characters: a registered secret (one generated elsewhere, e.g.
# by the operator) must be at least as long after the prefix as one create_token makes.
MIN_SECRET_CHARS = 43
SECRET_SHAPE = re.compile(r"^[A-Za-z0-9_-]+$")

INSERT_TOKEN = """
insert into api_tokens (kind, name, digest, hint, workspace_id, actor_id, agent_ids)
values (%(kind)s, %(name)s, %(digest)s, %(hint)s, %(workspace_id)s, %(actor_id)s, %(agent_ids)s)
returning id
"""
# Who a token is, and its last use touched, in one statement: a request authenticates in one
# round trip. Touching last_used_at on every request would turn each read into a write, so it is
# touched at most once a minute (the column's granularity, as `backscroll token list` shows it).
AUTHENTICATE = """
with token as (
    select t.id, t.kind::text as kind, t.workspace_id, t.actor_id, t.agent_ids, t.last_used_at
      from api_tokens t
     where t.digest = %(digest)s and t.revoked_at is null
),
touched as (
    update api_tokens u set last_used_at = now()
      from token
     where u.id = token.id and (token.last_used_at is null or token.last_used_at < now() - interval '1 minute')
)
select id, kind, workspace_id, actor_id, agent_ids from token
"""
# Registration of a secret made elsewhere, serialized per (kind, name): two migration Jobs
# registering at once leave one live token, not two.
LOCK_REGISTRATION = "select pg_advisory_xact_lock(hashtext('backscroll_register_token'), hashtext(%(key)s))"
FIND_DIGEST = "select id, kind::text as kind, name, revoked_at from api_tokens where digest = %(digest)s"
# The other live tokens of a registered one's name (and kind, unless null): a new secret under a
# name rotates it.
REVOKE_OTHERS = """
update api_tokens set revoked_at = now()
 where (%(kind)s::token_kind is null or kind = %(kind)s::token_kind) and name = %(name)s and id <> %(id)s
   and revoked_at is null
returning id
"""
# The scope predicate of every admin statement on tokens: an installation-wide caller (scope null)
# reaches every token, a workspace-scoped admin only its own workspace's. A token of another
# workspace and a token that does not exist are then one answer: no row.
IN_SCOPE = "(%(scope)s::bigint is null or t.workspace_id = %(scope)s)"
# Revocation is idempotent: a token revoked already keeps its revoked_at; `revoked_now` tells.
REVOKE_TOKEN = f"""
with target as (
    select t.id, t.revoked_at from api_tokens t where t.id = %(id)s and {IN_SCOPE} for update
),
revoked as (
    update api_tokens u set revoked_at = now() from target
     where u.id = target.id and target.revoked_at is null
    returning u.revoked_at
)
select target.id, coalesce((select revoked_at from revoked), target.revoked_at) as revoked_at,
       exists (select from revoked) as revoked_now
  from target
"""
# DELETE /v1/admin/workspaces/{slug}: every live token of the workspace, admin tokens included.
REVOKE_WORKSPACE_TOKENS = """
update api_tokens set revoked_at = now() where workspace_id = %(ws)s and revoked_at is null returning id
"""
# Metadata only, never the digest. `id` null lists (keyset after `after`, `limit` null: all),
# else reads that one token.
LIST_TOKENS = f"""
select t.id, t.kind::text as kind, t.name, t.hint, w.slug as workspace, a.namespace || '/' || a.external_id as actor,
       (select array_agg(g.slug order by g.slug) from agents g where g.id = any(t.agent_ids)) as agents,
       t.agent_ids, t.created_at, t.last_used_at, t.revoked_at
  from api_tokens t
  left join workspaces w on w.id = t.workspace_id
  left join actors a on a.id = t.actor_id
 where {IN_SCOPE} and (%(id)s::bigint is null or t.id = %(id)s) and t.id > %(after)s
 order by t.id
 limit %(limit)s
"""


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Principal:
    token_id: int
    kind: TokenKind
    workspace_id: int | None
    actor_id: int | None
    agent_ids: tuple[int, ...] | None  # None: every agent of the workspace

    @property
    def installation_wide(self) -> bool:
        """An admin (or status) token of no workspace: it acts on every workspace. An admin token
        with a workspace acts on that one alone (sql/0031)."""
        return self.workspace_id is None

    @property
    def scope(self) -> int | None:
        """The workspace an admin acts within; None for an installation-wide one (IN_SCOPE)."""
        return self.workspace_id

    def require(self, *kinds: TokenKind, installation: bool = False) -> "Principal":
        """The kinds a route answers; `installation`: an admin token must also be installation-wide
        (metrics, installation status, workspaces created and retired)."""
        if self.kind not in kinds:
            allowed = ", ".join(k.value for k in kinds)
            raise Forbidden(f"this endpoint needs a {allowed} token; this one is a {self.kind.value} token")
        if installation and self.kind is TokenKind.admin and not self.installation_wide:
            raise Forbidden("this endpoint needs an installation-wide admin token; this one is an admin token "
                            "scoped to a workspace")
        return self


def create_token(
    conn: psycopg.Connection,
    kind: TokenKind,
    *,
    name: str = "",
    workspace_id: int | None = None,
    actor_id: int | None = None,
    agent_ids: list[int] | None = None,
) -> tuple[int, str]:
    """Store a new token and return (id, secret). The secret is not recoverable afterwards."""
    secret = f"{PREFIX}{kind.value}_{secrets.token_urlsafe(32)}"
    row = conn.execute(
        INSERT_TOKEN,
        {
            "kind": kind.value,
            "name": name,
            "digest": digest(secret),
            "hint": secret[: len(PREFIX) + len(kind.value) + 7],
            "workspace_id": workspace_id,
            "actor_id": actor_id,
            "agent_ids": agent_ids,
        },
    ).fetchone()
    return row["id"], secret


def find_digest(conn: psycopg.Connection, secret: str) -> dict | None:
    """The token of this secret, live or revoked ({id, kind, name, revoked_at}), or None."""
    return conn.execute(FIND_DIGEST, {"digest": digest(secret)}).fetchone()


def store_registered(conn: psycopg.Connection, kind: TokenKind, name: str, secret: str, *, hint_chars: int,
                     workspace_id: int | None = None, agent_ids: list[int] | None = None,
                     rotate_same_kind: bool = True) -> tuple[int, list[int]]:
    """A secret made elsewhere stored as its digest (its first `hint_chars` characters as its hint),
    and the other live tokens of its name revoked (of its kind alone when `rotate_same_kind`):
    (id, revoked ids). The caller checked the secret and holds its registration lock."""
    token_id = conn.execute(INSERT_TOKEN, {
        "kind": kind.value, "name": name, "digest": digest(secret), "hint": secret[:hint_chars],
        "workspace_id": workspace_id, "actor_id": None, "agent_ids": agent_ids}).fetchone()["id"]
    revoked = [r["id"] for r in conn.execute(REVOKE_OTHERS, {"kind": kind.value if rotate_same_kind else None,
                                                              "name": name, "id": token_id})]
    return token_id, revoked


def validate_secret(secret: str) -> None:
    """A secret registered from elsewhere must look like one Backscroll makes: the errors never
    echo it."""
    body = secret.removeprefix(PREFIX)
    if not secret.startswith(PREFIX):
        raise BadRequest(f"a token starts with {PREFIX!r}; this one does not", code="bad_token")
    if not (MIN_SECRET_CHARS <= len(body) and len(secret) <= MAX_TOKEN_CHARS):
        raise BadRequest(f"a token is {PREFIX!r} and then {MIN_SECRET_CHARS} to {MAX_TOKEN_CHARS - len(PREFIX)} "
                         f"characters (256 random bits or more); this one has {len(body)} after the prefix",
                         code="bad_token")
    if not SECRET_SHAPE.match(body):
        raise BadRequest("a token holds only letters, digits, '-' and '_' (base64url) after the prefix",
                         code="bad_token")


def register_token(conn: psycopg.Connection, kind: TokenKind, name: str, secret: str) -> tuple[int, bool, list[int]]:
    """Store a token whose secret was made elsewhere (the operator's Secret), as its digest, and
    revoke the other live tokens of the same kind and name: a regenerated Secret rotates it.
    Idempotent: a secret already live changes nothing. Returns (id, created, revoked ids). The
    steps are one transaction (committed on return on an autocommit connection)."""
    if kind not in INSTALLATION_KINDS:
        raise BadRequest(f"only {', '.join(k.value for k in INSTALLATION_KINDS)} tokens can be registered "
                         f"(a {kind.value} token needs a workspace: use `tokens create`)", code="bad_token")
    validate_secret(secret)
    with conn.transaction():
        conn.execute(LOCK_REGISTRATION, {"key": f"{kind.value}/{name}"})
        found = find_digest(conn, secret)
        if found is not None:
            if found["revoked_at"] is not None:
                raise Conflict("this secret belongs to a revoked token; a revoked secret is never live again: "
                               "generate a new one", code="token_revoked")
            if found["kind"] != kind.value:
                raise Conflict(f"this secret is already a live {found['kind']} token, not a {kind.value} one",
                               code="token_kind_mismatch")
            return found["id"], False, []
        hint_len = len(PREFIX) + len(kind.value) + 7 if secret.startswith(f"{PREFIX}{kind.value}_") else len(PREFIX) + 6
        token_id, revoked = store_registered(conn, kind, name, secret, hint_chars=hint_len)
    return token_id, True, revoked


def authenticate(conn: psycopg.Connection, header: str | None) -> Principal:
    if not header:
        raise Unauthenticated("missing bearer token: send `Authorization: Bearer <token>`")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("malformed Authorization header: expected `Bearer <token>`")
    if len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise Unauthenticated("invalid or revoked token")
    row = conn.execute(AUTHENTICATE, {"digest": digest(token)}, prepare=True).fetchone()
    if row is None:
        raise Unauthenticated("invalid or revoked token")
    agent_ids = row["agent_ids"]
    return Principal(
        token_id=row["id"],
        kind=TokenKind(row["kind"]),
        workspace_id=row["workspace_id"],
        actor_id=row["actor_id"],
        agent_ids=tuple(agent_ids) if agent_ids is not None else None,
    )


def revoke_in_scope(conn: psycopg.Connection, token_id: int, scope: int | None) -> dict | None:
    """Revoke a token the caller's scope reaches (None: any); {id, revoked_at, revoked_now}, or
    None when there is no such token in the scope. Idempotent."""
    return conn.execute(REVOKE_TOKEN, {"id": token_id, "scope": scope}).fetchone()


def revoke_token(conn: psycopg.Connection, token_id: int) -> bool:
    """Whether a live token was revoked now (`backscroll tokens revoke`)."""
    row = revoke_in_scope(conn, token_id, None)
    return row is not None and row["revoked_now"]


def revoke_workspace_tokens(conn: psycopg.Connection, workspace_id: int) -> list[int]:
    return [r["id"] for r in conn.execute(REVOKE_WORKSPACE_TOKENS, {"ws": workspace_id})]


def list_tokens(conn: psycopg.Connection, scope: int | None = None, *, after: int = 0,
                limit: int | None = None) -> list[dict]:
    """Tokens' metadata (never a digest or a secret), by id, within the scope (None: all)."""
    return conn.execute(LIST_TOKENS, {"scope": scope, "id": None, "after": after, "limit": limit}).fetchall()


def token_in_scope(conn: psycopg.Connection, token_id: int, scope: int | None) -> dict | None:
    return conn.execute(LIST_TOKENS, {"scope": scope, "id": token_id, "after": 0, "limit": 1}).fetchone()
