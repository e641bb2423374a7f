"""Endpoints. Each opens one authenticated transaction and calls into a domain module."""

from __future__ import annotations

import io
import os
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from .. import status as search_status
from ..access.auth import API_KINDS, TokenKind
from ..errors import BodyTooLong
from ..ingest import importer, links, memories, workspaces
from .. import ingest
from ..search import maintenance, sessions
from ..search.limits import clamp_limit
from ..vocabulary import MAX_REQUEST_BYTES
from .admin_routes import audited
from .deps import AuthenticatedRoute, Id, Svc, answer, bearer, requires
from .service import Service


router = APIRouter(route_class=AuthenticatedRoute, dependencies=[Depends(bearer)])

AGENT_SLUG = r"^[a-z0-9][a-z0-9_-]{0,62}$"  # as agents.slug is constrained


@router.get("/v1/agent-sessions", tags=["sessions"], summary="Recent sessions, or sessions matching q")
@requires(TokenKind.reader)
def list_sessions(
    request: Request,
    svc: Svc,
    q: Annotated[str | None, Query(description="Words from the title or the conversation; quotes and -word work")] = None,
    agent: Annotated[str | None, Query(description="Only sessions with this agent (slug)", max_length=63,
                                       pattern=AGENT_SLUG)] = None,
    before: Annotated[str | None, Query(description="The `next` cursor of the previous page")] = None,
    limit: Annotated[int | None, Query(description="Page size; clamped to 1..100")] = None,
):
    query = sessions.validate_query(q, svc.limits)
    size = clamp_limit(limit, svc.limits.default, svc.limits.maximum)
    with svc.read_session(request) as (conn, principal):
        scope = sessions.resolve_scope(conn, principal, agent)
        if query is None:
            return answer(sessions.recent(conn, scope, svc.codec, before, size))
        with svc.ledger() as ledger:
            return answer(sessions.search(conn, scope, svc.codec, query, before, size, svc.limits,
                                          settings=svc.settings, ledger=ledger, side=svc.side(read=True)))


@router.get("/v1/agent-sessions/{session_id}", tags=["sessions"], summary="One session, if the reader may see it")
@requires(TokenKind.reader)
def get_session(request: Request, svc: Svc, session_id: Id):
    with svc.read_session(request) as (conn, principal):
        scope = sessions.resolve_scope(conn, principal, None)
        return sessions.get_one(conn, scope, session_id)


@router.post("/v1/conversations", tags=["ingest"], status_code=201, summary="Create or update a conversation")
@requires(TokenKind.ingest)
def upsert_conversation(request: Request, response: Response, svc: Svc, body: ingest.ConversationIn):
    with svc.session(request) as (conn, principal):
        conv_id, created = ingest.upsert_conversation(conn, principal.workspace_id, body)
    if not created:
        response.status_code = 200
    return {"id": conv_id, "created": created}


@router.post("/v1/conversations/{conversation_id}/messages", tags=["ingest"], status_code=201,
             summary="Append a message (idempotent on external_id)")
@requires(TokenKind.ingest)
def append_message(request: Request, response: Response, svc: Svc, conversation_id: Id, body: ingest.MessageIn):
    svc.check_body(body.body)
    with svc.session(request) as (conn, principal):
        msg_id, created = ingest.append_message(conn, principal.workspace_id, conversation_id, body)
    if not created:
        response.status_code = 200
    return {"id": msg_id, "created": created}


class ImportAccepted(BaseModel):
    line: int
    conversation_id: int
    messages_created: int


class ImportRejected(BaseModel):
    line: int
    code: str = Field(description="What the API answers the same mistake with in a request of its own: "
                                   "`invalid_request`, `body_too_long`, `forbidden` (a workspace not the "
                                   "token's), `message_finished`, ...")
    error: str


class ImportResult(BaseModel):
    lines: int = Field(description="Non-blank lines read")
    conversations: int = Field(description="Lines that landed (a conversation each)")
    messages_created: int
    accepted: list[ImportAccepted]
    rejected: list[ImportRejected] = Field(description="Lines that did not land, each with the reason; "
                                                       "nothing of a rejected line is written")


@router.post("/v1/import", tags=["ingest"], response_model=ImportResult,
             summary="Bulk ingestion: many conversations and their messages, one JSON line each",
             description=(
                 "The body is NDJSON (`application/x-ndjson`): one conversation per line, with its "
                 "messages, as `backscroll import` reads a file (the line's `workspace` may be left out; "
                 "it is the token's). Each line lands whole or not at all, in order; a bad line is "
                 "answered with its number and reason and the others still land. Idempotent: conversations "
                 "and messages are keyed by their external ids, so a retried request creates nothing twice. "
                 "A line's messages are written in one statement. Bodies are limited to "
                 f"{MAX_REQUEST_BYTES // 2**20} MiB: split larger loads. A line holds to the limits every "
                 "write does (a message body over `body_max_chars` rejects it with `body_too_long`); a line "
                 "naming a workspace other than the token's is rejected with one answer, whether or not that "
                 "workspace exists."),
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/x-ndjson": {"schema": {"type": "string"}}}}})
@requires(TokenKind.ingest)
async def bulk_import(request: Request, svc: Svc) -> dict:
    data = await request.body()
    return await run_in_threadpool(_bulk_import, request, svc, data)


def _bulk_import(request: Request, svc: Service, data: bytes) -> dict:
    with svc.session(request) as (conn, principal):
        report = importer.import_stream(conn, io.BytesIO(data), workspace_id=principal.workspace_id,
                                        body_max_chars=svc.settings.ingest.body_max_chars)
    return report.as_dict()


@router.patch("/v1/messages/{message_id}", tags=["ingest"], summary="Fill or finish a streaming message")
@requires(TokenKind.ingest)
def patch_message(request: Request, svc: Svc, message_id: Id, body: ingest.MessagePatch):
    svc.check_body(body.body)
    svc.check_body(body.append, "append")
    with svc.session(request) as (conn, principal):
        result = ingest.patch_message(conn, principal.workspace_id, message_id, body)
        if result["body_chars"] > svc.settings.ingest.body_max_chars:
            # Raising inside the transaction rolls the append back: nothing half-written.
            raise BodyTooLong(f"the message would grow past {svc.settings.ingest.body_max_chars} characters")
    return result


@router.delete("/v1/messages/{message_id}", tags=["ingest"], status_code=204, summary="Delete a message")
@requires(TokenKind.ingest)
def delete_message(request: Request, svc: Svc, message_id: Id):
    with svc.session(request) as (conn, principal):
        ingest.delete_message(conn, principal.workspace_id, message_id)
    return Response(status_code=204)


@router.delete("/v1/conversations/{conversation_id}", tags=["ingest"], status_code=204,
               summary="Delete a conversation and its messages")
@requires(TokenKind.ingest)
def delete_conversation(request: Request, svc: Svc, conversation_id: Id):
    with svc.session(request) as (conn, principal):
        ingest.delete_conversation(conn, principal.workspace_id, conversation_id)
    return Response(status_code=204)


@router.get("/v1/whoami", tags=["meta"], summary="What the presented token is")
@requires(*API_KINDS)
def whoami(request: Request, svc: Svc):
    with svc.session(request) as (_, principal):
        return {
            "token_id": principal.token_id,
            "kind": principal.kind.value,
            "workspace_id": principal.workspace_id,
            "actor_id": principal.actor_id,
            "agent_ids": list(principal.agent_ids) if principal.agent_ids is not None else "all",
        }


@router.get("/v1/status", tags=["meta"], summary="Schema version, search mode and embedding coverage per model",
            description=(
                "Needs an installation-wide `admin` token (a workspace-scoped admin is answered 403: the status "
                "is the installation's) or a `status` token: a status token reads this route and no other "
                "(every other route answers it 403), so a monitor such as the Kubernetes operator holds a "
                "credential that discloses no conversation. `backscroll tokens create --kind status` makes one; "
                "`backscroll tokens register --kind status --from-env VAR` stores one generated elsewhere."))
@requires(TokenKind.admin, TokenKind.status, installation=True)
def status(request: Request, svc: Svc):
    with svc.session(request) as (conn, _):
        facts = search_status.read(conn, svc.settings)
    # The endpoint is probed after the transaction: a slow server must not hold a connection.
    return search_status.report(facts, svc.settings)


@router.get("/v1/openapi.json", tags=["meta"], include_in_schema=False)
@requires(*API_KINDS)
def openapi(request: Request, svc: Svc):
    with svc.session(request):
        return request.app.openapi()


@router.get("/metrics", tags=["meta"], summary="Prometheus metrics (installation-wide admin token)")
@requires(TokenKind.admin, installation=True)
def metrics(request: Request, svc: Svc):
    with svc.session(request):
        pass
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # `serve --workers N`: every worker's counts, whichever worker answers.
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.post("/v1/memories", tags=["ingest"], status_code=201, summary="Store a memory with its audience and sources")
@requires(TokenKind.ingest)
def import_memory(request: Request, svc: Svc, body: memories.MemoryImport):
    svc.check_body(body.body)
    with svc.session(request) as (conn, principal):
        return {"id": memories.import_memory(conn, principal.workspace_id, body)}


@router.post("/v1/identity-links", tags=["ingest"], status_code=201,
             summary="Record that two actors are one person, in one agent's perspective (verified with proof, "
                     "else waiting for it)")
@requires(TokenKind.ingest)
def link_identities(request: Request, svc: Svc, body: links.LinkIn):
    with svc.session(request) as (conn, principal):
        return links.record(conn, principal.workspace_id, body)


@router.post("/v1/identity-links/{link_id}/verify", tags=["ingest"],
             summary="Give a link waiting for proof its proof; from then on it grants what a link grants")
@requires(TokenKind.ingest)
def verify_link(request: Request, svc: Svc, link_id: Id, body: links.VerifyIn):
    with svc.session(request) as (conn, principal):
        links.verify(conn, principal.workspace_id, link_id, body.proof)
    return {"id": link_id, "verified": True}


@router.put("/v1/conversations/{conversation_id}/readers", tags=["ingest"],
            summary="Set the readers of a members or external conversation; its inherited messages and memories "
                    "take them at once")
@requires(TokenKind.ingest)
def set_readers(request: Request, svc: Svc, conversation_id: Id, body: ingest.ReadersIn):
    with svc.session(request) as (conn, principal):
        return ingest.set_readers(conn, principal.workspace_id, conversation_id, body)


@router.post("/v1/identity-links/{link_id}/revoke", tags=["ingest"], summary="Separate two linked actors again")
@requires(TokenKind.ingest)
def revoke_link(request: Request, svc: Svc, link_id: Id):
    with svc.session(request) as (conn, principal):
        links.revoke(conn, principal.workspace_id, link_id)
    return {"id": link_id, "revoked": True}


Slug = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", description="workspace slug")]


class SearchSettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text_search_config: str | None = Field(
        default=None, max_length=63, pattern=r"^[a-z_][a-z0-9_]*$",
        description="simple (any language, no stemming) or one PostgreSQL ships: english, french, german, ...")
    speaker_names: bool | None = Field(default=None, description="Speaker names in documents (weight class A)")


@router.get("/v1/workspaces/{slug}/search-settings", tags=["admin"],
            summary="A workspace's text search configuration, and the rebuild in progress if any")
@requires(TokenKind.admin)
def get_search_settings(request: Request, svc: Svc, slug: Slug):
    with svc.session(request) as (conn, principal):
        workspaces.get(conn, principal.scope, slug)  # a scoped admin's own workspace, else 404
        return maintenance.language(conn, slug).as_dict()


@router.put("/v1/workspaces/{slug}/search-settings", tags=["admin"], status_code=202,
            summary="Change a workspace's text search configuration; documents are rebuilt in the background")
@requires(TokenKind.admin)
def put_search_settings(request: Request, svc: Svc, slug: Slug, body: SearchSettingsIn):
    with audited(svc, request, "workspace.search_settings", workspace=slug) as (conn, principal, _):
        workspaces.get(conn, principal.scope, slug)  # a scoped admin's own workspace, else 404
        return maintenance.request_reindex(conn, slug, body.text_search_config, body.speaker_names).as_dict()
