-- Search documents: message_search follows messages (body, state, role, speaker, language, audience)
-- and speakers' names.
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_audience_key(p_ws bigint, p_conversation bigint, p_kind audience_kind, p_namespace text, p_readers text[])
 returns bigint
 language plpgsql
as $$
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

create or replace function backscroll_index_message()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_index_message() is
    'message_search: the changed message''s search document (and its audience key), or none when it is no longer searchable';

create or replace function backscroll_index_messages()
 returns trigger
 language plpgsql
as $$
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
comment on function backscroll_index_messages() is
    'message_search: one search document per inserted finished user/assistant message, in one statement';

create or replace function backscroll_index_audience()
 returns trigger
 language plpgsql
as $$
declare
    key bigint;
begin
    key := backscroll_audience_key((select c.workspace_id from conversations c where c.id = new.conversation_id),
                                   new.conversation_id, new.audience_kind, new.audience_namespace,
                                   new.audience_readers);
    update message_search set audience_id = key where message_id = new.id and audience_id <> key;
    return null;
end $$;
comment on function backscroll_index_audience() is
    'message_search.audience_id: the document''s audience key follows the message''s audience or conversation';

create or replace function backscroll_reindex_speaker()
 returns trigger
 language plpgsql
as $$
begin
    update message_search s
       set tsv = backscroll_document(w.ts_config, m.language, case when w.speaker_names then new.display_name end, m.body),
           tsv_next = case when w.ts_config_next is not null
                           then backscroll_document(w.ts_config_next, m.language,
                                                    case when w.speaker_names_next then new.display_name end, m.body)
                      end
      from messages m
      join conversations c on c.id = m.conversation_id
      join workspaces w on w.id = c.workspace_id
     where m.speaker_actor_id = new.id and s.message_id = m.id;
    return null;
end $$;
comment on function backscroll_reindex_speaker() is
    'message_search: the documents of a renamed speaker''s messages, rebuilt (the name is in them where their workspace indexes speaker names)';

drop trigger if exists messages_index_after_insert on messages;
CREATE TRIGGER messages_index_after_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION backscroll_index_messages();

drop trigger if exists messages_index_after_update on messages;
CREATE TRIGGER messages_index_after_update AFTER UPDATE OF body, state, role, created_at, speaker_actor_id, language ON messages FOR EACH ROW EXECUTE FUNCTION backscroll_index_message();

drop trigger if exists messages_audience_after_update on messages;
CREATE TRIGGER messages_audience_after_update AFTER UPDATE OF audience_kind, audience_namespace, audience_readers, conversation_id ON messages FOR EACH ROW WHEN (old.audience_kind IS DISTINCT FROM new.audience_kind OR old.audience_namespace IS DISTINCT FROM new.audience_namespace OR old.audience_readers IS DISTINCT FROM new.audience_readers OR old.conversation_id IS DISTINCT FROM new.conversation_id) EXECUTE FUNCTION backscroll_index_audience();

drop trigger if exists actors_reindex_after_update on actors;
CREATE TRIGGER actors_reindex_after_update AFTER UPDATE OF display_name ON actors FOR EACH ROW WHEN (old.display_name IS DISTINCT FROM new.display_name) EXECUTE FUNCTION backscroll_reindex_speaker();
