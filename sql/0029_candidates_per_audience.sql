-- The candidate walk per audience key (issue 29: the latency of scoped candidates).
--
-- Since 0027 a search_history candidate must sit in an audience key the destination may
-- receive. Walking the agent's recency index and skipping the other keys read every document of
-- the window, most of them unreceivable (a public destination receives ~15% of an agent's
-- documents: 14,000 heap rows for 500 candidates). This index lets the walk read each
-- receivable key's own documents in recency order, one short range per key, and stop there.
create index message_search_audience_recent
    on message_search (agent_id, audience_id, created_at desc, message_id desc);

-- One reading per distinct lexeme set: under `multilingual` every configuration that reads a
-- word the same way (most of them, for an English word) added the same part again, and every
-- row a search tests paid for each copy (twenty `'invoic'` for `invoice`).
create or replace function backscroll_or_query(cfg regconfig, terms text[], stems regconfig[]) returns tsquery
language plpgsql immutable parallel safe as $$
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
