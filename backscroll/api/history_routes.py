"""Agent-facing endpoints: turns, search_history, replies, memories, the pre-delivery recheck."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from ..access.audit import query_digest
from ..access.auth import TokenKind
from .. import ingest
from ..search import history, turns
from .deps import AuthenticatedRoute, Id, Svc, answer, bearer, requires

router = APIRouter(route_class=AuthenticatedRoute, dependencies=[Depends(bearer)], tags=["history"])


@router.post("/v1/turns", status_code=201, summary="Register a turn: agent, destination, requester, loaded window")
@requires(TokenKind.runtime)
def register_turn(request: Request, svc: Svc, body: turns.TurnIn):
    with svc.session(request) as (conn, principal):
        turn_id = turns.register_turn(conn, principal.workspace_id, principal.agent_ids, body,
                                      actors=ingest.actor_resolver(conn, principal.workspace_id))
    return {"id": turn_id}


@router.post("/v1/tools/search_history", summary="Search history the turn may disclose into its destination")
@requires(TokenKind.runtime)
def search_history(request: Request, svc: Svc, body: history.SearchRequest):
    digest = query_digest(svc.settings.access, body.query)
    with svc.session(request) as (conn, principal):
        return answer(history.search_history(conn, principal.workspace_id, principal.agent_ids, body, digest,
                                             settings=svc.settings, side=svc.side()))


@router.post("/v1/turns/{turn_id}/reply", status_code=201, summary="Store the reply with the turn's evidence as provenance")
@requires(TokenKind.runtime)
def reply(request: Request, svc: Svc, turn_id: Id, body: turns.ReplyIn):
    svc.check_body(body.body)
    with svc.session(request) as (conn, principal):
        return turns.store_reply(conn, principal.workspace_id, principal.agent_ids, turn_id, body)


@router.post("/v1/turns/{turn_id}/memories", status_code=201, summary="Form a memory from what the turn saw")
@requires(TokenKind.runtime)
def memory(request: Request, svc: Svc, turn_id: Id, body: turns.MemoryIn):
    svc.check_body(body.body)
    with svc.session(request) as (conn, principal):
        return turns.form_memory(conn, principal.workspace_id, principal.agent_ids, turn_id, body)


@router.post("/v1/turns/{turn_id}/recheck", summary="Revalidate everything the reply would disclose, before delivery")
@requires(TokenKind.runtime)
def recheck(request: Request, svc: Svc, turn_id: Id):
    with svc.session(request) as (conn, principal):
        return turns.recheck(conn, principal.workspace_id, principal.agent_ids, turn_id)


@router.get("/v1/turns/{turn_id}/trace", summary="The turn's evidence ledger and its search audit rows")
@requires(TokenKind.runtime, TokenKind.admin)
def trace(request: Request, svc: Svc, turn_id: Id):
    with svc.session(request) as (conn, principal):
        return turns.trace(conn, principal, turn_id)
