"""Actors: people and bots by stable external id in a namespace, made known on first use (a
speaker, a creator, a turn's requester, a reader token's person)."""

from __future__ import annotations

from typing import Callable

import psycopg

from .models import ActorRef

WRITES = ("actors",)

UPSERT_ACTOR = """
insert into actors (workspace_id, namespace, external_id, display_name, kind)
values (%(workspace_id)s, %(namespace)s, %(external_id)s, coalesce(%(display_name)s, ''), %(kind)s)
on conflict (workspace_id, namespace, external_id) do update
   set display_name = coalesce(%(display_name)s, actors.display_name)
returning id
"""
# The erasure of a workspace (backscroll.erasure): at most %(batch)s of its actors per statement.
DELETE_BATCH = """
delete from actors where id = any(array(select id from actors where workspace_id = %(ws)s order by id limit %(batch)s))
"""


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


def delete_batch(conn: psycopg.Connection, workspace_id: int, batch: int) -> int:
    """At most `batch` of the workspace's actors deleted; how many."""
    return conn.execute(DELETE_BATCH, {"ws": workspace_id, "batch": batch}).rowcount
