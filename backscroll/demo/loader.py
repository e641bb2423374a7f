"""Loading the corpus through the real ingest code (once; idempotent on external ids) and minting
the demo tokens."""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg

from ..access.auth import TokenKind, create_token, revoke_token
from .. import ingest
from .corpus import (
    ACME_STREAMING, ALICE_WEDDING, DB_MIGRATION_PLAN, DOUBLE_BOOKING, FRENCH, INCIDENT, ROSE_ROOM,
    STREAMING, SURPRISE, build_corpus,
)
from .data import ACME_STAFF, CONVERSATION_PREFIX, GH_STAFF, Person, WORKSPACES


# ---------------------------------------------------------------------------------------------
# Loading.
# ---------------------------------------------------------------------------------------------

@dataclass
class DemoInfo:
    loaded: bool                   # False: an earlier run's corpus was found and reused
    conversations: int             # in the demo workspaces, all told
    messages: int
    conversations_created: int     # by this call
    messages_created: int
    seconds: float
    workspaces: dict[str, int]     # slug -> id
    ids: dict[str, int]            # name of a featured conversation -> its id


FEATURED = {
    "rose_room": ("grand-hotel", ROSE_ROOM),
    "double_booking": ("grand-hotel", DOUBLE_BOOKING),
    "french": ("grand-hotel", FRENCH),
    "surprise": ("grand-hotel", SURPRISE),
    "streaming": ("grand-hotel", STREAMING),
    "alice_wedding": ("grand-hotel", ALICE_WEDDING),
    "incident": ("acme", INCIDENT),
    "db_migration": ("acme", DB_MIGRATION_PLAN),
    "acme_streaming": ("acme", ACME_STREAMING),
}

COUNT_DEMO = """
select count(*) as n from conversations c join workspaces w on w.id = c.workspace_id
 where w.slug = any(%(slugs)s) and c.external_id = any(%(ids)s)
"""
TOTALS = """
select (select count(*) from conversations c where c.workspace_id = any(%(ws)s)) as conversations,
       (select count(*) from messages m join conversations c on c.id = m.conversation_id
         where c.workspace_id = any(%(ws)s)) as messages
"""
FEATURED_IDS = """
select w.slug, c.external_id, c.id from conversations c join workspaces w on w.id = c.workspace_id
 where (w.slug, c.external_id) in (select * from unnest(%(slugs)s::text[], %(ids)s::text[]))
"""


def load_demo(conn: psycopg.Connection, *, now: datetime | None = None, force: bool = False) -> DemoInfo:
    """Load the demo corpus unless an earlier run did; with ``force``, run the (idempotent) load anyway."""
    started = time.perf_counter()
    corpus = build_corpus(now)
    slugs = list(WORKSPACES)
    expected = len(corpus)
    with conn.transaction():
        found = conn.execute(COUNT_DEMO, {"slugs": slugs, "ids": [line.external_id for _, line in corpus]}
                             ).fetchone()["n"]
        loaded = force or found != expected
        for slug, name in WORKSPACES.items():
            ingest.workspaces.ensure(conn, slug, name)
        workspaces = {r["slug"]: r["id"] for r in conn.execute(
            "select slug, id from workspaces where slug = any(%(slugs)s)", {"slugs": slugs})}
        before = conn.execute(TOTALS, {"ws": list(workspaces.values())}).fetchone()
        messages_created = 0
        if loaded:
            for slug, line in corpus:
                _, created = ingest.import_line(conn, workspaces[slug], line)
                messages_created += created
        after = conn.execute(TOTALS, {"ws": list(workspaces.values())}).fetchone()
        featured = {(r["slug"], r["external_id"]): r["id"] for r in conn.execute(FEATURED_IDS, {
            "slugs": [ws for ws, _ in FEATURED.values()],
            "ids": [CONVERSATION_PREFIX + key for _, key in FEATURED.values()]})}
    return DemoInfo(
        loaded=loaded,
        conversations=after["conversations"],
        messages=after["messages"],
        conversations_created=after["conversations"] - before["conversations"],
        messages_created=messages_created,
        seconds=time.perf_counter() - started,
        workspaces=workspaces,
        ids={name: featured[(ws, CONVERSATION_PREFIX + key)] for name, (ws, key) in FEATURED.items()},
    )


# ---------------------------------------------------------------------------------------------
# Tokens.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TokenSpec:
    env: str
    name: str
    kind: TokenKind
    workspace: str | None = None
    actor: Person | None = None
    agents: tuple[str, ...] | None = None  # None: every agent of the workspace
    note: str = ""


TOKENS = (
    TokenSpec("BACKSCROLL_READER_TOKEN", "demo-reader", TokenKind.reader, "grand-hotel", GH_STAFF["alice"],
              ("concierge",), "Alice Moreau, grand-hotel: the concierge agent only, plus her own conversations"),
    TokenSpec("BACKSCROLL_READER_ALL_TOKEN", "demo-reader-all", TokenKind.reader, "grand-hotel", GH_STAFF["bob"],
              None, "Bob Okafor, grand-hotel: every agent"),
    TokenSpec("BACKSCROLL_ACME_READER_TOKEN", "demo-reader-acme", TokenKind.reader, "acme", ACME_STAFF["ravi"],
              None, "Ravi Patel, acme: every agent"),
    TokenSpec("BACKSCROLL_INGEST_TOKEN", "demo-ingest", TokenKind.ingest, "grand-hotel",
              note="writes conversations into grand-hotel"),
    TokenSpec("BACKSCROLL_ADMIN_TOKEN", "demo-admin", TokenKind.admin, note="status and /metrics"),
)

ACTIVE_DEMO_TOKENS = "select id from api_tokens where name = any(%(names)s) and revoked_at is null order by id"


def create_demo_tokens(conn: psycopg.Connection) -> dict[str, str]:
    """Revoke earlier demo tokens and create fresh ones; returns {env var: secret}."""
    secrets: dict[str, str] = {}
    with conn.transaction():
        for row in conn.execute(ACTIVE_DEMO_TOKENS, {"names": [t.name for t in TOKENS]}).fetchall():
            revoke_token(conn, row["id"])
        for spec in TOKENS:
            ws_id = ingest.workspace_id_for(conn, spec.workspace) if spec.workspace else None
            actor_id = (ingest.ensure_actor(conn, ws_id, spec.actor.namespace, spec.actor.ref())
                        if spec.actor else None)
            agent_ids = None
            if spec.agents is not None:
                agent_ids = [r["id"] for r in conn.execute(
                    "select id from agents where workspace_id = %s and slug = any(%s) order by id",
                    (ws_id, list(spec.agents)))]
            _, secret = create_token(conn, spec.kind, name=spec.name, workspace_id=ws_id, actor_id=actor_id,
                                     agent_ids=agent_ids)
            secrets[spec.env] = secret
    return secrets


def write_tokens_env(path: Path, api_url: str, tokens: dict[str, str]) -> Path:
    """Write the tokens as shell exports, readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    notes = {t.env: t.note for t in TOKENS}
    lines = ["# Backscroll demo tokens (`source` this file). Created by `backscroll demo`; each run revokes",
             "# the previous ones.", f"export BACKSCROLL_API_URL={shlex.quote(api_url)}"]
    for env, secret in tokens.items():
        lines.append(f"# {notes.get(env, '')}")
        lines.append(f"export {env}={shlex.quote(secret)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC
    return path
