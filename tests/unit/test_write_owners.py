"""One owner for every write (issue 33): each table of the migrated schema is declared once
(`WRITES`), and no module writes a table it does not own — read from the source, so a write
statement in the wrong module fails here by name (tests/write_owners.py says what counts)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests import write_owners

ROOT = write_owners.ROOT


def copy_tree(tmp_path: Path) -> Path:
    """The parts of the checkout the rule reads, copied (the migrations and the package)."""
    shutil.copytree(ROOT / "backscroll", tmp_path / "backscroll", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "sql", tmp_path / "sql")
    return tmp_path


def test_every_write_is_its_owners_and_every_table_has_one():
    assert write_owners.problems(ROOT) == []


def test_the_product_tables_are_ingests_one_module_each():
    """Conversations, messages, memories, links, workspaces, actors and agents: ingest/, by what is written."""
    tree = write_owners.read_tree(ROOT)
    for table in ("workspaces", "agents", "connectors", "actors", "conversations", "messages",
                  "message_source_evidence", "memories", "identity_links", "workspace_retirements"):
        assert tree.declared[table][0].startswith("backscroll.ingest."), (table, tree.declared[table])
        assert tree.declared[table][0] not in tree.packages
    assert {w.module for w in tree.writes if w.table in ("messages", "memories")} == {
        "backscroll.ingest.messages", "backscroll.ingest.memories"}


def test_a_reversed_write_fails_by_name(tmp_path):
    """The rule bites: an INSERT INTO messages planted in search/ is reported with its module,
    its constant and the table, and so is a write whose table no one declares."""
    root = copy_tree(tmp_path)
    planted = root / "backscroll" / "search" / "sessions.py"
    planted.write_text(planted.read_text() + '\nPLANTED = """\ninsert into messages (conversation_id, body)'
                       ' values (%(c)s, %(b)s)\n"""\n')
    found = write_owners.problems(root)
    assert len(found) == 1, found
    assert found[0].startswith("backscroll.search.sessions.PLANTED (line ")
    assert "writes messages, owned by backscroll.ingest.messages" in found[0]


def test_a_composed_write_and_an_update_are_read_too(tmp_path):
    """psycopg.sql compositions (the table an Identifier's literal, or a comprehension's) and an
    aliased UPDATE outside their owner fail alike."""
    root = copy_tree(tmp_path)
    planted = root / "backscroll" / "embeddings" / "document.py"
    planted.write_text(planted.read_text() + (
        "\nfrom psycopg import sql as _sql  # noqa: E402\n"
        "WIPE = [_sql.SQL('delete from {} where id = 1').format(_sql.Identifier(t)) for t in ('turns', 'memories')]\n"
        "RENAME = 'update actors a set display_name = %(n)s where a.id = %(id)s'\n"))
    found = write_owners.problems(root)
    assert sorted(p.split(" (line")[0] + " " + p.split(", owned by ")[0].rsplit(" ", 1)[1] for p in found) == [
        "backscroll.embeddings.document.RENAME actors", "backscroll.embeddings.document.WIPE memories",
        "backscroll.embeddings.document.WIPE turns"], found


def test_a_borrowed_write_fails_too(tmp_path):
    """Running an owner's statement from another module (imported, or composed into a statement
    of its own) is writing its table there."""
    root = copy_tree(tmp_path)
    planted = root / "backscroll" / "search" / "sessions.py"
    planted.write_text(planted.read_text() + (
        "\nfrom ..ingest.messages import SET_LANGUAGES  # noqa: E402\n"
        "from ..ingest import memories as _memories  # noqa: E402\n"
        "BOTH = SET_LANGUAGES + ';'\n\n\ndef _borrow(conn):\n"
        "    conn.execute(_memories.CARRY_MEMORY_READERS, {})\n"))
    found = sorted(write_owners.problems(root))
    assert found == [
        "backscroll.search.sessions.BOTH is composed from a write of messages, owned by backscroll.ingest.messages",
        "backscroll.search.sessions._borrow runs backscroll.ingest.memories.CARRY_MEMORY_READERS, a write of "
        "memories owned by backscroll.ingest.memories"], found


def test_two_owners_of_one_table_and_a_table_without_one_fail(tmp_path):
    root = copy_tree(tmp_path)
    links = root / "backscroll" / "ingest" / "links.py"
    links.write_text(links.read_text().replace('WRITES = ("identity_links",)', 'WRITES = ("identity_links", "actors")'))
    memories = root / "backscroll" / "ingest" / "memories.py"
    memories.write_text(memories.read_text().replace('WRITES = ("memories",)', "WRITES = ()"))
    found = write_owners.problems(root)
    assert "actors: declared by backscroll.ingest.actors and backscroll.ingest.links (one owner each)" in found
    assert "memories: a table of the migrated schema with no owner (declare it in its writer's WRITES)" in found


def test_the_write_owners_block_of_the_architecture_is_current():
    text = write_owners.ARCHITECTURE.read_text()
    assert write_owners.current(text) == write_owners.block(), (
        "docs/architecture.md's write owners are stale: run `python -m tests.write_owners`")
