"""What ingestion accepts: the wire models of conversations, messages, their audiences and
evidence, import lines and memories, and the one body limit every write path holds to. The
API, `backscroll import` and the demo validate against these; the write functions take them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from ..errors import BodyTooLong
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


class ReadersIn(Strict):
    readers: list[ExternalId] = Field(
        min_length=1, max_length=10_000,
        description="The conversation's readers by external id in its audience's namespace (at least one).")


class MemoryImport(Strict):
    agent: Slug
    body: Prose = Field(min_length=1, description="At most body_max_chars characters, as every body")
    audience: Audience = Field(description="Where the memory may be disclosed; the namespace is required")
    source_message_ids: list[int] = Field(default_factory=list, max_length=500)


def check_body(limit: int, text: str | None, field: str = "body") -> None:
    """The one body limit (IngestSettings.body_max_chars) every write path holds to: append, patch,
    import, replies and memories refuse a longer body alike. A setting, not a type, so it is
    checked here rather than by the wire models."""
    if text is not None and len(text) > limit:
        raise BodyTooLong(f"{field}: {len(text)} characters; the most accepted is {limit}")


def audience_params(audience: Audience | None, default_namespace: str, fallback: dict) -> dict:
    """The audience columns of a row: its own audience (namespace defaulting to the connector's),
    or `fallback` (what it inherits) when it has none."""
    if audience is None:
        return fallback
    return {
        "audience_kind": audience.kind.value,
        "audience_namespace": audience.namespace or default_namespace,
        "audience_readers": sorted(set(audience.readers)),
    }
