-- The lineage verdict: a message may be shown only if every message and memory it was derived
-- from may be (the walk over history_message_ids, memory_ids and source_message_ids).
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.



-- A node's parents in the lineage graph ('m' a message, 'k' a memory): a message's history and
-- memories, a memory's source messages. Both walks below step through it; plain SQL, so the
-- planner inlines it into each walk's recursive step (index scans on messages and memories).
create or replace function backscroll_lineage_parents(p_kind text, p_id bigint)
 returns table(kind text, id bigint)
 language sql
 stable parallel safe
as $$
    select e.kind, e.id
      from messages m
      cross join lateral (select 'm'::text as kind, h as id from unnest(m.history_message_ids) as h
                          union all
                          select 'k', k from unnest(m.memory_ids) as k) e
     where p_kind = 'm' and m.id = p_id
    union all
    select 'm', s
      from memories mem, unnest(mem.source_message_ids) as s
     where p_kind = 'k' and mem.id = p_id
$$;

-- One node of a lineage walk ('m' a message, 'k' a memory) and whether it may be shown at the
-- destination: a message needs its source evidence, at most 500 history entries and the
-- disclosure rule; a memory the disclosure rule, from its turn's conversation. A node that is not
-- there is denied. Both walks below (one root, and the audit's batch of roots) take their verdict
-- from here. A one-row table, not a scalar: a set-returning SQL function in FROM is inlined into
-- its caller, so each walk evaluates the rule as if written in it (a scalar call per node would
-- run the function's own executor for each, several times slower).
create or replace function backscroll_lineage_node_allows(p_kind text, p_id bigint, p_agent bigint,
                                                          d_conversation bigint, d_kind audience_kind,
                                                          d_namespace text, d_readers text[])
 returns table(allowed boolean)
 language sql
 stable parallel safe
as $$
    select coalesce(
               case p_kind
                 when 'm' then (
                    select cardinality(m.history_message_ids) <= 500
                       and exists (select 1 from message_source_evidence e where e.message_id = m.id)
                       and backscroll_disclosable(p_agent, m.conversation_id, m.audience_kind, m.audience_namespace,
                                                  m.audience_readers, d_conversation, d_kind, d_namespace, d_readers)
                      from messages m where m.id = p_id)
                 else (
                    select backscroll_disclosable(p_agent, (select t.conversation_id from turns t where t.id = k.turn_id),
                                                  k.audience_kind, k.audience_namespace, k.audience_readers,
                                                  d_conversation, d_kind, d_namespace, d_readers)
                      from memories k where k.id = p_id)
               end, false)
$$;

create or replace function backscroll_lineage_allows(p_roots bigint[], p_agent bigint, d_conversation bigint, d_kind audience_kind, d_namespace text, d_readers text[])
 returns boolean
 language plpgsql
 stable parallel safe
 set plan_cache_mode to 'force_generic_plan'
as $$
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
          cross join lateral backscroll_lineage_parents(w.kind, w.id) x
    ),
    capped as (select * from walk limit 5001)
    select count(*),
           count(*) filter (where not v.allowed)
      into nodes, denied
      from capped c
      cross join lateral backscroll_lineage_node_allows(c.kind, c.id, p_agent, d_conversation, d_kind, d_namespace,
                                                        d_readers) v;
    return nodes <= 5000 and denied = 0;
end $$;

create or replace function backscroll_lineage_allows(p_roots bigint[], p_agent bigint, d_kind audience_kind, d_namespace text, d_readers text[])
 returns boolean
 language sql
 stable parallel safe
as $$
    select backscroll_lineage_allows(p_roots, p_agent, null::bigint, d_kind, d_namespace, d_readers)
$$;

create or replace function backscroll_lineage_denied(p_roots bigint[], p_agent bigint, d_conversation bigint, d_kind audience_kind, d_namespace text, d_readers text[])
 returns bigint[]
 language plpgsql
 stable parallel safe
 set plan_cache_mode to 'force_generic_plan'
as $$
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
          cross join lateral backscroll_lineage_parents(w.kind, w.id) x
    ),
    capped as materialized (select * from walk limit 50001),
    nodes as (select distinct c.kind, c.id from capped c),
    verdicts as materialized (
        select n.kind, n.id, v.allowed
          from nodes n
          cross join lateral backscroll_lineage_node_allows(n.kind, n.id, p_agent, d_conversation, d_kind,
                                                            d_namespace, d_readers) v
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

create or replace function backscroll_lineage_denied(p_roots bigint[], p_agent bigint, d_kind audience_kind, d_namespace text, d_readers text[])
 returns bigint[]
 language sql
 stable parallel safe
as $$
    select backscroll_lineage_denied(p_roots, p_agent, null::bigint, d_kind, d_namespace, d_readers)
$$;
