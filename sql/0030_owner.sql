-- Which SearchIndex owns this database (issue 31): one row, written by `backscroll migrate` with
-- BACKSCROLL_OWNER_UID (the operator's migration Job), read by migrate, purge and `models drop`,
-- which refuse a database another index claimed. Expand-only: a new table nothing older reads.
create table backscroll_owner (
    singleton  boolean primary key default true check (singleton),
    uid        text not null,
    name       text not null,
    claimed_at timestamptz not null default now()
);
