-- Semantic search: the model registry, message vectors, the embedding outbox, the usage
-- ledger and backfill progress. Nothing here embeds anything: with no model registered the
-- outbox stays empty (off means off), and vectors are written only by `backscroll worker` and
-- `backscroll backfill`, through the gateway.

-- Models vectors may be stored for, with their size. `backscroll migrate --model M
-- --dimensions D` registers one and builds its index; a different size for the same name is
-- refused there (a new size is a new model name, e.g. `arctic-embed-l-v2.0@256`).
create table embedding_models (
    model      text primary key check (length(model) between 1 and 200 and model !~ '[[:cntrl:]]'),
    -- HNSW indexes vectors of at most 2,000 dimensions.
    dimensions integer not null check (dimensions between 1 and 2000),
    index_name text not null unique,
    created_at timestamptz not null default now()
);

-- One vector per (message, model). The column is untyped so several sizes coexist; each model
-- has its own partial expression index, ((embedding::vector(D))) ... where model = 'M', so a
-- query only ever compares vectors of its own model.
create table message_embeddings (
    message_id  bigint not null references messages on delete cascade,
    model       text not null references embedding_models on delete cascade,
    embedding   vector not null,
    embedded_at timestamptz not null default now(),
    -- message_id first: the cascade from messages looks rows up by it.
    primary key (message_id, model)
);
-- Coverage counts per model without reading a single vector.
create index message_embeddings_model on message_embeddings (model);

-- One job per indexable message, for the worker. Written by the database (triggers on the
-- search sidecar below), never by the request that stored the message. A job is for whichever
-- model the worker embeds with; older messages are the backfill's.
create table embedding_outbox (
    message_id      bigint primary key references messages on delete cascade,
    attempts        integer not null default 0,
    next_attempt_at timestamptz not null default now(),
    last_error      text,
    -- Set after too many failed attempts: the job stays, with its error, for a person to read.
    parked_at       timestamptz,
    enqueued_at     timestamptz not null default now()
);
create index embedding_outbox_due on embedding_outbox (next_attempt_at, message_id) where parked_at is null;

-- One row per call to an embeddings endpoint, successful or not, attributed to the workspace
-- that owns the text (a message's workspace, or the searcher's for a query). No foreign key:
-- the ledger outlives what it paid for.
create table embedding_usage (
    id           bigint generated always as identity primary key,
    workspace_id bigint,
    operation    text not null check (operation in ('embed_documents', 'embed_query')),
    model        text not null,
    purpose      text not null check (purpose in ('message', 'query', 'backfill')),
    items        integer not null check (items >= 0),
    -- As reported by the server (usage.total_tokens); null when it reports none.
    tokens       integer,
    ok           boolean not null,
    -- The failure's category and a short reason; never the text, never the key.
    error        text,
    duration_ms  integer,
    created_at   timestamptz not null default now()
);
create index embedding_usage_workspace on embedding_usage (workspace_id, created_at);

-- Progress of `backscroll backfill --model M`, one row per model: what the status endpoint
-- reads, and where an interrupted run resumes.
create table embedding_backfills (
    model       text primary key references embedding_models on delete cascade,
    state       text not null check (state in ('running', 'interrupted', 'failed', 'finished')),
    started_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    finished_at timestamptz,
    -- Messages with a vector of this model, and indexable messages, as of the last batch.
    embedded    bigint not null default 0,
    total       bigint not null default 0,
    -- Messages this run could not embed (handed to the outbox with their error).
    failed      bigint not null default 0,
    last_error  text
);

-- The last message embedded per workspace (oldest first, by created_at then id).
create table embedding_backfill_positions (
    model           text not null references embedding_backfills on delete cascade,
    workspace_id    bigint not null references workspaces on delete cascade,
    last_created_at timestamptz not null,
    last_message_id bigint not null,
    primary key (model, workspace_id)
);

-- The outbox follows the search sidecar, so exactly the indexable messages (finished, said by a
-- user or an assistant, with words in them) get a job, and only while a model is registered.
create function backscroll_embedding_enqueue() returns trigger
language plpgsql as $$
begin
    if exists (select 1 from embedding_models) then
        insert into embedding_outbox (message_id)
        select message_id from added where tsv <> ''::tsvector
        on conflict (message_id) do update
           set attempts = 0, next_attempt_at = now(), last_error = null, parked_at = null,
               enqueued_at = now();
    end if;
    return null;
end $$;

create function backscroll_embedding_text_changed() returns trigger
language plpgsql as $$
begin
    -- The job first, then the vectors: the worker locks jobs before it writes vectors, and
    -- taking them in the same order here means the two never wait on each other in a circle.
    if new.tsv <> ''::tsvector and exists (select 1 from embedding_models) then
        insert into embedding_outbox (message_id) values (new.message_id)
        on conflict (message_id) do update
           set attempts = 0, next_attempt_at = now(), last_error = null, parked_at = null,
               enqueued_at = now();
    else
        delete from embedding_outbox where message_id = new.message_id;
    end if;
    -- Vectors of words the message no longer has would find it for the wrong reasons.
    delete from message_embeddings where message_id = new.message_id;
    return null;
end $$;

create function backscroll_embedding_forget() returns trigger
language plpgsql as $$
begin
    -- A message that is no longer indexable keeps no job and no vectors. (A deleted message
    -- loses them by cascade as well; this covers the sidecar row going on its own.)
    delete from embedding_outbox o using gone g where o.message_id = g.message_id;
    delete from message_embeddings e using gone g where e.message_id = g.message_id;
    return null;
end $$;

create trigger message_search_enqueue_after_insert
    after insert on message_search referencing new table as added
    for each statement execute function backscroll_embedding_enqueue();
create trigger message_search_reembed_after_update
    after update of tsv on message_search
    for each row when (old.tsv is distinct from new.tsv)
    execute function backscroll_embedding_text_changed();
create trigger message_search_forget_after_delete
    after delete on message_search referencing old table as gone
    for each statement execute function backscroll_embedding_forget();
