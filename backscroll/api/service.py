"""What every request needs: the pool, the settings, the cursor codec, and authentication."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import psycopg
from fastapi import Request
from psycopg_pool import ConnectionPool

from ..auth import Principal, TokenKind, authenticate
from ..config import Settings
from ..cursor import CursorCodec
from ..keys import derive, root_key
from ..sessions import Limits


class Service:
    def __init__(self, settings: Settings, pool: ConnectionPool):
        self.settings = settings
        self.pool = pool
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


def service(request: Request) -> Service:
    return request.app.state.service
