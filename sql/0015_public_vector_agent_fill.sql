-- backscroll: no-transaction
-- 0014's column for the vectors written before it, in chunks of 10,000 message ids, each
-- committed: no long transaction, no lock a search waits on, and an interrupted run resumes
-- where it stopped (a chunk already filled in updates nothing). Vectors written meanwhile get
-- the column from 0014's trigger. Each updated vector goes into its model's HNSW index again:
-- 2 min 45 s for 43,330 public vectors of 277,824 on the 2-core benchmark machine.
do $$
declare
    lo bigint := 0;
    top bigint := (select coalesce(max(message_id), 0) from message_embeddings);
begin
    while lo < top loop
        update message_embeddings e
           set public_agent_id = c.agent_id
          from messages m
          join conversations c on c.id = m.conversation_id
         where e.message_id > lo and e.message_id <= lo + 10000
           and m.id = e.message_id and m.audience_kind = 'public'
           and e.public_agent_id is distinct from c.agent_id;
        commit;
        lo := lo + 10000;
    end loop;
end $$;
