"""Writing conversations and messages: the one path the API and `backscroll import` share.

Every function takes a connection inside the caller's transaction, so a request or an import
line either lands whole or not at all.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Annotated, Callable

import psycopg
from psycopg.types.json import Jsonb
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from .. import language
from ..errors import BadRequest, BodyTooLong, Conflict, NotFound
from ..vocabulary import ExternalId, Prose, Slug, Text, Title

# Far-future timestamps would pin a conversation to the top of every recent list.
MAX_CLOCK_SKEW = timedelta(hours=1)


def _not_future(value: datetime | None) -> datetime | None:
    if value is not None and value > datetime.now(timezone.utc) + MAX_CLOCK_SKEW:
        raise ValueError("is in the future")
    return value


Timestamp = Annotated[AwareDatetime, AfterValidator(_not_future)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ActorKind(str, Enum):
    person = "person"
    bot = "bot"
    agent = "agent"


class Role(str, Enum):
    user = "user"
    assistant = "assistant"
    tool = "tool"
    summary = "summary"
    system = "system"


class State(str, Enum):
    streaming = "streaming"
    finished = "finished"


class AudienceKind(str, Enum):
    public = "public"
    workspace = "workspace"
    members = "members"
    external = "external"


# The kinds whose readers decide where they may be disclosed (a non-empty subset, same namespace).
PRIVATE_KINDS = frozenset({AudienceKind.members, AudienceKind.external})


class ActorRef(Strict):
    external_id: ExternalId = Field(description="Stable id in the namespace (never the display name).")
    display_name: Annotated[Prose, Field(max_length=256)] | None = None
    kind: ActorKind = ActorKind.person
    namespace: Annotated[Text, Field(min_length=3, max_length=200)] | None = Field(
        default=None, description="`type:name`; defaults to the conversation's connector."
    )


class ConnectorRef(Strict):
    type: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")]
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,126}$")]

    @property
    def namespace(self) -> str:
        return f"{self.type}:{self.name}"


class Audience(Strict):
    kind: AudienceKind
    namespace: Annotated[Text, Field(min_length=3, max_length=200)] | None = Field(
        default=None, description="`type:name`; defaults to the conversation's connector."
    )
    readers: list[ExternalId] = Field(
        default_factory=list, max_length=10_000,
        description=("Who may read it, by external id in the namespace: required (at least one) for members and "
                     "external, refused for public and workspace. An external conversation's readers are the "
                     "people of the other organisation(s) it is shared with, as the connector knows them."))

    @model_validator(mode="after")
    def _readers_match_kind(self) -> "Audience":
        if self.kind in PRIVATE_KINDS and not self.readers:
            raise ValueError(f"a {self.kind.value} audience needs at least one reader (its readers decide where it "
                             "may be disclosed; an empty set would match nothing)")
        if self.kind not in PRIVATE_KINDS and self.readers:
            raise ValueError(f"readers are only meaningful for a members or external audience, not {self.kind.value}")
        return self


class ConversationIn(Strict):
    agent: Slug
    agent_name: Annotated[Prose, Field(max_length=200)] | None = None
    connector: ConnectorRef
    external_id: ExternalId
    title: Title = ""
    audience: Audience | None = Field(
        default=None, description="Who may read it; defaults to members = [creator]."
    )
    creator: ActorRef | None = None
    created_at: Timestamp | None = None

    @model_validator(mode="after")
    def _someone_can_read_it(self) -> "ConversationIn":
        if self.audience is None and self.creator is None:
            raise ValueError("give an audience, or a creator (the audience then defaults to the creator alone)")
        return self


class Evidence(Strict):
    kind: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")] = Field(
        description="Where the message came from: connector_event, import, agent_reply, ...")
    reference: Annotated[Text, Field(max_length=512)] | None = Field(
        default=None, description="The source's own id for it (an event id, a file and line)")


DEFAULT_EVIDENCE = Evidence(kind="ingest")
MAX_PROVENANCE_IDS = 10_000


class MessageIn(Strict):
    external_id: ExternalId | None = None
    role: Role
    speaker: ActorRef | None = None
    body: Prose = ""
    state: State = State.finished
    audience: Audience | None = Field(default=None, description="Defaults to the conversation's audience.")
    created_at: Timestamp | None = None
    evidence: Evidence | None = Field(
        default=DEFAULT_EVIDENCE,
        description=("Structured source evidence. Defaults to {\"kind\": \"ingest\"}: it arrived through an "
                     "authenticated connector. Explicit null records none, and a message without evidence "
                     "is never eligible for search_history."))
    history_message_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(
        default_factory=list, max_length=MAX_PROVENANCE_IDS,
        description="Provenance of an agent reply: the history messages it was built from.")
    memory_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(
        default_factory=list, max_length=MAX_PROVENANCE_IDS,
        description="Provenance of an agent reply: the memories it was built from.")


class MessagePatch(Strict):
    body: Prose | None = Field(default=None, description="Replace the body.")
    append: Prose | None = Field(default=None, description="Append to the body (streaming).")
    state: State | None = None

    @model_validator(mode="after")
    def _one_change(self) -> "MessagePatch":
        if self.body is not None and self.append is not None:
            raise ValueError("give body or append, not both")
        if self.body is None and self.append is None and self.state is None:
            raise ValueError("nothing to change: give body, append or state")
        return self


class ImportLine(ConversationIn):
    workspace: Slug | None = None
    messages: list[MessageIn] = Field(default_factory=list, max_length=100_000)


UPSERT_AGENT = """
insert into agents (workspace_id, slug, name) values (%(workspace_id)s, %(slug)s, %(name)s)
on conflict (workspace_id, slug) do update set name = coalesce(%(new_name)s, agents.name)
returning id
"""
UPSERT_CONNECTOR = """
insert into connectors (agent_id, type, name) values (%(agent_id)s, %(type)s, %(name)s)
on conflict (agent_id, type, name) do update set type = excluded.type
returning id, namespace
"""
UPSERT_ACTOR = """
insert into actors (workspace_id, namespace, external_id, display_name, kind)
values (%(workspace_id)s, %(namespace)s, %(external_id)s, coalesce(%(display_name)s, ''), %(kind)s)
on conflict (workspace_id, namespace, external_id) do update
   set display_name = coalesce(%(display_name)s, actors.display_name)
returning id
"""
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
CARRY_MEMORY_READERS = """
update memories k set audience_readers = %(readers)s::text[]
  from turns t
 where t.id = k.turn_id and t.conversation_id = %(id)s and k.audience_inherited
   and k.audience_kind = %(kind)s::audience_kind and k.audience_namespace = %(namespace)s
   and k.audience_readers = %(old)s::text[]
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
INSERT_MESSAGE = """
insert into messages (conversation_id, external_id, speaker_actor_id, role, body, state,
                      audience_kind, audience_namespace, audience_readers, audience_inherited, created_at,
                      updated_at, history_message_ids, memory_ids, language)
values (%(conversation_id)s, %(external_id)s, %(speaker_actor_id)s, %(role)s, %(body)s, %(state)s,
        %(audience_kind)s, %(audience_namespace)s, %(audience_readers)s, %(audience_inherited)s,
        coalesce(%(created_at)s, now()), coalesce(%(created_at)s, now()),
        %(history_message_ids)s::bigint[], %(memory_ids)s::bigint[], %(language)s::regconfig)
on conflict (conversation_id, external_id) do update
   set body = excluded.body, state = excluded.state, role = excluded.role,
       speaker_actor_id = excluded.speaker_actor_id, language = excluded.language
 where messages.state = 'streaming'
   and (messages.body, messages.state, messages.role, messages.speaker_actor_id)
       is distinct from (excluded.body, excluded.state, excluded.role, excluded.speaker_actor_id)
returning id, (xmax = 0) as created
"""
# A replayed message is a no-op; only a streaming one may still change through a replay.
SELECT_MESSAGE_BY_KEY = """
select id, state::text as state,
       (body, role, speaker_actor_id) is not distinct from (%(body)s, %(role)s::message_role, %(speaker_actor_id)s::bigint)
       and state::text = %(state)s as same
  from messages where conversation_id = %(conversation_id)s and external_id = %(external_id)s
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
DELETE_CONVERSATION = "delete from conversations where id = %(id)s and workspace_id = %(workspace_id)s returning id"
SELECT_WORKSPACE = "select id from workspaces where slug = %(slug)s"
SELECT_WORKSPACE_SLUG = "select slug from workspaces where id = %(id)s"


def workspace_id_for(conn: psycopg.Connection, slug: str) -> int:
    row = conn.execute(SELECT_WORKSPACE, {"slug": slug}).fetchone()
    if row is None:
        raise NotFound(f"unknown workspace {slug!r}: create it with `backscroll workspaces create {slug}`")
    return row["id"]


def workspace_slug(conn: psycopg.Connection, workspace_id: int) -> str:
    return conn.execute(SELECT_WORKSPACE_SLUG, {"id": workspace_id}).fetchone()["slug"]


def check_body(limit: int, text: str | None, field: str = "body") -> None:
    """The one body limit (Settings.body_max_chars) every write path holds to: append, patch,
    import, replies and memories refuse a longer body alike. A setting, not a type, so it is
    checked here rather than by the wire models."""
    if text is not None and len(text) > limit:
        raise BodyTooLong(f"{field}: {len(text)} characters; the most accepted is {limit}")


def ensure_actor(conn: psycopg.Connection, workspace_id: int, namespace: str, ref: ActorRef) -> int:
    return conn.execute(
        UPSERT_ACTOR,
        {
            "workspace_id": workspace_id,
            "namespace": ref.namespace or namespace,
            "external_id": ref.external_id,
            "display_name": ref.display_name,
            "kind": ref.kind.value,
        },
    ).fetchone()["id"]


def actor_resolver(conn: psycopg.Connection, workspace_id: int) -> Callable[[str, str], int]:
    """(namespace, external id) -> the actor's id, made known if it was not: how a turn's
    requester is resolved (search.turns.register_turn takes it; the actors are ingestion's to write)."""
    return lambda namespace, external_id: ensure_actor(conn, workspace_id, namespace,
                                                       ActorRef(external_id=external_id))


def _audience_params(audience: Audience | None, default_namespace: str, fallback: dict) -> dict:
    if audience is None:
        return fallback
    return {
        "audience_kind": audience.kind.value,
        "audience_namespace": audience.namespace or default_namespace,
        "audience_readers": sorted(set(audience.readers)),
    }


def ensure_agents(conn: psycopg.Connection, workspace_id: int, slugs: list[str]) -> list[int]:
    """The agents of these slugs, each made (named after its slug) if it is not known yet; their
    ids, sorted. A known agent keeps its name."""
    return sorted(conn.execute(UPSERT_AGENT, {"workspace_id": workspace_id, "slug": slug, "name": slug,
                                              "new_name": None}).fetchone()["id"] for slug in sorted(set(slugs)))


def upsert_conversation(conn: psycopg.Connection, workspace_id: int, conv: ConversationIn) -> tuple[int, bool]:
    """Create or update a conversation keyed by (agent, connector, external id)."""
    agent_id = conn.execute(
        UPSERT_AGENT,
        {"workspace_id": workspace_id, "slug": conv.agent, "name": conv.agent_name or conv.agent,
         "new_name": conv.agent_name},
    ).fetchone()["id"]
    connector = conn.execute(
        UPSERT_CONNECTOR, {"agent_id": agent_id, "type": conv.connector.type, "name": conv.connector.name}
    ).fetchone()
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
        **_audience_params(conv.audience, namespace, creator_default),
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
    return {"messages": conn.execute(CARRY_MESSAGE_READERS, args).rowcount,
            "memories": conn.execute(CARRY_MEMORY_READERS, args).rowcount}


class ReadersIn(Strict):
    readers: list[ExternalId] = Field(
        min_length=1, max_length=10_000,
        description="The conversation's readers by external id in its audience's namespace (at least one).")


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


def append_message(conn: psycopg.Connection, workspace_id: int, conversation_id: int, msg: MessageIn) -> tuple[int, bool]:
    """Add a message (idempotent on its external id); returns (id, created)."""
    conv = conn.execute(SELECT_CONVERSATION_FOR_WRITE, {"id": conversation_id, "workspace_id": workspace_id}).fetchone()
    if conv is None:
        raise NotFound(f"no conversation {conversation_id}")
    namespace = conv["connector_namespace"]
    speaker_id = ensure_actor(conn, workspace_id, namespace, msg.speaker) if msg.speaker else None
    inherited = {
        "audience_kind": conv["audience_kind"],
        "audience_namespace": conv["audience_namespace"],
        "audience_readers": conv["audience_readers"],
    }
    history = sorted(set(msg.history_message_ids))
    memories = sorted(set(msg.memory_ids))
    check_provenance(conn, workspace_id, history, memories)
    params = {
        "conversation_id": conversation_id,
        "external_id": msg.external_id,
        "speaker_actor_id": speaker_id,
        "role": msg.role.value,
        "body": msg.body,
        "state": msg.state.value,
        "created_at": msg.created_at,
        "history_message_ids": history,
        "memory_ids": memories,
        "audience_inherited": msg.audience is None,
        "language": language.detector(conn).detect(msg.body),
        **_audience_params(msg.audience, namespace, inherited),
    }
    row = conn.execute(INSERT_MESSAGE, params).fetchone()
    if row is None:
        existing = conn.execute(SELECT_MESSAGE_BY_KEY, params).fetchone()
        if not existing["same"]:
            raise Conflict(f"message {msg.external_id!r} is finished and can no longer change",
                           code="message_finished")
        return existing["id"], False
    if row["created"] and msg.evidence is not None:
        conn.execute(INSERT_EVIDENCE, {"id": row["id"], "kind": msg.evidence.kind,
                                       "reference": msg.evidence.reference})
    return row["id"], bool(row["created"])


# Many messages of one conversation in one statement (an import line): the indexing trigger then
# writes their documents, statistics deltas and embedding jobs once for the statement (migration
# 0023). The same rules as INSERT_MESSAGE, row by row: a new external id is inserted, a streaming
# message may still change, a finished one may not.
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


def append_messages(conn: psycopg.Connection, workspace_id: int, conversation_id: int,
                    messages: list[MessageIn]) -> list[tuple[int, bool]]:
    """append_message for many messages of one conversation, in one statement; (id, created) of
    each, in order. Messages without an external id, or one id twice, go one by one."""
    keys = [m.external_id for m in messages]
    if len(messages) < 2 or None in keys or len(set(keys)) < len(keys):
        return [append_message(conn, workspace_id, conversation_id, m) for m in messages]
    conv = conn.execute(SELECT_CONVERSATION_FOR_WRITE, {"id": conversation_id, "workspace_id": workspace_id}).fetchone()
    if conv is None:
        raise NotFound(f"no conversation {conversation_id}")
    namespace = conv["connector_namespace"]
    inherited = {k: conv[k] for k in ("audience_kind", "audience_namespace", "audience_readers")}
    speakers: dict[tuple, int] = {}
    history: set[int] = set()
    memories: set[int] = set()
    detect = language.detector(conn)
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
            **_audience_params(msg.audience, namespace, inherited),
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
        conn.execute(SET_LANGUAGE, {"id": message_id, "language": language.detector(conn).detect(row["sample"])})
    return {k: row[k] for k in ("id", "state", "body_chars")}


def delete_message(conn: psycopg.Connection, workspace_id: int, message_id: int) -> None:
    if conn.execute(DELETE_MESSAGE, {"id": message_id, "workspace_id": workspace_id}).fetchone() is None:
        raise NotFound(f"no message {message_id}")


def delete_conversation(conn: psycopg.Connection, workspace_id: int, conversation_id: int) -> None:
    if conn.execute(DELETE_CONVERSATION, {"id": conversation_id, "workspace_id": workspace_id}).fetchone() is None:
        raise NotFound(f"no conversation {conversation_id}")


def import_line(conn: psycopg.Connection, workspace_id: int, line: ImportLine) -> tuple[int, int]:
    """One import line: a conversation and its messages. Returns (conversation id, messages created)."""
    if line.created_at is None:
        # History began with its first message, not when it was imported: otherwise every
        # imported conversation would read as active today, in file order.
        stamps = [m.created_at for m in line.messages if m.created_at is not None]
        if stamps:
            line = line.model_copy(update={"created_at": min(stamps)})
    conv_id, _ = upsert_conversation(conn, workspace_id, line)
    if any(msg.external_id is None for msg in line.messages):
        raise BadRequest("every imported message needs an external_id, so a re-run does not duplicate it")
    written = append_messages(conn, workspace_id, conv_id, line.messages)
    return conv_id, sum(created for _, created in written)
