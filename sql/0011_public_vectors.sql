-- search_history into a public destination may disclose public messages only (the audience
-- predicate admits nothing else there), a small share of an agent's history. Its vector list
-- reads the agent's public messages through this index and ranks their vectors exactly,
-- instead of walking the model's HNSW index past every vector it must refuse.
create index messages_public on messages (conversation_id) include (id) where audience_kind = 'public';
