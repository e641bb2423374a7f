"""What a search_history answer no longer shows, read back from its audit row.

The answer carries no score and no ranking feature (issue 29: BM25's statistics count a few rows
the caller cannot see, so a number would move with them); the audit row keeps both, exactly, as
seed 000 wants them inspectable. Tests that check the ranking read them there.
"""

from __future__ import annotations

import psycopg

LAST_AUDIT = "select selected from search_audit where turn_id = %s order by id desc limit 1"


def audited(conn: psycopg.Connection, turn_id: int, result: dict) -> dict:
    """`result` with each hit's `score` and `features` from the turn's latest audit row."""
    row = conn.execute(LAST_AUDIT, (turn_id,)).fetchone()
    selected = {s["message_id"]: s for s in (row["selected"] if row else [])}
    for hit in result["hits"]:
        hit["score"] = selected[hit["message_id"]]["score"]
        hit["features"] = selected[hit["message_id"]]["features"]
    return result
