"""Which SearchIndex a database belongs to (`backscroll_owner`, sql/0030): the one owner of its writes.

Two SearchIndexes pointed at one database would each migrate it, and the first one deleted with
`deletionPolicy: delete` would purge the other's data (a prune drops the other's model). The
operator passes each index's uid to its migration, purge and prune Jobs (BACKSCROLL_OWNER_UID);
the migration claims an unclaimed database, and every one of them refuses a database another
index claimed, before touching anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from ..errors import DatabaseOwnedElsewhere

OWNER_TABLE_EXISTS = "select to_regclass('backscroll_owner') is not null"
SELECT_OWNER = "select uid, name from backscroll_owner"
# The name follows a renamed or re-namespaced reference; the uid never changes hands here.
CLAIM = """
insert into backscroll_owner (uid, name) values (%(uid)s, %(name)s)
on conflict (singleton) do update set name = excluded.name where backscroll_owner.uid = excluded.uid
"""


@dataclass(frozen=True)
class Owner:
    uid: str
    name: str  # NAMESPACE/NAME, for the person reading a refusal


def current_owner(conn: psycopg.Connection) -> Owner | None:
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        if not cur.execute(OWNER_TABLE_EXISTS).fetchone()[0]:
            return None
        row = cur.execute(SELECT_OWNER).fetchone()
    return Owner(*row) if row is not None else None


def refuse_foreign_owner(conn: psycopg.Connection, uid: str) -> None:
    """Raise DatabaseOwnedElsewhere when another owner claimed the database (unclaimed: fine)."""
    owner = current_owner(conn)
    if owner is not None and owner.uid != uid:
        raise DatabaseOwnedElsewhere(
            f"this database belongs to SearchIndex {owner.name} (uid {owner.uid}), not to uid {uid}: two "
            "SearchIndexes on one database would migrate, prune and purge each other's data. Point "
            "spec.database at a database of its own; to hand this one over, delete the other SearchIndex "
            "(deletionPolicy: retain) and run `delete from backscroll_owner` in the database")


def claim_owner(conn: psycopg.Connection, owner: Owner) -> None:
    """Record `owner` on an unclaimed database (sql/0030 applied); refuse one claimed by another."""
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        if not cur.execute(OWNER_TABLE_EXISTS).fetchone()[0]:
            return  # a migrations directory from before 0030: nothing to record it in
        cur.execute(CLAIM, {"uid": owner.uid, "name": owner.name})
    refuse_foreign_owner(conn, owner.uid)
