-- The admin HTTP API (issue 32, item 3): workspaces retired over HTTP, workspace-scoped admin
-- tokens, and one audit row per admin action.
--
-- An admin token with a workspace_id is scoped to that workspace: it sees and acts on that
-- workspace alone, and only an admin token without one (installation-wide, made by
-- `backscroll tokens create --kind admin` or registered by the operator) acts on all and may mint
-- admin tokens. api_tokens_workspace_check (0025) already lets an admin token carry a workspace,
-- so api_tokens is unchanged; this release is the first to make such tokens and to read the
-- column for them. A pod of an earlier release would read a scoped admin token as an
-- installation-wide one: make scoped admin tokens once the rollout is complete (docs/upgrades.md).
--
-- Expand-only: two tables nothing older reads. Neither alters nor references workspaces: an
-- `alter table workspaces` (or a foreign key to it) would lock the table every ingest and search
-- of the running release reads while this migration's transaction is open.

-- DELETE /v1/admin/workspaces/{slug} retires a workspace: its tokens are revoked, no token can be
-- made for it again, and its data is retained (erasing it is `backscroll purge`'s, not the API's).
-- One row per retired workspace; no foreign key (see above; workspaces are never deleted but by purge).
create table workspace_retirements (
    workspace_id bigint primary key,
    retired_at   timestamptz not null default now()
);

-- Who did what to which workspace or token, and how it ended: never a secret and nothing of the
-- request but ids and slugs. No foreign keys: a row outlives the token that acted and its target.
create table admin_audit (
    id               bigint generated always as identity primary key,
    at               timestamptz not null default now(),
    -- the acting token, and the workspace it is scoped to (null: installation-wide)
    token_id         bigint not null,
    token_workspace_id bigint,
    action           text not null check (action ~ '^[a-z][a-z_.]{0,62}$'),
    target_workspace text check (target_workspace ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    target_token_id  bigint,
    -- 'ok', or the error code the API answered (`not_found`, `conflict`, ...)
    outcome          text not null check (outcome ~ '^[a-z][a-z_]{0,62}$')
);
