"""Bearer tokens: created once and printed once, stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from enum import Enum

import psycopg

from ..errors import Forbidden, Unauthenticated


class TokenKind(str, Enum):
    reader = "reader"    # a person reading sessions: workspace, actor, agent scope
    runtime = "runtime"  # an agent runtime calling search_history for its runs
    ingest = "ingest"    # a connector writing conversations and messages
    admin = "admin"      # operators: status, metrics, token management


PREFIX = "bks_"
MAX_TOKEN_CHARS = 128

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
REVOKE_TOKEN = "update api_tokens set revoked_at = now() where id = %(id)s and revoked_at is null returning id"
LIST_TOKENS = """
select t.id, t.kind::text as kind, t.name, t.hint, w.slug as workspace, a.namespace || '/' || a.external_id as actor,
       t.agent_ids, t.created_at, t.last_used_at, t.revoked_at
  from api_tokens t
  left join workspaces w on w.id = t.workspace_id
  left join actors a on a.id = t.actor_id
 order by t.id
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

    def require(self, *kinds: TokenKind) -> "Principal":
        if self.kind not in kinds:
            allowed = ", ".join(k.value for k in kinds)
            raise Forbidden(f"this endpoint needs a {allowed} token; this one is a {self.kind.value} token")
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


def revoke_token(conn: psycopg.Connection, token_id: int) -> bool:
    return conn.execute(REVOKE_TOKEN, {"id": token_id}).fetchone() is not None


def list_tokens(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(LIST_TOKENS).fetchall()
