-- search_history into a public destination ranks the vectors of the agent's public messages
-- (0011). Finding them through messages meant reading every public message of the workspace
-- (one partial index over all agents) and joining it to the agent's conversations: ~5 ms of a
-- ~16 ms list at 300k messages. The sidecar already holds one row per indexable message with
-- its agent, so it carries the public flag too, and a partial index per agent hands over the
-- agent's public message ids in one index-only read. The flag narrows, it never vouches: every
-- candidate is still tested against the audience predicate on `messages`.
alter table message_search add column public boolean not null default false;

update message_search s
   set public = true
  from messages m
 where m.id = s.message_id and m.audience_kind = 'public';

create index message_search_public on message_search (agent_id) include (message_id) where public;
drop index messages_public;

-- The document trigger (0009's) writes the flag with the document, and also runs when a
-- message's audience changes, so the flag follows it.
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
                                    created_at, tsv_next, public)
        select new.id, new.conversation_id, conv.agent_id, conv.workspace_id, d.tsv,
               backscroll_body_length(d.tsv), new.created_at,
               case when conv.ts_config_next is not null
                    then backscroll_document(conv.ts_config_next,
                                             case when conv.speaker_names_next then speaker end, new.body) end,
               new.audience_kind = 'public'
          from (select backscroll_document(conv.ts_config, case when conv.speaker_names then speaker end,
                                           new.body) as tsv) d
        on conflict (message_id) do update
           set tsv = excluded.tsv, doc_len = excluded.doc_len, created_at = excluded.created_at,
               tsv_next = excluded.tsv_next, public = excluded.public;
    elsif tg_op = 'UPDATE' then
        delete from message_search where message_id = new.id;
    end if;
    return null;
end $$;

drop trigger messages_index_after_update on messages;
create trigger messages_index_after_update
    after update of body, state, role, created_at, speaker_actor_id, audience_kind on messages
    for each row execute function backscroll_index_message();
