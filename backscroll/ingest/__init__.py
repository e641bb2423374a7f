"""Writing the history, split by what is written: the wire models (`models`), `workspaces`,
`agents` (and their connectors), `actors`, `conversations`, `messages` (with their source
evidence, an agent's reply), `memories`, identity `links`; JSON-lines imports (`importer`). Each
module declares the tables it writes (`WRITES`) and is the only one that writes them
(tests/unit/test_write_owners.py); the API, `backscroll import`, the demo and search's turns call
these functions. The names below are the package's API, so a caller writes `ingest.append_message`.
"""

from .actors import actor_resolver, ensure_actor
from .agents import ensure_agents
from .conversations import delete_conversation, sealed_conversations, set_readers, upsert_conversation
from .importer import import_line
from .messages import append_message, append_messages, check_provenance, delete_message, patch_message
from .models import (
    DEFAULT_EVIDENCE, MAX_PROVENANCE_IDS, PRIVATE_KINDS, ActorKind, ActorRef, Audience, AudienceKind, ConnectorRef,
    ConversationIn, Evidence, ImportLine, MemoryImport, MessageIn, MessagePatch, ReadersIn, Role, State, Strict,
    check_body,
)
from .workspaces import workspace_id_for, workspace_slug

__all__ = [
    "actor_resolver", "ensure_actor", "ensure_agents", "delete_conversation", "sealed_conversations", "set_readers",
    "upsert_conversation", "import_line", "append_message", "append_messages", "check_provenance", "delete_message",
    "patch_message", "DEFAULT_EVIDENCE", "MAX_PROVENANCE_IDS", "PRIVATE_KINDS", "ActorKind", "ActorRef", "Audience",
    "AudienceKind", "ConnectorRef", "ConversationIn", "Evidence", "ImportLine", "MemoryImport", "MessageIn",
    "MessagePatch", "ReadersIn", "Role", "State", "Strict", "check_body", "workspace_id_for", "workspace_slug",
]
