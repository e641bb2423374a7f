-- The ledger of sql/definitions/: the checksum each file of functions and triggers was last
-- applied with. `migrate` applies a definitions file, after the table migrations, only when its
-- checksum is not the one recorded here (backscroll/store/migrate.py). Expand-only: no earlier
-- release reads or writes it.
create table backscroll_definitions (
    name       text primary key,
    checksum   text not null,
    applied_at timestamptz not null default now()
);
