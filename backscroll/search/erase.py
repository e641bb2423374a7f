"""What erasing a workspace deletes of search's own tables (backscroll.erasure runs it): the BM25
statistics and their pending deltas, per agent and per (agent, audience key). No foreign key
reaches them; no other workspace's agent shares a row, so no other workspace's numbers move. The
documents themselves (`message_search`) go with their messages, by cascade."""

from __future__ import annotations

import psycopg
from psycopg import sql

# backscroll_fold_search_stats takes it with pg_try_advisory_xact_lock and skips a round when held:
# held, no fold can add a deleted delta back into a counter.
HOLD_FOLD = "select pg_advisory_xact_lock(hashtext('backscroll_fold_search_stats'))"
FORGET_AGENTS = [sql.SQL("delete from {} where agent_id = any(%(agents)s)").format(sql.Identifier(table)) for table in (
    "search_term_deltas", "search_doc_deltas", "search_term_stats", "search_doc_stats",
    "search_audience_term_stats", "search_audience_doc_stats")]


def hold_fold(conn: psycopg.Connection) -> None:
    """Hold off the statistics fold until the caller's transaction ends."""
    conn.execute(HOLD_FOLD)


def forget_agents(conn: psycopg.Connection, agent_ids: list[int]) -> int:
    """Every statistics row and pending delta of these agents deleted; how many."""
    return sum(conn.execute(statement, {"agents": agent_ids}).rowcount for statement in FORGET_AGENTS)
