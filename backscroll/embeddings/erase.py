"""What erasing a workspace deletes of the embeddings' own tables (backscroll.erasure runs it):
its usage ledger, in batches, and the backfill coverage counters and their pending deltas of its
agents, which no foreign key reaches. Vectors and outbox jobs go with their messages, by cascade."""

from __future__ import annotations

import psycopg
from psycopg import sql

DELETE_USAGE_BATCH = """
delete from embedding_usage
 where id = any(array(select id from embedding_usage where workspace_id = %(ws)s order by id limit %(batch)s))
"""
FORGET_AGENTS = [sql.SQL("delete from {} where agent_id = any(%(agents)s)").format(sql.Identifier(table)) for table in (
    "embedding_coverage_deltas", "embedding_coverage_stats", "embedding_audience_coverage_stats")]


def delete_usage_batch(conn: psycopg.Connection, workspace_id: int, batch: int) -> int:
    """At most `batch` of the workspace's usage rows deleted; how many."""
    return conn.execute(DELETE_USAGE_BATCH, {"ws": workspace_id, "batch": batch}).rowcount


def forget_agents(conn: psycopg.Connection, agent_ids: list[int]) -> int:
    """Every coverage counter and pending delta of these agents deleted; how many."""
    return sum(conn.execute(statement, {"agents": agent_ids}).rowcount for statement in FORGET_AGENTS)
