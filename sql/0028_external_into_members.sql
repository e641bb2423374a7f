-- A shared channel reaches its own members' private conversations (issue 29, item 6).
--
-- Seed 000: a private conversation is "retrievable only in a conversation whose readers could
-- already read it". An `external` origin (a channel shared with another organisation, Slack
-- Connect) was disclosed into `external` destinations only, so a person asking the agent in
-- their own DM about a shared channel they are in found nothing, nor any reply built on it.
-- Now `external` reaches a `members` or `external` destination of the same namespace whose
-- readers are a non-empty subset of its own: everyone who reads the destination already reads
-- the channel. The reverse stays closed (`members` never reaches `external`: the outside
-- readers of a shared channel never read the private room), and identity links still extend
-- only single-reader `members` origins (backscroll_audience_allows_for), never `external` ones.
create or replace function backscroll_audience_allows(
    o_kind audience_kind, o_namespace text, o_readers text[],
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns boolean
language sql immutable parallel safe as $$
    select coalesce(case o_kind
        when 'public' then true
        when 'workspace' then d_kind in ('workspace', 'members') and d_namespace = o_namespace and o_namespace <> ''
        when 'members' then d_kind = 'members' and d_namespace = o_namespace and o_namespace <> ''
                            and cardinality(d_readers) > 0 and d_readers <@ o_readers
        when 'external' then d_kind in ('members', 'external') and d_namespace = o_namespace and o_namespace <> ''
                             and cardinality(d_readers) > 0 and d_readers <@ o_readers
    end, false)
$$;
