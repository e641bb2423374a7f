"""docs/schema.sql is the current definition of every function, trigger and index (issue 17,
item 4), and docs/architecture.md's table "What a write sets off" every trigger with what it
maintains (issue 33, item 2): both generated from a migrated database (`make schema`), so neither
drifts from sql/definitions/ and the migrations."""

from __future__ import annotations

from pathlib import Path

import psycopg

from backscroll.store.schema import TRIGGERS_BEGIN, TRIGGERS_END, render, trigger_table, with_trigger_table

DOCS = Path(__file__).resolve().parents[2] / "docs"
CHECKED_IN = DOCS / "schema.sql"
ARCHITECTURE = DOCS / "architecture.md"


def test_docs_schema_sql_is_what_the_migrations_leave(template_url):
    with psycopg.connect(template_url, row_factory=psycopg.rows.dict_row) as conn:
        current = render(conn)
    assert CHECKED_IN.read_text(encoding="utf-8") == current, (
        "docs/schema.sql is stale: a definition or a migration changed a function, trigger or index; run `make schema`")


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


def test_the_trigger_table_in_architecture_md_is_the_catalogs(template_url):
    with psycopg.connect(template_url, row_factory=psycopg.rows.dict_row) as conn:
        table = trigger_table(conn)
        triggers = conn.execute("select count(*) as n from pg_trigger t join pg_class c on c.oid = t.tgrelid "
                                "where c.relnamespace = 'public'::regnamespace and not t.tgisinternal").fetchone()["n"]
    document = ARCHITECTURE.read_text(encoding="utf-8")
    assert with_trigger_table(document, table) == document, (
        "docs/architecture.md's trigger table is stale: a definition changed a trigger or its comment; run `make schema`")
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| table |")]
    assert len(rows) == triggers
    # Each says what it maintains: a trigger function without a COMMENT in sql/definitions/ fails here.
    assert all(not row.endswith("|  |") for row in rows), [row for row in rows if row.endswith("|  |")]
    assert document.index(TRIGGERS_BEGIN) < document.index(TRIGGERS_END, document.index(TRIGGERS_BEGIN))
