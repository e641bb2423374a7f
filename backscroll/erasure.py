"""`backscroll workspaces erase`: one workspace's data deleted, the rest of the installation untouched.

`backscroll purge` (store/purge.py) drops everything at once. A workspace is erased row by row
instead, because the others go on being written and searched meanwhile. Each row is deleted by the
owner of its table (tests/unit/test_write_owners.py): the workspace's tokens by access, its
conversations, messages, memories, actors and the workspace by ingest, the statistics by search,
the usage ledger and coverage counters by embeddings. This module only orders them:

1. its tokens are revoked first (one short transaction), so nothing reads from or writes into it
   while it is erased;
2. its messages, then its conversations, memories, actors and embedding usage rows are deleted in
   batches, each batch its own transaction: the per-row triggers (search statistics deltas,
   embedding coverage, the outbox, the search sidecar) fire for one batch at a time, and no lock
   is held for the whole erasure. The cascades take each message's document, vectors, evidence
   and outbox row along;
3. one last transaction deletes the workspace row (cascading to agents, connectors, identity
   links, tokens, audience keys, backfill positions) and its retirement mark, and the rows keyed by
   its agents that no foreign key reaches: the BM25 statistics and coverage counters and their
   pending deltas. The fold of the statistics is held off (its advisory lock) so it cannot fold a
   deleted delta back into a counter.

Killed midway, running it again finishes the job: every step deletes what is left. Progress is
counted in rows; no content is ever printed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from .access.auth import revoke_workspace_tokens
from .embeddings import erase as embeddings_erase
from .ingest import actors, conversations, memories, messages, workspaces
from .search import erase as search_erase

log = logging.getLogger(__name__)

BATCH = 1000
# A batch waits this long for a lock (a writer still finishing), then fails: run it again.
LOCK_TIMEOUT = "set local lock_timeout = '30s'"
# FOR UPDATE waits for the writers that hold KEY SHARE on it (indexing a document) to finish.
HOLD = "select 1 from workspaces where id = %(ws)s for update"
AGENTS = "select id from agents where workspace_id = %(ws)s"

# (what, deleter): each deletes at most `batch` rows of the workspace; repeated until none is left.
BATCHES: list[tuple[str, Callable[[psycopg.Connection, int, int], int]]] = [
    ("messages", messages.delete_batch),
    ("conversations", conversations.delete_batch),
    ("memories", memories.delete_batch),
    ("actors", actors.delete_batch),
    ("embedding usage rows", embeddings_erase.delete_usage_batch),
]


@dataclass
class Erased:
    workspace_id: int | None
    tokens_revoked: int = 0
    deleted: dict[str, int] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return self.workspace_id is not None


def erase_workspace(conn: psycopg.Connection, slug: str, *, batch: int = BATCH,
                    progress: Callable[[str], None] = lambda line: None) -> Erased:
    """Erase workspace `slug` and everything of it. `conn` is in autocommit mode: each step is its own
    transaction. Returns what was deleted; `found` is false when there is no such workspace."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    row = workspaces.find(conn, slug)
    if row is None:
        return Erased(workspace_id=None)
    ws = row["id"]
    erased = Erased(workspace_id=ws)

    with conn.transaction():
        erased.tokens_revoked = len(revoke_workspace_tokens(conn, ws))
    progress(f"workspace {slug} (id {ws}): {erased.tokens_revoked} live token(s) revoked")

    for what, delete_batch in BATCHES:
        total = 0
        while True:
            with conn.transaction():
                conn.execute(LOCK_TIMEOUT)
                n = delete_batch(conn, ws, batch)
            if n <= 0:
                break
            total += n
            progress(f"workspace {slug}: deleted {n} {what} ({total} so far)")
        erased.deleted[what] = total

    with conn.transaction():
        conn.execute(LOCK_TIMEOUT)
        search_erase.hold_fold(conn)
        if conn.execute(HOLD, {"ws": ws}).fetchone() is None:
            progress(f"workspace {slug}: already gone")
            return erased
        agents = [r["id"] for r in conn.execute(AGENTS, {"ws": ws})]
        # Whatever was written between the batches and now goes with the row (its triggers append
        # deltas for these agents, deleted just below).
        workspaces.delete(conn, ws)
        keyed = search_erase.forget_agents(conn, agents) + embeddings_erase.forget_agents(conn, agents)
        erased.deleted["statistics rows"] = keyed
    progress(f"workspace {slug}: deleted the workspace, its {len(agents)} agent(s) and {keyed} statistics row(s)")
    log.warning("erased workspace %s (id %d)", slug, ws)
    return erased
