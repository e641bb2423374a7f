-- Statistics that count only what the destination may receive (issue 29, non-interference).
--
-- BM25's document frequencies, document count and average length were kept per agent, so a
-- search_history hit's score moved when another person's DM holding the same word was stored,
-- and the candidate pool (the rarest terms' most recent matches) could fill with rows the
-- destination may never see. Now every indexed message carries its AUDIENCE KEY (the audience
-- as the disclosure rule reads it) and the statistics are kept per (agent, audience) beside the
-- per-agent ones: a search sums those of the audiences its destination may receive, reads its
-- candidates from those audiences only, and counts coverage over them. Session search keeps the
-- per-agent statistics, summed over the reader's agents.
--
-- The deltas stay one stream: writers append (agent, audience, lexeme, delta) rows as before,
-- and the fold adds them to both the per-agent and the per-audience counts, so ingestion writes
-- no more rows than it did.

-- Writers (ingestion, the worker, the backfill) wait here while the new counters are filled from
-- what is there; searches go on until the statistics tables are altered.
lock table message_search, message_embeddings in share mode;

-- 1. The audience key: an audience exactly as backscroll_disclosable judges it (kind, namespace,
-- readers and, for a row sealed to its own conversation by 0018, that conversation), per
-- workspace. Readers are sorted, never deduplicated or dropped: the rule counts them
-- (cardinality) and compares them as sets, so sorting changes no verdict and nothing else is
-- safe to change.
create table search_audiences (
    id                  bigint generated always as identity primary key,
    workspace_id        bigint not null references workspaces (id) on delete cascade,
    kind                audience_kind not null,
    namespace           text,
    readers             text[],
    sealed_conversation bigint,
    unique nulls not distinct (workspace_id, kind, namespace, readers, sealed_conversation)
);

create function backscroll_audience_key(p_ws bigint, p_conversation bigint, p_kind audience_kind,
                                        p_namespace text, p_readers text[]) returns bigint
language plpgsql as $$
declare
    k_readers text[] := case when p_readers is not null then array(select r from unnest(p_readers) r order by 1) end;
    -- backscroll_sealed_allows's condition: such a row is disclosable in its own conversation only.
    k_sealed bigint := case when coalesce(p_kind in ('members', 'external') and cardinality(p_readers) = 0, false)
                            then p_conversation end;
    found bigint;
begin
    select a.id into found from search_audiences a
     where a.workspace_id = p_ws and a.kind = p_kind and a.namespace is not distinct from p_namespace
       and a.readers is not distinct from k_readers and a.sealed_conversation is not distinct from k_sealed;
    if found is null then
        insert into search_audiences (workspace_id, kind, namespace, readers, sealed_conversation)
        values (p_ws, p_kind, p_namespace, k_readers, k_sealed)
        on conflict do nothing
        returning id into found;
        if found is null then  -- a concurrent writer made it first
            select a.id into found from search_audiences a
             where a.workspace_id = p_ws and a.kind = p_kind and a.namespace is not distinct from p_namespace
               and a.readers is not distinct from k_readers and a.sealed_conversation is not distinct from k_sealed;
        end if;
    end if;
    return found;
end $$;

-- 2. Every document's audience key.
alter table message_search add column audience_id bigint;
-- The fill changes no document: the statement-level counting trigger would compare every row.
alter table message_search disable trigger message_search_count_update;
update message_search s
   set audience_id = backscroll_audience_key(s.workspace_id, m.conversation_id, m.audience_kind,
                                             m.audience_namespace, m.audience_readers)
  from messages m
 where m.id = s.message_id;
alter table message_search enable trigger message_search_count_update;
alter table message_search alter column audience_id set not null;

-- 3. The per-audience counters, filled from what is there (exact under the lock above). Delta
-- rows written before this migration carry no audience and are folded into the per-agent counts
-- only, which is all they were counted in.
create table search_audience_term_stats (
    agent_id    bigint not null,
    audience_id bigint not null,
    lexeme      text   not null,
    df          bigint not null,
    primary key (agent_id, audience_id, lexeme)
);
insert into search_audience_term_stats (agent_id, audience_id, lexeme, df)
select s.agent_id, s.audience_id, u.lexeme, count(*) from message_search s, unnest(s.tsv) u group by 1, 2, 3;

create table search_audience_doc_stats (
    agent_id    bigint not null,
    audience_id bigint not null,
    docs        bigint not null,
    total_len   bigint not null,
    indexable   bigint not null,
    primary key (agent_id, audience_id)
);
insert into search_audience_doc_stats (agent_id, audience_id, docs, total_len, indexable)
select agent_id, audience_id, count(*), sum(doc_len), count(*) filter (where tsv <> ''::tsvector)
  from message_search group by 1, 2;

create table embedding_audience_coverage_stats (
    agent_id    bigint not null,
    audience_id bigint not null,
    model       text   not null,
    embedded    bigint not null,
    primary key (agent_id, audience_id, model)
);
insert into embedding_audience_coverage_stats (agent_id, audience_id, model, embedded)
select s.agent_id, s.audience_id, e.model, count(*)
  from message_embeddings e join message_search s on s.message_id = e.message_id
 where s.tsv <> ''::tsvector
 group by 1, 2, 3;

alter table search_term_deltas add column audience_id bigint;
alter table search_doc_deltas add column audience_id bigint;
alter table embedding_coverage_deltas add column audience_id bigint;

-- The audience keys a destination may receive in one agent's perspective: the keys the agent's
-- documents carry, judged by the audience predicate, identity-aware, or the sealed rule, as
-- backscroll_disclosable judges a row. The destination reader's linked identities are resolved
-- once (as the search statements' DESTINATION_ALLOWS does) instead of once per key, so judging
-- an agent's thousand keys costs about a millisecond. Nothing narrows the keys but the agent and
-- the rule itself: weaken the predicate and the keys widen with it.
create function backscroll_receivable_audiences(p_ws bigint, p_agent bigint, d_conversation bigint,
                                                d_kind audience_kind, d_namespace text, d_readers text[])
returns bigint[]
language sql stable parallel safe as $$
    with linked as materialized (
        select li.namespace, li.external_id
          from backscroll_linked_identities(p_agent, d_namespace, d_readers[1]) li
         where d_kind = 'members' and cardinality(d_readers) = 1
    )
    select coalesce(array_agg(a.id order by a.id), '{}')
      from search_audiences a
     where a.workspace_id = p_ws
       and a.id in (select audience_id from search_audience_doc_stats where agent_id = p_agent
                    union
                    select audience_id from search_doc_deltas where agent_id = p_agent and audience_id is not null)
       and (backscroll_audience_allows(a.kind, a.namespace, a.readers, d_kind, d_namespace, d_readers)
            or (a.kind = 'members' and cardinality(a.readers) = 1
                and (a.namespace, a.readers[1]) in (select l.namespace, l.external_id from linked l))
            or backscroll_sealed_allows(a.sealed_conversation, a.kind, a.namespace, a.readers,
                                        d_conversation, d_kind, d_namespace))
$$;

-- 4. Writers name the audience in every delta.
create or replace function backscroll_count_inserted() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, audience_id, lexeme, delta)
    select n.agent_id, n.audience_id, u.lexeme, count(*) from new_rows n, unnest(n.tsv) u group by 1, 2, 3;
    insert into search_doc_deltas (agent_id, audience_id, docs, total_len, indexable)
    select agent_id, audience_id, count(*), sum(doc_len), count(*) filter (where tsv <> ''::tsvector)
      from new_rows group by 1, 2;
    return null;
end $$;

create or replace function backscroll_count_deleted() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, audience_id, lexeme, delta)
    select o.agent_id, o.audience_id, u.lexeme, -count(*) from old_rows o, unnest(o.tsv) u group by 1, 2, 3;
    insert into search_doc_deltas (agent_id, audience_id, docs, total_len, indexable)
    select agent_id, audience_id, -count(*), -sum(doc_len), -count(*) filter (where tsv <> ''::tsvector)
      from old_rows group by 1, 2;
    return null;
end $$;

-- A document that moves to another audience (its message's audience changed) is counted out of
-- the old one and into the new one; the per-agent sums see no change.
create or replace function backscroll_count_updated() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, audience_id, lexeme, delta)
    select agent_id, audience_id, lexeme, sum(d)::integer
      from (select o.agent_id, o.audience_id, u.lexeme, -1 as d
              from old_rows o join new_rows n on n.message_id = o.message_id, unnest(o.tsv) u
             where o.tsv is distinct from n.tsv or o.agent_id <> n.agent_id or o.audience_id <> n.audience_id
            union all
            select n.agent_id, n.audience_id, u.lexeme, 1
              from old_rows o join new_rows n on n.message_id = o.message_id, unnest(n.tsv) u
             where o.tsv is distinct from n.tsv or o.agent_id <> n.agent_id or o.audience_id <> n.audience_id) x
     group by 1, 2, 3
    having sum(d) <> 0;
    insert into search_doc_deltas (agent_id, audience_id, docs, total_len, indexable)
    select agent_id, audience_id, sum(docs), sum(len), sum(indexable)
      from (select o.agent_id, o.audience_id, -1 as docs, -o.doc_len as len,
                   -(o.tsv <> ''::tsvector)::integer as indexable
              from old_rows o join new_rows n on n.message_id = o.message_id
             where o.doc_len <> n.doc_len or o.agent_id <> n.agent_id or o.audience_id <> n.audience_id
                or (o.tsv <> ''::tsvector) <> (n.tsv <> ''::tsvector)
            union all
            select n.agent_id, n.audience_id, 1, n.doc_len, (n.tsv <> ''::tsvector)::integer
              from old_rows o join new_rows n on n.message_id = o.message_id
             where o.doc_len <> n.doc_len or o.agent_id <> n.agent_id or o.audience_id <> n.audience_id
                or (o.tsv <> ''::tsvector) <> (n.tsv <> ''::tsvector)) x
     group by 1, 2
    having sum(docs) <> 0 or sum(len) <> 0 or sum(indexable) <> 0;
    return null;
end $$;

create or replace function backscroll_coverage_document_gone() returns trigger
language plpgsql as $$
begin
    if old.tsv <> ''::tsvector then
        perform 1 from messages where id = old.message_id for update;
        insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
        select old.agent_id, old.audience_id, e.model, -count(*)
          from message_embeddings e
         where e.message_id = old.message_id
         group by e.model;
    end if;
    return old;
end $$;

create or replace function backscroll_coverage_vector_gone() returns trigger
language plpgsql as $$
begin
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select s.agent_id, s.audience_id, old.model, -1
      from message_search s
     where s.message_id = old.message_id and s.tsv <> ''::tsvector
       and exists (select 1 from embedding_models r where r.model = old.model);
    return old;
end $$;

create or replace function backscroll_coverage_vector_moved() returns trigger
language plpgsql as $$
begin
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select s.agent_id, s.audience_id, old.model, -1 from message_search s
     where s.message_id = old.message_id and s.tsv <> ''::tsvector
    union all
    select s.agent_id, s.audience_id, new.model, 1 from message_search s
     where s.message_id = new.message_id and s.tsv <> ''::tsvector;
    return new;
end $$;

create or replace function backscroll_coverage_vectors_added() returns trigger
language plpgsql as $$
begin
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select s.agent_id, s.audience_id, a.model, count(*)
      from added a join message_search s on s.message_id = a.message_id
     where s.tsv <> ''::tsvector
     group by 1, 2, 3;
    return null;
end $$;

create or replace function backscroll_coverage_model_gone() returns trigger
language plpgsql as $$
begin
    delete from embedding_coverage_stats c using gone g where c.model = g.model;
    delete from embedding_audience_coverage_stats c using gone g where c.model = g.model;
    delete from embedding_coverage_deltas d using gone g where d.model = g.model;
    return null;
end $$;

create or replace function backscroll_embedding_enqueue() returns trigger
language plpgsql as $$
begin
    if exists (select 1 from embedding_models) then
        insert into embedding_outbox (message_id)
        select message_id from added where tsv <> ''::tsvector
        on conflict (message_id) do update
           set attempts = 0, next_attempt_at = now(), last_error = null, parked_at = null,
               enqueued_at = now();
        insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
        select a.agent_id, a.audience_id, e.model, count(*)
          from added a join message_embeddings e on e.message_id = a.message_id
         where a.tsv <> ''::tsvector
         group by 1, 2, 3;
    end if;
    return null;
end $$;

-- Becoming indexable counts the vectors into the new audience; ceasing to, out of the old one.
create or replace function backscroll_embedding_indexable_changed() returns trigger
language plpgsql as $$
begin
    perform 1 from messages where id = new.message_id for update;
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select case when new.tsv <> ''::tsvector then new.agent_id else old.agent_id end,
           case when new.tsv <> ''::tsvector then new.audience_id else old.audience_id end,
           e.model, case when new.tsv <> ''::tsvector then count(*) else -count(*) end
      from message_embeddings e
     where e.message_id = new.message_id
     group by e.model;
    perform backscroll_embedding_reembed(array[new.message_id]);
    return null;
end $$;

-- An indexable document whose audience changed takes its vectors' coverage along.
create function backscroll_coverage_audience_moved() returns trigger
language plpgsql as $$
begin
    perform 1 from messages where id = new.message_id for update;
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select old.agent_id, old.audience_id, e.model, -count(*)
      from message_embeddings e where e.message_id = new.message_id group by e.model
    union all
    select new.agent_id, new.audience_id, e.model, count(*)
      from message_embeddings e where e.message_id = new.message_id group by e.model;
    return null;
end $$;

create trigger message_search_coverage_audience
    after update of audience_id on message_search
    for each row when (old.audience_id is distinct from new.audience_id
                       and old.tsv <> ''::tsvector and new.tsv <> ''::tsvector)
    execute function backscroll_coverage_audience_moved();

-- 5. The fold adds each delta to the per-agent and, when it names one, the per-audience counts.
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
        returning agent_id, audience_id, lexeme, delta
    ), summed as (
        select agent_id, lexeme, sum(delta) as delta, count(*) as n from moved group by 1, 2
    ), upserted as (
        insert into search_term_stats as t (agent_id, lexeme, df)
        select agent_id, lexeme, delta from summed order by agent_id, lexeme
        on conflict (agent_id, lexeme) do update set df = t.df + excluded.df
        returning 1
    ), upserted_audience as (
        insert into search_audience_term_stats as t (agent_id, audience_id, lexeme, df)
        select agent_id, audience_id, lexeme, sum(delta) from moved where audience_id is not null
         group by 1, 2, 3 order by 1, 2, 3
        on conflict (agent_id, audience_id, lexeme) do update set df = t.df + excluded.df
        returning 1
    )
    select coalesce(sum(n), 0) into folded from summed;
    with moved as (
        delete from search_doc_deltas returning agent_id, audience_id, docs, total_len, indexable
    ), upserted_audience as (
        insert into search_audience_doc_stats as t (agent_id, audience_id, docs, total_len, indexable)
        select agent_id, audience_id, sum(docs), sum(total_len), sum(indexable) from moved
         where audience_id is not null group by 1, 2 order by 1, 2
        on conflict (agent_id, audience_id) do update
           set docs = t.docs + excluded.docs, total_len = t.total_len + excluded.total_len,
               indexable = t.indexable + excluded.indexable
        returning 1
    )
    insert into search_doc_stats as t (agent_id, docs, total_len, indexable)
    select agent_id, sum(docs), sum(total_len), sum(indexable) from moved group by 1
    on conflict (agent_id) do update set docs = t.docs + excluded.docs, total_len = t.total_len + excluded.total_len,
                                         indexable = t.indexable + excluded.indexable;
    with moved as (
        delete from embedding_coverage_deltas returning agent_id, audience_id, model, embedded
    ), upserted_audience as (
        insert into embedding_audience_coverage_stats as t (agent_id, audience_id, model, embedded)
        select agent_id, audience_id, model, sum(embedded) from moved
         where audience_id is not null group by 1, 2, 3 order by 1, 2, 3
        on conflict (agent_id, audience_id, model) do update set embedded = t.embedded + excluded.embedded
        returning 1
    )
    insert into embedding_coverage_stats as t (agent_id, model, embedded)
    select agent_id, model, sum(embedded) from moved group by 1, 2 order by 1, 2
    on conflict (agent_id, model) do update set embedded = t.embedded + excluded.embedded;
    return folded;
end $$;

-- 6. Indexing writes the key; a message whose audience changes moves its document.
create or replace function backscroll_index_messages() returns trigger
language plpgsql as $$
begin
    -- KEY SHARE on the workspaces written to, as the row trigger took it: a reindex swap (which
    -- locks the workspace FOR UPDATE) waits for this transaction, so no document is written in a
    -- configuration the swap already left. In id order, so two bulk writers never wait in a circle.
    perform 1
       from workspaces w
      where w.id in (select c.workspace_id from conversations c
                      where c.id in (select a.conversation_id from added a))
      order by w.id
        for key share of w;
    insert into message_search (message_id, conversation_id, agent_id, workspace_id, tsv, doc_len,
                                created_at, tsv_next, audience_id)
    select n.id, n.conversation_id, c.agent_id, c.workspace_id, d.tsv, backscroll_body_length(d.tsv), n.created_at,
           case when w.ts_config_next is not null
                then backscroll_document(w.ts_config_next, n.language,
                                         case when w.speaker_names_next then s.display_name end, n.body) end,
           backscroll_audience_key(c.workspace_id, n.conversation_id, n.audience_kind, n.audience_namespace,
                                   n.audience_readers)
      from added n
      join conversations c on c.id = n.conversation_id
      join workspaces w on w.id = c.workspace_id
      left join actors s on s.id = n.speaker_actor_id
     cross join lateral (select backscroll_document(w.ts_config, n.language,
                                                    case when w.speaker_names then s.display_name end, n.body) as tsv) d
     where n.state = 'finished' and n.role in ('user', 'assistant')
     order by n.id
    on conflict (message_id) do update
       set tsv = excluded.tsv, doc_len = excluded.doc_len, created_at = excluded.created_at,
           tsv_next = excluded.tsv_next, audience_id = excluded.audience_id;
    return null;
end $$;

create or replace function backscroll_index_message() returns trigger
language plpgsql as $$
declare
    conv record;
    speaker text;
begin
    if new.state = 'finished' and new.role in ('user', 'assistant') then
        -- KEY SHARE on the workspace row: a reindex swap (which locks it FOR UPDATE) waits for
        -- this transaction, so no document is written in a configuration the swap already left.
        select c.agent_id, c.workspace_id, w.ts_config, w.speaker_names, w.ts_config_next, w.speaker_names_next
          into conv
          from conversations c join workspaces w on w.id = c.workspace_id
         where c.id = new.conversation_id
           for key share of w;
        speaker := (select a.display_name from actors a where a.id = new.speaker_actor_id);
        insert into message_search (message_id, conversation_id, agent_id, workspace_id, tsv, doc_len,
                                    created_at, tsv_next, audience_id)
        select new.id, new.conversation_id, conv.agent_id, conv.workspace_id, d.tsv,
               backscroll_body_length(d.tsv), new.created_at,
               case when conv.ts_config_next is not null
                    then backscroll_document(conv.ts_config_next, new.language,
                                             case when conv.speaker_names_next then speaker end, new.body) end,
               backscroll_audience_key(conv.workspace_id, new.conversation_id, new.audience_kind,
                                       new.audience_namespace, new.audience_readers)
          from (select backscroll_document(conv.ts_config, new.language, case when conv.speaker_names then speaker end,
                                           new.body) as tsv) d
        on conflict (message_id) do update
           set tsv = excluded.tsv, doc_len = excluded.doc_len, created_at = excluded.created_at,
               tsv_next = excluded.tsv_next, audience_id = excluded.audience_id;
    elsif tg_op = 'UPDATE' then
        delete from message_search where message_id = new.id;
    end if;
    return null;
end $$;

create function backscroll_index_audience() returns trigger
language plpgsql as $$
declare
    key bigint;
begin
    key := backscroll_audience_key((select c.workspace_id from conversations c where c.id = new.conversation_id),
                                   new.conversation_id, new.audience_kind, new.audience_namespace,
                                   new.audience_readers);
    update message_search set audience_id = key where message_id = new.id and audience_id <> key;
    return null;
end $$;

create trigger messages_audience_after_update
    after update of audience_kind, audience_namespace, audience_readers, conversation_id on messages
    for each row when (old.audience_kind is distinct from new.audience_kind
                       or old.audience_namespace is distinct from new.audience_namespace
                       or old.audience_readers is distinct from new.audience_readers
                       or old.conversation_id is distinct from new.conversation_id)
    execute function backscroll_index_audience();

-- A destination's window of recent documents (ranking.recent_window_start) and the walk through
-- it test each document's audience: carried in the agent's recency index, they read no heap row.
drop index message_search_agent_recent;
create index message_search_agent_recent on message_search (agent_id, created_at desc) include (audience_id);
