"""A workspace and its tokens as declared elsewhere (a `SearchWorkspace` resource): applied, not created.

`apply_workspace` makes the database match a declaration: the workspace (created, or adopted when
one with the slug exists, its display name updated; a new text search configuration is returned
for the caller to request through the language-change path), the agents runtime tokens are scoped to (created when
missing), and each declared token registered by name from a secret generated elsewhere (stored as
its digest only). Every token of a declaration is named `<prefix><token>` (the operator's prefix
is `sw:<namespace>/<workspace>/`): a new secret under a name revokes the older ones (rotation),
and a name no longer declared is revoked. `revoke_declared` revokes every token under a prefix
(the declaration deleted). Nothing here prints, logs or returns a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from ..errors import BadRequest, Conflict
from .auth import PREFIX, TokenKind, digest, validate_secret

# Kinds a declaration may hold. A reader is a person (an actor), not a service: made by hand. A
# declared admin token is scoped to the declared workspace (sql/0031), never installation-wide;
# a status token reads the installation's status alone.
DECLARABLE = (TokenKind.ingest, TokenKind.runtime, TokenKind.admin, TokenKind.status)
WORKSPACE_KINDS = (TokenKind.ingest, TokenKind.runtime, TokenKind.admin)

LOCK = "select pg_advisory_xact_lock(hashtext('backscroll_declared_tokens'), hashtext(%(prefix)s))"
FIND_WORKSPACE = """
select w.id, w.name, w.ts_config::text as ts_config, r.retired_at
  from workspaces w left join workspace_retirements r on r.workspace_id = w.id
 where w.slug = %(slug)s
"""
INSERT_WORKSPACE = """
insert into workspaces (slug, name, ts_config) values (%(slug)s, %(name)s, %(cfg)s::regconfig) returning id
"""
RENAME_WORKSPACE = "update workspaces set name = %(name)s where id = %(id)s"
ENSURE_AGENT = """
insert into agents (workspace_id, slug, name) values (%(ws)s, %(slug)s, %(slug)s)
on conflict (workspace_id, slug) do nothing
"""
AGENT_IDS = "select id, slug from agents where workspace_id = %(ws)s and slug = any(%(slugs)s)"
FIND_DIGEST = "select id, kind::text as kind, name, revoked_at from api_tokens where digest = %(digest)s"
INSERT_TOKEN = """
insert into api_tokens (kind, name, digest, hint, workspace_id, agent_ids)
values (%(kind)s, %(name)s, %(digest)s, %(hint)s, %(ws)s, %(agents)s) returning id
"""
RESCOPE = "update api_tokens set workspace_id = %(ws)s, agent_ids = %(agents)s where id = %(id)s"
REVOKE_OTHERS = """
update api_tokens set revoked_at = now()
 where name = %(name)s and id <> %(id)s and revoked_at is null returning id
"""
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


@dataclass
class Applied:
    workspace_id: int
    lines: list[str]  # what was done, for the log: never a secret
    ts_config_change: tuple[str, str] | None = None  # (current, declared) of an adopted workspace


def _scope(conn: psycopg.Connection, workspace_id: int, token: Declared) -> tuple[int | None, list[int] | None]:
    if token.kind not in WORKSPACE_KINDS:
        return None, None
    if token.kind is not TokenKind.runtime or token.agents is None:
        return workspace_id, None
    slugs = sorted(set(token.agents))
    for slug in slugs:
        conn.execute(ENSURE_AGENT, {"ws": workspace_id, "slug": slug})
    rows = conn.execute(AGENT_IDS, {"ws": workspace_id, "slugs": slugs}).fetchall()
    return workspace_id, sorted(r["id"] for r in rows)


def _workspace(conn: psycopg.Connection, slug: str, name: str | None, ts_config: str | None,
               lines: list[str], applied: Applied) -> int:
    row = conn.execute(FIND_WORKSPACE, {"slug": slug}).fetchone()
    if row is None:
        cfg = ts_config or "simple"
        workspace_id = conn.execute(INSERT_WORKSPACE, {"slug": slug, "name": name or slug, "cfg": cfg}).fetchone()["id"]
        lines.append(f"created workspace {slug} (id {workspace_id}, {cfg})")
        return workspace_id
    if row["retired_at"] is not None:
        raise Conflict(f"workspace {slug!r} is retired: it takes no new token (a retired slug is never reused)",
                       code="workspace_retired")
    lines.append(f"adopted workspace {slug} (id {row['id']}): it exists already")
    if name is not None and row["name"] != name:  # None: the declaration leaves the name alone
        conn.execute(RENAME_WORKSPACE, {"name": name, "id": row["id"]})
        lines.append(f"renamed workspace {slug}: {row['name']!r} -> {name!r}")
    if ts_config and ts_config != row["ts_config"]:
        # Not changed here: the caller requests it through the language path (search.maintenance),
        # which rebuilds the workspace's documents in the background.
        applied.ts_config_change = (row["ts_config"], ts_config)
    return row["id"]


def apply_workspace(conn: psycopg.Connection, slug: str, name: str | None, ts_config: str | None, prefix: str,
                    tokens: list[Declared]) -> Applied:
    """One transaction: the workspace, its agents, each token, and revocation of the undeclared."""
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
    lines: list[str] = []
    applied = Applied(0, lines)
    with conn.transaction():
        conn.execute(LOCK, {"prefix": prefix})
        workspace_id = applied.workspace_id = _workspace(conn, slug, name, ts_config, lines, applied)
        for token in tokens:
            full = prefix + token.name
            ws, agents = _scope(conn, workspace_id, token)
            found = conn.execute(FIND_DIGEST, {"digest": digest(token.secret)}).fetchone()
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
            hint_len = len(PREFIX) + 6
            token_id = conn.execute(INSERT_TOKEN, {
                "kind": token.kind.value, "name": full, "digest": digest(token.secret),
                "hint": token.secret[:hint_len], "ws": ws, "agents": agents}).fetchone()["id"]
            revoked = [r["id"] for r in conn.execute(REVOKE_OTHERS, {"name": full, "id": token_id})]
            scope = "" if token.agents is None or token.kind is not TokenKind.runtime else \
                f" for agents {', '.join(sorted(set(token.agents)))}"
            lines.append(f"registered {token.kind.value} token {token_id} ({full}){scope}"
                         + (f"; revoked the previous: {', '.join(map(str, revoked))}" if revoked else ""))
        for row in conn.execute(REVOKE_UNDECLARED, {"prefix": prefix, "keep": [prefix + n for n in names]}):
            lines.append(f"revoked token {row['id']} ({row['name']}): no longer declared")
    return applied


def revoke_declared(conn: psycopg.Connection, prefix: str) -> list[str]:
    """Revoke every live token under `prefix` (the declaration is gone); the workspace's data stays."""
    if not prefix.endswith("/"):
        raise BadRequest(f"a declaration's token prefix ends with '/': {prefix!r}", code="bad_prefix")
    with conn.transaction():
        conn.execute(LOCK, {"prefix": prefix})
        return [f"revoked token {r['id']} ({r['name']})"
                for r in conn.execute(REVOKE_UNDECLARED, {"prefix": prefix, "keep": []})]
