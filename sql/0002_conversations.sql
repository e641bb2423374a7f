-- Workspaces, agents, connectors, actors, conversations and messages.

create table workspaces (
    id         bigint generated always as identity primary key,
    slug       text not null unique check (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name       text not null,
    -- Text search configuration for documents and queries of this workspace. `simple`
    -- does not stem, so no language is quietly searched worse than another.
    ts_config  regconfig not null default 'simple',
    created_at timestamptz not null default now()
);

create table agents (
    id           bigint generated always as identity primary key,
    workspace_id bigint not null references workspaces on delete cascade,
    slug         text not null check (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name         text not null,
    created_at   timestamptz not null default now(),
    unique (workspace_id, slug)
);

-- A connector is where an agent talks (slack:acme, web:backscroll, email:support).
-- `type:name` is an audience namespace.
create table connectors (
    id         bigint generated always as identity primary key,
    agent_id   bigint not null references agents on delete cascade,
    type       text not null check (type ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    name       text not null check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,126}$'),
    namespace  text generated always as (type || ':' || name) stored,
    created_at timestamptz not null default now(),
    unique (agent_id, type, name)
);

-- A person or bot, by the stable id its namespace gives it: display names collide.
create table actors (
    id           bigint generated always as identity primary key,
    workspace_id bigint not null references workspaces on delete cascade,
    namespace    text not null,
    external_id  text not null check (length(external_id) between 1 and 256),
    display_name text not null default '',
    kind         text not null default 'person' check (kind in ('person', 'bot', 'agent')),
    created_at   timestamptz not null default now(),
    unique (workspace_id, namespace, external_id)
);

-- Audience of a conversation or message. public: anyone; workspace: everyone in the
-- namespace; members: exactly `readers` (stable external ids) of the namespace; external:
-- shared outside the namespace.
create type audience_kind as enum ('public', 'workspace', 'members', 'external');

create table conversations (
    id                 bigint generated always as identity primary key,
    workspace_id       bigint not null references workspaces on delete cascade,
    agent_id           bigint not null references agents on delete cascade,
    connector_id       bigint not null references connectors on delete cascade,
    external_id        text not null check (length(external_id) between 1 and 256),
    title              text not null default '',
    audience_kind      audience_kind not null,
    audience_namespace text not null,
    audience_readers   text[] not null default '{}',
    creator_actor_id   bigint references actors on delete set null,
    created_at         timestamptz not null default now(),
    updated_at         timestamptz not null default now(),
    -- Written only by the triggers on messages below.
    last_active_at     timestamptz not null default now(),
    unique (connector_id, external_id),
    check (audience_kind <> 'members' or cardinality(audience_readers) > 0)
);

-- The recent list: keyset over (last_active_at desc, id desc); id breaks timestamp ties.
create function backscroll_conversation_born() returns trigger
language plpgsql as $$
begin
    new.last_active_at := new.created_at;
    return new;
end $$;

create trigger conversations_born_before_insert
    before insert on conversations
    for each row execute function backscroll_conversation_born();

create index conversations_recent on conversations (workspace_id, last_active_at desc, id desc);
create index conversations_agent_recent on conversations (agent_id, last_active_at desc, id desc);
create index conversations_creator_recent on conversations (creator_actor_id, last_active_at desc, id desc);
create index conversations_title_trgm on conversations using gin (title gin_trgm_ops);

create type message_role as enum ('user', 'assistant', 'tool', 'summary', 'system');
create type message_state as enum ('streaming', 'finished');

create table messages (
    id                 bigint generated always as identity primary key,
    conversation_id    bigint not null references conversations on delete cascade,
    external_id        text check (length(external_id) between 1 and 256),
    speaker_actor_id   bigint references actors on delete set null,
    role               message_role not null,
    body               text not null default '',
    state              message_state not null default 'finished',
    audience_kind      audience_kind not null,
    audience_namespace text not null,
    audience_readers   text[] not null default '{}',
    created_at         timestamptz not null default now(),
    -- When the message last changed (created, filled, finished); drives last_active_at.
    updated_at         timestamptz not null default now(),
    unique (conversation_id, external_id),
    check (audience_kind <> 'members' or cardinality(audience_readers) > 0)
);
create index messages_conversation on messages (conversation_id, created_at, id);

-- last_active_at follows the conversation's messages: statement-level triggers with
-- transition tables, so a bulk load or a cascade costs one UPDATE, not one per row.
create function backscroll_touch_conversations() returns trigger
language plpgsql as $$
begin
    update conversations c
       set last_active_at = n.at
      from (select conversation_id, max(updated_at) as at from changed group by 1) n
     where c.id = n.conversation_id
       and c.last_active_at < n.at;
    return null;
end $$;

create function backscroll_recompute_conversations() returns trigger
language plpgsql as $$
begin
    -- The same value inserts maintain: the newest message, but never before the conversation
    -- began (greatest() skips the NULL of a conversation left without messages).
    update conversations c
       set last_active_at = greatest(
               c.created_at,
               (select max(m.updated_at) from messages m where m.conversation_id = c.id))
     where c.id in (select distinct conversation_id from changed);
    return null;
end $$;

create trigger messages_touch_after_insert
    after insert on messages referencing new table as changed
    for each statement execute function backscroll_touch_conversations();
create trigger messages_touch_after_update
    after update on messages referencing new table as changed
    for each statement execute function backscroll_touch_conversations();
create trigger messages_touch_after_delete
    after delete on messages referencing old table as changed
    for each statement execute function backscroll_recompute_conversations();

create function backscroll_message_stamp() returns trigger
language plpgsql as $$
begin
    if new.body is distinct from old.body or new.state is distinct from old.state then
        new.updated_at := greatest(now(), old.updated_at);
    end if;
    return new;
end $$;

create trigger messages_stamp_before_update
    before update on messages
    for each row execute function backscroll_message_stamp();

-- The search sidecar: one document per indexable message (finished, said by a user or an
-- assistant). Kept by a trigger so no write path can forget it. It narrows by agent and
-- conversation; it never vouches for visibility on its own.
create table message_search (
    message_id      bigint primary key references messages on delete cascade,
    conversation_id bigint not null,
    agent_id        bigint not null,
    workspace_id    bigint not null,
    tsv             tsvector not null
);
create index message_search_agent_tsv on message_search using gin (agent_id, tsv);
create index message_search_agent on message_search (agent_id);
create index message_search_conversation on message_search (conversation_id);

create function backscroll_index_message() returns trigger
language plpgsql as $$
declare
    conv record;
begin
    if new.state = 'finished' and new.role in ('user', 'assistant') then
        select c.agent_id, c.workspace_id, w.ts_config
          into conv
          from conversations c join workspaces w on w.id = c.workspace_id
         where c.id = new.conversation_id;
        -- Only the first 100,000 characters are searchable: a tsvector is capped at 1 MB.
        insert into message_search (message_id, conversation_id, agent_id, workspace_id, tsv)
        values (new.id, new.conversation_id, conv.agent_id, conv.workspace_id,
                to_tsvector(conv.ts_config, left(new.body, 100000)))
        on conflict (message_id) do update set tsv = excluded.tsv;
    elsif tg_op = 'UPDATE' then
        delete from message_search where message_id = new.id;
    end if;
    return null;
end $$;

create trigger messages_index_after_insert
    after insert on messages
    for each row execute function backscroll_index_message();
create trigger messages_index_after_update
    after update of body, state, role on messages
    for each row execute function backscroll_index_message();
