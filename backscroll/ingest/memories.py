"""Memories: imported with an audience of their own (`POST /v1/memories`), or formed by a
runtime in a turn (search.turns.form_memory checks the turn), said to the destination's audience
and following its readers; a workspace's erasure."""

from __future__ import annotations

import psycopg

from ..errors import BadRequest, NotFound
from .messages import check_provenance
from .models import MemoryImport

WRITES = ("memories",)

INSERT_MEMORY = """
insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,
                      source_message_ids)
select a.workspace_id, a.id, %(body)s, %(kind)s::audience_kind, %(namespace)s, %(readers)s::text[], %(sources)s::bigint[]
  from agents a where a.workspace_id = %(ws)s and a.slug = %(agent)s
returning id
"""
# The destination's audience as it is now, read under a share lock: a change of its readers in
# flight (conversations.set_readers) either finishes first or waits for this memory, and carries it.
INSERT_TURN_MEMORY = """
insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,
                      audience_inherited, source_message_ids, turn_id)
select %(ws)s, %(agent)s, %(body)s, c.audience_kind, c.audience_namespace, c.audience_readers, true,
       %(sources)s::bigint[], %(turn)s
  from conversations c where c.id = %(conversation)s
   for share of c
returning id, audience_kind::text as kind, audience_namespace as namespace, audience_readers as readers
"""
CARRY_MEMORY_READERS = """
update memories k set audience_readers = %(readers)s::text[]
  from turns t
 where t.id = k.turn_id and t.conversation_id = %(id)s and k.audience_inherited
   and k.audience_kind = %(kind)s::audience_kind and k.audience_namespace = %(namespace)s
   and k.audience_readers = %(old)s::text[]
"""
# The erasure of a workspace (backscroll.erasure): at most %(batch)s of its memories per statement.
DELETE_BATCH = """
delete from memories where id = any(array(select id from memories where workspace_id = %(ws)s order by id limit %(batch)s))
"""


def import_memory(conn: psycopg.Connection, workspace_id: int, memory: MemoryImport) -> int:
    if memory.audience.namespace is None and memory.audience.kind.value != "public":
        raise BadRequest("audience.namespace: required for a memory's audience", code="invalid_request")
    sources = sorted(set(memory.source_message_ids))
    check_provenance(conn, workspace_id, sources, [])
    row = conn.execute(INSERT_MEMORY, {
        "ws": workspace_id, "agent": memory.agent, "body": memory.body, "kind": memory.audience.kind.value,
        "namespace": memory.audience.namespace or "", "readers": sorted(set(memory.audience.readers)),
        "sources": sources,
    }).fetchone()
    if row is None:
        raise NotFound(f"no agent {memory.agent!r}")
    return row["id"]


def form_in_turn(conn: psycopg.Connection, workspace_id: int, agent_id: int, turn_id: int, conversation_id: int,
                 *, body: str, sources: list[int]) -> dict:
    """A memory formed in turn `turn_id` from `sources`, under its destination conversation's
    audience as it is now (inherited): {id, kind, namespace, readers}."""
    return conn.execute(INSERT_TURN_MEMORY, {"ws": workspace_id, "agent": agent_id, "body": body, "sources": sources,
                                             "turn": turn_id, "conversation": conversation_id}).fetchone()


def carry_readers(conn: psycopg.Connection, args: dict) -> int:
    """The memories formed in the conversation's turns under its audience take its new readers
    (conversations.set_readers; `args` as messages.carry_readers takes them)."""
    return conn.execute(CARRY_MEMORY_READERS, args).rowcount


def delete_batch(conn: psycopg.Connection, workspace_id: int, batch: int) -> int:
    """At most `batch` of the workspace's memories deleted; how many."""
    return conn.execute(DELETE_BATCH, {"ws": workspace_id, "batch": batch}).rowcount
