"""What every request needs: the pool, the settings, the cursor codec, and authentication.

A request authenticates once, from its headers, before its body is read: the route
(deps.AuthenticatedRoute) takes a connection from the pool, authenticates the caller in that
connection's transaction and keeps both for the request (`begin`); `session` continues that
transaction with the request's work and commits it; `end` gives the connection back. A request
with a body gives the connection back while the body arrives (a slow upload holds none) and takes
another for the work, for the caller already authenticated (`resume`). A request is authorized as
of its start: a token revoked while it runs stops every request that starts after the revocation
commits.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import psycopg
from fastapi import Request
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from ..access.auth import Principal, authenticate
from ..access.keys import derive, root_key
from ..config import Settings
from ..ingest.models import check_body
from ..search.cursor import CursorCodec
from ..search.hybrid import SideConnection
from ..search.sessions import Limits
from ..store.db import side_connections


@dataclass
class Held:
    """The connection a request authenticated on, and who it is (request.state.held)."""
    conn: psycopg.Connection
    principal: Principal


def held(request: Request) -> Held | None:
    return getattr(request.state, "held", None)


class Service:
    def __init__(self, settings: Settings, pool: ConnectionPool, read_pool: ConnectionPool | None = None):
        self.settings = settings
        self.pool = pool
        self.read_pool = read_pool
        with pool.connection() as conn:
            self.codec = CursorCodec(derive(root_key(conn, settings.access), "cursor"))
        self.limits = Limits.of(settings.search)
        self.body_reads = asyncio.Semaphore(settings.api.request_body_reads_max)  # deps._read_body

    def check_body(self, text: str | None, field: str = "body") -> None:
        """The body limit every write path holds to, at this server's setting (ingest.models.check_body)."""
        check_body(self.settings.ingest.body_max_chars, text, field)

    def begin(self, request: Request) -> None:
        """Authenticate the caller on a connection the request keeps until `end` (see the module)."""
        conn = self.pool.getconn()
        try:
            principal = authenticate(conn, request.headers.get("authorization"))
        except BaseException:
            self._give_back(conn)
            raise
        request.state.held = Held(conn, principal)

    def resume(self, request: Request, principal: Principal) -> None:
        """A connection for the work of a caller `begin` authenticated, once its body arrived."""
        request.state.held = Held(self.pool.getconn(), principal)

    def settled(self, request: Request) -> bool:
        """Whether the request's connection has no transaction open (its session committed or
        rolled back), so that `end` does no I/O and need not leave the event loop."""
        h = held(request)
        return h is None or h.conn.info.transaction_status == TransactionStatus.IDLE

    def end(self, request: Request) -> None:
        """Give the request's connection back: what is left open is the authentication's own
        transaction (its touch of last_used_at), committed; a failed one is rolled back."""
        h = held(request)
        if h is None:
            return
        request.state.held = None
        self._give_back(h.conn)

    def _give_back(self, conn: psycopg.Connection) -> None:
        try:
            status = conn.info.transaction_status
            if status == TransactionStatus.INTRANS:
                conn.commit()
            elif status == TransactionStatus.INERROR:
                conn.rollback()
        finally:
            self.pool.putconn(conn)  # a broken connection is discarded by the pool

    def _held(self, request: Request) -> Held:
        h = held(request)
        if h is None:
            # Every route authenticates (deps.AuthenticatedRoute, which refuses a route without
            # token kinds): a request here without a held connection is a programming error.
            raise RuntimeError("no route authenticated this request (use deps.AuthenticatedRoute)")
        return h

    @contextmanager
    def session(self, request: Request) -> Iterator[tuple[psycopg.Connection, Principal]]:
        """The request's transaction, on the connection it authenticated on (its token kind checked
        by the route, deps.requires), committed when the block ends, rolled back if it raises."""
        h = self._held(request)
        try:
            yield h.conn, h.principal
        except BaseException:
            h.conn.rollback()
            raise
        h.conn.commit()

    @contextmanager
    def read_session(self, request: Request) -> Iterator[tuple[psycopg.Connection, Principal]]:
        """A read-only transaction for a person's read, on the replica when one is configured. The
        token was checked on the primary, so a revoked token stops at once despite replica lag."""
        if self.read_pool is None:
            with self.session(request) as (conn, principal):
                yield conn, principal
            return
        principal = self._held(request).principal
        self.end(request)  # the read runs on the replica: the primary's connection goes back now
        with self.read_pool.connection() as conn:
            with conn.transaction():
                # A replica refuses writes anyway; this also holds when the URL points at a primary.
                conn.execute("set transaction read only")
                yield conn, principal

    def side(self, *, read: bool = False) -> SideConnection:
        """Where a hybrid search's vector list may take a second connection: the pool its own
        connection came from (`read`: a person's read, on the replica when there is one)."""
        return side_connections(self.read_pool if read and self.read_pool is not None else self.pool)

    @contextmanager
    def ledger(self) -> Iterator[psycopg.Connection | None]:
        """Where a read's usage-ledger rows go: the primary, when reads run on a replica; with no
        replica, None (the read's own transaction writes them)."""
        if self.read_pool is None or not self.settings.embeddings.enabled:
            yield None
            return
        with self.pool.connection() as conn:
            with conn.transaction():
                yield conn


def service(request: Request) -> Service:
    return request.app.state.service
