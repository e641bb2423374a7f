"""Messages and their source evidence: appended one by one (the API) or many in one statement
(an import line), filled and finished while streaming, deleted; an agent's reply to a turn; the
readers an inherited audience carries; the languages detected later; a workspace's erasure.

Every function takes a connection inside the caller's transaction, so a request or an import
line either lands whole or not at all.
"""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from .. import language
from ..config import get_settings
from ..errors import BadRequest, Conflict, NotFound
from .actors import ensure_actor
from .models import MessageIn, MessagePatch, State, audience_params

WRITES = ("messages", "message_source_evidence")

# The conversation a message is written into, locked the way the write will lock it anyway: the
# statement trigger that moves its last activity (backscroll_touch_conversations) updates this row.
# FOR SHARE here made two concurrent appends each hold a share lock and wait for the other's to
# update it (a deadlock, every time, from 2 writers on); FOR NO KEY UPDATE makes the second wait
# here, before it has anything, and still keeps the audience from changing under the write.
SELECT_CONVERSATION_FOR_WRITE = """
select c.id, c.audience_kind::text as audience_kind, c.audience_namespace, c.audience_readers,
       n.namespace as connector_namespace
  from conversations c join connectors n on n.id = c.connector_id
 where c.id = %(id)s and c.workspace_id = %(workspace_id)s
   for no key update of c
"""
INSERT_EVIDENCE = """
insert into message_source_evidence (message_id, kind, reference) values (%(id)s, %(kind)s, %(reference)s)
on conflict (message_id) do nothing
"""
COUNT_WORKSPACE_MESSAGES = """
select count(*) as n from messages m join conversations c on c.id = m.conversation_id
 where m.id = any(%(ids)s::bigint[]) and c.workspace_id = %(workspace_id)s
"""
COUNT_WORKSPACE_MEMORIES = "select count(*) as n from memories where id = any(%(ids)s::bigint[]) and workspace_id = %(workspace_id)s"
SELECT_MESSAGE_FOR_WRITE = """
select m.id, m.state::text as state
  from messages m join conversations c on c.id = m.conversation_id
 where m.id = %(id)s and c.workspace_id = %(workspace_id)s
   for update of m
"""
UPDATE_MESSAGE = """
update messages
   set body = case when %(append)s::text is not null then normalize(body || %(append)s::text, NFC)
                   else coalesce(%(body)s::text, body) end,
       state = coalesce(%(state)s::message_state, state)
 where id = %(id)s
returning id, state::text as state, length(body) as body_chars,
          case when state = 'finished' then left(body, %(sample)s) end as sample
"""
# A message's language is told from its finished text (a streaming one is not indexed yet).
SET_LANGUAGE = "update messages set language = %(language)s::regconfig where id = %(id)s"
DELETE_MESSAGE = """
delete from messages m using conversations c
 where m.id = %(id)s and c.id = m.conversation_id and c.workspace_id = %(workspace_id)s
returning m.id
"""
# An agent's reply to a turn (search.turns.store_reply): finished, said to the conversation's
# audience as it is now (inherited), its provenance the turn's evidence.
INSERT_REPLY = """
insert into messages (conversation_id, external_id, speaker_actor_id, role, body, state,
                      audience_kind, audience_namespace, audience_readers, audience_inherited,
                      history_message_ids, memory_ids, language)
select c.id, %(external_id)s, null, 'assistant', %(body)s, 'finished',
       c.audience_kind, c.audience_namespace, c.audience_readers, true, %(history)s::bigint[], %(memories)s::bigint[],
       %(language)s::regconfig
  from conversations c where c.id = %(conversation)s
   for no key update of c
returning id
"""
# What was said to the conversation's audience follows its readers: the messages that inherited
# it, and the memories formed in its turns under it (`audience_inherited`, recorded when they
# were written: migration 0020). A message or memory given an audience of its own keeps it, even
# one that happens to equal the conversation's.
CARRY_MESSAGE_READERS = """
update messages set audience_readers = %(readers)s::text[]
 where conversation_id = %(id)s and audience_inherited
   and audience_kind = %(kind)s::audience_kind and audience_namespace = %(namespace)s
   and audience_readers = %(old)s::text[]
"""
# Languages detected after the message was written (search.maintenance, migration 0022).
SET_LANGUAGES = """
update messages m set language = x.language::regconfig
  from unnest(%(ids)s::bigint[], %(languages)s::text[]) as x(id, language)
 where m.id = x.id
"""
# The erasure of a workspace (backscroll.erasure): at most %(batch)s of its messages per statement.
DELETE_BATCH = """
delete from messages where id = any(array(
    select m.id from conversations c join messages m on m.conversation_id = c.id
     where c.workspace_id = %(ws)s order by m.id limit %(batch)s))
"""


def _detector(conn: psycopg.Connection) -> language.Detector:
    """The language detector of this process's settings: every path that writes a message (the
    API, an import, a reply) detects with the languages the deployment configured."""
    return language.detector(conn, get_settings().language)


# Messages of one conversation in one statement (one appended, or an import line's): the indexing
# trigger then writes their documents, statistics deltas and embedding jobs once for the statement
# (migration 0023). Row by row, a new external id is inserted, a streaming message may still
# change, a finished one may not: a replayed message is a no-op.
INSERT_MESSAGES = """
insert into messages (conversation_id, external_id, speaker_actor_id, role, body, state,
                      audience_kind, audience_namespace, audience_readers, audience_inherited, created_at,
                      updated_at, history_message_ids, memory_ids, language)
select %(conversation_id)s, r.external_id, r.speaker_actor_id, r.role, r.body, r.state,
       r.audience_kind, r.audience_namespace, r.audience_readers, r.audience_inherited,
       coalesce(r.created_at, now()), coalesce(r.created_at, now()), r.history_message_ids, r.memory_ids, r.language
  from jsonb_to_recordset(%(rows)s::jsonb) as r(
           ord integer, external_id text, speaker_actor_id bigint, role message_role, body text, state message_state,
           audience_kind audience_kind, audience_namespace text, audience_readers text[], audience_inherited boolean,
           created_at timestamptz, history_message_ids bigint[], memory_ids bigint[], language regconfig)
 order by r.ord
on conflict (conversation_id, external_id) do update
   set body = excluded.body, state = excluded.state, role = excluded.role,
       speaker_actor_id = excluded.speaker_actor_id, language = excluded.language
 where messages.state = 'streaming'
   and (messages.body, messages.state, messages.role, messages.speaker_actor_id)
       is distinct from (excluded.body, excluded.state, excluded.role, excluded.speaker_actor_id)
returning id, external_id, (xmax = 0) as created
"""
SELECT_MESSAGES_BY_KEY = """
select m.id, m.external_id,
       (m.body, m.role, m.speaker_actor_id) is not distinct from (r.body, r.role, r.speaker_actor_id)
       and m.state = r.state as same
  from jsonb_to_recordset(%(rows)s::jsonb) as r(external_id text, speaker_actor_id bigint, role message_role,
                                                body text, state message_state)
  join messages m on m.conversation_id = %(conversation_id)s and m.external_id = r.external_id
"""
INSERT_EVIDENCES = """
insert into message_source_evidence (message_id, kind, reference)
select r.id, r.kind, r.reference from jsonb_to_recordset(%(rows)s::jsonb) as r(id bigint, kind text, reference text)
on conflict (message_id) do nothing
"""


def append_message(conn: psycopg.Connection, workspace_id: int, conversation_id: int, msg: MessageIn) -> tuple[int, bool]:
    """Add a message (idempotent on its external id); returns (id, created)."""
    return append_messages(conn, workspace_id, conversation_id, [msg])[0]


def append_messages(conn: psycopg.Connection, workspace_id: int, conversation_id: int,
                    messages: list[MessageIn]) -> list[tuple[int, bool]]:
    """Add messages of one conversation, in one statement; (id, created) of each, in order.
    Several without an external id, or one id twice, go one by one."""
    keys = [m.external_id for m in messages]
    if len(messages) > 1 and (None in keys or len(set(keys)) < len(keys)):
        return [append_message(conn, workspace_id, conversation_id, m) for m in messages]
    conv = conn.execute(SELECT_CONVERSATION_FOR_WRITE, {"id": conversation_id, "workspace_id": workspace_id}).fetchone()
    if conv is None:
        raise NotFound(f"no conversation {conversation_id}")
    namespace = conv["connector_namespace"]
    inherited = {k: conv[k] for k in ("audience_kind", "audience_namespace", "audience_readers")}
    speakers: dict[tuple, int] = {}
    history: set[int] = set()
    memories: set[int] = set()
    detect = _detector(conn)
    rows = []
    for i, msg in enumerate(messages):
        speaker_id = None
        if msg.speaker is not None:
            key = (msg.speaker.namespace, msg.speaker.external_id, msg.speaker.display_name, msg.speaker.kind)
            if key not in speakers:
                speakers[key] = ensure_actor(conn, workspace_id, namespace, msg.speaker)
            speaker_id = speakers[key]
        history.update(msg.history_message_ids)
        memories.update(msg.memory_ids)
        rows.append({
            "ord": i, "external_id": msg.external_id, "speaker_actor_id": speaker_id, "role": msg.role.value,
            "body": msg.body, "state": msg.state.value,
            "created_at": msg.created_at.isoformat() if msg.created_at else None,
            "history_message_ids": sorted(set(msg.history_message_ids)), "memory_ids": sorted(set(msg.memory_ids)),
            "audience_inherited": msg.audience is None, "language": detect.detect(msg.body),
            **audience_params(msg.audience, namespace, inherited),
        })
    check_provenance(conn, workspace_id, sorted(history), sorted(memories))
    written = {r["external_id"]: (r["id"], bool(r["created"]))
               for r in conn.execute(INSERT_MESSAGES, {"conversation_id": conversation_id, "rows": Jsonb(rows)})}
    missing = [r for r in rows if r["external_id"] not in written]
    if missing:
        for r in conn.execute(SELECT_MESSAGES_BY_KEY, {"conversation_id": conversation_id, "rows": Jsonb(missing)}):
            if not r["same"]:
                raise Conflict(f"message {r['external_id']!r} is finished and can no longer change",
                               code="message_finished")
            written[r["external_id"]] = (r["id"], False)
    evidence = [{"id": written[m.external_id][0], "kind": m.evidence.kind, "reference": m.evidence.reference}
                for m in messages if m.evidence is not None and written[m.external_id][1]]
    if evidence:
        conn.execute(INSERT_EVIDENCES, {"rows": Jsonb(evidence)})
    return [written[k] for k in keys]


def check_provenance(conn: psycopg.Connection, workspace_id: int, history: list[int], memories: list[int]) -> None:
    """Provenance may only name messages and memories of the same workspace."""
    if history:
        found = conn.execute(COUNT_WORKSPACE_MESSAGES, {"ids": history, "workspace_id": workspace_id}).fetchone()["n"]
        if found != len(history):
            raise BadRequest("history_message_ids: every id must be a message of this workspace",
                             code="unknown_provenance")
    if memories:
        found = conn.execute(COUNT_WORKSPACE_MEMORIES, {"ids": memories, "workspace_id": workspace_id}).fetchone()["n"]
        if found != len(memories):
            raise BadRequest("memory_ids: every id must be a memory of this workspace", code="unknown_provenance")


def patch_message(conn: psycopg.Connection, workspace_id: int, message_id: int, patch: MessagePatch) -> dict:
    """Fill or finish a streaming message. A finished message is final."""
    current = conn.execute(SELECT_MESSAGE_FOR_WRITE, {"id": message_id, "workspace_id": workspace_id}).fetchone()
    if current is None:
        raise NotFound(f"no message {message_id}")
    if current["state"] == State.finished.value:
        if patch.body is not None or patch.append is not None or patch.state is State.streaming:
            raise Conflict(f"message {message_id} is finished and can no longer change", code="message_finished")
    row = conn.execute(
        UPDATE_MESSAGE,
        {"id": message_id, "body": patch.body, "append": patch.append,
         "state": patch.state.value if patch.state else None, "sample": language.SAMPLE_CHARS},
    ).fetchone()
    if row["sample"] is not None:
        conn.execute(SET_LANGUAGE, {"id": message_id, "language": _detector(conn).detect(row["sample"])})
    return {k: row[k] for k in ("id", "state", "body_chars")}


def delete_message(conn: psycopg.Connection, workspace_id: int, message_id: int) -> None:
    if conn.execute(DELETE_MESSAGE, {"id": message_id, "workspace_id": workspace_id}).fetchone() is None:
        raise NotFound(f"no message {message_id}")


def write_reply(conn: psycopg.Connection, conversation_id: int, turn_id: int, *, body: str,
                external_id: str | None, history: list[int], memories: list[int]) -> int:
    """An agent's reply to turn `turn_id` (search.turns checks the turn and gathers its
    provenance): a finished assistant message with 'agent_reply' source evidence naming the turn.
    Returns its id."""
    reply_id = conn.execute(INSERT_REPLY, {"conversation": conversation_id, "external_id": external_id, "body": body,
                                           "history": history, "memories": memories,
                                           "language": _detector(conn).detect(body)}).fetchone()["id"]
    conn.execute(INSERT_EVIDENCE, {"id": reply_id, "kind": "agent_reply", "reference": f"turn:{turn_id}"})
    return reply_id


def carry_readers(conn: psycopg.Connection, args: dict) -> int:
    """The conversation's inherited messages take its new readers (conversations.set_readers):
    `args` names the conversation (id), its audience (kind, namespace), the old and new readers."""
    return conn.execute(CARRY_MESSAGE_READERS, args).rowcount


def set_languages(conn: psycopg.Connection, ids: list[int], languages: list[str]) -> None:
    """Record the languages detected for these messages (each rewrites its document, by trigger)."""
    conn.execute(SET_LANGUAGES, {"ids": ids, "languages": languages})


def delete_batch(conn: psycopg.Connection, workspace_id: int, batch: int) -> int:
    """At most `batch` of the workspace's messages deleted (their documents, vectors, evidence and
    outbox rows cascade); how many."""
    return conn.execute(DELETE_BATCH, {"ws": workspace_id, "batch": batch}).rowcount
