"""The database: connections and the pool (`db`), forward-only migrations from `sql/` (`migrate`),
and the generated schema reference (`schema`).

Its own bookkeeping is written by this package alone: the migrations' and definitions' ledgers, the
installation key (its first migration), the database's owner: tests/unit/test_write_owners.py."""

WRITES = ("backscroll_migrations", "backscroll_definitions", "backscroll_installation", "backscroll_owner")
