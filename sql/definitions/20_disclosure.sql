-- The disclosure rule: where a row said in one audience may be shown (the audience predicate,
-- linked identities, a sealed row's own conversation) and which audience keys a destination receives.
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_audience_allows(o_kind audience_kind, o_namespace text, o_readers text[], d_kind audience_kind, d_namespace text, d_readers text[])
 returns boolean
 language sql
 immutable parallel safe
as $$
    select coalesce(case o_kind
        when 'public' then true
        when 'workspace' then d_kind in ('workspace', 'members') and d_namespace = o_namespace and o_namespace <> ''
        when 'members' then d_kind = 'members' and d_namespace = o_namespace and o_namespace <> ''
                            and cardinality(d_readers) > 0 and d_readers <@ o_readers
        when 'external' then d_kind in ('members', 'external') and d_namespace = o_namespace and o_namespace <> ''
                             and cardinality(d_readers) > 0 and d_readers <@ o_readers
    end, false)
$$;

create or replace function backscroll_linked_identities(p_agent bigint, p_namespace text, p_external text)
 returns table(namespace text, external_id text)
 language sql
 stable parallel safe
as $$
    select b.namespace, b.external_id
      from agents ag
      join actors a on a.workspace_id = ag.workspace_id and a.namespace = p_namespace and a.external_id = p_external
      join identity_links l on l.agent_id = ag.id and l.revoked_at is null and l.verified_at is not null
                           and a.id in (l.actor_a, l.actor_b)
      join actors b on b.id = case when l.actor_a = a.id then l.actor_b else l.actor_a end
                   and b.workspace_id = ag.workspace_id
     where ag.id = p_agent
$$;

create or replace function backscroll_identities_linked(p_agent bigint, a_namespace text, a_external text, b_namespace text, b_external text)
 returns boolean
 language sql
 stable parallel safe
as $$
    select exists (select 1 from backscroll_linked_identities(p_agent, a_namespace, a_external) li
                    where li.namespace = b_namespace and li.external_id = b_external)
$$;

create or replace function backscroll_audience_allows_for(p_agent bigint, o_kind audience_kind, o_namespace text, o_readers text[], d_kind audience_kind, d_namespace text, d_readers text[])
 returns boolean
 language sql
 stable parallel safe
as $$
    select backscroll_audience_allows(o_kind, o_namespace, o_readers, d_kind, d_namespace, d_readers)
        or (o_kind = 'members' and cardinality(o_readers) = 1
            and d_kind = 'members' and cardinality(d_readers) = 1
            and backscroll_identities_linked(p_agent, o_namespace, o_readers[1], d_namespace, d_readers[1]))
$$;

create or replace function backscroll_sealed_allows(o_conversation bigint, o_kind audience_kind, o_namespace text, o_readers text[], d_conversation bigint, d_kind audience_kind, d_namespace text)
 returns boolean
 language sql
 immutable parallel safe
as $$
    select coalesce(o_kind in ('members', 'external') and cardinality(o_readers) = 0
                    and o_conversation = d_conversation
                    and d_kind = o_kind and d_namespace = o_namespace, false)
$$;

create or replace function backscroll_disclosable(p_agent bigint, o_conversation bigint, o_kind audience_kind, o_namespace text, o_readers text[], d_conversation bigint, d_kind audience_kind, d_namespace text, d_readers text[])
 returns boolean
 language sql
 stable parallel safe
as $$
    select backscroll_audience_allows_for(p_agent, o_kind, o_namespace, o_readers, d_kind, d_namespace, d_readers)
        or backscroll_sealed_allows(o_conversation, o_kind, o_namespace, o_readers, d_conversation, d_kind, d_namespace)
$$;

create or replace function backscroll_receivable_audiences(p_ws bigint, p_agent bigint, d_conversation bigint, d_kind audience_kind, d_namespace text, d_readers text[])
 returns bigint[]
 language sql
 stable parallel safe
as $$
    with linked as materialized (
        select li.namespace, li.external_id
          from backscroll_linked_identities(p_agent, d_namespace, d_readers[1]) li
         where d_kind = 'members' and cardinality(d_readers) = 1
    )
    select coalesce(array_agg(a.id order by a.id), '{}')
      from search_audiences a
     where a.workspace_id = p_ws
       and a.id in (select audience_id from search_audience_doc_stats where agent_id = p_agent
                    union
                    select audience_id from search_doc_deltas where agent_id = p_agent and audience_id is not null)
       and (backscroll_audience_allows(a.kind, a.namespace, a.readers, d_kind, d_namespace, d_readers)
            or (a.kind = 'members' and cardinality(a.readers) = 1
                and (a.namespace, a.readers[1]) in (select l.namespace, l.external_id from linked l))
            or backscroll_sealed_allows(a.sealed_conversation, a.kind, a.namespace, a.readers,
                                        d_conversation, d_kind, d_namespace))
$$;
