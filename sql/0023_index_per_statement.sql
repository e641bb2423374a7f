-- Bulk writes (issue 19): a statement that inserts many messages indexes them in one insert into
-- the sidecar, not one per message. The row trigger made every message its own statement on
-- message_search, so the statement-level triggers there (BM25 deltas, the embedding outbox) ran
-- once per message: 26 delta rows per message, 15.8 million for 600,000 messages. Now a COPY or a
-- multi-row INSERT of N messages writes one delta row per (agent, lexeme) for the whole statement
-- and one outbox insert. Updates stay row by row (a message is edited, streamed or finished alone).

create function backscroll_index_messages() returns trigger
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
                                created_at, tsv_next)
    select n.id, n.conversation_id, c.agent_id, c.workspace_id, d.tsv, backscroll_body_length(d.tsv), n.created_at,
           case when w.ts_config_next is not null
                then backscroll_document(w.ts_config_next, n.language,
                                         case when w.speaker_names_next then s.display_name end, n.body) end
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
           tsv_next = excluded.tsv_next;
    return null;
end $$;

drop trigger messages_index_after_insert on messages;
create trigger messages_index_after_insert
    after insert on messages referencing new table as added
    for each statement execute function backscroll_index_messages();
