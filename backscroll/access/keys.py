"""Keys derived from one root secret: BACKSCROLL_MASTER_KEY, or the installation's own key."""

from __future__ import annotations

import hashlib
import hmac

import psycopg

from ..config import AccessSettings

SELECT_INSTALLATION_KEY = "select key from backscroll_installation"


def root_key(conn: psycopg.Connection, access: AccessSettings) -> bytes:
    if access.master_key is not None:
        return access.master_key.get_secret_value().encode()
    row = conn.execute(SELECT_INSTALLATION_KEY).fetchone()
    if row is None:
        raise RuntimeError("the installation key is missing: run `backscroll migrate`")
    return bytes(row["key"] if isinstance(row, dict) else row[0])


def derive(root: bytes, purpose: str) -> bytes:
    """A subkey per purpose, so a digest made for one use is worthless for another."""
    return hmac.new(root, b"backscroll/" + purpose.encode(), hashlib.sha256).digest()
