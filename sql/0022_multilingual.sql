-- Every language stemmed, none worse (issue 18).
--
-- `multilingual` becomes the default text search configuration. Its documents hold the words of a
-- message as they are (what `simple` makes of them: the speaker's name at weight A, the body at D,
-- what BM25 counts as the body's length and what a quoted phrase matches) and, at weight C, the
-- stems of the message's own language that differ from those words. The language is detected per
-- message when it is written (backscroll/language, an offline detector) and kept in
-- `messages.language`: the stemming configuration of that language, `simple` when none was
-- detected with confidence, NULL until it is detected (the maintenance thread detects the
-- messages written before this migration or by a path that did not say). A query word is read as
-- it is and through every stemming configuration (backscroll_term_configs), so "researching"
-- finds a message saying "researcher" and "recherches" one saying "recherche", in a workspace
-- holding both languages. A workspace may still pin one configuration (`english`, `simple`, ...).
--
-- A `multilingual` document of a message whose language is not known is exactly the `simple`
-- document, so the workspaces on `simple` move to `multilingual` here without a rebuild: each
-- document gains its stems when its message's language is filled in (one row rewritten; its
-- vectors are not touched: nothing embedded changed, migration 0021).

create text search configuration multilingual (copy = simple);
comment on text search configuration multilingual is
    'Backscroll: the words as simple reads them, plus the stems of each message''s own language (messages.language)';

alter table messages add column language regconfig;
comment on column messages.language is
    'stemming configuration of the message''s language, detected when written; simple: none detected; null: not yet detected';
create index messages_language_pending on messages (id) where language is null;

-- The document of a message. Stems are added only under `multilingual`, only for a detected
-- language, and only where they differ from a word already in the document: the body's length and
-- its term frequencies stay those of the words (each stem position counts once, like the word it
-- stands for, and no lexeme holds both).
create function backscroll_document(cfg regconfig, lang regconfig, speaker_name text, body text) returns tsvector
language sql immutable parallel safe as $$
    select d.words
           || case when cfg = 'multilingual'::regconfig and lang is not null
                        and lang not in ('simple'::regconfig, 'multilingual'::regconfig)
                   then setweight(ts_delete(to_tsvector(lang, left(body, 100000)), tsvector_to_array(d.words)), 'C')
                   else ''::tsvector end
      from (select setweight(to_tsvector(cfg, coalesce(speaker_name, '')), 'A')
                   -- Only the first 100,000 characters are searchable: a tsvector is capped at 1 MB.
                   || to_tsvector(cfg, left(body, 100000)) as words) d
$$;

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
                    then backscroll_document(conv.ts_config_next, new.language,
                                             case when conv.speaker_names_next then speaker end, new.body) end
          from (select backscroll_document(conv.ts_config, new.language, case when conv.speaker_names then speaker end,
                                           new.body) as tsv) d
        on conflict (message_id) do update
           set tsv = excluded.tsv, doc_len = excluded.doc_len, created_at = excluded.created_at,
               tsv_next = excluded.tsv_next;
    elsif tg_op = 'UPDATE' then
        delete from message_search where message_id = new.id;
    end if;
    return null;
end $$;

create or replace function backscroll_reindex_speaker() returns trigger
language plpgsql as $$
begin
    update message_search s
       set tsv = backscroll_document(w.ts_config, m.language, case when w.speaker_names then new.display_name end, m.body),
           tsv_next = case when w.ts_config_next is not null
                           then backscroll_document(w.ts_config_next, m.language,
                                                    case when w.speaker_names_next then new.display_name end, m.body)
                      end
      from messages m
      join conversations c on c.id = m.conversation_id
      join workspaces w on w.id = c.workspace_id
     where m.speaker_actor_id = new.id and s.message_id = m.id;
    return null;
end $$;

drop function backscroll_document(regconfig, text, text);

-- A detected language rewrites the message's document (its vectors stay: migration 0021 re-embeds
-- on body and speaker changes only).
drop trigger messages_index_after_update on messages;
create trigger messages_index_after_update
    after update of body, state, role, created_at, speaker_actor_id, language on messages
    for each row execute function backscroll_index_message();

-- The configurations a query term is read in: the workspace's, and for a single word under
-- `multilingual`, each stemming configuration that reads it as one lexeme other than the word
-- itself. A quoted phrase (a term with a space) or a compound ("e-mail") stays exact.
create function backscroll_term_configs(cfg regconfig, term text, stems regconfig[]) returns regconfig[]
language sql immutable parallel safe as $$
    select case when cfg = 'multilingual'::regconfig and term !~ '\s' and length(to_tsvector(cfg, term)) = 1
                then array[cfg] || array(select s from unnest(stems) with ordinality as x(s, i)
                                          where length(to_tsvector(s, term)) = 1
                                            and to_tsvector(s, term) <> to_tsvector(cfg, term)
                                          order by x.i)
                else array[cfg] end
$$;

-- Terms OR'd, each read in every configuration backscroll_term_configs gives it.
create function backscroll_or_query(cfg regconfig, terms text[], stems regconfig[]) returns tsquery
language plpgsql immutable parallel safe as $$
declare
    result tsquery;
    term text;
    reading regconfig;
    part tsquery;
begin
    foreach term in array coalesce(terms, '{}') loop
        foreach reading in array backscroll_term_configs(cfg, term, coalesce(stems, '{}')) loop
            part := phraseto_tsquery(reading, term);
            if numnode(part) > 0 then
                result := case when result is null then part else result || part end;
            end if;
        end loop;
    end loop;
    return result;
end $$;

create or replace function backscroll_or_query(cfg regconfig, terms text[]) returns tsquery
language sql immutable parallel safe as $$
    select backscroll_or_query(cfg, terms, '{}'::regconfig[])
$$;

-- The configuration an excerpt is highlighted in, the query read in it too: the message's own
-- language under `multilingual` (so "researchers" lights up for a query that found it through the
-- stem "research", and a quoted phrase's words in their inflected forms), else the workspace's.
create function backscroll_headline_config(cfg regconfig, lang regconfig) returns regconfig
language sql immutable parallel safe as $$
    select case when cfg = 'multilingual'::regconfig and lang is not null then lang else cfg end
$$;

alter table workspaces alter column ts_config set default 'multilingual';
update workspaces set ts_config = 'multilingual' where ts_config = 'simple'::regconfig;
update workspaces set ts_config_next = 'multilingual' where ts_config_next = 'simple'::regconfig;
