-- The audit counts lineage exclusions over the search's own ranked pool: every pool member that
-- passed the cheap predicates but was not selected is walked to tell `lineage` from
-- `below_cutoff`. One backscroll_lineage_allows call per member cost ~70 us (a plpgsql call and a
-- recursive statement each), ~10 ms for a common word's pool, more than the ranking itself.
--
-- backscroll_lineage_denied answers for all of them in one walk: the walk carries its root, so
-- each root's node set is exactly the one its own call would walk, while each distinct node's
-- verdict is read once however many roots reach it (a conversation's messages share most of
-- their history). A root is denied exactly when backscroll_lineage_allows(array[root], ...)
-- would deny it: a denied node, or more than 5000 nodes. When the roots together reach more than
-- 50000 (root, node) pairs the per-root counts could be cut short, so it falls back to one call
-- per root.
--
-- The node rule is backscroll_lineage_allows's (0004), written out again: it is evaluated per
-- node inside one statement here, where a function call per node would cost what this saves.
-- The mutation check weakens both copies separately.
create function backscroll_lineage_denied(
    p_roots bigint[], p_agent bigint,
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
                       and backscroll_audience_allows_for(p_agent, m.audience_kind, m.audience_namespace,
                                                          m.audience_readers, d_kind, d_namespace, d_readers)
                      from messages m where m.id = n.id)
                 else (
                    select backscroll_audience_allows_for(p_agent, k.audience_kind, k.audience_namespace,
                                                          k.audience_readers, d_kind, d_namespace, d_readers)
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
                      where not backscroll_lineage_allows(array[r], p_agent, d_kind, d_namespace, d_readers)
                      order by r);
    end if;
    return denied;
end $$;
alter function backscroll_lineage_denied(bigint[], bigint, audience_kind, text, text[])
    set plan_cache_mode = force_generic_plan;
