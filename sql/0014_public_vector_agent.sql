-- search_history into a public destination ranks the vectors of the agent's public messages
-- exactly (0011). It found them through messages: every public message of the workspace (one
-- partial index over all agents) joined to the agent's conversations, then each id looked up in
-- the vectors' primary key: ~9 of a ~16 ms list at 300k messages. Each vector now carries the
-- agent whose public message it embeds (null for any other message), and a partial index per
-- agent and model hands the agent's public vectors over in one range read. The column narrows,
-- it never vouches: every candidate is still tested against the audience predicate and the
-- perspective on `messages`, `conversations` and `connectors`.
--
-- Upgrading writes a new version of every public message's vector, and each goes into its
-- model's HNSW index again: 43,000 of 278,000 384-dimension vectors took 2 min 45 s on the
-- 2-core bench machine. Plan it like an index build. Searches and the worker go on meanwhile.
alter table message_embeddings add column public_agent_id bigint;

update message_embeddings e
   set public_agent_id = c.agent_id
  from messages m
  join conversations c on c.id = m.conversation_id
 where m.id = e.message_id and m.audience_kind = 'public';

create index message_embeddings_public on message_embeddings (public_agent_id, model)
    where public_agent_id is not null;
drop index messages_public;

-- A vector takes its message's public agent as it is written (the worker, the backfill, a bulk
-- load alike); a message whose audience (or conversation) changes takes its vectors along.
create function backscroll_embedding_public_agent() returns trigger
language plpgsql as $$
begin
    new.public_agent_id := (select c.agent_id
                              from messages m join conversations c on c.id = m.conversation_id
                             where m.id = new.message_id and m.audience_kind = 'public');
    return new;
end $$;

create trigger message_embeddings_public_agent
    before insert or update of message_id on message_embeddings
    for each row execute function backscroll_embedding_public_agent();

create function backscroll_embedding_audience_changed() returns trigger
language plpgsql as $$
begin
    update message_embeddings e
       set public_agent_id = (select c.agent_id from conversations c
                               where c.id = new.conversation_id and new.audience_kind = 'public')
     where e.message_id = new.id;
    return null;
end $$;

create trigger messages_embeddings_audience_after_update
    after update of audience_kind, conversation_id on messages
    for each row when (old.audience_kind is distinct from new.audience_kind
                       or old.conversation_id is distinct from new.conversation_id)
    execute function backscroll_embedding_audience_changed();
