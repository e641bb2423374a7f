-- search_history reads its candidates from the sidecar first and classifies them on demand, in
-- ranked order (bench/RESULTS.md, search_history). Two things make that cheap.

-- 1. The identity-aware branch of the audience predicate as a set: the identities verifiably
-- linked, in this perspective, to one (namespace, external id). SEARCH resolves the destination
-- reader's set once instead of asking `backscroll_identities_linked` once per other person's DM
-- among the matches (3,760 calls for one common word), and that function now asks this one, so
-- the rule is written once.
create function backscroll_linked_identities(p_agent bigint, p_namespace text, p_external text)
returns table (namespace text, external_id text)
language sql stable parallel safe as $$
    select b.namespace, b.external_id
      from agents ag
      join actors a on a.workspace_id = ag.workspace_id and a.namespace = p_namespace and a.external_id = p_external
      join identity_links l on l.agent_id = ag.id and l.revoked_at is null
                           and a.id in (l.actor_a, l.actor_b)
      join actors b on b.id = case when l.actor_a = a.id then l.actor_b else l.actor_a end
                   and b.workspace_id = ag.workspace_id
     where ag.id = p_agent
$$;

create or replace function backscroll_identities_linked(
    p_agent bigint, a_namespace text, a_external text, b_namespace text, b_external text
) returns boolean
language sql stable parallel safe as $$
    select exists (select 1 from backscroll_linked_identities(p_agent, a_namespace, a_external) li
                    where li.namespace = b_namespace and li.external_id = b_external)
$$;

-- 2. Ranking reads only the sidecar: recency needs the message's time, so the sidecar keeps it.
alter table message_search add column created_at timestamptz;
update message_search s set created_at = m.created_at from messages m where m.id = s.message_id;
alter table message_search alter column created_at set not null;

create or replace function backscroll_index_message() returns trigger
language plpgsql as $$
declare
    conv record;
begin
    if new.state = 'finished' and new.role in ('user', 'assistant') then
        select c.agent_id, c.workspace_id, w.ts_config
          into conv
          from conversations c join workspaces w on w.id = c.workspace_id
         where c.id = new.conversation_id;
        -- Only the first 100,000 characters are searchable: a tsvector is capped at 1 MB.
        insert into message_search (message_id, conversation_id, agent_id, workspace_id, tsv, created_at)
        values (new.id, new.conversation_id, conv.agent_id, conv.workspace_id,
                to_tsvector(conv.ts_config, left(new.body, 100000)), new.created_at)
        on conflict (message_id) do update set tsv = excluded.tsv, created_at = excluded.created_at;
    elsif tg_op = 'UPDATE' then
        delete from message_search where message_id = new.id;
    end if;
    return null;
end $$;

drop trigger messages_index_after_update on messages;
create trigger messages_index_after_update
    after update of body, state, role, created_at on messages
    for each row execute function backscroll_index_message();
