-- Exact vector scans (a small scope's list, a public destination's list) rank thousands of
-- vectors per search. They compute the cosine distance as one plus the inner product, half the
-- arithmetic of `<=>`, which is exact for unit vectors only: the gateway has always stored unit
-- vectors; this makes it a rule. NOT VALID: existing rows are not rescanned (every one came
-- through the gateway), new and updated ones are checked.
alter table message_embeddings add constraint message_embeddings_unit_length
    check (abs(vector_norm(embedding) - 1) < 1e-4) not valid;

-- The exact session list reads the ids of the reader's own conversations with other agents by
-- conversation; covering the message id makes that an index-only read (like 0010's agent index).
create index message_search_conversation_cover on message_search (conversation_id) include (message_id);
drop index message_search_conversation;
