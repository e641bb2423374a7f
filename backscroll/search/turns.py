"""Turns: what a run saw (its evidence ledger), the reply built from it, memories formed from
it, and the pre-delivery recheck that revalidates all of it against the destination. The ledger
(`turns`, `turn_evidence`) is written here and by search_history; the reply and the memories are
messages and memories, written by ingest (`ingest.messages.write_reply`, `ingest.memories.form_in_turn`)
once the turn has vouched for them."""

from __future__ import annotations

from typing import Callable

import psycopg
from pydantic import BaseModel, ConfigDict, Field

from ..errors import BadRequest, Conflict, NotFound
from ..ingest import memories as ingest_memories, messages as ingest_messages
from ..vocabulary import ExternalId, Prose, Text
from .history import Turn, evidence_ids, load_turn
from .history_sql import ADD_EVIDENCE, JOINT_LINEAGE

MAX_LOADED = 500        # the history window is capped at 500 messages
MAX_INPUT_MESSAGES = 501
MAX_HISTORY_IDS = 500


class RequesterRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    external_id: ExternalId
    namespace: Text | None = Field(default=None, max_length=200,
                                   description="`type:name`; defaults to the destination's connector")


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    conversation_id: int = Field(ge=1, le=2**63 - 1, description="The destination conversation")
    requester: RequesterRef | None = None
    answering_message_id: int | None = Field(default=None, ge=1, le=2**63 - 1)
    loaded_message_ids: list[int] = Field(default_factory=list, max_length=MAX_LOADED)


class ReplyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The one body limit every write holds to is a setting (body_max_chars), checked where the
    # settings are (the API's check_body), not a length of this model's own.
    body: Prose = Field(description="At most body_max_chars characters, as every body")
    external_id: ExternalId | None = None
    memory_ids: list[int] = Field(default_factory=list, max_length=100)


class MemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: Prose = Field(min_length=1, description="At most body_max_chars characters, as every body")
    source_message_ids: list[int] = Field(min_length=1, max_length=MAX_HISTORY_IDS)


SELECT_DESTINATION = """
select c.id, c.agent_id, cn.namespace as connector_namespace
  from conversations c join connectors cn on cn.id = c.connector_id
  join agents ag on ag.id = c.agent_id
 where c.id = %(conversation)s and c.workspace_id = %(ws)s and ag.slug = %(agent)s
"""
COUNT_IN_CONVERSATION = """
select count(*) as n from messages where conversation_id = %(conversation)s and id = any(%(ids)s::bigint[])
"""
INSERT_TURN = """
insert into turns (workspace_id, agent_id, conversation_id, requester_actor_id, answering_message_id)
values (%(ws)s, %(agent)s, %(conversation)s, %(requester)s, %(answering)s)
returning id
"""
SET_REPLY = "update turns set reply_message_id = %(reply)s where id = %(turn)s"
COUNT_AGENT_MEMORIES = "select count(*) as n from memories where id = any(%(ids)s::bigint[]) and agent_id = %(agent)s"

# The recheck, row by row, so the answer can say which rule failed for which message.
RECHECK_ROWS = """
select r.id,
       m.id is not null as present,
       exists (select 1 from message_source_evidence e where e.message_id = r.id) as has_evidence,
       m.id is not null and backscroll_disclosable(%(agent)s, m.conversation_id, m.audience_kind, m.audience_namespace,
            m.audience_readers, %(d_conversation)s::bigint, %(d_kind)s::audience_kind, %(d_namespace)s,
            %(d_readers)s::text[]) as audience_ok
  from unnest(%(ids)s::bigint[]) as r(id)
  left join messages m on m.id = r.id
 order by r.id
"""
RECHECK_MEMORIES = """
select r.id, k.id is not null as present,
       k.id is not null and backscroll_disclosable(%(agent)s, (select t.conversation_id from turns t where t.id = k.turn_id),
            k.audience_kind, k.audience_namespace, k.audience_readers, %(d_conversation)s::bigint,
            %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[]) as audience_ok
  from unnest(%(ids)s::bigint[]) as r(id)
  left join memories k on k.id = r.id
 order by r.id
"""
RECHECK_LINEAGE = JOINT_LINEAGE
RECHECK_MEMORY_LINEAGE = """
select coalesce(bool_and(backscroll_lineage_allows(k.source_message_ids, %(agent)s, %(d_conversation)s::bigint,
                                                   %(d_kind)s::audience_kind, %(d_namespace)s, %(d_readers)s::text[])),
                true) as ok
  from memories k where k.id = any(%(ids)s::bigint[])
"""
SELECT_REPLY = "select history_message_ids, memory_ids from messages where id = %(id)s"


def register_turn(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None, turn: TurnIn,
                  actors: Callable[[str, str], int] | None = None) -> int:
    """Register a turn. `actors` resolves the requester (namespace, external id) to an actor,
    making them known when the workspace does not know them yet: the ingestion's upsert, handed in
    by the caller (the writes to actors are ingestion's). Whether a person is already known
    somewhere in the workspace is not the runtime's to learn, so an unknown requester is no error
    (issue 29: a 400 for a person known only from a conversation the runtime cannot see said that
    they were)."""
    dest = conn.execute(SELECT_DESTINATION, {"conversation": turn.conversation_id, "ws": workspace_id,
                                             "agent": turn.agent}).fetchone()
    if dest is None or (agent_ids is not None and dest["agent_id"] not in agent_ids):
        raise NotFound(f"no conversation {turn.conversation_id} with agent {turn.agent!r} for this runtime")
    requester_id = None
    if turn.requester is not None:
        if actors is None:
            raise TypeError("a turn with a requester needs `actors` to resolve them")
        requester_id = actors(turn.requester.namespace or dest["connector_namespace"], turn.requester.external_id)
    window = sorted(set(turn.loaded_message_ids))
    answering = [turn.answering_message_id] if turn.answering_message_id else []
    claimed = sorted(set(window + answering))
    if claimed:
        found = conn.execute(COUNT_IN_CONVERSATION, {"conversation": dest["id"], "ids": claimed}).fetchone()["n"]
        if found != len(claimed):
            raise BadRequest("loaded_message_ids and answering_message_id must be messages of the destination conversation",
                             code="foreign_message")
    turn_id = conn.execute(INSERT_TURN, {"ws": workspace_id, "agent": dest["agent_id"], "conversation": dest["id"],
                                         "requester": requester_id, "answering": turn.answering_message_id}
                           ).fetchone()["id"]
    conn.execute(ADD_EVIDENCE, {"turn": turn_id, "ids": answering, "via": "answering"})
    conn.execute(ADD_EVIDENCE, {"turn": turn_id, "ids": window, "via": "loaded"})
    return turn_id


def _turn_for(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None, turn_id: int) -> Turn:
    turn = load_turn(conn, workspace_id, turn_id)
    if agent_ids is not None and turn.agent_id not in agent_ids:
        raise NotFound(f"no turn {turn_id}")
    return turn


def store_reply(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None, turn_id: int,
                reply: ReplyIn) -> dict:
    """Store the agent's reply with the turn's whole evidence as its history provenance."""
    turn = _turn_for(conn, workspace_id, agent_ids, turn_id)
    if turn.reply_message_id is not None:
        raise Conflict(f"turn {turn_id} already has a reply ({turn.reply_message_id})", code="reply_exists")
    memories = sorted(set(reply.memory_ids))
    if memories:
        known = conn.execute(COUNT_AGENT_MEMORIES, {"ids": memories, "agent": turn.agent_id}).fetchone()["n"]
        if known != len(memories):
            raise BadRequest("memory_ids: not memories of this agent", code="unknown_memory")
    history = evidence_ids(conn, turn_id)
    reply_id = ingest_messages.write_reply(conn, turn.conversation_id, turn_id, body=reply.body,
                                           external_id=reply.external_id, history=history, memories=memories)
    conn.execute(SET_REPLY, {"reply": reply_id, "turn": turn_id})
    return {"id": reply_id, "history_message_ids": history, "memory_ids": memories}


def form_memory(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None, turn_id: int,
                memory: MemoryIn) -> dict:
    """A memory formed in a turn: disclosable only where the destination and every source are."""
    turn = _turn_for(conn, workspace_id, agent_ids, turn_id)
    sources = sorted(set(memory.source_message_ids))
    seen = set(evidence_ids(conn, turn_id))
    unseen = [s for s in sources if s not in seen]
    if unseen:
        raise BadRequest(f"source_message_ids: the turn never saw {unseen[:5]}", code="unseen_source")
    row = ingest_memories.form_in_turn(conn, workspace_id, turn.agent_id, turn_id, turn.conversation_id,
                                       body=memory.body, sources=sources)
    return {"id": row["id"], "source_message_ids": sources,
            "audience": {"kind": row["kind"], "namespace": row["namespace"], "readers": list(row["readers"])}}


def recheck(conn: psycopg.Connection, workspace_id: int, agent_ids: tuple[int, ...] | None, turn_id: int) -> dict:
    """Revalidate, just before delivery, everything the reply would disclose, against the
    destination's audience as it is now."""
    turn = _turn_for(conn, workspace_id, agent_ids, turn_id)
    if turn.reply_message_id is not None:
        reply = conn.execute(SELECT_REPLY, {"id": turn.reply_message_id}).fetchone()
        history, memories = reply["history_message_ids"], reply["memory_ids"]
    else:
        history, memories = evidence_ids(conn, turn_id), []
    params = {"agent": turn.agent_id, **turn.destination_params()}

    def verdict(ok: bool, reason: str, message_id: int | None = None) -> dict:
        out = {"deliverable": ok, "reason": reason, "destination": turn.destination,
               "checked": {"messages": len(history), "memories": len(memories)}}
        if message_id is not None:
            out["message_id"] = message_id
        return out

    if len(history) > MAX_HISTORY_IDS or len(history) + 1 > MAX_INPUT_MESSAGES:
        return verdict(False, "provenance_cap")
    for row in conn.execute(RECHECK_ROWS, {**params, "ids": history}).fetchall():
        if not row["present"]:
            return verdict(False, "message_deleted", row["id"])
        if not row["has_evidence"]:
            return verdict(False, "no_evidence", row["id"])
        if not row["audience_ok"]:
            return verdict(False, "audience", row["id"])
    for row in conn.execute(RECHECK_MEMORIES, {**params, "ids": memories}).fetchall():
        if not row["present"]:
            return verdict(False, "memory_deleted", row["id"])
        if not row["audience_ok"]:
            return verdict(False, "audience", row["id"])
    if history and not conn.execute(RECHECK_LINEAGE, {**params, "ids": history}).fetchone()["ok"]:
        return verdict(False, "lineage")
    if memories and not conn.execute(RECHECK_MEMORY_LINEAGE, {**params, "ids": memories}).fetchone()["ok"]:
        return verdict(False, "lineage")
    return verdict(True, "ok")


SELECT_TRACE_EVIDENCE = """
select message_id, via, added_at from turn_evidence where turn_id = %(turn)s order by added_at, message_id
"""
SELECT_TRACE_AUDIT = """
select id, created_at, encode(query_digest, 'hex') as query_digest, filters, destination_audience,
       requested_limit, effective_limit, status, mode, degradation, selected, exclusions
  from search_audit where turn_id = %(turn)s order by id
"""
SELECT_TURN_ANY = "select id, workspace_id, agent_id from turns where id = %(turn)s"


# What a runtime's trace leaves out of each audit row (an admin reads it whole): the exclusion
# counts count messages the destination may not receive, and the scores and features move with
# the receivable rows that lineage or missing evidence then excluded (issue 29). The selected
# message ids, filters, limits, status and mode stay.
RUNTIME_WITHHELD = ("exclusions",)
RUNTIME_WITHHELD_PER_HIT = ("score", "features")


def trace(conn: psycopg.Connection, principal, turn_id: int) -> dict:
    """What a turn saw and every search it made (search_audit rows), for the run trace: whole for
    an admin, without what a runtime may not learn from it (RUNTIME_WITHHELD)."""
    row = conn.execute(SELECT_TURN_ANY, {"turn": turn_id}).fetchone()
    visible = row is not None and (
        # an installation-wide admin (no workspace) sees every turn; a workspace-scoped one its workspace's
        (principal.kind.value == "admin" and principal.workspace_id is None)
        or (row["workspace_id"] == principal.workspace_id
            and (principal.agent_ids is None or row["agent_id"] in principal.agent_ids)))
    if not visible:
        raise NotFound(f"no turn {turn_id}")
    evidence = conn.execute(SELECT_TRACE_EVIDENCE, {"turn": turn_id}).fetchall()
    audits = conn.execute(SELECT_TRACE_AUDIT, {"turn": turn_id}).fetchall()
    whole = principal.kind.value == "admin"
    for a in audits:
        a["created_at"] = a["created_at"].isoformat()
        if not whole:
            for key in RUNTIME_WITHHELD:
                a.pop(key)
            a["selected"] = [{k: v for k, v in s.items() if k not in RUNTIME_WITHHELD_PER_HIT} for s in a["selected"]]
    return {
        "turn_id": turn_id,
        "evidence": [{"message_id": e["message_id"], "via": e["via"], "added_at": e["added_at"].isoformat()}
                     for e in evidence],
        "search_audit": audits,
    }
