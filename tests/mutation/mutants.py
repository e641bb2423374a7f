"""The mutants: each weakens one narrowing predicate to `true`.

A mutant names the SQL constant it edits in backscroll/search/sessions_sql.py, the exact text it
replaces there (which must occur exactly once inside that constant, so a refactor cannot make
a mutant silently vanish), and what it becomes. Every mutant must make the test suite fail,
and the runner prints which tests caught it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    constant: str
    old: str
    new: str


SESSIONS = "backscroll/search/sessions_sql.py"

MUTANTS = [
    Mutant("scope: every agent of the workspace", SESSIONS, "RESOLVE_SCOPE",
           "(%(all_agents)s or a.id = any(%(agent_ids)s::bigint[]))", "true"),
    # The agents outside the reader's scope through which search reaches the reader's own
    # conversations: only this workspace's, so a sidecar row of another workspace's agent never
    # surfaces through them.
    Mutant("scope: other agents only of the workspace", SESSIONS, "RESOLVE_SCOPE",
           "where o.workspace_id = %(ws)s", "where true"),
    Mutant("recent list: agent predicate", SESSIONS, "RECENT",
           "where c.agent_id = a.agent_id", "where true"),
    Mutant("recent list: own-conversation predicate", SESSIONS, "RECENT",
           "where c.creator_actor_id = %(actor)s", "where true"),
    Mutant("title search: agent predicate", SESSIONS, "SEARCH_TITLES",
           "and (c.agent_id = any(%(agents)s::bigint[])\n            or (c.creator_actor_id",
           "and (true\n            or (c.creator_actor_id"),
    Mutant("title search: own-conversation predicate", SESSIONS, "SEARCH_TITLES",
           "or (c.creator_actor_id = %(actor)s", "or (true"),
    Mutant("content search: agent predicate", SESSIONS, "SEARCH_CONTENT",
           "where s.agent_id = any(%(agents)s::bigint[])", "where true"),
    Mutant("content search: own-conversation predicate", SESSIONS, "SEARCH_CONTENT",
           "where c.creator_actor_id = %(actor)s", "where true"),
    # The own-conversations branch reaches the sidecar through its GIN index over the workspace's
    # other agents; a sidecar row naming one of the reader's conversations but indexed under an
    # agent of another workspace must not surface through it.
    Mutant("content search: own conversations only through the workspace's other agents", SESSIONS, "SEARCH_CONTENT",
           "and s.agent_id = any(%(other_agents)s::bigint[])", "and true"),
    # A query with no positive term (`-rose`) would match nearly everything the reader may see:
    # no content scan is even planned. (In the own-conversations branch the empty query already
    # folds to no scan, so a mutant of its guard would be equivalent.)
    Mutant("content search: no positive term, agents' branch", SESSIONS, "SEARCH_CONTENT",
           "and %(searching)s\n        -- Walking", "and true\n        -- Walking"),
    # `-word` excludes the messages that hold it, in both branches.
    Mutant("content search: excluded words, agents' branch", SESSIONS, "SEARCH_CONTENT",
           "and not coalesce(s.tsv @@ (select <<NEG_TSQUERY>>), false)", "and true"),
    Mutant("content search: excluded words, own-conversations branch", SESSIONS, "SEARCH_CONTENT",
           "and not coalesce(s.tsv @@ <<NEG_TSQUERY>>, false)", "and true"),
    # Semantic hits: the vector list is a filtered index scan with its own copy of the narrowing,
    # and the fused statement checks that list again (tests/semantic/test_hybrid_sessions.py).
    Mutant("semantic list: agent predicate", SESSIONS, "SEMANTIC_NARROWING",
           "and (c.agent_id = any(%(agents)s::bigint[])\n            or (c.creator_actor_id",
           "and (true\n            or (c.creator_actor_id"),
    Mutant("semantic list: own-conversation predicate", SESSIONS, "SEMANTIC_NARROWING",
           "or (c.creator_actor_id = %(actor)s", "or (true"),
    Mutant("semantic list, exact, agents' branch: only the configured model's vectors", SESSIONS,
           "SEMANTIC_AGENTS_ARM", "where e.model = %(model)s", "where true"),
    Mutant("semantic list, exact, own branch: only the configured model's vectors", SESSIONS, "SEMANTIC_OWN_ARM",
           "and e.model = %(model)s", "and true"),
    Mutant("semantic list, HNSW: only the configured model's vectors", SESSIONS, "SEMANTIC_HNSW",
           "where e.model = %(model)s", "where true"),
    Mutant("semantic re-check: agent predicate", SESSIONS, "SEARCH_FUSION",
           "and (vc.agent_id = any(%(agents)s::bigint[])", "and (true"),
    Mutant("semantic re-check: own-conversation predicate", SESSIONS, "SEARCH_FUSION",
           "or (vc.creator_actor_id = %(actor)s", "or (true"),
    # The sidebar's transcript: its query narrows by itself, not only behind get_one's check
    # (tests/browser/test_page_http.py::test_transcript_query_narrows_by_itself).
    Mutant("transcript: visibility predicate", "backscroll/web/transcript.py", "MESSAGES",
           "(c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)", "true"),
    Mutant("read one session: visibility predicate", SESSIONS, "ONE",
           "(c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)", "true"),
    Mutant("read one session: workspace predicate", SESSIONS, "ONE",
           "and c.workspace_id = %(ws)s", ""),
    # The admin API (issue 32): a workspace-scoped admin reaches its own workspace's tokens and
    # workspace alone (tests/api/test_admin_api.py).
    Mutant("admin API: a scoped admin's tokens", "backscroll/access/auth.py", "IN_SCOPE",
           "t.workspace_id = %(scope)s", "true"),
    Mutant("admin API: a scoped admin's workspaces", "backscroll/ingest/workspaces.py", "LIST_WORKSPACES",
           "w.id = %(scope)s", "true"),
]
