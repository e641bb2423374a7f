-- BM25 statistics: every change to message_search writes deltas, folded into the per-agent and
-- per-audience statistics by backscroll_fold_search_stats (the maintenance loop).
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_count_inserted()
 returns trigger
 language plpgsql
as $$
begin
    insert into search_term_deltas (agent_id, audience_id, lexeme, delta)
    select n.agent_id, n.audience_id, u.lexeme, count(*) from new_rows n, unnest(n.tsv) u group by 1, 2, 3;
    insert into search_doc_deltas (agent_id, audience_id, docs, total_len, indexable)
    select agent_id, audience_id, count(*), sum(doc_len), count(*) filter (where tsv <> ''::tsvector)
      from new_rows group by 1, 2;
    return null;
end $$;
comment on function backscroll_count_inserted() is
    'search_term_deltas and search_doc_deltas: the BM25 statistics'' deltas for new documents';

create or replace function backscroll_count_updated()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_count_updated() is
    'search_term_deltas and search_doc_deltas: the BM25 statistics'' deltas for changed documents';

create or replace function backscroll_count_deleted()
 returns trigger
 language plpgsql
as $$
begin
    insert into search_term_deltas (agent_id, audience_id, lexeme, delta)
    select o.agent_id, o.audience_id, u.lexeme, -count(*) from old_rows o, unnest(o.tsv) u group by 1, 2, 3;
    insert into search_doc_deltas (agent_id, audience_id, docs, total_len, indexable)
    select agent_id, audience_id, -count(*), -sum(doc_len), -count(*) filter (where tsv <> ''::tsvector)
      from old_rows group by 1, 2;
    return null;
end $$;
comment on function backscroll_count_deleted() is
    'search_term_deltas and search_doc_deltas: the BM25 statistics'' deltas for removed documents';

create or replace function backscroll_fold_search_stats(p_limit integer)
 returns bigint
 language plpgsql
as $$
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

drop trigger if exists message_search_count_insert on message_search;
CREATE TRIGGER message_search_count_insert AFTER INSERT ON message_search REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION backscroll_count_inserted();

drop trigger if exists message_search_count_update on message_search;
CREATE TRIGGER message_search_count_update AFTER UPDATE ON message_search REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION backscroll_count_updated();

drop trigger if exists message_search_count_delete on message_search;
CREATE TRIGGER message_search_count_delete AFTER DELETE ON message_search REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION backscroll_count_deleted();
