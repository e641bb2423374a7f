-- Embedding coverage: per agent, audience and model, how many indexable documents have a vector
-- (deltas folded like the BM25 statistics).
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_coverage_vectors_added()
 returns trigger
 language plpgsql
as $$
begin
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select s.agent_id, s.audience_id, a.model, count(*)
      from added a join message_search s on s.message_id = a.message_id
     where s.tsv <> ''::tsvector
     group by 1, 2, 3;
    return null;
end $$;
comment on function backscroll_coverage_vectors_added() is
    'embedding_coverage_deltas: +1 per new vector of an indexable document';

create or replace function backscroll_coverage_vector_gone()
 returns trigger
 language plpgsql
as $$
begin
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select s.agent_id, s.audience_id, old.model, -1
      from message_search s
     where s.message_id = old.message_id and s.tsv <> ''::tsvector
       and exists (select 1 from embedding_models r where r.model = old.model);
    return old;
end $$;
comment on function backscroll_coverage_vector_gone() is
    'embedding_coverage_deltas: -1 per removed vector of an indexable document';

create or replace function backscroll_coverage_vector_moved()
 returns trigger
 language plpgsql
as $$
begin
    insert into embedding_coverage_deltas (agent_id, audience_id, model, embedded)
    select s.agent_id, s.audience_id, old.model, -1 from message_search s
     where s.message_id = old.message_id and s.tsv <> ''::tsvector
    union all
    select s.agent_id, s.audience_id, new.model, 1 from message_search s
     where s.message_id = new.message_id and s.tsv <> ''::tsvector;
    return new;
end $$;
comment on function backscroll_coverage_vector_moved() is
    'embedding_coverage_deltas when a vector changes message or model';

create or replace function backscroll_coverage_document_gone()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_coverage_document_gone() is
    'embedding_coverage_deltas: a removed document''s vectors leave its audience''s coverage';

create or replace function backscroll_coverage_audience_moved()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_coverage_audience_moved() is
    'embedding_coverage_deltas: a document''s vectors move to its new audience key';

create or replace function backscroll_coverage_model_gone()
 returns trigger
 language plpgsql
as $$
begin
    delete from embedding_coverage_stats c using gone g where c.model = g.model;
    delete from embedding_audience_coverage_stats c using gone g where c.model = g.model;
    delete from embedding_coverage_deltas d using gone g where d.model = g.model;
    return null;
end $$;
comment on function backscroll_coverage_model_gone() is
    'embedding coverage statistics and deltas of a removed model are deleted';

drop trigger if exists message_embeddings_coverage_insert on message_embeddings;
CREATE TRIGGER message_embeddings_coverage_insert AFTER INSERT ON message_embeddings REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION backscroll_coverage_vectors_added();

drop trigger if exists message_embeddings_coverage_delete on message_embeddings;
CREATE TRIGGER message_embeddings_coverage_delete BEFORE DELETE ON message_embeddings FOR EACH ROW EXECUTE FUNCTION backscroll_coverage_vector_gone();

drop trigger if exists message_embeddings_coverage_update on message_embeddings;
CREATE TRIGGER message_embeddings_coverage_update BEFORE UPDATE OF message_id, model ON message_embeddings FOR EACH ROW WHEN (old.message_id IS DISTINCT FROM new.message_id OR old.model IS DISTINCT FROM new.model) EXECUTE FUNCTION backscroll_coverage_vector_moved();

drop trigger if exists message_search_coverage_delete on message_search;
CREATE TRIGGER message_search_coverage_delete BEFORE DELETE ON message_search FOR EACH ROW EXECUTE FUNCTION backscroll_coverage_document_gone();

drop trigger if exists message_search_coverage_audience on message_search;
CREATE TRIGGER message_search_coverage_audience AFTER UPDATE OF audience_id ON message_search FOR EACH ROW WHEN (old.audience_id IS DISTINCT FROM new.audience_id AND old.tsv <> ''::tsvector AND new.tsv <> ''::tsvector) EXECUTE FUNCTION backscroll_coverage_audience_moved();

drop trigger if exists embedding_models_coverage_delete on embedding_models;
CREATE TRIGGER embedding_models_coverage_delete AFTER DELETE ON embedding_models REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION backscroll_coverage_model_gone();
