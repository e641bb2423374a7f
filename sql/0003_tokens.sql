-- API tokens, stored as SHA-256 digests of 256-bit random secrets: a leaked table
-- yields no usable token, and a high-entropy secret needs no slow hash.
create type token_kind as enum ('reader', 'runtime', 'ingest', 'admin');

create table api_tokens (
    id           bigint generated always as identity primary key,
    kind         token_kind not null,
    name         text not null default '',
    digest       bytea not null unique,
    -- The first characters of the token, shown in listings so a person can tell them apart.
    hint         text not null,
    workspace_id bigint references workspaces on delete cascade,
    actor_id     bigint references actors on delete cascade,
    -- Agents a reader or runtime token may read; NULL means every agent of the workspace.
    agent_ids    bigint[],
    created_at   timestamptz not null default now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    check (kind = 'admin' or workspace_id is not null),
    check (kind <> 'reader' or actor_id is not null)
);
