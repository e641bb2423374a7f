"""sql/definitions/: every function and trigger written once, applied by `migrate` after the table
migrations when its file's checksum changed (issue 33, item 2)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import psycopg
import pytest

from backscroll.errors import MigrationError
from backscroll.store.migrate import load_definitions, load_migrations, migrate, migrations_root
from backscroll.store.schema import FUNCTIONS, TRIGGERS
from tests.migrations import migrations_through

DECLARED_FUNCTION = re.compile(r"^create or replace function (\w+)\(", re.M)
DECLARED_TRIGGER = re.compile(r"^create trigger (\w+) .*? on (\w+) ", re.M | re.I)
RECORDED = "select name, checksum from backscroll_definitions order by name"


def _catalog(url: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    with psycopg.connect(url) as conn:
        return conn.execute(FUNCTIONS).fetchall(), conn.execute(TRIGGERS).fetchall()


def _recorded(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute(RECORDED).fetchall())


@pytest.fixture
def sql_copy(tmp_path) -> Path:
    directory = tmp_path / "sql"
    shutil.copytree(migrations_root(), directory)
    return directory


def test_the_catalog_holds_exactly_what_the_definitions_declare(template_url):
    """Nothing defined only in a migration: each function and trigger of a migrated database is
    declared in sql/definitions/, once, and each declared one is there."""
    functions, triggers = _catalog(template_url)
    text = "\n".join(d.sql for d in load_definitions())
    # By name, each overload counted: two signatures of one name are two declarations.
    assert sorted(name for name, _, _ in functions) == sorted(DECLARED_FUNCTION.findall(text))
    assert sorted((table, name) for table, name, _ in triggers) == sorted(
        (table, name) for name, table in DECLARED_TRIGGER.findall(text))


def test_the_definitions_alone_make_every_function_and_trigger(db_url):
    """Drop every function and trigger the migrations left, apply only the definitions: the same
    catalog, byte for byte (no body comes from a migration)."""
    before = _catalog(db_url)
    with psycopg.connect(db_url) as conn:
        for table, name, _ in before[1]:
            conn.execute(f"drop trigger {name} on {table}")
        for name, args, _ in before[0]:
            conn.execute(f"drop function {name}({args}) cascade")
        assert conn.execute(FUNCTIONS).fetchall() == [] and conn.execute(TRIGGERS).fetchall() == []
        for definition in load_definitions():
            conn.execute(definition.sql)
    assert _catalog(db_url) == before


def test_applying_the_definitions_again_changes_nothing(db_url):
    before = _catalog(db_url)
    with psycopg.connect(db_url) as conn:
        for definition in load_definitions():
            conn.execute(definition.sql)
    assert _catalog(db_url) == before


def test_an_empty_database_gets_the_definitions_after_the_migrations(empty_db_url):
    applied = migrate(empty_db_url)
    assert [m.version for m in applied] == [m.version for m in load_migrations()]
    assert [d.name for d in applied.definitions] == [d.name for d in load_definitions()]
    assert applied.labels()[-1] == f"definitions/{load_definitions()[-1].name}"
    assert _recorded(empty_db_url) == {d.name: d.checksum for d in load_definitions()}
    again = migrate(empty_db_url)
    assert again == [] and again.definitions == [] and again.labels() == []


def test_a_changed_definitions_file_is_applied_on_the_next_migrate_and_only_it(db_url, sql_copy):
    recorded = _recorded(db_url)
    edited = sql_copy / "definitions" / "40_conversations.sql"
    edited.write_text(edited.read_text().replace(
        "'a new conversation''s last_active_at starts at its created_at'", "'when the conversation began'"))
    applied = migrate(db_url, directory=sql_copy)
    assert applied == [] and [d.name for d in applied.definitions] == ["40_conversations.sql"]
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select obj_description('backscroll_conversation_born'::regproc, 'pg_proc')"
                            ).fetchone()[0] == "when the conversation began"
    now = _recorded(db_url)
    assert now["40_conversations.sql"] != recorded["40_conversations.sql"]
    assert {k: v for k, v in now.items() if k != "40_conversations.sql"} == {
        k: v for k, v in recorded.items() if k != "40_conversations.sql"}
    assert migrate(db_url, directory=sql_copy).definitions == []  # unchanged: not applied again
    # The checkout's text again: applied again, the database is as it was.
    assert [d.name for d in migrate(db_url).definitions] == ["40_conversations.sql"]
    assert _recorded(db_url) == recorded


def test_a_failing_definitions_file_applies_nothing(db_url, sql_copy):
    before, recorded = _catalog(db_url), _recorded(db_url)
    (sql_copy / "definitions" / "10_text_search.sql").write_text(
        (sql_copy / "definitions" / "10_text_search.sql").read_text() + "\ncomment on function nowhere() is 'x';\n")
    (sql_copy / "definitions" / "40_conversations.sql").write_text(
        (sql_copy / "definitions" / "40_conversations.sql").read_text().replace(
            "return new;", "return new; -- edited", 1))
    with pytest.raises(MigrationError, match="definitions/10_text_search.sql failed"):
        migrate(db_url, directory=sql_copy)
    assert _catalog(db_url) == before and _recorded(db_url) == recorded


def test_a_database_of_a_later_release_keeps_its_definitions(db_url, sql_copy):
    """An older image migrating a newer schema (expand-only, so it may) must not put its older
    functions back: the later release's stand."""
    (sql_copy / "0999_later.sql").write_text("select 1;\n")
    edited = sql_copy / "definitions" / "40_conversations.sql"
    edited.write_text(edited.read_text().replace("return new;", "return new; -- a later release's", 1))
    assert [d.name for d in migrate(db_url, directory=sql_copy).definitions] == ["40_conversations.sql"]
    later = _catalog(db_url)
    applied = migrate(db_url)
    assert applied == [] and applied.definitions == []
    assert _catalog(db_url) == later


@pytest.mark.parametrize("version", [1, 9, 18, 22, 27, 31])
def test_a_database_at_an_earlier_version_upgrades_in_place(empty_db_url, template_url, tmp_path, version):
    """A live database at an earlier version (0031: the last before sql/definitions/ existed) gets
    the migrations it lacks, the ledger and every definitions file, and then holds what a new one
    holds."""
    migrate(empty_db_url, directory=migrations_through(tmp_path, version))
    applied = migrate(empty_db_url)
    assert [m.label for m in applied] == [m.label for m in load_migrations() if m.version > version]
    assert [d.name for d in applied.definitions] == [d.name for d in load_definitions()]
    assert _catalog(empty_db_url) == _catalog(template_url)


def test_the_lineage_verdict_of_a_node_and_its_parents_are_written_once(template_url):
    """Both lineage walks (one root; the audit's batch of roots) take each node's verdict and each
    node's parents from one function each: their text is in no other."""
    functions, _ = _catalog(template_url)
    for function, text in [("backscroll_lineage_node_allows",
                            "exists (select 1 from message_source_evidence e where e.message_id = m.id)"),
                           ("backscroll_lineage_parents", "unnest(mem.source_message_ids)")]:
        assert [name for name, _, body in functions if text in body] == [function]
        callers = {name for name, _, body in functions if f"{function}(" in body and name != function}
        assert callers == {"backscroll_lineage_allows", "backscroll_lineage_denied"}, function
