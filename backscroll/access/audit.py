"""Search audit digests: a keyed HMAC of the normalized query, never the query itself.

The key is derived from BACKSCROLL_MASTER_KEY only. The installation key lives in the same
database as the audit rows, so a digest under it would let anyone who can read the table
confirm guesses of short keyword queries; without a master key the digest is left empty.
"""

from __future__ import annotations

import hashlib
import hmac
import unicodedata

from ..config import Settings
from .keys import derive


def normalize(query: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def query_digest(settings: Settings, query: str) -> bytes | None:
    if settings.master_key is None:
        return None
    key = derive(settings.master_key.get_secret_value().encode(), "search-audit")
    return hmac.new(key, normalize(query).encode(), hashlib.sha256).digest()
