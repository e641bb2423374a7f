"""Opaque, signed page cursors.

A cursor is ``base64url(json) "." base64url(tag)``. The JSON holds the position of the last
row served (``(last_active_at, id)`` for the recent list, ``(tier, score, content score, id)``
for a ranked search) and a fingerprint of the request it pages, so a cursor cannot be replayed
against a different query. The tag is an HMAC, so a forged or truncated cursor is refused with
400 rather than reaching SQL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from ..errors import BadRequest

VERSION = 1
MAX_CURSOR_CHARS = 512
TAG_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fingerprint(*parts: object) -> str:
    """A short digest of what a cursor pages (the query, the agent filter)."""
    blob = json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class CursorCodec:
    def __init__(self, key: bytes):
        self._key = key

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:TAG_BYTES]

    def encode(self, kind: str, fp: str, position: list[Any]) -> str:
        payload = json.dumps({"v": VERSION, "k": kind, "f": fp, "p": position}, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def decode(self, cursor: str, kind: str, fp: str) -> list[Any]:
        """The position inside ``cursor``; BadRequest for anything not made by ``encode``."""
        if len(cursor) > MAX_CURSOR_CHARS or cursor.count(".") != 1:
            raise BadRequest("invalid cursor: pass back the `next` value of a previous page unchanged",
                             code="invalid_cursor")
        body, tag = cursor.split(".")
        try:
            payload, given = _unb64(body), _unb64(tag)
        except (binascii.Error, ValueError):
            raise BadRequest("invalid cursor: not a cursor this server issued", code="invalid_cursor") from None
        if not hmac.compare_digest(given, self._tag(payload)):
            raise BadRequest("invalid cursor: not a cursor this server issued", code="invalid_cursor")
        data = json.loads(payload)
        if data.get("v") != VERSION:
            raise BadRequest("invalid cursor: issued by another version; start from the first page",
                             code="invalid_cursor")
        if data.get("k") != kind or data.get("f") != fp:
            raise BadRequest("invalid cursor: it pages a different query; start from the first page",
                             code="invalid_cursor")
        return data["p"]

    def decode_keyset(self, cursor: str, kind: str, fp: str) -> tuple[datetime, int]:
        """The (timestamp, id) position of a keyset cursor (the recent list, a transcript)."""
        position = self.decode(cursor, kind, fp)
        try:
            return datetime.fromisoformat(position[0]), int(position[1])
        except (TypeError, ValueError, IndexError):
            raise BadRequest("invalid cursor", code="invalid_cursor") from None
