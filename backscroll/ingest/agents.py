"""Agents and the connectors they talk through (`type:name`, an audience namespace), made on
first use: by a conversation written for them, or by a declaration naming them."""

from __future__ import annotations

import psycopg

from .models import ConnectorRef

WRITES = ("agents", "connectors")

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


def ensure_agent(conn: psycopg.Connection, workspace_id: int, slug: str, name: str | None) -> int:
    """The agent of this slug, made if it is not known yet; `name` renames a known one (None: it
    keeps its name)."""
    return conn.execute(UPSERT_AGENT, {"workspace_id": workspace_id, "slug": slug, "name": name or slug,
                                       "new_name": name}).fetchone()["id"]


def ensure_connector(conn: psycopg.Connection, agent_id: int, connector: ConnectorRef) -> dict:
    """The agent's connector, made if it is not known yet: {id, namespace}."""
    return conn.execute(UPSERT_CONNECTOR, {"agent_id": agent_id, "type": connector.type,
                                           "name": connector.name}).fetchone()


def ensure_agents(conn: psycopg.Connection, workspace_id: int, slugs: list[str]) -> list[int]:
    """The agents of these slugs, each made (named after its slug) if it is not known yet; their
    ids, sorted. A known agent keeps its name."""
    return sorted(ensure_agent(conn, workspace_id, slug, None) for slug in sorted(set(slugs)))
