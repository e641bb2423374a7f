-- The disclosure model for agent history search: source evidence, provenance, memories,
-- identity links, turns with their evidence ledger, and search audit rows.

-- Provenance of an agent reply: the history messages and memories it was built from.
alter table messages
    add column history_message_ids bigint[] not null default '{}',
    add column memory_ids          bigint[] not null default '{}';

-- Structured evidence of where a message came from. No row means unknown provenance, and a
-- message of unknown provenance is never eligible for disclosure.
create table message_source_evidence (
    message_id  bigint primary key references messages on delete cascade,
    kind        text not null check (kind ~ '^[a-z][a-z0-9_]{0,62}$'),
    reference   text check (length(reference) <= 512),
    recorded_at timestamptz not null default now()
);

-- What an agent remembered, with the audience it may be disclosed to and the messages it was
-- formed from (walked by the lineage check like a reply's history).
create table memories (
    id                 bigint generated always as identity primary key,
    workspace_id       bigint not null references workspaces on delete cascade,
    agent_id           bigint not null references agents on delete cascade,
    body               text not null,
    audience_kind      audience_kind not null,
    audience_namespace text not null,
    audience_readers   text[] not null default '{}',
    source_message_ids bigint[] not null default '{}',
    turn_id            bigint,
    created_at         timestamptz not null default now(),
    check (audience_kind <> 'members' or cardinality(audience_readers) > 0)
);
create index memories_agent on memories (agent_id);

-- Two actors proved to be the same person, in one agent's perspective. Live while not revoked.
create table identity_links (
    id          bigint generated always as identity primary key,
    agent_id    bigint not null references agents on delete cascade,
    actor_a     bigint not null references actors on delete cascade,
    actor_b     bigint not null references actors on delete cascade,
    proof       text not null check (length(proof) between 1 and 512),
    verified_at timestamptz not null default now(),
    revoked_at  timestamptz,
    check (actor_a < actor_b)
);
create unique index identity_links_live on identity_links (agent_id, actor_a, actor_b) where revoked_at is null;

-- A turn: one agent run answering one message in one destination conversation.
create table turns (
    id                   bigint generated always as identity primary key,
    workspace_id         bigint not null references workspaces on delete cascade,
    agent_id             bigint not null references agents on delete cascade,
    conversation_id      bigint not null references conversations on delete cascade,
    requester_actor_id   bigint references actors on delete set null,
    answering_message_id bigint references messages on delete set null,
    reply_message_id     bigint references messages on delete set null,
    created_at           timestamptz not null default now()
);

-- Every message a turn saw, loaded or searched: the reply's provenance is built from it.
create table turn_evidence (
    turn_id    bigint not null references turns on delete cascade,
    message_id bigint not null,
    via        text not null check (via in ('loaded', 'answering', 'search')),
    added_at   timestamptz not null default now(),
    primary key (turn_id, message_id)
);

-- One row per search_history call, including the ones that found nothing. Never the query
-- text: a keyed digest of it (null without BACKSCROLL_MASTER_KEY).
create table search_audit (
    id                   bigint generated always as identity primary key,
    turn_id              bigint not null references turns on delete cascade,
    created_at           timestamptz not null default now(),
    query_digest         bytea,
    filters              jsonb not null default '{}',
    destination_audience jsonb not null,
    requested_limit      integer not null,
    effective_limit      integer not null,
    status               text not null,
    mode                 text not null default 'lexical',
    degradation          text,
    selected             jsonb not null default '[]',
    exclusions           jsonb not null default '{}'
);
create index search_audit_turn on search_audit (turn_id);

-- The audience predicate: may text said to the origin audience be disclosed into the
-- destination audience?
--   public    -> anywhere
--   workspace -> a workspace or members destination of the same namespace (never external)
--   members   -> a members destination of the same namespace whose readers are a subset
--   external  -> an external destination of the same namespace whose readers are a subset
create function backscroll_audience_allows(
    o_kind audience_kind, o_namespace text, o_readers text[],
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns boolean
language sql immutable parallel safe as $$
    select coalesce(case o_kind
        when 'public' then true
        when 'workspace' then d_kind in ('workspace', 'members') and d_namespace = o_namespace
        when 'members' then d_kind = 'members' and d_namespace = o_namespace and d_readers <@ o_readers
        when 'external' then d_kind = 'external' and d_namespace = o_namespace and d_readers <@ o_readers
    end, false)
$$;

-- Are these two (namespace, external id) identities one verified person in this perspective?
create function backscroll_identities_linked(
    p_agent bigint, a_namespace text, a_external text, b_namespace text, b_external text
) returns boolean
language sql stable parallel safe as $$
    select exists (
        select 1
          from agents ag
          join actors a on a.workspace_id = ag.workspace_id and a.namespace = a_namespace and a.external_id = a_external
          join actors b on b.workspace_id = ag.workspace_id and b.namespace = b_namespace and b.external_id = b_external
          join identity_links l on l.agent_id = ag.id and l.revoked_at is null
                               and l.actor_a = least(a.id, b.id) and l.actor_b = greatest(a.id, b.id)
         where ag.id = p_agent)
$$;

-- The audience predicate, identity-aware: single-reader private evidence may also follow the
-- same verified person into their other direct conversation with this agent.
create function backscroll_audience_allows_for(
    p_agent bigint,
    o_kind audience_kind, o_namespace text, o_readers text[],
    d_kind audience_kind, d_namespace text, d_readers text[]
) returns boolean
language sql stable parallel safe as $$
    select backscroll_audience_allows(o_kind, o_namespace, o_readers, d_kind, d_namespace, d_readers)
        or (o_kind = 'members' and cardinality(o_readers) = 1
            and d_kind = 'members' and cardinality(d_readers) = 1
            and backscroll_identities_linked(p_agent, o_namespace, o_readers[1], d_namespace, d_readers[1]))
$$;

-- The lineage walk: may these messages, and everything they were built from (replies'
-- history and memories, memories' sources, recursively), be disclosed into the destination?
-- Caps, any overflow denying the whole read: 501 input messages, 5,000 lineage nodes,
-- 500 history ids on any one message. A missing (deleted) node denies too.
create function backscroll_lineage_allows(
    p_roots bigint[], p_agent bigint,
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
                       and backscroll_audience_allows_for(p_agent, m.audience_kind, m.audience_namespace,
                                                          m.audience_readers, d_kind, d_namespace, d_readers)
                      from messages m where m.id = c.id)
                 else (
                    select backscroll_audience_allows_for(p_agent, k.audience_kind, k.audience_namespace,
                                                          k.audience_readers, d_kind, d_namespace, d_readers)
                      from memories k where k.id = c.id)
               end, false))
      into nodes, denied
      from capped c;
    return nodes <= 5000 and denied = 0;
end $$;

-- Query words OR'd, each term a phrase: the simple parser splits an identifier such as
-- INC-482913 into `inc` and `-482913`, and OR'ing those would match every INC-* message.
create function backscroll_or_query(cfg regconfig, terms text[]) returns tsquery
language plpgsql immutable parallel safe as $$
declare
    result tsquery;
    term text;
    part tsquery;
begin
    foreach term in array coalesce(terms, '{}') loop
        part := phraseto_tsquery(cfg, term);
        if numnode(part) > 0 then
            result := case when result is null then part else result || part end;
        end if;
    end loop;
    return result;
end $$;
