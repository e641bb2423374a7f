"""`backscroll workspaces erase`: one workspace's data deleted, the rest of the installation untouched.

`backscroll purge` (purge.py) drops everything at once. A workspace is erased row by row instead,
because the others go on being written and searched meanwhile:

1. its tokens are revoked first (one short transaction), so nothing reads from or writes into it
   while it is erased;
2. its messages, then its conversations, memories and actors are deleted in batches, each batch
   its own transaction: the per-row triggers (search statistics deltas, embedding coverage, the
   outbox, the search sidecar) fire for one batch at a time, and no lock is held for the whole
   erasure. The cascades take each message's document, vectors, evidence and outbox row along;
3. one last transaction deletes the workspace row (cascading to agents, connectors, identity
   links, tokens, audience keys, backfill positions) and the rows keyed by its agents and audience
   keys that no foreign key reaches: the BM25 statistics and coverage counters and their pending
   deltas (per agent: no other workspace's agent shares one, so no other workspace's statistics
   move), its embedding usage ledger and its retirement mark. The fold of the statistics is held
   off (its advisory lock) so it cannot fold a deleted delta back into a counter.

Killed midway, running it again finishes the job: every step deletes what is left. Progress is
counted in rows; no content is ever printed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

BATCH = 1000
# A batch waits this long for a lock (a writer still finishing), then fails: run it again.
LOCK_TIMEOUT = "set local lock_timeout = '30s'"
# backscroll_fold_search_stats takes it with pg_try_advisory_xact_lock and skips a round when held.
FOLD_LOCK = "select pg_advisory_xact_lock(hashtext('backscroll_fold_search_stats'))"

FIND = "select id from workspaces where slug = %(slug)s"
# FOR UPDATE waits for the writers that hold KEY SHARE on it (indexing a document) to finish.
HOLD = "select 1 from workspaces where id = %(ws)s for update"
AGENTS = "select id from agents where workspace_id = %(ws)s"
DELETE_WORKSPACE = "delete from workspaces where id = %(ws)s"
DELETE_RETIREMENT = "delete from workspace_retirements where workspace_id = %(ws)s"


def _batch_of(table: str) -> sql.Composed:
    """At most %(batch)s rows of `table` that belong to the workspace, deleted."""
    return sql.SQL("delete from {t} where id = any(array(select id from {t} where workspace_id = %(ws)s "
                   "order by id limit %(batch)s))").format(t=sql.Identifier(table))


# (what, statement): each deletes at most %(batch)s rows of the workspace; repeated until none is left.
BATCHES: list[tuple[str, sql.Composable]] = [
    ("messages", sql.SQL("""
delete from messages where id = any(array(
    select m.id from conversations c join messages m on m.conversation_id = c.id
     where c.workspace_id = %(ws)s order by m.id limit %(batch)s))""")),
    *((what, _batch_of(table)) for what, table in (
        ("conversations", "conversations"), ("memories", "memories"), ("actors", "actors"),
        ("embedding usage rows", "embedding_usage"))),
]

# Keyed by agent (and audience key), reached by no foreign key.
AGENT_KEYED = [
    sql.SQL("delete from {} where agent_id = any(%(agents)s)").format(sql.Identifier(table)) for table in (
        "search_term_deltas", "search_doc_deltas", "embedding_coverage_deltas",
        "search_term_stats", "search_doc_stats", "embedding_coverage_stats",
        "search_audience_term_stats", "search_audience_doc_stats", "embedding_audience_coverage_stats")
]


@dataclass
class Erased:
    workspace_id: int | None
    tokens_revoked: int = 0
    deleted: dict[str, int] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return self.workspace_id is not None


def erase_workspace(conn: psycopg.Connection, slug: str, *, revoke: Callable[[psycopg.Connection, int], list],
                    batch: int = BATCH, progress: Callable[[str], None] = lambda line: None) -> Erased:
    """Erase workspace `slug` and everything of it. `conn` is in autocommit mode: each step is its own
    transaction. `revoke(conn, workspace_id)` revokes its live tokens (the access layer's, which
    owns them; the ids revoked). Returns what was deleted; `found` is false when there is no such
    workspace."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    row = conn.execute(FIND, {"slug": slug}).fetchone()
    if row is None:
        return Erased(workspace_id=None)
    ws = _value(row, "id")
    erased = Erased(workspace_id=ws)

    with conn.transaction():
        erased.tokens_revoked = len(revoke(conn, ws))
    progress(f"workspace {slug} (id {ws}): {erased.tokens_revoked} live token(s) revoked")

    for what, statement in BATCHES:
        total = 0
        while True:
            with conn.transaction():
                conn.execute(LOCK_TIMEOUT)
                n = conn.execute(statement, {"ws": ws, "batch": batch}).rowcount
            if n <= 0:
                break
            total += n
            progress(f"workspace {slug}: deleted {n} {what} ({total} so far)")
        erased.deleted[what] = total

    with conn.transaction():
        conn.execute(LOCK_TIMEOUT)
        conn.execute(FOLD_LOCK)
        if conn.execute(HOLD, {"ws": ws}).fetchone() is None:
            progress(f"workspace {slug}: already gone")
            return erased
        agents = [_value(r, "id") for r in conn.execute(AGENTS, {"ws": ws})]
        # Whatever was written between the batches and now goes with the row (its triggers append
        # deltas for these agents, deleted just below).
        conn.execute(DELETE_WORKSPACE, {"ws": ws})
        keyed = 0
        for statement in AGENT_KEYED:
            keyed += conn.execute(statement, {"agents": agents}).rowcount
        conn.execute(DELETE_RETIREMENT, {"ws": ws})
        erased.deleted["statistics rows"] = keyed
    progress(f"workspace {slug}: deleted the workspace, its {len(agents)} agent(s) and {keyed} statistics row(s)")
    log.warning("erased workspace %s (id %d)", slug, ws)
    return erased


def _value(row, key: str):
    return row[key] if isinstance(row, dict) else row[0]
