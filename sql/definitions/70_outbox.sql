-- The embedding outbox: what the worker must (re-)embed, and the public agent of each vector.
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_embedding_reembed(p_ids bigint[])
 returns void
 language plpgsql
as $$
begin
    -- The jobs first, then the vectors: the worker locks jobs before it writes vectors, and
    -- taking them in the same order here means the two never wait on each other in a circle.
    if exists (select 1 from embedding_models) then
        insert into embedding_outbox (message_id)
        select s.message_id from message_search s
         where s.message_id = any(p_ids) and s.tsv <> ''::tsvector
         order by s.message_id
        on conflict (message_id) do update
           set attempts = 0, next_attempt_at = now(), last_error = null, parked_at = null,
               enqueued_at = now();
    end if;
    delete from embedding_outbox o
     where o.message_id = any(p_ids)
       and not exists (select 1 from message_search s
                        where s.message_id = o.message_id and s.tsv <> ''::tsvector
                          and exists (select 1 from embedding_models));
    delete from message_embeddings where message_id = any(p_ids);
end $$;

create or replace function backscroll_embedding_enqueue()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_embedding_enqueue() is
    'embedding_outbox: new indexable documents queued for embedding; embedding_coverage_deltas for vectors already there';

create or replace function backscroll_embedding_forget()
 returns trigger
 language plpgsql
as $$
begin
    -- A message that is no longer indexable keeps no job and no vectors. (A deleted message
    -- loses them by cascade as well; this covers the sidecar row going on its own.)
    delete from embedding_outbox o using gone g where o.message_id = g.message_id;
    delete from message_embeddings e using gone g where e.message_id = g.message_id;
    return null;
end $$;
comment on function backscroll_embedding_forget() is
    'embedding_outbox and message_embeddings: a removed document keeps no job and no vectors';

create or replace function backscroll_embedding_indexable_changed()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_embedding_indexable_changed() is
    'embedding_coverage_deltas, embedding_outbox and message_embeddings when a document becomes (or stops being) indexable';

create or replace function backscroll_embedding_public_agent()
 returns trigger
 language plpgsql
as $$
begin
    new.public_agent_id := (select c.agent_id
                              from messages m join conversations c on c.id = m.conversation_id
                             where m.id = new.message_id and m.audience_kind = 'public');
    return new;
end $$;
comment on function backscroll_embedding_public_agent() is
    'message_embeddings.public_agent_id: the agent of a public message''s vector (the public vector index''s key)';

create or replace function backscroll_embedding_audience_changed()
 returns trigger
 language plpgsql
as $$
begin
    update message_embeddings e
       set public_agent_id = (select c.agent_id from conversations c
                               where c.id = new.conversation_id and new.audience_kind = 'public')
     where e.message_id = new.id;
    return null;
end $$;
comment on function backscroll_embedding_audience_changed() is
    'message_embeddings.public_agent_id when a message''s audience or conversation changes';

create or replace function backscroll_reembed_message()
 returns trigger
 language plpgsql
as $$
begin
    perform backscroll_embedding_reembed(array[new.id]);
    return null;
end $$;
comment on function backscroll_reembed_message() is
    'embedding_outbox and message_embeddings: a message whose body or speaker changed is queued again, its vectors dropped';

create or replace function backscroll_reembed_speaker()
 returns trigger
 language plpgsql
as $$
begin
    perform backscroll_embedding_reembed(array(
        select m.id from messages m
          join conversations c on c.id = m.conversation_id
          join workspaces w on w.id = c.workspace_id
         where m.speaker_actor_id = new.id and w.speaker_names));
    return null;
end $$;
comment on function backscroll_reembed_speaker() is
    'embedding_outbox and message_embeddings: a renamed speaker''s messages re-embedded, where their workspace embeds speaker names';

create or replace function backscroll_reembed_workspace()
 returns trigger
 language plpgsql
as $$
begin
    perform backscroll_embedding_reembed(array(
        select m.id from messages m
          join conversations c on c.id = m.conversation_id
         where c.workspace_id = new.id and m.speaker_actor_id is not null));
    return null;
end $$;
comment on function backscroll_reembed_workspace() is
    'embedding_outbox and message_embeddings: a workspace''s messages with a speaker re-embedded when it turns speaker names on or off';

drop trigger if exists message_search_enqueue_after_insert on message_search;
CREATE TRIGGER message_search_enqueue_after_insert AFTER INSERT ON message_search REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION backscroll_embedding_enqueue();

drop trigger if exists message_search_forget_after_delete on message_search;
CREATE TRIGGER message_search_forget_after_delete AFTER DELETE ON message_search REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION backscroll_embedding_forget();

drop trigger if exists message_search_indexable_after_update on message_search;
CREATE TRIGGER message_search_indexable_after_update AFTER UPDATE OF tsv ON message_search FOR EACH ROW WHEN ((old.tsv <> ''::tsvector) IS DISTINCT FROM (new.tsv <> ''::tsvector)) EXECUTE FUNCTION backscroll_embedding_indexable_changed();

drop trigger if exists message_embeddings_public_agent on message_embeddings;
CREATE TRIGGER message_embeddings_public_agent BEFORE INSERT OR UPDATE OF message_id ON message_embeddings FOR EACH ROW EXECUTE FUNCTION backscroll_embedding_public_agent();

drop trigger if exists messages_embeddings_audience_after_update on messages;
CREATE TRIGGER messages_embeddings_audience_after_update AFTER UPDATE OF audience_kind, conversation_id ON messages FOR EACH ROW WHEN (old.audience_kind IS DISTINCT FROM new.audience_kind OR old.conversation_id IS DISTINCT FROM new.conversation_id) EXECUTE FUNCTION backscroll_embedding_audience_changed();

drop trigger if exists messages_reembed_after_update on messages;
CREATE TRIGGER messages_reembed_after_update AFTER UPDATE OF body, speaker_actor_id ON messages FOR EACH ROW WHEN (old.body IS DISTINCT FROM new.body OR old.speaker_actor_id IS DISTINCT FROM new.speaker_actor_id) EXECUTE FUNCTION backscroll_reembed_message();

drop trigger if exists actors_reembed_after_update on actors;
CREATE TRIGGER actors_reembed_after_update AFTER UPDATE OF display_name ON actors FOR EACH ROW WHEN (old.display_name IS DISTINCT FROM new.display_name) EXECUTE FUNCTION backscroll_reembed_speaker();

drop trigger if exists workspaces_reembed_after_update on workspaces;
CREATE TRIGGER workspaces_reembed_after_update AFTER UPDATE OF speaker_names ON workspaces FOR EACH ROW WHEN (old.speaker_names IS DISTINCT FROM new.speaker_names) EXECUTE FUNCTION backscroll_reembed_workspace();
