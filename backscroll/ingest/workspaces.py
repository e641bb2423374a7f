"""Workspaces and the tokens made for them: what `backscroll workspaces` and `backscroll tokens
create` do on the command line and /v1/admin does over HTTP, in one place.

Every lookup takes a scope: the workspace a workspace-scoped admin acts within, or None for an
installation-wide caller (the command line, an admin token of no workspace). A workspace outside
the scope and one that does not exist are one answer (NotFound, the same message). A workspace is
retired here: `retire` revokes its tokens and keeps its data; a retired workspace takes no new
token and no import. Its rows are deleted by `backscroll workspaces erase` (backscroll.erasure,
through `delete` and each table's owner).
"""

from __future__ import annotations

import psycopg
from pydantic import ValidationError

from dataclasses import dataclass

from ..access.auth import INSTALLATION_KINDS, TokenKind, create_token, revoke_workspace_tokens
from ..access.workspace_tokens import Declared, check_declaration, lock_declaration, register_declared
from ..errors import BadRequest, Conflict, NotFound
from .actors import ensure_actor
from .agents import ensure_agents
from .models import ActorRef

WRITES = ("workspaces", "workspace_retirements")

# `rename`: the command line's `workspaces create` renames a workspace that exists; the API does not.
INSERT_WORKSPACE = """
insert into workspaces (slug, name, ts_config) values (%(slug)s, %(name)s, %(cfg)s::regconfig)
on conflict (slug) do update set name = case when %(rename)s then excluded.name else workspaces.name end
returning id, (xmax = 0) as created
"""
# The scope predicate of every workspace read: an installation-wide caller (scope null) sees every
# workspace, a workspace-scoped admin its own.
LIST_WORKSPACES = """
select w.id, w.slug, w.name, w.ts_config::text as ts_config, w.created_at, r.retired_at,
       (select count(*) from agents a where a.workspace_id = w.id) as agents,
       (select count(*) from conversations c where c.workspace_id = w.id) as conversations
  from workspaces w
  left join workspace_retirements r on r.workspace_id = w.id
 where (%(scope)s::bigint is null or w.id = %(scope)s)
   and (%(slug)s::text is null or w.slug = %(slug)s) and w.slug > %(after)s
 order by w.slug
 limit %(limit)s
"""
# The first retirement's time stays: retiring again changes nothing.
RETIRE_WORKSPACE = """
with retired as (
    insert into workspace_retirements (workspace_id) values (%(id)s) on conflict (workspace_id) do nothing
    returning retired_at
)
select retired_at from retired
 union all
select retired_at from workspace_retirements where workspace_id = %(id)s and not exists (select from retired)
"""
# The demo's workspaces: made with the database's default text search configuration, never renamed.
ENSURE_WORKSPACE = """
insert into workspaces (slug, name) values (%(slug)s, %(name)s)
on conflict (slug) do nothing
"""
SELECT_WORKSPACE = """
select w.id, r.retired_at from workspaces w left join workspace_retirements r on r.workspace_id = w.id
 where w.slug = %(slug)s
"""
SELECT_WORKSPACE_SLUG = "select slug from workspaces where id = %(id)s"
# A change of text search configuration (or speaker-name setting) requested, and made current
# when every document is rebuilt (search.maintenance, which rebuilds them).
REQUEST_REINDEX = """
update workspaces
   set ts_config_next = %(cfg)s::regconfig, speaker_names_next = %(names)s, reindex_requested_at = now()
 where id = %(ws)s
"""
SWAP_CONFIG = """
update workspaces
   set ts_config = ts_config_next, speaker_names = speaker_names_next,
       ts_config_next = null, speaker_names_next = null, reindex_requested_at = null
 where id = %(ws)s
"""
# The last step of an erasure (backscroll.erasure): the row (its agents, connectors, identity
# links, tokens, audience keys and backfill positions cascade) and its retirement mark.
DELETE_WORKSPACE = "delete from workspaces where id = %(ws)s"
DELETE_RETIREMENT = "delete from workspace_retirements where workspace_id = %(ws)s"
SELECT_AGENTS = "select id, slug from agents where workspace_id = %(ws)s and slug = any(%(slugs)s)"


def _unknown(slug: str) -> NotFound:
    # One message for a workspace that does not exist and one outside the caller's scope.
    return NotFound(f"no workspace {slug!r}")


def create(conn: psycopg.Connection, slug: str, name: str | None, ts_config: str, *,
           rename: bool = False) -> tuple[int, bool]:
    """Make a workspace; (id, created). An existing slug is renamed when `rename` (the command
    line), and a Conflict otherwise (the API). `ts_config` is checked by the caller
    (search.maintenance.check_text_search_config)."""
    row = conn.execute(INSERT_WORKSPACE, {"slug": slug, "name": name or slug, "cfg": ts_config,
                                          "rename": rename}).fetchone()
    if not row["created"] and not rename:
        raise Conflict(f"workspace {slug!r} exists already (retired workspaces keep their slug)",
                       code="workspace_exists")
    return row["id"], row["created"]


def ensure(conn: psycopg.Connection, slug: str, name: str) -> None:
    """The workspace `slug`, made (with the database's default configuration) if it is not there."""
    conn.execute(ENSURE_WORKSPACE, {"slug": slug, "name": name})


def find(conn: psycopg.Connection, slug: str) -> dict | None:
    """{id, retired_at} of the workspace `slug`, or None."""
    return conn.execute(SELECT_WORKSPACE, {"slug": slug}).fetchone()


def workspace_id_for(conn: psycopg.Connection, slug: str, *, writable: bool = False) -> int:
    """The id of workspace `slug` (NotFound). `writable`: one that takes writes, as the API
    refuses a retired one (its tokens are revoked and none can be made): Conflict."""
    row = find(conn, slug)
    if row is None:
        raise NotFound(f"unknown workspace {slug!r}: create it with `backscroll workspaces create {slug}`")
    if writable and row["retired_at"] is not None:
        raise Conflict(f"workspace {slug!r} is retired: it takes no new writes (its data is kept until "
                       "`backscroll workspaces erase`)", code="workspace_retired")
    return row["id"]


def workspace_slug(conn: psycopg.Connection, workspace_id: int) -> str:
    return conn.execute(SELECT_WORKSPACE_SLUG, {"id": workspace_id}).fetchone()["slug"]


def request_reindex(conn: psycopg.Connection, workspace_id: int, ts_config: str, speaker_names: bool) -> None:
    """Record the configuration the workspace's documents are to be rebuilt with."""
    conn.execute(REQUEST_REINDEX, {"ws": workspace_id, "cfg": ts_config, "names": speaker_names})


def swap_config(conn: psycopg.Connection, workspace_id: int) -> None:
    """Make the requested configuration current (its documents rebuilt, in the same transaction)."""
    conn.execute(SWAP_CONFIG, {"ws": workspace_id})


def delete(conn: psycopg.Connection, workspace_id: int) -> None:
    """The workspace row and its retirement mark deleted (the erasure's last step)."""
    conn.execute(DELETE_WORKSPACE, {"ws": workspace_id})
    conn.execute(DELETE_RETIREMENT, {"ws": workspace_id})


def listing(conn: psycopg.Connection, scope: int | None, *, after: str = "", limit: int | None = None) -> list[dict]:
    """Workspaces by slug, after `after` (keyset), within the scope (None: all)."""
    return conn.execute(LIST_WORKSPACES, {"scope": scope, "slug": None, "after": after, "limit": limit}).fetchall()


def get(conn: psycopg.Connection, scope: int | None, slug: str) -> dict:
    row = conn.execute(LIST_WORKSPACES, {"scope": scope, "slug": slug, "after": "", "limit": 1}).fetchone()
    if row is None:
        raise _unknown(slug)
    return row


def retire(conn: psycopg.Connection, scope: int | None, slug: str) -> tuple[dict, list[int]]:
    """Revoke every live token of the workspace and mark it retired; its data stays. Idempotent:
    retiring a retired workspace revokes what was made since (nothing: no token can be) and keeps
    the first retired_at. Returns (the workspace, the token ids revoked now)."""
    ws = get(conn, scope, slug)
    revoked = revoke_workspace_tokens(conn, ws["id"])
    ws["retired_at"] = conn.execute(RETIRE_WORKSPACE, {"id": ws["id"]}).fetchone()["retired_at"]
    return ws, revoked


def parse_actor(text: str) -> tuple[str, str]:
    """NAMESPACE/EXTERNAL_ID (e.g. web:demo/alice), as a reader token names its person."""
    namespace, sep, external = text.rpartition("/")
    if not sep or ":" not in namespace or not external:
        raise BadRequest("an actor is NAMESPACE/EXTERNAL_ID, e.g. web:demo/alice", code="invalid_actor")
    return namespace, external


def issue_token(conn: psycopg.Connection, kind: TokenKind, *, workspace_id: int | None, workspace_slug: str = "",
                actor: str | None = None, display_name: str | None = None, agents: list[str] | None = None,
                name: str = "") -> tuple[int, str]:
    """Make a token of `kind` for a workspace (None: an installation-wide admin or status token):
    a reader's person (made known if new) and a reader's or runtime's agents (None: all). Returns
    (id, secret); the secret is not stored and not recoverable."""
    if kind is TokenKind.status and workspace_id is not None:
        raise BadRequest("a status token belongs to no workspace", code="invalid_token_request")
    if kind not in INSTALLATION_KINDS and workspace_id is None:
        raise BadRequest(f"a {kind.value} token needs a workspace", code="invalid_token_request")
    if kind is not TokenKind.reader and (actor is not None or display_name is not None):
        raise BadRequest(f"only a reader token names a person (actor); this is a {kind.value} token",
                         code="invalid_token_request")
    if kind not in (TokenKind.reader, TokenKind.runtime) and agents is not None:
        raise BadRequest(f"only reader and runtime tokens are scoped to agents; this is a {kind.value} token",
                         code="invalid_token_request")
    actor_id = agent_ids = None
    if kind is TokenKind.reader:
        if not actor:
            raise BadRequest("a reader token needs its person: actor NAMESPACE/EXTERNAL_ID", code="invalid_actor")
        namespace, external = parse_actor(actor)
        try:
            ref = ActorRef(external_id=external, display_name=display_name or external, namespace=namespace)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise BadRequest(f"the actor is not one: {problems}", code="invalid_actor") from None
        actor_id = ensure_actor(conn, workspace_id, namespace, ref)
    if agents is not None:
        slugs = sorted(set(agents))
        if not slugs:
            raise BadRequest("agents: leave it out (every agent) or name at least one agent slug",
                             code="invalid_token_request")
        rows = conn.execute(SELECT_AGENTS, {"ws": workspace_id, "slugs": slugs}).fetchall()
        missing = set(slugs) - {r["slug"] for r in rows}
        if missing:
            raise BadRequest(f"no such agents in {workspace_slug or 'the workspace'}: {', '.join(sorted(missing))}",
                             code="unknown_agent")
        agent_ids = sorted(r["id"] for r in rows)
    return create_token(conn, kind, name=name, workspace_id=workspace_id, actor_id=actor_id, agent_ids=agent_ids)


def for_token(conn: psycopg.Connection, scope: int | None, slug: str | None) -> tuple[int, str]:
    """The workspace a token is made for, by slug, within the scope; (id, slug). None: the scoped
    admin's own workspace. A retired workspace takes no new token (Conflict)."""
    if slug is None:
        if scope is None:
            raise BadRequest("name the token's workspace (`workspace`)", code="invalid_token_request")
        rows = conn.execute(LIST_WORKSPACES, {"scope": scope, "slug": None, "after": "", "limit": 1}).fetchall()
        ws = rows[0]
    else:
        ws = get(conn, scope, slug)
    if ws["retired_at"] is not None:
        raise Conflict(f"workspace {ws['slug']!r} is retired: it takes no new token", code="workspace_retired")
    return ws["id"], ws["slug"]


@dataclass
class Applied:
    workspace_id: int
    lines: list[str]  # what was done, for the log: never a secret
    ts_config_change: tuple[str, str] | None = None  # (current, declared) of an adopted workspace


def declare(conn: psycopg.Connection, slug: str, name: str | None, ts_config: str | None, prefix: str,
            tokens: list[Declared]) -> Applied:
    """A declared workspace (a SearchWorkspace's registration Job) made to match, in one
    transaction: created, or adopted when the slug exists (renamed when `name` is given; a new text
    search configuration is returned for the caller to request through the language path, which
    rebuilds its documents), the agents its runtime tokens name (made when missing), and its tokens
    (access.workspace_tokens: registered by name, the undeclared revoked)."""
    check_declaration(prefix, tokens)
    applied = Applied(0, [])
    with conn.transaction():
        lock_declaration(conn, prefix)
        try:
            ws = get(conn, None, slug)
        except NotFound:
            cfg = ts_config or "simple"
            applied.workspace_id, _ = create(conn, slug, name or slug, cfg)
            applied.lines.append(f"created workspace {slug} (id {applied.workspace_id}, {cfg})")
        else:
            if ws["retired_at"] is not None:
                raise Conflict(f"workspace {slug!r} is retired: it takes no new token (a retired slug is never "
                               "reused)", code="workspace_retired")
            applied.workspace_id = ws["id"]
            applied.lines.append(f"adopted workspace {slug} (id {ws['id']}): it exists already")
            if name is not None and ws["name"] != name:  # None: the declaration leaves the name alone
                create(conn, slug, name, ws["ts_config"], rename=True)
                applied.lines.append(f"renamed workspace {slug}: {ws['name']!r} -> {name!r}")
            if ts_config and ts_config != ws["ts_config"]:
                applied.ts_config_change = (ws["ts_config"], ts_config)
        agent_ids = {t.name: ensure_agents(conn, applied.workspace_id, list(t.agents))
                     for t in tokens if t.kind is TokenKind.runtime and t.agents is not None}
        applied.lines += register_declared(conn, applied.workspace_id, prefix, tokens, agent_ids)
    return applied
