-- Measured in bench/RESULTS_history.md: the lineage walk re-planned its recursive query on
-- every call (310-770 us each); a generic plan costs 70-180 us. The walks are tiny (5 nodes at
-- p50), so a plan made for one root serves every root.
alter function backscroll_lineage_allows(bigint[], bigint, audience_kind, text, text[])
    set plan_cache_mode = force_generic_plan;

-- requester_spoke ("has the requester spoken in this room?") probes by speaker.
create index messages_speaker on messages (speaker_actor_id, conversation_id);
