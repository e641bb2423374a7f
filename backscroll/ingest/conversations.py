"""Conversations: written keyed by (connector, external id), their readers recorded (and carried
to what inherited them), deleted; the sealed ones listed; a workspace's erasure."""

from __future__ import annotations

import psycopg

from ..errors import BadRequest, NotFound
from . import memories, messages
from .actors import ensure_actor
from .agents import ensure_agent, ensure_connector
from .models import PRIVATE_KINDS, ConversationIn, ReadersIn, audience_params

WRITES = ("conversations",)

UPSERT_CONVERSATION = """
insert into conversations (workspace_id, agent_id, connector_id, external_id, title,
                           audience_kind, audience_namespace, audience_readers,
                           creator_actor_id, created_at)
values (%(workspace_id)s, %(agent_id)s, %(connector_id)s, %(external_id)s, %(title)s,
        %(audience_kind)s, %(audience_namespace)s, %(audience_readers)s,
        %(creator_actor_id)s, coalesce(%(created_at)s, now()))
on conflict (connector_id, external_id) do update
   set title = excluded.title,
       audience_kind = excluded.audience_kind,
       audience_namespace = excluded.audience_namespace,
       audience_readers = excluded.audience_readers,
       creator_actor_id = coalesce(excluded.creator_actor_id, conversations.creator_actor_id),
       updated_at = now()
 where (conversations.title, conversations.audience_kind, conversations.audience_namespace,
        conversations.audience_readers, conversations.creator_actor_id)
       is distinct from
       (excluded.title, excluded.audience_kind, excluded.audience_namespace,
        excluded.audience_readers, coalesce(excluded.creator_actor_id, conversations.creator_actor_id))
returning id, (xmax = 0) as created
"""
SELECT_CONVERSATION_BY_KEY = "select id from conversations where connector_id = %(connector_id)s and external_id = %(external_id)s"
SELECT_AUDIENCE_BY_KEY = """
select id, audience_kind::text as audience_kind, audience_namespace, audience_readers
  from conversations where connector_id = %(connector_id)s and external_id = %(external_id)s
   for update
"""
SELECT_AUDIENCE = """
select id, audience_kind::text as audience_kind, audience_namespace, audience_readers
  from conversations where id = %(id)s and workspace_id = %(workspace_id)s
   for update
"""
SET_CONVERSATION_READERS = """
update conversations set audience_readers = %(readers)s::text[], updated_at = now() where id = %(id)s
"""
COUNT_SEALED = """
select c.id, c.external_id, c.title, cn.namespace as connector, c.audience_kind::text as audience_kind,
       (select count(*) from messages m where m.conversation_id = c.id
           and m.audience_kind in ('members', 'external') and cardinality(m.audience_readers) = 0) as messages
  from conversations c join connectors cn on cn.id = c.connector_id
 where c.workspace_id = %(workspace_id)s
   and c.audience_kind in ('members', 'external') and cardinality(c.audience_readers) = 0
 order by c.id
"""
DELETE_CONVERSATION = "delete from conversations where id = %(id)s and workspace_id = %(workspace_id)s returning id"
# The erasure of a workspace (backscroll.erasure): at most %(batch)s of its conversations per statement.
DELETE_BATCH = """
delete from conversations
 where id = any(array(select id from conversations where workspace_id = %(ws)s order by id limit %(batch)s))
"""


def upsert_conversation(conn: psycopg.Connection, workspace_id: int, conv: ConversationIn) -> tuple[int, bool]:
    """Create or update a conversation keyed by (agent, connector, external id)."""
    agent_id = ensure_agent(conn, workspace_id, conv.agent, conv.agent_name)
    connector = ensure_connector(conn, agent_id, conv.connector)
    namespace = connector["namespace"]
    creator_id = ensure_actor(conn, workspace_id, namespace, conv.creator) if conv.creator else None
    creator_default = {
        "audience_kind": "members",
        "audience_namespace": (conv.creator.namespace or namespace) if conv.creator else namespace,
        "audience_readers": [conv.creator.external_id] if conv.creator else [],
    }
    params = {
        "workspace_id": workspace_id,
        "agent_id": agent_id,
        "connector_id": connector["id"],
        "external_id": conv.external_id,
        "title": conv.title,
        "creator_actor_id": creator_id,
        "created_at": conv.created_at,
        **audience_params(conv.audience, namespace, creator_default),
    }
    before = conn.execute(SELECT_AUDIENCE_BY_KEY, params).fetchone()
    row = conn.execute(UPSERT_CONVERSATION, params).fetchone()
    if row is None:  # unchanged: the conditional upsert touched nothing
        row = conn.execute(SELECT_CONVERSATION_BY_KEY, params).fetchone()
        return row["id"], False
    if before is not None:
        _carry_readers(conn, before, params["audience_kind"], params["audience_namespace"], params["audience_readers"])
    return row["id"], bool(row["created"])


def _carry_readers(conn: psycopg.Connection, before: dict, kind: str, namespace: str, readers: list[str]) -> dict:
    """After a conversation's readers changed (same kind and namespace), its inherited messages
    and memories take the new readers. A change of kind or namespace carries nothing: rows said
    to the old audience keep it, so a room made wider never widens what was said before."""
    if (before["audience_kind"], before["audience_namespace"]) != (kind, namespace) \
            or list(before["audience_readers"]) == list(readers):
        return {"messages": 0, "memories": 0}
    args = {"id": before["id"], "kind": kind, "namespace": namespace, "old": list(before["audience_readers"]),
            "readers": list(readers)}
    return {"messages": messages.carry_readers(conn, args), "memories": memories.carry_readers(conn, args)}


def set_readers(conn: psycopg.Connection, workspace_id: int, conversation_id: int, body: ReadersIn) -> dict:
    """Record the readers of a members or external conversation (the connector knows them): the
    conversation, its inherited messages and the memories formed in it under its audience take
    them in this transaction, so the next search and the next pre-delivery recheck use them. The
    way to unseal a conversation stored with an external audience and no readers (0018)."""
    before = conn.execute(SELECT_AUDIENCE, {"id": conversation_id, "workspace_id": workspace_id}).fetchone()
    if before is None:
        raise NotFound(f"no conversation {conversation_id}")
    if before["audience_kind"] not in {k.value for k in PRIVATE_KINDS}:
        raise BadRequest(f"conversation {conversation_id} has a {before['audience_kind']} audience, which has no "
                         "readers: only members and external conversations do", code="no_readers_for_kind")
    readers = sorted(set(body.readers))
    conn.execute(SET_CONVERSATION_READERS, {"id": conversation_id, "readers": readers})
    carried = _carry_readers(conn, before, before["audience_kind"], before["audience_namespace"], readers)
    return {"conversation_id": conversation_id, "audience": {"kind": before["audience_kind"],
                                                             "namespace": before["audience_namespace"],
                                                             "readers": readers},
            "previous_readers": list(before["audience_readers"]), "updated": carried}


def sealed_conversations(conn: psycopg.Connection, workspace_id: int) -> list[dict]:
    """Conversations stored with a private audience and no readers (before migration 0018):
    each is disclosable only into itself until `set_readers` records its readers."""
    return conn.execute(COUNT_SEALED, {"workspace_id": workspace_id}).fetchall()

def delete_conversation(conn: psycopg.Connection, workspace_id: int, conversation_id: int) -> None:
    if conn.execute(DELETE_CONVERSATION, {"id": conversation_id, "workspace_id": workspace_id}).fetchone() is None:
        raise NotFound(f"no conversation {conversation_id}")



def delete_batch(conn: psycopg.Connection, workspace_id: int, batch: int) -> int:
    """At most `batch` of the workspace's conversations deleted; how many."""
    return conn.execute(DELETE_BATCH, {"ws": workspace_id, "batch": batch}).rowcount
