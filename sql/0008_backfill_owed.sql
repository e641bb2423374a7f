-- A model registered over existing messages owes them a backfill. `migrate --model` records it
-- as `pending`; `backscroll worker` (or the operator's backfill Job) takes it up, and until it
-- finishes, search reports `backfilling` with the coverage.
alter table embedding_backfills drop constraint embedding_backfills_state_check;
alter table embedding_backfills add constraint embedding_backfills_state_check
    check (state in ('pending', 'running', 'interrupted', 'failed', 'finished'));
