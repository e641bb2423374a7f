-- BM25 ranking, speaker-aware documents and per-workspace language with a background reindex
-- (issue 8; measured in bench/RESULTS.md, ranking).

-- 1. The document. A message's lexical document is its body (weight D) and its speaker's display
-- name in a weight class of its own (A): people ask what a person said, and a person's own
-- messages rarely contain their own name. Ranking decides what a name match is worth (the
-- `search_speaker_weight` setting), so the name cannot drown the body.
create function backscroll_document(cfg regconfig, speaker_name text, body text) returns tsvector
language sql immutable parallel safe as $$
    -- Only the first 100,000 characters are searchable: a tsvector is capped at 1 MB.
    select setweight(to_tsvector(cfg, coalesce(speaker_name, '')), 'A') || to_tsvector(cfg, left(body, 100000))
$$;

-- BM25's document length: the body's tokens (positions of weight D), not the name's.
create function backscroll_body_length(tsv tsvector) returns integer
language sql immutable parallel safe as $$
    select count(*)::integer from unnest(tsv) u, unnest(u.weights) w where w = 'D'
$$;

-- 2. Per-workspace document settings, and a rebuild in the background when they change: the
-- `_next` values are what the documents are being rebuilt with (into message_search.tsv_next)
-- while search keeps answering from `tsv` with the current ones; the swap is one transaction.
alter table workspaces
    add column speaker_names boolean not null default true,
    add column ts_config_next regconfig,
    add column speaker_names_next boolean,
    add column reindex_requested_at timestamptz;

alter table message_search
    add column doc_len integer not null default 0,
    add column tsv_next tsvector;

-- Rebuild every existing document with its speaker's name before the statistics are counted
-- (one pass: each pass writes a new version of every row and its GIN entries).
update message_search s
   set tsv = d.tsv, doc_len = backscroll_body_length(d.tsv)
  from messages m
  join conversations c on c.id = m.conversation_id
  join workspaces w on w.id = c.workspace_id
  left join actors a on a.id = m.speaker_actor_id
  cross join lateral (select backscroll_document(w.ts_config, case when w.speaker_names then a.display_name end,
                                                 m.body) as tsv) d
 where m.id = s.message_id;

create or replace function backscroll_index_message() returns trigger
language plpgsql as $$
declare
    conv record;
    speaker text;
begin
    if new.state = 'finished' and new.role in ('user', 'assistant') then
        -- KEY SHARE on the workspace row: a reindex swap (which locks it FOR UPDATE) waits for
        -- this transaction, so no document is written in a configuration the swap already left.
        select c.agent_id, c.workspace_id, w.ts_config, w.speaker_names, w.ts_config_next, w.speaker_names_next
          into conv
          from conversations c join workspaces w on w.id = c.workspace_id
         where c.id = new.conversation_id
           for key share of w;
        speaker := (select a.display_name from actors a where a.id = new.speaker_actor_id);
        insert into message_search (message_id, conversation_id, agent_id, workspace_id, tsv, doc_len,
                                    created_at, tsv_next)
        select new.id, new.conversation_id, conv.agent_id, conv.workspace_id, d.tsv,
               backscroll_body_length(d.tsv), new.created_at,
               case when conv.ts_config_next is not null
                    then backscroll_document(conv.ts_config_next,
                                             case when conv.speaker_names_next then speaker end, new.body) end
          from (select backscroll_document(conv.ts_config, case when conv.speaker_names then speaker end,
                                           new.body) as tsv) d
        on conflict (message_id) do update
           set tsv = excluded.tsv, doc_len = excluded.doc_len, created_at = excluded.created_at,
               tsv_next = excluded.tsv_next;
    elsif tg_op = 'UPDATE' then
        delete from message_search where message_id = new.id;
    end if;
    return null;
end $$;

drop trigger messages_index_after_update on messages;
create trigger messages_index_after_update
    after update of body, state, role, created_at, speaker_actor_id on messages
    for each row execute function backscroll_index_message();

-- A renamed person's documents follow the new name (names rarely change; the rewrite is one
-- statement through messages_speaker).
create function backscroll_reindex_speaker() returns trigger
language plpgsql as $$
begin
    update message_search s
       set tsv = backscroll_document(w.ts_config, case when w.speaker_names then new.display_name end, m.body),
           tsv_next = case when w.ts_config_next is not null
                           then backscroll_document(w.ts_config_next,
                                                    case when w.speaker_names_next then new.display_name end, m.body)
                      end
      from messages m
      join conversations c on c.id = m.conversation_id
      join workspaces w on w.id = c.workspace_id
     where m.speaker_actor_id = new.id and s.message_id = m.id;
    return null;
end $$;

create trigger actors_reindex_after_update
    after update of display_name on actors
    for each row when (old.display_name is distinct from new.display_name)
    execute function backscroll_reindex_speaker();

-- When even the rarest query term matches more messages than the candidate pool holds, the
-- most recent matches are taken: a search first finds how far back the most recent window of
-- its scope goes (an index walk of k entries) and reads only the matches inside it (a bitmap
-- AND of the GIN index with one of these), not every match.
create index message_search_agent_recent on message_search (agent_id, created_at desc);
create index message_search_workspace_recent on message_search (workspace_id, created_at desc) include (agent_id);

-- 3. BM25 statistics per agent (search_history's scope; session search sums a workspace's
-- agents): document frequency per lexeme, and documents and total length. Writers only append
-- signed deltas, from statement-level triggers over transition tables, so concurrent ingestion
-- never waits on a hot row ("the" is in every other message). Readers add the pending deltas
-- of the query's lexemes to the folded counts, so the statistics are exact at every moment;
-- folding (backscroll_fold_search_stats, run in the background) only keeps that read short.
create table search_term_stats (
    agent_id bigint not null,
    lexeme   text   not null,
    df       bigint not null,
    primary key (agent_id, lexeme)
);
create table search_term_deltas (
    agent_id bigint  not null,
    lexeme   text    not null,
    delta    integer not null
);
create index search_term_deltas_lookup on search_term_deltas (agent_id, lexeme);
create table search_doc_stats (
    agent_id  bigint primary key,
    docs      bigint not null,
    total_len bigint not null
);
create table search_doc_deltas (
    agent_id  bigint not null,
    docs      bigint not null,
    total_len bigint not null
);
create index search_doc_deltas_agent on search_doc_deltas (agent_id);

insert into search_term_stats (agent_id, lexeme, df)
select s.agent_id, u.lexeme, count(*) from message_search s, unnest(s.tsv) u group by 1, 2;
insert into search_doc_stats (agent_id, docs, total_len)
select agent_id, count(*), sum(doc_len) from message_search group by 1;

create function backscroll_count_inserted() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, lexeme, delta)
    select n.agent_id, u.lexeme, count(*) from new_rows n, unnest(n.tsv) u group by 1, 2;
    insert into search_doc_deltas (agent_id, docs, total_len)
    select agent_id, count(*), sum(doc_len) from new_rows group by 1;
    return null;
end $$;

create function backscroll_count_deleted() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, lexeme, delta)
    select o.agent_id, u.lexeme, -count(*) from old_rows o, unnest(o.tsv) u group by 1, 2;
    insert into search_doc_deltas (agent_id, docs, total_len)
    select agent_id, -count(*), -sum(doc_len) from old_rows group by 1;
    return null;
end $$;

-- An update counts only when the document changed (a reindex batch writes tsv_next alone).
create function backscroll_count_updated() returns trigger
language plpgsql as $$
begin
    insert into search_term_deltas (agent_id, lexeme, delta)
    select agent_id, lexeme, sum(d)::integer
      from (select o.agent_id, u.lexeme, -1 as d
              from old_rows o join new_rows n on n.message_id = o.message_id, unnest(o.tsv) u
             where o.tsv is distinct from n.tsv or o.agent_id <> n.agent_id
            union all
            select n.agent_id, u.lexeme, 1
              from old_rows o join new_rows n on n.message_id = o.message_id, unnest(n.tsv) u
             where o.tsv is distinct from n.tsv or o.agent_id <> n.agent_id) x
     group by 1, 2
    having sum(d) <> 0;
    insert into search_doc_deltas (agent_id, docs, total_len)
    select agent_id, sum(docs), sum(len)
      from (select o.agent_id, -1 as docs, -o.doc_len as len
              from old_rows o join new_rows n on n.message_id = o.message_id
             where o.doc_len <> n.doc_len or o.agent_id <> n.agent_id
            union all
            select n.agent_id, 1, n.doc_len
              from old_rows o join new_rows n on n.message_id = o.message_id
             where o.doc_len <> n.doc_len or o.agent_id <> n.agent_id) x
     group by 1
    having sum(docs) <> 0 or sum(len) <> 0;
    return null;
end $$;

create trigger message_search_count_insert after insert on message_search
    referencing new table as new_rows for each statement execute function backscroll_count_inserted();
create trigger message_search_count_delete after delete on message_search
    referencing old table as old_rows for each statement execute function backscroll_count_deleted();
create trigger message_search_count_update after update on message_search
    referencing old table as old_rows new table as new_rows
    for each statement execute function backscroll_count_updated();

-- Folds at most p_limit pending term deltas (and every pending document delta) into the
-- counts; returns how many term deltas it folded. One folder at a time (an advisory lock): two
-- folds upserting the same lexemes in different orders could deadlock.
create function backscroll_fold_search_stats(p_limit integer) returns bigint
language plpgsql as $$
declare
    folded bigint := 0;
begin
    if not pg_try_advisory_xact_lock(hashtext('backscroll_fold_search_stats')) then
        return 0;
    end if;
    with moved as (
        delete from search_term_deltas
         where ctid = any(array(select ctid from search_term_deltas limit p_limit))
        returning agent_id, lexeme, delta
    ), summed as (
        select agent_id, lexeme, sum(delta) as delta, count(*) as n from moved group by 1, 2
    ), upserted as (
        insert into search_term_stats as t (agent_id, lexeme, df)
        select agent_id, lexeme, delta from summed order by agent_id, lexeme
        on conflict (agent_id, lexeme) do update set df = t.df + excluded.df
        returning 1
    )
    select coalesce(sum(n), 0) into folded from summed;
    with moved as (
        delete from search_doc_deltas returning agent_id, docs, total_len
    )
    insert into search_doc_stats as t (agent_id, docs, total_len)
    select agent_id, sum(docs), sum(total_len) from moved group by 1
    on conflict (agent_id) do update set docs = t.docs + excluded.docs, total_len = t.total_len + excluded.total_len;
    return folded;
end $$;
