"""The tokens of a declaration (a `SearchWorkspace` resource), registered by name from secrets
generated elsewhere (stored as their digests only).

The workspace and its agents are ingest's (`ingest.workspaces.declare`, which calls this). Every
token of a declaration is named `<prefix><token>` (the operator's prefix is
`sw:<namespace>/<workspace>/`): a new secret under a name revokes the older ones (rotation), and a
name no longer declared is revoked. `revoke_declared` revokes every token under a prefix (the
declaration deleted). Nothing here prints, logs or returns a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from ..errors import BadRequest, Conflict
from .auth import PREFIX, TokenKind, find_digest, store_registered, validate_secret

# Kinds a declaration may hold. A reader is a person (an actor), not a service: made by hand. A
# declared admin token is scoped to the declared workspace (sql/0031), never installation-wide;
# a status token reads the installation's status alone.
DECLARABLE = (TokenKind.ingest, TokenKind.runtime, TokenKind.admin, TokenKind.status)
WORKSPACE_KINDS = (TokenKind.ingest, TokenKind.runtime, TokenKind.admin)

LOCK = "select pg_advisory_xact_lock(hashtext('backscroll_declared_tokens'), hashtext(%(prefix)s))"
RESCOPE = "update api_tokens set workspace_id = %(ws)s, agent_ids = %(agents)s where id = %(id)s"
REVOKE_UNDECLARED = """
update api_tokens set revoked_at = now()
 where starts_with(name, %(prefix)s) and not (name = any(%(keep)s)) and revoked_at is null
returning id, name
"""


@dataclass(frozen=True)
class Declared:
    name: str                       # the token's name in the declaration (a Secret key)
    kind: TokenKind
    secret: str
    agents: tuple[str, ...] | None  # runtime: agent slugs; None: every agent of the workspace


def _scope(workspace_id: int, token: Declared, agent_ids: dict[str, list[int]]) -> tuple[int | None, list[int] | None]:
    if token.kind not in WORKSPACE_KINDS:
        return None, None
    if token.kind is not TokenKind.runtime or token.agents is None:
        return workspace_id, None
    return workspace_id, agent_ids[token.name]


def check_declaration(prefix: str, tokens: list[Declared]) -> None:
    """Refuse a declaration before anything is written: its prefix, repeated names, kinds, secrets."""
    if not prefix.endswith("/"):
        raise BadRequest(f"a declaration's token prefix ends with '/': {prefix!r}", code="bad_prefix")
    names = [t.name for t in tokens]
    if len(set(names)) != len(names):
        raise BadRequest(f"token names repeat: {', '.join(sorted(names))}", code="bad_token")
    for token in tokens:
        if token.kind not in DECLARABLE:
            raise BadRequest(f"token {token.name}: a {token.kind.value} token cannot be declared (kinds: "
                             f"{', '.join(k.value for k in DECLARABLE)})", code="bad_token")
        try:
            validate_secret(token.secret)
        except BadRequest as exc:
            raise BadRequest(f"token {token.name}: {exc.message}", code="bad_token") from None


def lock_declaration(conn: psycopg.Connection, prefix: str) -> None:
    """Serializes the transactions that apply or revoke one declaration (two Jobs at once)."""
    conn.execute(LOCK, {"prefix": prefix})


def register_declared(conn: psycopg.Connection, workspace_id: int, prefix: str, tokens: list[Declared],
                      agent_ids: dict[str, list[int]]) -> list[str]:
    """Each token registered by name (under `lock_declaration`, in the caller's transaction), the
    undeclared ones under the prefix revoked; `agent_ids`: a runtime token's agents, by token
    name. Returns what was done, for the log: never a secret."""
    lines: list[str] = []
    for token in tokens:
        full = prefix + token.name
        ws, agents = _scope(workspace_id, token, agent_ids)
        found = find_digest(conn, token.secret)
        if found is not None:
            if found["revoked_at"] is not None:
                raise Conflict(f"token {token.name}: its secret belongs to a revoked token; a revoked secret is "
                               "never live again: delete its Secret to generate a new one", code="token_revoked")
            if (found["kind"], found["name"]) != (token.kind.value, full):
                raise Conflict(f"token {token.name}: its secret is already another live token "
                               f"({found['kind']}, {found['name']!r})", code="token_kind_mismatch")
            conn.execute(RESCOPE, {"ws": ws, "agents": agents, "id": found["id"]})
            lines.append(f"{token.kind.value} token {found['id']} ({full}) is registered already")
            continue
        # a new secret under the name revokes the older ones, whatever their kind
        token_id, revoked = store_registered(conn, token.kind, full, token.secret, hint_chars=len(PREFIX) + 6,
                                             workspace_id=ws, agent_ids=agents, rotate_same_kind=False)
        scope = "" if token.agents is None or token.kind is not TokenKind.runtime else \
            f" for agents {', '.join(sorted(set(token.agents)))}"
        lines.append(f"registered {token.kind.value} token {token_id} ({full}){scope}"
                     + (f"; revoked the previous: {', '.join(map(str, revoked))}" if revoked else ""))
    for row in conn.execute(REVOKE_UNDECLARED, {"prefix": prefix, "keep": [prefix + t.name for t in tokens]}):
        lines.append(f"revoked token {row['id']} ({row['name']}): no longer declared")
    return lines


def revoke_declared(conn: psycopg.Connection, prefix: str) -> list[str]:
    """Revoke every live token under `prefix` (the declaration is gone); the workspace's data stays."""
    if not prefix.endswith("/"):
        raise BadRequest(f"a declaration's token prefix ends with '/': {prefix!r}", code="bad_prefix")
    with conn.transaction():
        conn.execute(LOCK, {"prefix": prefix})
        return [f"revoked token {r['id']} ({r['name']})"
                for r in conn.execute(REVOKE_UNDECLARED, {"prefix": prefix, "keep": []})]
