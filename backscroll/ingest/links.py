"""Identity links: two actors proved to be the same person, in one agent's perspective.

A link lets single-reader private evidence follow that person into their other direct
conversation with the agent, once verified: a link may be recorded waiting for proof, and grants
nothing until `verify` gives it one. Revoking it separates them again; the pre-delivery recheck
sees the revocation before any retrieved history ships.
"""

from __future__ import annotations

import psycopg
from pydantic import BaseModel, ConfigDict, Field

from ..errors import BadRequest, NotFound
from ..vocabulary import ExternalId, Text

WRITES = ("identity_links",)


class ActorKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: Text = Field(min_length=3, max_length=200)
    external_id: ExternalId


class LinkIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    a: ActorKey
    b: ActorKey
    proof: Text | None = Field(
        default=None, min_length=1, max_length=512,
        description=("What proved both identities live in this perspective (e.g. a verification id). Without it "
                     "the link is recorded unverified, waiting for proof, and grants nothing until verified."))


class VerifyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    proof: Text = Field(min_length=1, max_length=512,
                        description="What proved both identities live in this perspective (e.g. a verification id)")


SELECT_AGENT = "select id from agents where workspace_id = %(ws)s and slug = %(slug)s"
SELECT_ACTOR = "select id from actors where workspace_id = %(ws)s and namespace = %(namespace)s and external_id = %(external_id)s"
# Recording a link again never unverifies it: a pending record of a verified link keeps its proof.
INSERT_LINK = """
insert into identity_links (agent_id, actor_a, actor_b, proof, verified_at)
values (%(agent)s, least(%(a)s::bigint, %(b)s::bigint), greatest(%(a)s::bigint, %(b)s::bigint), %(proof)s::text,
        case when %(proof)s::text is not null then now() end)
on conflict (agent_id, actor_a, actor_b) where revoked_at is null do update
   set proof = coalesce(excluded.proof, identity_links.proof),
       verified_at = coalesce(identity_links.verified_at, excluded.verified_at)
returning id, verified_at is not null as verified
"""
VERIFY_LINK = """
update identity_links l set proof = %(proof)s, verified_at = coalesce(l.verified_at, now())
  from agents ag
 where l.id = %(id)s and ag.id = l.agent_id and ag.workspace_id = %(ws)s and l.revoked_at is null
returning l.id
"""
REVOKE_LINK = """
update identity_links l set revoked_at = now()
  from agents ag
 where l.id = %(id)s and ag.id = l.agent_id and ag.workspace_id = %(ws)s and l.revoked_at is null
returning l.id
"""


def _actor(conn: psycopg.Connection, ws: int, key: ActorKey) -> int:
    row = conn.execute(SELECT_ACTOR, {"ws": ws, "namespace": key.namespace, "external_id": key.external_id}).fetchone()
    if row is None:
        raise BadRequest(f"no actor {key.namespace}/{key.external_id} in this workspace", code="unknown_actor")
    return row["id"]


def link(conn: psycopg.Connection, workspace_id: int, body: LinkIn) -> int:
    """Record a link (verified when it comes with proof); returns its id."""
    return record(conn, workspace_id, body)["id"]


def record(conn: psycopg.Connection, workspace_id: int, body: LinkIn) -> dict:
    agent = conn.execute(SELECT_AGENT, {"ws": workspace_id, "slug": body.agent}).fetchone()
    if agent is None:
        raise NotFound(f"no agent {body.agent!r}")
    a, b = _actor(conn, workspace_id, body.a), _actor(conn, workspace_id, body.b)
    if a == b:
        raise BadRequest("an actor cannot be linked to itself", code="self_link")
    return conn.execute(INSERT_LINK, {"agent": agent["id"], "a": a, "b": b, "proof": body.proof}).fetchone()


def verify(conn: psycopg.Connection, workspace_id: int, link_id: int, proof: str) -> None:
    """Give a live link its proof: from now on it grants what a link grants."""
    if conn.execute(VERIFY_LINK, {"id": link_id, "ws": workspace_id, "proof": proof}).fetchone() is None:
        raise NotFound(f"no live identity link {link_id}")


def revoke(conn: psycopg.Connection, workspace_id: int, link_id: int) -> None:
    if conn.execute(REVOKE_LINK, {"id": link_id, "ws": workspace_id}).fetchone() is None:
        raise NotFound(f"no live identity link {link_id}")
