"""The mutants: each weakens one narrowing predicate to `true`.

A mutant names the SQL constant it edits in backscroll/sessions.py, the exact text it
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


SESSIONS = "backscroll/sessions.py"

MUTANTS = [
    Mutant("scope: every agent of the workspace", SESSIONS, "RESOLVE_SCOPE",
           "(%(all_agents)s or a.id = any(%(agent_ids)s::bigint[]))", "true"),
    Mutant("recent list: agent predicate", SESSIONS, "RECENT",
           "where c.agent_id = a.agent_id", "where true"),
    Mutant("recent list: own-conversation predicate", SESSIONS, "RECENT",
           "where c.creator_actor_id = %(actor)s", "where true"),
    Mutant("title search: agent predicate", SESSIONS, "SEARCH",
           "and (c.agent_id = any(%(agents)s::bigint[])\n            or (c.creator_actor_id",
           "and (true\n            or (c.creator_actor_id"),
    Mutant("title search: own-conversation predicate", SESSIONS, "SEARCH",
           "or (c.creator_actor_id = %(actor)s", "or (true"),
    Mutant("content search: agent predicate", SESSIONS, "SEARCH",
           "where s.agent_id = any(%(agents)s::bigint[])", "where true"),
    Mutant("content search: own-conversation predicate", SESSIONS, "SEARCH",
           "where c.creator_actor_id = %(actor)s", "where true"),
    Mutant("read one session: visibility predicate", SESSIONS, "ONE",
           "(c.agent_id = any(%(agents)s::bigint[]) or c.creator_actor_id = %(actor)s)", "true"),
    Mutant("read one session: workspace predicate", SESSIONS, "ONE",
           "and c.workspace_id = %(ws)s", ""),
]
