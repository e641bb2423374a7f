"""How many results a caller gets: one rule for every search and list."""

from __future__ import annotations


def clamp_limit(limit: int | None, default: int, maximum: int) -> int:
    """`default` when the caller names none, else `limit` clamped to 1..`maximum`.

    A limit is a wish, not a contract: out of range is clamped rather than refused, so a client
    that asks for more than the server gives still gets a page (and the cursor for the next).
    """
    if limit is None:
        return default
    return max(1, min(int(limit), maximum))
