"""What several command groups use: the database connection, the owner guard, a whole-number argument."""

from __future__ import annotations

import argparse

from ..config import Settings


def url_of(settings: Settings) -> str:
    from ..store.db import database_url

    return database_url(settings.database)


def connection(settings: Settings, autocommit: bool = True):
    from ..store.db import connect

    return connect(url_of(settings), autocommit=autocommit)


def guard_owner(settings: Settings) -> None:
    """purge and `models drop` on behalf of one SearchIndex never touch another's database."""
    from ..store.owner import refuse_foreign_owner

    if settings.database.owner_uid:
        with connection(settings) as conn:
            refuse_foreign_owner(conn, settings.database.owner_uid)


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse turns the ValueError into a usage error)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value
