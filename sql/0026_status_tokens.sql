-- A status token, like an admin token, belongs to no workspace: it reads the installation's
-- status, not a workspace's data.
alter table api_tokens drop constraint api_tokens_check;
alter table api_tokens add constraint api_tokens_workspace_check
    check (kind in ('admin', 'status') or workspace_id is not null);
