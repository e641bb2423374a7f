"""A conversation's messages, for the sidebar's transcript view.

Reading a transcript is narrowed exactly as searching it is (seed 003): the agents the reader is
scoped to, plus the reader's own conversations. The predicate is in the query itself, not only in
the `get_one` check before it, so this SQL alone can never return another reader's messages.
"""

from __future__ import annotations

import psycopg

from ..search.cursor import CursorCodec, fingerprint
from ..search.sessions import Scope
from ..vocabulary import MAX_ID

PAGE_DEFAULT = 200
PAGE_MAX = 500

MESSAGES = """
select m.id, m.role::text as role, m.state::text as state, m.body, m.created_at,
       sp.display_name as speaker_name, sp.external_id as speaker_id, sp.namespace as speaker_namespace
  from messages m
  join conversations c on c.id = m.conversation_id
  left join actors sp on sp.id = m.speaker_actor_id
 where m.conversation_id = %(id)s
   and c.workspace_id = %(ws)s
   and (c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)
   and (m.created_at, m.id) > (%(after_at)s::timestamptz, %(after_id)s::bigint)
 order by m.created_at, m.id
 limit %(fetch)s
"""


def clamp(limit: int | None) -> int:
    return PAGE_DEFAULT if limit is None else max(1, min(int(limit), PAGE_MAX))


def messages(conn: psycopg.Connection, scope: Scope, codec: CursorCodec, conversation_id: int,
             after: str | None, limit: int) -> dict:
    """One page of messages in the order they were written; `next` continues after the last."""
    # The cursor is bound to its conversation: one conversation's cursor cannot page another's.
    fp = fingerprint("transcript", conversation_id)
    after_at, after_id = "-infinity", -MAX_ID
    if after:
        after_at, after_id = codec.decode_keyset(after, "transcript", fp)
    rows = conn.execute(MESSAGES, {
        "id": conversation_id, "ws": scope.workspace_id, "agents": scope.agent_ids, "actor": scope.actor_id,
        "after_at": after_at, "after_id": after_id, "fetch": limit + 1,
    }).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    out = []
    for r in rows:
        speaker = None
        if r["speaker_id"] is not None:
            speaker = {"namespace": r["speaker_namespace"], "external_id": r["speaker_id"],
                       "display_name": r["speaker_name"]}
        out.append({"id": r["id"], "role": r["role"], "state": r["state"], "body": r["body"],
                    "speaker": speaker, "created_at": r["created_at"].isoformat()})
    nxt = None
    if more:
        last = rows[-1]
        nxt = codec.encode("transcript", fp, [last["created_at"].isoformat(), last["id"]])
    return {"messages": out, "next": nxt}
