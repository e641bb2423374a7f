"""The admin API (issue 32): workspaces and tokens over HTTP, for what is not declarative.

An admin token with no workspace is installation-wide: it acts on every workspace, and it alone
creates and retires workspaces and makes admin tokens. An admin token with a workspace acts on
that workspace alone: another workspace, and a token of one, is answered 404 with the same words
whether it exists or not. Every action writes one admin_audit row (access.audit), whatever its
outcome: the action's own writes are undone when it fails, its audit row is kept.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Iterator, Literal

import psycopg
from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ..access.audit import record_admin_action
from ..access.auth import Principal, TokenKind, list_tokens, revoke_in_scope, token_in_scope
from ..errors import BackscrollError, Forbidden, NotFound
from ..ingest import workspaces
from ..search.limits import clamp_limit
from ..search.maintenance import check_text_search_config
from ..vocabulary import MAX_ID, Prose, Slug
from .deps import AuthenticatedRoute, Id, Svc, bearer, requires
from .service import Service

router = APIRouter(route_class=AuthenticatedRoute, dependencies=[Depends(bearer)], tags=["admin"])

PAGE_DEFAULT = 100
PAGE_MAX = 1000
SLUG = r"^[a-z0-9][a-z0-9_-]{0,62}$"  # as workspaces.slug is constrained
WorkspaceSlug = Annotated[str, Path(pattern=SLUG, description="workspace slug")]

SAVEPOINT = "savepoint admin_action"
ROLLBACK_TO_SAVEPOINT = "rollback to savepoint admin_action"


@dataclass
class Target:
    """What an action's audit row names: a workspace's slug, a token's id (a new token's once made)."""
    workspace: str | None = None
    token_id: int | None = None


@contextmanager
def audited(svc: Service, request: Request, action: str, *, workspace: str | None = None,
            token_id: int | None = None) -> Iterator[tuple[psycopg.Connection, Principal, Target]]:
    """The request's transaction (Service.session), with its admin_audit row: `ok` with the
    action's writes, or the error's code without them (rolled back to before the action, the row
    written and committed, the error raised on)."""
    target = Target(workspace, token_id)
    with svc.session(request) as (conn, principal):
        conn.execute(SAVEPOINT)
        try:
            yield conn, principal, target
        except BackscrollError as exc:
            conn.execute(ROLLBACK_TO_SAVEPOINT)
            record_admin_action(conn, principal, action, workspace=target.workspace, token_id=target.token_id,
                                outcome=exc.code)
            conn.commit()
            raise
        record_admin_action(conn, principal, action, workspace=target.workspace, token_id=target.token_id)


class WorkspaceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slug: Slug = Field(description="Lowercase letters, digits, `-` and `_`, up to 63; never changes")
    name: Annotated[Prose, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="Display name; defaults to the slug")
    text_search_config: str | None = Field(
        default=None, max_length=63, pattern=r"^[a-z_][a-z0-9_]*$",
        description="multilingual, simple, or one PostgreSQL ships (english, french, ...); defaults to "
                    "BACKSCROLL_TEXT_SEARCH_CONFIG")


class WorkspaceOut(BaseModel):
    id: int
    slug: str
    name: str
    text_search_config: str
    created_at: datetime
    retired_at: datetime | None = Field(description="When DELETE retired it (its tokens revoked, its data kept)")
    agents: int = Field(description="Agents the workspace holds")
    conversations: int = Field(description="Conversations the workspace holds")


class WorkspacePage(BaseModel):
    workspaces: list[WorkspaceOut]
    next: str | None = Field(description="`after` for the next page; null on the last")


class WorkspaceRetired(BaseModel):
    workspace: WorkspaceOut
    revoked_token_ids: list[int] = Field(description="The workspace's tokens this request revoked")
    data: Literal["retained"] = Field(description="The workspace's conversations, messages and vectors are "
                                                  "kept: erasing them is `backscroll purge`'s")


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["reader", "runtime", "ingest", "admin"] = Field(
        description="admin: a workspace-scoped admin token, made by an installation-wide admin only")
    workspace: Slug | None = Field(default=None, description="The token's workspace; a workspace-scoped admin "
                                                             "may leave it out (its own)")
    actor: Annotated[str, Field(min_length=5, max_length=460, pattern=r"^[^/\s]+:[^/\s]+/[^/]+$")] | None = Field(
        default=None, description="reader: the person, NAMESPACE/EXTERNAL_ID (e.g. `slack:acme/U42`), made known "
                                  "if new")
    display_name: Annotated[Prose, Field(min_length=1, max_length=256)] | None = Field(
        default=None, description="reader: the person's display name")
    agents: Annotated[list[Slug], Field(min_length=1, max_length=100)] | None = Field(
        default=None, description="reader, runtime: the agents (slugs) it may read; left out: every agent")
    name: Annotated[Prose, Field(max_length=200)] = Field(default="", description="A label for listings")


class TokenOut(BaseModel):
    id: int
    kind: str
    name: str
    workspace: str | None = Field(description="null: an installation-wide admin or status token")
    actor: str | None = Field(description="A reader's person, NAMESPACE/EXTERNAL_ID")
    agents: list[str] | None = Field(description="A reader's or runtime's agents; null: every agent")
    hint: str = Field(description="The secret's first characters, to tell tokens apart (never the secret)")
    created_at: datetime
    last_used_at: datetime | None = Field(description="Touched at most once a minute")
    revoked_at: datetime | None


class TokenCreated(TokenOut):
    secret: str = Field(description="The bearer token, shown in this answer once: it is stored as a digest "
                                    "and cannot be recovered")


class TokenPage(BaseModel):
    tokens: list[TokenOut]
    next: int | None = Field(description="`after` for the next page; null on the last")


class TokenRevoked(BaseModel):
    id: int
    revoked_at: datetime
    revoked_now: bool = Field(description="false: it was revoked already (revocation is idempotent)")


Limit = Annotated[int | None, Query(description=f"Page size; clamped to 1..{PAGE_MAX}, default {PAGE_DEFAULT}")]


def _workspace_out(row: dict) -> dict:
    return {k: row[k] for k in ("id", "slug", "name", "created_at", "retired_at", "agents", "conversations")} | {
        "text_search_config": row["ts_config"]}


def _token_out(row: dict) -> dict:
    return {k: row[k] for k in ("id", "kind", "name", "workspace", "actor", "agents", "hint", "created_at",
                                "last_used_at", "revoked_at")}


@router.post("/v1/admin/workspaces", status_code=201, response_model=WorkspaceOut,
             summary="Create a workspace (installation-wide admin); 409 when the slug exists")
@requires(TokenKind.admin, installation=True)
def create_workspace(request: Request, svc: Svc, body: WorkspaceIn):
    with audited(svc, request, "workspace.create", workspace=body.slug) as (conn, _, _target):
        cfg = check_text_search_config(conn, body.text_search_config or svc.settings.language.text_search_config)
        workspaces.create(conn, body.slug, body.name, cfg)
        return _workspace_out(workspaces.get(conn, None, body.slug))


@router.get("/v1/admin/workspaces", response_model=WorkspacePage,
            summary="Workspaces by slug: every one for an installation-wide admin, its own for a scoped one")
@requires(TokenKind.admin)
def list_workspaces(request: Request, svc: Svc, limit: Limit = None,
                    after: Annotated[str, Query(max_length=63, pattern=r"^([a-z0-9][a-z0-9_-]{0,62})?$",
                                                description="The `next` of the previous page")] = ""):
    size = clamp_limit(limit, PAGE_DEFAULT, PAGE_MAX)
    with audited(svc, request, "workspace.list") as (conn, principal, _):
        rows = workspaces.listing(conn, principal.scope, after=after, limit=size + 1)
    return {"workspaces": [_workspace_out(r) for r in rows[:size]],
            "next": rows[size - 1]["slug"] if len(rows) > size else None}


@router.get("/v1/admin/workspaces/{slug}", response_model=WorkspaceOut, summary="One workspace")
@requires(TokenKind.admin)
def get_workspace(request: Request, svc: Svc, slug: WorkspaceSlug):
    with audited(svc, request, "workspace.get", workspace=slug) as (conn, principal, _):
        return _workspace_out(workspaces.get(conn, principal.scope, slug))


@router.delete("/v1/admin/workspaces/{slug}", response_model=WorkspaceRetired,
               summary="Retire a workspace (installation-wide admin): every token of it revoked, its data kept",
               description=(
                   "Revokes every token of the workspace (its admin tokens included) and marks it retired: no "
                   "token can be made for it again and its slug stays taken. Its conversations, messages and "
                   "vectors are retained (`data: retained`); erasing them is not this route's (`backscroll "
                   "purge`). Idempotent: retiring a retired workspace answers the same, with no token revoked."))
@requires(TokenKind.admin, installation=True)
def retire_workspace(request: Request, svc: Svc, slug: WorkspaceSlug):
    with audited(svc, request, "workspace.retire", workspace=slug) as (conn, principal, _):
        ws, revoked = workspaces.retire(conn, principal.scope, slug)
    return {"workspace": _workspace_out(ws), "revoked_token_ids": revoked, "data": "retained"}


@router.post("/v1/admin/tokens", status_code=201, response_model=TokenCreated,
             summary="Make a token for a workspace; its secret is in this answer and nowhere else",
             description=(
                 "kind `reader` (a person: `actor`, and `agents` or every agent), `runtime` (`agents` or every "
                 "agent), `ingest`, or `admin`: an admin token scoped to the workspace, which only an "
                 "installation-wide admin may make (installation-wide admin tokens are made by `backscroll tokens "
                 "create --kind admin` or registered by the operator, never over HTTP). A workspace-scoped admin "
                 "makes tokens for its own workspace; another is answered 404. A retired workspace takes none "
                 "(409)."))
@requires(TokenKind.admin)
def create_token(request: Request, svc: Svc, body: TokenIn):
    kind = TokenKind(body.kind)
    with audited(svc, request, f"token.create.{kind.value}", workspace=body.workspace) as (conn, principal, target):
        if kind is TokenKind.admin and not principal.installation_wide:
            raise Forbidden("only an installation-wide admin token makes admin tokens")
        ws_id, slug = workspaces.for_token(conn, principal.scope, body.workspace)
        target.workspace = slug
        token_id, secret = workspaces.issue_token(conn, kind, workspace_id=ws_id, workspace_slug=slug,
                                                  actor=body.actor, display_name=body.display_name,
                                                  agents=body.agents, name=body.name)
        target.token_id = token_id
        row = token_in_scope(conn, token_id, principal.scope)
    return {**_token_out(row), "secret": secret}


@router.get("/v1/admin/tokens", response_model=TokenPage,
            summary="Tokens' metadata by id (never a secret): every token for an installation-wide admin, its "
                    "workspace's for a scoped one")
@requires(TokenKind.admin)
def list_tokens_route(request: Request, svc: Svc, limit: Limit = None,
                      after: Annotated[int, Query(ge=0, le=MAX_ID, description="The `next` of the previous page")] = 0):
    size = clamp_limit(limit, PAGE_DEFAULT, PAGE_MAX)
    with audited(svc, request, "token.list") as (conn, principal, _):
        rows = list_tokens(conn, principal.scope, after=after, limit=size + 1)
    return {"tokens": [_token_out(r) for r in rows[:size]], "next": rows[size - 1]["id"] if len(rows) > size else None}


@router.post("/v1/admin/tokens/{token_id}/revoke", response_model=TokenRevoked,
             summary="Revoke a token (idempotent); 404 for one outside the caller's workspace, as for none")
@requires(TokenKind.admin)
def revoke_token_route(request: Request, svc: Svc, token_id: Id):
    with audited(svc, request, "token.revoke", token_id=token_id) as (conn, principal, _):
        row = revoke_in_scope(conn, token_id, principal.scope)
        if row is None:
            raise NotFound(f"no token {token_id}")
    return row
