-- Extensions and the installation's own bookkeeping.
create extension if not exists pg_trgm;
create extension if not exists btree_gin;
create extension if not exists vector;

-- One random key per installation: cursor signatures (and later audit digests) are derived
-- from it when BACKSCROLL_MASTER_KEY is not set, so every replica agrees without configuration.
create table backscroll_installation (
    singleton  boolean primary key default true check (singleton),
    key        bytea not null,
    created_at timestamptz not null default now()
);
insert into backscroll_installation (key)
values (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
