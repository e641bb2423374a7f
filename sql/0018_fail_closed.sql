-- Issue 16: a message shared with one external organisation reached another. External audiences
-- were stored with no readers, and "destination readers <@ origin readers" holds for two empty
-- sets, so every external conversation of a namespace was one audience. From here on:
--
-- 1. The audience predicate fails closed on every empty or unknown set. `members` and `external`
--    reach only a destination of the same kind and namespace whose readers are a NON-EMPTY
--    subset of theirs; an empty namespace matches nothing; a null anywhere is a denial (the
--    coalesce; `<@` never matches a null element). `public` still reaches anywhere.
-- 2. Ingest requires readers for an external audience, as it always did for members (the API
--    answers 400 otherwise), so no new row is stored without them.
-- 3. What becomes of existing rows: conversations, messages and memories stored with an external
--    audience and no readers are left as they are, and are SEALED to their own conversation:
--    disclosable into nothing but the conversation they belong to (a memory: the conversation of
--    the turn that formed it; an imported memory with no turn reaches nothing). No search from
--    any other conversation sees them, and a destination with no readers receives nothing of
--    another conversation's. `backscroll conversations set-readers` (or PUT
--    /v1/conversations/{id}/readers) records the readers the connector knows; the conversation's
--    inherited messages and memories take them at once. A notice below counts what is sealed.
-- 4. Identity links may be recorded unverified (waiting for proof); they grant nothing until
--    verified. Revocation as before.
--
-- The lineage walks now take the destination conversation (the sealed rule needs it). The old
-- signatures stay as wrappers with no destination conversation, so an API pod of the previous
-- version, still serving during a rolling upgrade, gets the stricter answer (sealed rows match
-- nothing there), never an error and never a wider one.

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
        when 'external' then d_kind = 'external' and d_namespace = o_namespace and o_namespace <> ''
                             and cardinality(d_readers) > 0 and d_readers <@ o_readers
    end, false)
$$;

-- A row stored with a private kind and no readers (before this migration) is sealed to its own
-- conversation: it may be disclosed there, where whoever reads it could already read the row,
-- and nowhere else.
create function backscroll_sealed_allows(
    o_conversation bigint, o_kind audience_kind, o_namespace text, o_readers text[],
    d_conversation bigint, d_kind audience_kind, d_namespace text
) returns boolean
language sql immutable parallel safe as $$
    select coalesce(o_kind in ('members', 'external') and cardinality(o_readers) = 0
                    and o_conversation = d_conversation
                    and d_kind = o_kind and d_namespace = o_namespace, false)
$$;

-- The whole rule for one row (a message of `o_conversation`, or a memory formed there) into the
-- destination conversation: the audience predicate, identity-aware, or the sealed rule.
create function backscroll_disclosable(
    p_agent bigint,
    o_conversation bigint, o_kind audience_kind, o_namespace text, o_readers text[],
    d_conversation bigint, d_kind audience_kind, d_namespace text, d_readers text[]
) returns boolean
language sql stable parallel safe as $$
    select backscroll_audience_allows_for(p_agent, o_kind, o_namespace, o_readers, d_kind, d_namespace, d_readers)
        or backscroll_sealed_allows(o_conversation, o_kind, o_namespace, o_readers, d_conversation, d_kind, d_namespace)
$$;

-- Identity links waiting for proof: recorded, granting nothing.
alter table identity_links
    alter column proof drop not null,
    alter column verified_at drop not null,
    alter column verified_at drop default,
    add column recorded_at timestamptz not null default now(),
    add constraint identity_links_verified_with_proof check (verified_at is null or proof is not null);

create or replace function backscroll_linked_identities(p_agent bigint, p_namespace text, p_external text)
returns table (namespace text, external_id text)
language sql stable parallel safe as $$
    select b.namespace, b.external_id
      from agents ag
      join actors a on a.workspace_id = ag.workspace_id and a.namespace = p_namespace and a.external_id = p_external
      join identity_links l on l.agent_id = ag.id and l.revoked_at is null and l.verified_at is not null
                           and a.id in (l.actor_a, l.actor_b)
      join actors b on b.id = case when l.actor_a = a.id then l.actor_b else l.actor_a end
                   and b.workspace_id = ag.workspace_id
     where ag.id = p_agent
$$;

-- The lineage walk (0004), with the destination conversation. Caps as before: 501 input
-- messages, 5,000 lineage nodes, 500 history ids on any one message; a missing node denies.
create function backscroll_lineage_allows(
    p_roots bigint[], p_agent bigint, d_conversation bigint,
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns boolean
language plpgsql stable parallel safe as $$
declare
    nodes integer;
    denied integer;
begin
    if cardinality(p_roots) > 501 then
        return false;
    end if;
    with recursive walk(kind, id) as (
        select 'm'::text, r from unnest(p_roots) as r
        union
        select x.kind, x.id
          from walk w
          cross join lateral (
                select 'm'::text as kind, h as id
                  from messages m, unnest(m.history_message_ids) as h
                 where w.kind = 'm' and m.id = w.id
                union all
                select 'k', k
                  from messages m, unnest(m.memory_ids) as k
                 where w.kind = 'm' and m.id = w.id
                union all
                select 'm', s
                  from memories mem, unnest(mem.source_message_ids) as s
                 where w.kind = 'k' and mem.id = w.id
          ) x
    ),
    capped as (select * from walk limit 5001)
    select count(*),
           count(*) filter (where not coalesce(
               case c.kind
                 when 'm' then (
                    select cardinality(m.history_message_ids) <= 500
                       and exists (select 1 from message_source_evidence e where e.message_id = m.id)
                       and backscroll_disclosable(p_agent, m.conversation_id, m.audience_kind, m.audience_namespace,
                                                  m.audience_readers, d_conversation, d_kind, d_namespace, d_readers)
                      from messages m where m.id = c.id)
                 else (
                    select backscroll_disclosable(p_agent, (select t.conversation_id from turns t where t.id = k.turn_id),
                                                  k.audience_kind, k.audience_namespace, k.audience_readers,
                                                  d_conversation, d_kind, d_namespace, d_readers)
                      from memories k where k.id = c.id)
               end, false))
      into nodes, denied
      from capped c;
    return nodes <= 5000 and denied = 0;
end $$;
alter function backscroll_lineage_allows(bigint[], bigint, bigint, audience_kind, text, text[])
    set plan_cache_mode = force_generic_plan;

-- The audit's batched lineage verdicts (0012), with the destination conversation. The node rule
-- is the walk's above, written out again for the reason 0012 gives (one statement, not a call
-- per node); the mutation check weakens both copies separately.
create function backscroll_lineage_denied(
    p_roots bigint[], p_agent bigint, d_conversation bigint,
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns bigint[]
language plpgsql stable parallel safe as $$
declare
    pairs integer;
    denied bigint[];
begin
    if coalesce(cardinality(p_roots), 0) = 0 then
        return '{}';
    end if;
    with recursive walk(root, kind, id) as (
        select r, 'm'::text, r from unnest(p_roots) as r
        union
        select w.root, x.kind, x.id
          from walk w
          cross join lateral (
                select e.kind, e.id
                  from messages m
                  cross join lateral (select 'm'::text as kind, h as id from unnest(m.history_message_ids) as h
                                      union all
                                      select 'k', k from unnest(m.memory_ids) as k) e
                 where w.kind = 'm' and m.id = w.id
                union all
                select 'm', s
                  from memories mem, unnest(mem.source_message_ids) as s
                 where w.kind = 'k' and mem.id = w.id
          ) x
    ),
    capped as materialized (select * from walk limit 50001),
    nodes as (select distinct c.kind, c.id from capped c),
    verdicts as materialized (
        select n.kind, n.id, coalesce(
               case n.kind
                 when 'm' then (
                    select cardinality(m.history_message_ids) <= 500
                       and exists (select 1 from message_source_evidence e where e.message_id = m.id)
                       and backscroll_disclosable(p_agent, m.conversation_id, m.audience_kind, m.audience_namespace,
                                                  m.audience_readers, d_conversation, d_kind, d_namespace, d_readers)
                      from messages m where m.id = n.id)
                 else (
                    select backscroll_disclosable(p_agent, (select t.conversation_id from turns t where t.id = k.turn_id),
                                                  k.audience_kind, k.audience_namespace, k.audience_readers,
                                                  d_conversation, d_kind, d_namespace, d_readers)
                      from memories k where k.id = n.id)
               end, false) as allowed
          from nodes n
    ),
    per_root as (
        select c.root, count(*) as nodes, bool_and(v.allowed) as allowed
          from capped c
          join verdicts v on v.kind = c.kind and v.id = c.id
         group by c.root
    )
    select (select count(*) from capped),
           array(select r.root from per_root r where not (r.nodes <= 5000 and r.allowed) order by r.root)
      into pairs, denied;
    if pairs > 50000 then
        return array(select r from unnest(p_roots) as r
                      where not backscroll_lineage_allows(array[r], p_agent, d_conversation, d_kind, d_namespace,
                                                          d_readers)
                      order by r);
    end if;
    return denied;
end $$;
alter function backscroll_lineage_denied(bigint[], bigint, bigint, audience_kind, text, text[])
    set plan_cache_mode = force_generic_plan;

-- The previous signatures, for API pods of the previous version during a rolling upgrade: no
-- destination conversation, so a sealed row matches nothing.
create or replace function backscroll_lineage_allows(
    p_roots bigint[], p_agent bigint,
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns boolean
language sql stable parallel safe as $$
    select backscroll_lineage_allows(p_roots, p_agent, null::bigint, d_kind, d_namespace, d_readers)
$$;
create or replace function backscroll_lineage_denied(
    p_roots bigint[], p_agent bigint,
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns bigint[]
language sql stable parallel safe as $$
    select backscroll_lineage_denied(p_roots, p_agent, null::bigint, d_kind, d_namespace, d_readers)
$$;

-- Existing rows with a private kind and no readers (only `external` could be stored so; the
-- members check has always refused it): left as they are, sealed to their own conversation.
do $$
declare
    conversations_n bigint;
    messages_n bigint;
    memories_n bigint;
begin
    select count(*) into conversations_n from conversations
     where audience_kind in ('members', 'external') and cardinality(audience_readers) = 0;
    select count(*) into messages_n from messages
     where audience_kind in ('members', 'external') and cardinality(audience_readers) = 0;
    select count(*) into memories_n from memories
     where audience_kind in ('members', 'external') and cardinality(audience_readers) = 0;
    if conversations_n + messages_n + memories_n > 0 then
        raise notice 'sealed to their own conversation until their readers are set: % conversation(s), % message(s), % memory(ies) with an external audience and no readers; see `backscroll conversations sealed`',
            conversations_n, messages_n, memories_n;
    end if;
end $$;
