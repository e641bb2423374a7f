-- A conversation's activity: when it began and when it was last active, kept by its messages' writes.
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_conversation_born()
 returns trigger
 language plpgsql
as $$
begin
    new.last_active_at := new.created_at;
    return new;
end $$;
comment on function backscroll_conversation_born() is
    'a new conversation''s last_active_at starts at its created_at';

create or replace function backscroll_message_stamp()
 returns trigger
 language plpgsql
as $$
begin
    if new.body is distinct from old.body or new.state is distinct from old.state then
        new.updated_at := greatest(now(), old.updated_at);
    end if;
    return new;
end $$;
comment on function backscroll_message_stamp() is
    'messages.updated_at moves forward when a message''s body or state changes';

create or replace function backscroll_touch_conversations()
 returns trigger
 language plpgsql
as $$
begin
    update conversations c
       set last_active_at = n.at
      from (select conversation_id, max(updated_at) as at from changed group by 1) n
     where c.id = n.conversation_id
       and c.last_active_at < n.at;
    return null;
end $$;
comment on function backscroll_touch_conversations() is
    'conversations.last_active_at: the newest updated_at of the inserted or updated messages';

create or replace function backscroll_recompute_conversations()
 returns trigger
 language plpgsql
as $$
begin
    -- The same value inserts maintain: the newest message, but never before the conversation
    -- began (greatest() skips the NULL of a conversation left without messages).
    update conversations c
       set last_active_at = greatest(
               c.created_at,
               (select max(m.updated_at) from messages m where m.conversation_id = c.id))
     where c.id in (select distinct conversation_id from changed);
    return null;
end $$;
comment on function backscroll_recompute_conversations() is
    'conversations.last_active_at recomputed for the conversations whose messages were deleted';

drop trigger if exists conversations_born_before_insert on conversations;
CREATE TRIGGER conversations_born_before_insert BEFORE INSERT ON conversations FOR EACH ROW EXECUTE FUNCTION backscroll_conversation_born();

drop trigger if exists messages_stamp_before_update on messages;
CREATE TRIGGER messages_stamp_before_update BEFORE UPDATE ON messages FOR EACH ROW EXECUTE FUNCTION backscroll_message_stamp();

drop trigger if exists messages_touch_after_insert on messages;
CREATE TRIGGER messages_touch_after_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION backscroll_touch_conversations();

drop trigger if exists messages_touch_after_update on messages;
CREATE TRIGGER messages_touch_after_update AFTER UPDATE ON messages REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION backscroll_touch_conversations();

drop trigger if exists messages_touch_after_delete on messages;
CREATE TRIGGER messages_touch_after_delete AFTER DELETE ON messages REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION backscroll_recompute_conversations();
