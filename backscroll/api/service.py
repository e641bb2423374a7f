"""What every request needs: the pool, the settings, the cursor codec, and authentication."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import psycopg
from fastapi import Request
from psycopg_pool import ConnectionPool

from ..access.auth import Principal, TokenKind, authenticate
from ..access.keys import derive, root_key
from ..config import Settings
from ..search.cursor import CursorCodec
from ..search.hybrid import SideConnection
from ..search.sessions import Limits
from ..store.db import side_connections


class Service:
    def __init__(self, settings: Settings, pool: ConnectionPool, read_pool: ConnectionPool | None = None):
        self.settings = settings
        self.pool = pool
        self.read_pool = read_pool
        with pool.connection() as conn:
            self.codec = CursorCodec(derive(root_key(conn, settings), "cursor"))
        self.limits = Limits(
            default=settings.page_limit_default,
            maximum=settings.page_limit_max,
            query_max_chars=settings.query_max_chars,
            excerpt_words=settings.excerpt_words,
        )

    def authenticate(self, request: Request) -> Principal:
        """Who is calling (Unauthenticated when nobody valid), in a short transaction of its own."""
        with self.pool.connection() as conn:
            return authenticate(conn, request.headers.get("authorization"))

    @contextmanager
    def session(self, request: Request, *kinds: TokenKind) -> Iterator[tuple[psycopg.Connection, Principal]]:
        """One transaction for the request, opened only for an authenticated caller of an allowed kind."""
        with self.pool.connection() as conn:
            with conn.transaction():
                principal = authenticate(conn, request.headers.get("authorization"))
                if kinds:
                    principal.require(*kinds)
                yield conn, principal


    @contextmanager
    def read_session(self, request: Request, *kinds: TokenKind) -> Iterator[tuple[psycopg.Connection, Principal]]:
        """A read-only transaction for a person's read, on the replica when one is configured. The
        token is checked on the primary first, so a revoked token stops at once despite replica lag."""
        if self.read_pool is None:
            with self.session(request, *kinds) as (conn, principal):
                yield conn, principal
            return
        principal = self.authenticate(request)
        if kinds:
            principal.require(*kinds)
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
        if self.read_pool is None or not self.settings.embeddings_enabled:
            yield None
            return
        with self.pool.connection() as conn:
            with conn.transaction():
                yield conn


def service(request: Request) -> Service:
    return request.app.state.service
