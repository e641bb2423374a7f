"""docs/schema.sql is the current definition of every function, trigger and index (issue 17,
item 4): regenerated whenever a migration changes one, so a reader never has to find which of
several migrations holds a function's current text."""

from __future__ import annotations

from pathlib import Path

import psycopg

from backscroll.store.schema import render

CHECKED_IN = Path(__file__).resolve().parents[2] / "docs" / "schema.sql"


def test_docs_schema_sql_is_what_the_migrations_leave(template_url):
    with psycopg.connect(template_url, row_factory=psycopg.rows.dict_row) as conn:
        current = render(conn)
    assert CHECKED_IN.read_text(encoding="utf-8") == current, (
        "docs/schema.sql is stale: a migration changed a function, trigger or index; run `make schema`")


def test_the_current_schema_holds_each_rule_once_and_only_the_migrations_own(template_url):
    with psycopg.connect(template_url, row_factory=psycopg.rows.dict_row) as conn:
        text = render(conn)
    # The disclosure rule as it stands, once each (0018 replaced 0004's and 0007's).
    for name in ("backscroll_audience_allows(o_kind", "backscroll_sealed_allows(", "backscroll_disclosable(",
                 "backscroll_linked_identities("):
        assert text.count(f"CREATE OR REPLACE FUNCTION public.{name}") == 1, name
    assert "l.verified_at is not null" in text and "cardinality(d_readers) > 0" in text
    # Extensions' own functions are not the project's.
    assert "FUNCTION public.vector_in" not in text and "FUNCTION public.similarity(" not in text
