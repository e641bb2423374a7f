-- search_history into a public destination ranks the vectors of the agent's public messages
-- exactly (0011). It found them through messages: every public message of the workspace (one
-- partial index over all agents) joined to the agent's conversations, then each id looked up in
-- the vectors' primary key: ~9 of a ~16 ms list at 300k messages. Each vector now carries the
-- agent whose public message it embeds (null for any other message), and a partial index per
-- agent and model (0016) hands the agent's public vectors over in one range read. The column
-- narrows, it never vouches: every candidate is still tested against the audience predicate and
-- the perspective on `messages`, `conversations` and `connectors`.
--
-- In four steps, so that no search waits on the upgrade: this one adds the column and the
-- triggers that keep it (brief locks); 0015 fills it in for the vectors already there, in
-- committed chunks; 0016 builds the index (writes wait, reads go on); 0017 drops the index the
-- old way read.
alter table message_embeddings add column public_agent_id bigint;

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
