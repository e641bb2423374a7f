-- How text becomes a search document and a query: the stemming configurations, the document of
-- a message, its length, the OR query over terms and stems.
--
-- Applied by `backscroll migrate` after the table migrations whenever this file's checksum is not
-- the one recorded in backscroll_definitions (backscroll/store/migrate.py): edit it in place.

create or replace function backscroll_headline_config(cfg regconfig, lang regconfig)
 returns regconfig
 language sql
 immutable parallel safe
as $$
    select case when cfg = 'multilingual'::regconfig and lang is not null then lang else cfg end
$$;

create or replace function backscroll_term_configs(cfg regconfig, term text, stems regconfig[])
 returns regconfig[]
 language sql
 immutable parallel safe
as $$
    select case when cfg = 'multilingual'::regconfig and term !~ '\s' and length(to_tsvector(cfg, term)) = 1
                then array[cfg] || array(select s from unnest(stems) with ordinality as x(s, i)
                                          where length(to_tsvector(s, term)) = 1
                                            and to_tsvector(s, term) <> to_tsvector(cfg, term)
                                          order by x.i)
                else array[cfg] end
$$;

create or replace function backscroll_document(cfg regconfig, lang regconfig, speaker_name text, body text)
 returns tsvector
 language sql
 immutable parallel safe
as $$
    select d.words
           || case when cfg = 'multilingual'::regconfig and lang is not null
                        and lang not in ('simple'::regconfig, 'multilingual'::regconfig)
                   then setweight(ts_delete(to_tsvector(lang, left(body, 100000)), tsvector_to_array(d.words)), 'C')
                   else ''::tsvector end
      from (select setweight(to_tsvector(cfg, coalesce(speaker_name, '')), 'A')
                   -- Only the first 100,000 characters are searchable: a tsvector is capped at 1 MB.
                   || to_tsvector(cfg, left(body, 100000)) as words) d
$$;

create or replace function backscroll_body_length(tsv tsvector)
 returns integer
 language sql
 immutable parallel safe
as $$
    select count(*)::integer from unnest(tsv) u, unnest(u.weights) w where w = 'D'
$$;

create or replace function backscroll_or_query(cfg regconfig, terms text[], stems regconfig[])
 returns tsquery
 language plpgsql
 immutable parallel safe
as $$
declare
    result tsquery;
    term text;
    reading regconfig;
    part tsquery;
    seen text[] := '{}';
begin
    foreach term in array coalesce(terms, '{}') loop
        foreach reading in array backscroll_term_configs(cfg, term, coalesce(stems, '{}')) loop
            part := phraseto_tsquery(reading, term);
            if numnode(part) > 0 and not (part::text = any(seen)) then
                seen := seen || part::text;
                result := case when result is null then part else result || part end;
            end if;
        end loop;
    end loop;
    return result;
end $$;

create or replace function backscroll_or_query(cfg regconfig, terms text[])
 returns tsquery
 language sql
 immutable parallel safe
as $$
    select backscroll_or_query(cfg, terms, '{}'::regconfig[])
$$;
