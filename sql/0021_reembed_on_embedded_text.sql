-- Vectors embed a message's document text (embeddings/document.py: its body, after its speaker's
-- displayed name when the workspace puts names in documents), not its text-search document.
-- Until now any change of `message_search.tsv` queued the message again and dropped its vectors,
-- so switching a workspace's text search configuration, which rewrites every tsv but no text,
-- deleted every vector of the workspace and embedded it all again. Re-embedding now follows
-- what is embedded: the body, the speaker, the speaker's displayed name, and the workspace's
-- speaker-names setting.

drop trigger message_search_reembed_after_update on message_search;
drop function backscroll_embedding_text_changed();

-- The embedded text of these messages changed: queue the indexable ones again (while a model is
-- registered), drop the jobs of the others, and drop their vectors, which would find them for
-- the wrong reasons.
create function backscroll_embedding_reembed(p_ids bigint[]) returns void
language plpgsql as $$
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

-- What stays tied to the document: a document emptied (or filled) changes whether the message is
-- owed a vector, and whether its vectors count (migration 0020), whatever changed its text.
-- Waits for a vector being stored first, as a deleted document does.
create function backscroll_embedding_indexable_changed() returns trigger
language plpgsql as $$
begin
    perform 1 from messages where id = new.message_id for update;
    insert into embedding_coverage_deltas (agent_id, model, embedded)
    select new.agent_id, e.model, case when new.tsv <> ''::tsvector then count(*) else -count(*) end
      from message_embeddings e
     where e.message_id = new.message_id
     group by e.model;
    perform backscroll_embedding_reembed(array[new.message_id]);
    return null;
end $$;

create trigger message_search_indexable_after_update
    after update of tsv on message_search
    for each row when ((old.tsv <> ''::tsvector) is distinct from (new.tsv <> ''::tsvector))
    execute function backscroll_embedding_indexable_changed();

-- After messages_index_after_update (triggers fire in name order), so the sidecar row it reads
-- is the new one.
create function backscroll_reembed_message() returns trigger
language plpgsql as $$
begin
    perform backscroll_embedding_reembed(array[new.id]);
    return null;
end $$;

create trigger messages_reembed_after_update
    after update of body, speaker_actor_id on messages
    for each row when (old.body is distinct from new.body
                       or old.speaker_actor_id is distinct from new.speaker_actor_id)
    execute function backscroll_reembed_message();

-- A renamed person: their messages are embedded with the new name where names are embedded.
create function backscroll_reembed_speaker() returns trigger
language plpgsql as $$
begin
    perform backscroll_embedding_reembed(array(
        select m.id from messages m
          join conversations c on c.id = m.conversation_id
          join workspaces w on w.id = c.workspace_id
         where m.speaker_actor_id = new.id and w.speaker_names));
    return null;
end $$;

create trigger actors_reembed_after_update
    after update of display_name on actors
    for each row when (old.display_name is distinct from new.display_name)
    execute function backscroll_reembed_speaker();

-- Names put into (or taken out of) a workspace's documents: every message with a speaker is
-- embedded again. The text search configuration alone embeds nothing again.
create function backscroll_reembed_workspace() returns trigger
language plpgsql as $$
begin
    perform backscroll_embedding_reembed(array(
        select m.id from messages m
          join conversations c on c.id = m.conversation_id
         where c.workspace_id = new.id and m.speaker_actor_id is not null));
    return null;
end $$;

create trigger workspaces_reembed_after_update
    after update of speaker_names on workspaces
    for each row when (old.speaker_names is distinct from new.speaker_names)
    execute function backscroll_reembed_workspace();
