-- The agent's public vectors of a model in one range read (0014). Built in a transaction of its
-- own: writes of vectors wait for the build, searches do not.
create index if not exists message_embeddings_public on message_embeddings (public_agent_id, model)
    where public_agent_id is not null;
