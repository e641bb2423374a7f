"""Memories written by ingestion (a runtime forms them through its turn: turns.form_memory)."""

from __future__ import annotations

import psycopg
from pydantic import Field

from ..errors import BadRequest, NotFound
from ..vocabulary import Prose, Slug
from .writes import Audience, Strict, check_provenance

INSERT_MEMORY = """
insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, audience_readers,
                      source_message_ids)
select a.workspace_id, a.id, %(body)s, %(kind)s::audience_kind, %(namespace)s, %(readers)s::text[], %(sources)s::bigint[]
  from agents a where a.workspace_id = %(ws)s and a.slug = %(agent)s
returning id
"""


class MemoryImport(Strict):
    agent: Slug
    body: Prose = Field(min_length=1, description="At most body_max_chars characters, as every body")
    audience: Audience = Field(description="Where the memory may be disclosed; the namespace is required")
    source_message_ids: list[int] = Field(default_factory=list, max_length=500)


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
