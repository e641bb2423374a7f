-- Which rows inherited their conversation's audience (review of issue 16). When a conversation's
-- readers change, only what was said to the conversation follows them; a message or memory given
-- an audience of its own keeps it, even when that audience happens to equal the conversation's at
-- the moment (a whisper to alice in a room of alice and bob, the room later down to alice alone,
-- must not reach carol when she joins). Equality of audiences could not tell them apart: this
-- column records it when the row is written (ingest without an audience, an agent's reply, a
-- memory formed in a turn).
--
-- Existing rows: unknown, so false (they keep their readers whatever the conversation's become),
-- except the rows 0018 sealed, which inherited the only audience an external conversation could
-- have (no readers) and must be unsealable: a message of a sealed conversation with that same
-- sealed audience, and a memory formed in a turn there under it.
alter table messages add column audience_inherited boolean not null default false;
alter table memories add column audience_inherited boolean not null default false;

update messages m
   set audience_inherited = true
  from conversations c
 where c.id = m.conversation_id
   and c.audience_kind in ('members', 'external') and cardinality(c.audience_readers) = 0
   and m.audience_kind = c.audience_kind and m.audience_namespace = c.audience_namespace
   and cardinality(m.audience_readers) = 0;

update memories k
   set audience_inherited = true
  from turns t
  join conversations c on c.id = t.conversation_id
 where t.id = k.turn_id
   and c.audience_kind in ('members', 'external') and cardinality(c.audience_readers) = 0
   and k.audience_kind = c.audience_kind and k.audience_namespace = c.audience_namespace
   and cardinality(k.audience_readers) = 0;
