-- The exact vector list of a small scope (session search's reader of a few agents) first reads
-- which messages its agents hold, and in which conversations, to narrow them. From the table
-- that is one heap page per message (the sidecar's rows carry two documents); from this index
-- it is an index-only walk of a few pages. It replaces the plain agent index it extends.
create index message_search_agent_cover on message_search (agent_id) include (conversation_id, message_id);
drop index message_search_agent;
