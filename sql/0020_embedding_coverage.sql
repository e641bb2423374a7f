-- Degradation says the truth (issue 16, item 5). A search reports `backfilling` with its scope's
-- coverage whenever the scope's indexable messages are not all embedded for the model (a backfill
-- owed or running, the outbox not drained yet, a model just registered), not only while an
-- `embedding_backfills` row is unfinished. Counting the scope at search time costs more than the
-- search, so both sides of the ratio are counters, exact at every moment, read in one round trip:
--
-- * owed: the indexable documents per agent (`tsv <> ''`, what the outbox and the backfill give a
--   vector), a column of 0009's per-agent document statistics, written by the triggers that
--   already write them (no new trigger on ingestion);
-- * embedded: per agent and model, the vectors whose message has an indexable document. Writers
--   append signed deltas (no writer waits on a hot row); readers add the pending deltas to the
--   folded counts; backscroll_fold_search_stats folds them with the BM25 ones.
--
-- A vector counts for (its document's agent, its model) exactly while the vector exists, its model
-- is registered and its message has an indexable document. Every change to one of those three
-- adjusts the count, judged by what is visible at that moment. A vector and its document are each
-- checked for the other from row-level BEFORE DELETE triggers: when a message is deleted, the
-- cascades remove both, and statement-level triggers would only run once both are gone.

-- Every writer (ingestion, the worker, the backfill) waits here until the counters are filled:
-- what they would write in the meantime would be counted twice or not at all. Searches go on
-- until the statistics tables are altered, just before the end: the counting is done by then.
lock table message_search, message_embeddings in share mode;

-- What is there now: indexable documents per agent (written into the statistics below), and
-- vectors per agent and model whose message has an indexable document.
create temporary table indexable_now on commit drop as
select agent_id, count(*) as n from message_search where tsv <> ''::tsvector group by 1;

create table embedding_coverage_stats (
    agent_id bigint not null,
    model    text   not null,
    embedded bigint not null,
    primary key (agent_id, model)
);
create table embedding_coverage_deltas (
    agent_id bigint not null,
    model    text   not null,
    embedded bigint not null
);
create index embedding_coverage_deltas_scope on embedding_coverage_deltas (agent_id, model);

insert into embedding_coverage_stats (agent_id, model, embedded)
select s.agent_id, e.model, count(*)
  from message_embeddings e join message_search s on s.message_id = e.message_id
 where s.tsv <> ''::tsvector
 group by 1, 2;

-- 1. Owed: indexable documents per agent.
alter table search_doc_stats add column indexable bigint not null default 0;
alter table search_doc_deltas add column indexable bigint not null default 0;

insert into search_doc_stats as t (agent_id, docs, total_len, indexable)
select agent_id, 0, 0, n from indexable_now
on conflict (agent_id) do update set indexable = excluded.indexable;

create or replace function backscroll_count_inserted() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, lexeme, delta)
    select n.agent_id, u.lexeme, count(*) from new_rows n, unnest(n.tsv) u group by 1, 2;
    insert into search_doc_deltas (agent_id, docs, total_len, indexable)
    select agent_id, count(*), sum(doc_len), count(*) filter (where tsv <> ''::tsvector) from new_rows group by 1;
    return null;
end $$;

create or replace function backscroll_count_deleted() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, lexeme, delta)
    select o.agent_id, u.lexeme, -count(*) from old_rows o, unnest(o.tsv) u group by 1, 2;
    insert into search_doc_deltas (agent_id, docs, total_len, indexable)
    select agent_id, -count(*), -sum(doc_len), -count(*) filter (where tsv <> ''::tsvector) from old_rows group by 1;
    return null;
end $$;

-- An update counts only when the document changed (a reindex batch writes tsv_next alone); a
-- document emptied or filled changes what is owed even when its body's length does not (a
-- speaker's name is in the document, not in its length).
create or replace function backscroll_count_updated() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, lexeme, delta)
    select agent_id, lexeme, sum(d)::integer
      from (select o.agent_id, u.lexeme, -1 as d
              from old_rows o join new_rows n on n.message_id = o.message_id, unnest(o.tsv) u
             where o.tsv is distinct from n.tsv or o.agent_id <> n.agent_id
            union all
            select n.agent_id, u.lexeme, 1
              from old_rows o join new_rows n on n.message_id = o.message_id, unnest(n.tsv) u
             where o.tsv is distinct from n.tsv or o.agent_id <> n.agent_id) x
     group by 1, 2
    having sum(d) <> 0;
    insert into search_doc_deltas (agent_id, docs, total_len, indexable)
    select agent_id, sum(docs), sum(len), sum(indexable)
      from (select o.agent_id, -1 as docs, -o.doc_len as len, -(o.tsv <> ''::tsvector)::integer as indexable
              from old_rows o join new_rows n on n.message_id = o.message_id
             where o.doc_len <> n.doc_len or o.agent_id <> n.agent_id
                or (o.tsv <> ''::tsvector) <> (n.tsv <> ''::tsvector)
            union all
            select n.agent_id, 1, n.doc_len, (n.tsv <> ''::tsvector)::integer
              from old_rows o join new_rows n on n.message_id = o.message_id
             where o.doc_len <> n.doc_len or o.agent_id <> n.agent_id
                or (o.tsv <> ''::tsvector) <> (n.tsv <> ''::tsvector)) x
     group by 1
    having sum(docs) <> 0 or sum(len) <> 0 or sum(indexable) <> 0;
    return null;
end $$;

-- 2. Embedded: vectors per agent and model.

-- Vectors stored (the worker, the backfill, a bulk load): one delta per agent and model and
-- statement. (The worker's upsert of a vector already there is an update: it counts nothing.)
create function backscroll_coverage_vectors_added() returns trigger
language plpgsql as $$
begin
    insert into embedding_coverage_deltas (agent_id, model, embedded)
    select s.agent_id, a.model, count(*)
      from added a join message_search s on s.message_id = a.message_id
     where s.tsv <> ''::tsvector
     group by 1, 2;
    return null;
end $$;

create trigger message_embeddings_coverage_insert
    after insert on message_embeddings referencing new table as added
    for each statement execute function backscroll_coverage_vectors_added();

-- A vector deleted while its document is still there. (Its document deleted first accounted for
-- it; a model being deleted takes its counters with it.)
create function backscroll_coverage_vector_gone() returns trigger
language plpgsql as $$
begin
    insert into embedding_coverage_deltas (agent_id, model, embedded)
    select s.agent_id, old.model, -1
      from message_search s
     where s.message_id = old.message_id and s.tsv <> ''::tsvector
       and exists (select 1 from embedding_models r where r.model = old.model);
    return old;
end $$;

create trigger message_embeddings_coverage_delete
    before delete on message_embeddings
    for each row execute function backscroll_coverage_vector_gone();

-- A vector moved to another message or model (nothing does this; the counts must not drift if
-- a person does).
create function backscroll_coverage_vector_moved() returns trigger
language plpgsql as $$
begin
    insert into embedding_coverage_deltas (agent_id, model, embedded)
    select s.agent_id, old.model, -1 from message_search s
     where s.message_id = old.message_id and s.tsv <> ''::tsvector
    union all
    select s.agent_id, new.model, 1 from message_search s
     where s.message_id = new.message_id and s.tsv <> ''::tsvector;
    return new;
end $$;

create trigger message_embeddings_coverage_update
    before update of message_id, model on message_embeddings
    for each row when (old.message_id is distinct from new.message_id or old.model is distinct from new.model)
    execute function backscroll_coverage_vector_moved();

-- A document deleted (its message deleted, or no longer indexable) takes its vectors out of the
-- count. It first waits for whoever is storing a vector of the message (the worker and the
-- backfill hold a key-share lock on the messages they embed): a vector committed after this
-- count would be deleted by backscroll_embedding_forget without being subtracted. A message
-- being deleted is locked already (and no longer visible).
create function backscroll_coverage_document_gone() returns trigger
language plpgsql as $$
begin
    if old.tsv <> ''::tsvector then
        perform 1 from messages where id = old.message_id for update;
        insert into embedding_coverage_deltas (agent_id, model, embedded)
        select old.agent_id, e.model, -count(*)
          from message_embeddings e
         where e.message_id = old.message_id
         group by e.model;
    end if;
    return old;
end $$;

create trigger message_search_coverage_delete
    before delete on message_search
    for each row execute function backscroll_coverage_document_gone();

-- A new document whose message already has vectors (one stored while its document was away)
-- counts them; for a new message the probe finds nothing.
create or replace function backscroll_embedding_enqueue() returns trigger
language plpgsql as $$
begin
    if exists (select 1 from embedding_models) then
        insert into embedding_outbox (message_id)
        select message_id from added where tsv <> ''::tsvector
        on conflict (message_id) do update
           set attempts = 0, next_attempt_at = now(), last_error = null, parked_at = null,
               enqueued_at = now();
        insert into embedding_coverage_deltas (agent_id, model, embedded)
        select a.agent_id, e.model, count(*)
          from added a join message_embeddings e on e.message_id = a.message_id
         where a.tsv <> ''::tsvector
         group by 1, 2;
    end if;
    return null;
end $$;

-- A document emptied (or filled) changes whether its vectors count, before they are deleted
-- (deleted under the new document, they are subtracted only if it is indexable). Waits for a
-- vector being stored first, as a deleted document does.
create or replace function backscroll_embedding_text_changed() returns trigger
language plpgsql as $$
begin
    if (old.tsv <> ''::tsvector) <> (new.tsv <> ''::tsvector) then
        perform 1 from messages where id = new.message_id for update;
        insert into embedding_coverage_deltas (agent_id, model, embedded)
        select new.agent_id, e.model, case when new.tsv <> ''::tsvector then count(*) else -count(*) end
          from message_embeddings e
         where e.message_id = new.message_id
         group by e.model;
    end if;
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

-- A model deleted (its vectors go by cascade, uncounted): its counters go too, so a model
-- registered again under the name starts from what it then embeds.
create function backscroll_coverage_model_gone() returns trigger
language plpgsql as $$
begin
    delete from embedding_coverage_stats c using gone g where c.model = g.model;
    delete from embedding_coverage_deltas d using gone g where d.model = g.model;
    return null;
end $$;

create trigger embedding_models_coverage_delete
    after delete on embedding_models referencing old table as gone
    for each statement execute function backscroll_coverage_model_gone();

-- 3. Folding, with the BM25 statistics: the coverage deltas are folded whole, like the document
-- deltas (one row per statement, far fewer than term deltas).
create or replace function backscroll_fold_search_stats(p_limit integer) returns bigint
language plpgsql as $$
declare
    folded bigint := 0;
begin
    if not pg_try_advisory_xact_lock(hashtext('backscroll_fold_search_stats')) then
        return 0;
    end if;
    with moved as (
        delete from search_term_deltas
         where ctid = any(array(select ctid from search_term_deltas limit p_limit))
        returning agent_id, lexeme, delta
    ), summed as (
        select agent_id, lexeme, sum(delta) as delta, count(*) as n from moved group by 1, 2
    ), upserted as (
        insert into search_term_stats as t (agent_id, lexeme, df)
        select agent_id, lexeme, delta from summed order by agent_id, lexeme
        on conflict (agent_id, lexeme) do update set df = t.df + excluded.df
        returning 1
    )
    select coalesce(sum(n), 0) into folded from summed;
    with moved as (
        delete from search_doc_deltas returning agent_id, docs, total_len, indexable
    )
    insert into search_doc_stats as t (agent_id, docs, total_len, indexable)
    select agent_id, sum(docs), sum(total_len), sum(indexable) from moved group by 1
    on conflict (agent_id) do update set docs = t.docs + excluded.docs, total_len = t.total_len + excluded.total_len,
                                         indexable = t.indexable + excluded.indexable;
    with moved as (
        delete from embedding_coverage_deltas returning agent_id, model, embedded
    )
    insert into embedding_coverage_stats as t (agent_id, model, embedded)
    select agent_id, model, sum(embedded) from moved group by 1, 2 order by 1, 2
    on conflict (agent_id, model) do update set embedded = t.embedded + excluded.embedded;
    return folded;
end $$;
