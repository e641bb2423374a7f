"""Building worlds for tests through the same code paths production uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import psycopg
from fastapi.testclient import TestClient

from backscroll import ingest
from backscroll.ingest import links
from backscroll.search import turns
from backscroll.app import create_app
from backscroll.access.auth import TokenKind, create_token
from backscroll.config import Settings
from backscroll.store.db import connect

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@dataclass
class World:
    url: str
    conn: psycopg.Connection
    workspaces: dict[str, int] = field(default_factory=dict)

    def workspace(self, slug: str) -> int:
        if slug not in self.workspaces:
            self.workspaces[slug] = self.conn.execute(
                "insert into workspaces (slug, name) values (%s, %s) returning id", (slug, slug.title())
            ).fetchone()["id"]
        return self.workspaces[slug]

    def agent_id(self, ws: str, slug: str) -> int:
        return self.conn.execute(
            "select id from agents where workspace_id = %s and slug = %s", (self.workspace(ws), slug)
        ).fetchone()["id"]

    def actor_id(self, ws: str, namespace: str, external_id: str, display_name: str | None = None) -> int:
        return ingest.ensure_actor(self.conn, self.workspace(ws), namespace,
                                   ingest.ActorRef(external_id=external_id, display_name=display_name))

    def conversation(self, ws: str, agent: str, external_id: str, title: str = "", *, creator: str | None = None,
                     connector: tuple[str, str] = ("web", "demo"), created: float = 0,
                     audience: dict | None = None) -> int:
        conv = ingest.ConversationIn(
            agent=agent,
            connector=ingest.ConnectorRef(type=connector[0], name=connector[1]),
            external_id=external_id,
            title=title,
            creator=ingest.ActorRef(external_id=creator) if creator else None,
            audience=ingest.Audience(**audience) if audience else
            (None if creator else ingest.Audience(kind="workspace")),
            created_at=at(created),
        )
        conv_id, _ = ingest.upsert_conversation(self.conn, self.workspace(ws), conv)
        return conv_id

    def message(self, ws: str, conversation_id: int, body: str, *, role: str = "user", minute: float = 1,
                state: str = "finished", speaker: str | None = None, external_id: str | None = None,
                audience: dict | None = None, evidence: bool = True, history: list[int] = (),
                memories: list[int] = ()) -> int:
        msg = ingest.MessageIn(role=role, body=body, state=state, created_at=at(minute), external_id=external_id,
                               speaker=ingest.ActorRef(external_id=speaker) if speaker else None,
                               audience=ingest.Audience(**audience) if audience else None,
                               evidence=ingest.DEFAULT_EVIDENCE if evidence else None,
                               history_message_ids=list(history), memory_ids=list(memories))
        msg_id, _ = ingest.append_message(self.conn, self.workspace(ws), conversation_id, msg)
        return msg_id

    def turn(self, ws: str, agent: str, conversation_id: int, *, requester: str | None = None,
             requester_namespace: str | None = None, answering: int | None = None, loaded: list[int] = ()) -> int:
        body = turns.TurnIn(
            agent=agent, conversation_id=conversation_id, answering_message_id=answering,
            loaded_message_ids=list(loaded),
            requester=turns.RequesterRef(external_id=requester, namespace=requester_namespace) if requester else None)
        return turns.register_turn(self.conn, self.workspace(ws), None, body,
                                   actors=ingest.actor_resolver(self.conn, self.workspace(ws)))

    def link(self, ws: str, agent: str, a: tuple[str, str], b: tuple[str, str]) -> int:
        return links.link(self.conn, self.workspace(ws), links.LinkIn(
            agent=agent, a=links.ActorKey(namespace=a[0], external_id=a[1]),
            b=links.ActorKey(namespace=b[0], external_id=b[1]), proof="verified in test"))

    def token(self, kind: str, ws: str | None = None, *, actor: str | None = None,
              agents: list[str] | None = None, namespace: str = "web:demo") -> str:
        kind_ = TokenKind(kind)
        ws_id = self.workspace(ws) if ws else None
        actor_id = self.actor_id(ws, namespace, actor) if actor else None
        agent_ids = [self.agent_id(ws, a) for a in agents] if agents is not None else None
        _, secret = create_token(self.conn, kind_, workspace_id=ws_id, actor_id=actor_id, agent_ids=agent_ids)
        return secret

    def last_active(self, conversation_id: int) -> datetime:
        return self.conn.execute("select last_active_at from conversations where id = %s",
                                 (conversation_id,)).fetchone()["last_active_at"]


def open_world(url: str) -> World:
    return World(url=url, conn=connect(url, autocommit=True))


# The declared defaults, nothing from the environment: lexical search, for the tests that call
# the searches themselves.
DECLARED = Settings.declared()


def settings_for(url: str, **changes: dict) -> Settings:
    """The environment's settings (a developer's .env left out) on the database at `url`, with
    `changes` by group: ``settings_for(url, ingest={"body_max_chars": 100})``."""
    database = {"database_url": url, **changes.pop("database", {})}
    return Settings(_env_file=None).replace(database=database, **changes)


def client(url: str, **changes: dict) -> TestClient:
    """The application on the database at `url`, its settings as `settings_for` makes them."""
    return TestClient(create_app(settings_for(url, **changes), url), raise_server_exceptions=False)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
