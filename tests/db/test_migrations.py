"""Forward-only migrations: in order, once, under an advisory lock, refusing edited history."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import psycopg
import pytest

from backscroll.errors import MigrationError
from backscroll.store.migrate import ADVISORY_LOCK_ID, load_migrations, migrate, migrations_root, schema_version
from tests.migrations import migrations_through

SQL_FILES = sorted(p.name for p in migrations_root().glob("*.sql"))


def _ledger(url: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute("select version, name, checksum from backscroll_migrations order by version").fetchall()


def _exists(url: str, table: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("select to_regclass(%s) is not null", (table,)).fetchone()[0]


@pytest.fixture
def sql_copy(tmp_path) -> Path:
    directory = tmp_path / "sql"
    shutil.copytree(migrations_root(), directory)
    return directory


def test_the_checkout_has_migrations_numbered_without_gaps():
    versions = [m.version for m in load_migrations()]
    assert len(versions) >= 3
    assert versions == list(range(1, len(versions) + 1))
    assert len(SQL_FILES) == len(versions)


def test_empty_database_gets_every_file_in_order(empty_db_url):
    applied = migrate(empty_db_url)
    expected = load_migrations()
    assert [(m.version, m.name) for m in applied] == [(m.version, m.name) for m in expected]
    assert [f"{m.version:04d}_{m.name}.sql" for m in applied] == SQL_FILES
    assert _ledger(empty_db_url) == [(m.version, m.name, m.checksum) for m in expected]
    with psycopg.connect(empty_db_url) as conn:
        assert schema_version(conn) == expected[-1].version
        # applied one after another, each in its own transaction: applied_at never decreases
        stamps = [r[0] for r in conn.execute("select applied_at from backscroll_migrations order by version")]
    assert stamps == sorted(stamps)
    for table in ("workspaces", "conversations", "messages", "message_search", "api_tokens"):
        assert _exists(empty_db_url, table), table


def test_rerun_is_a_no_op(db_url):
    before = _ledger(db_url)
    assert migrate(db_url) == []
    assert migrate(db_url) == []
    assert _ledger(db_url) == before


def test_extensions_are_installed(db_url):
    with psycopg.connect(db_url) as conn:
        names = {r[0] for r in conn.execute("select extname from pg_extension")}
        assert {"vector", "pg_trgm", "btree_gin"} <= names
        # and they work
        assert conn.execute("select '[1,2,3]'::vector <-> '[1,2,4]'::vector").fetchone()[0] == 1.0
        assert conn.execute("select similarity('rose room', 'rose room')").fetchone()[0] == 1.0


def test_installation_key_is_created_once(db_url):
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("select key from backscroll_installation").fetchall()
    assert len(rows) == 1
    assert len(bytes(rows[0][0])) == 32
    migrate(db_url)
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select key from backscroll_installation").fetchall() == rows


def test_changed_applied_migration_is_refused(empty_db_url, sql_copy):
    assert len(migrate(empty_db_url, directory=sql_copy)) == len(SQL_FILES)
    edited = sql_copy / SQL_FILES[1]
    edited.write_text(edited.read_text() + "\n-- a harmless-looking edit\n")
    # a new migration after the edited one must not be applied either
    (sql_copy / "0999_after_the_edit.sql").write_text("create table after_the_edit (id int);\n")
    with pytest.raises(MigrationError) as info:
        migrate(empty_db_url, directory=sql_copy)
    message = info.value.message
    assert SQL_FILES[1] in message
    assert "changed" in message and "forward-only" in message
    assert not _exists(empty_db_url, "after_the_edit")
    # restoring the file lets the new migration through
    shutil.copy(migrations_root() / SQL_FILES[1], edited)
    assert [m.version for m in migrate(empty_db_url, directory=sql_copy)] == [999]
    assert _exists(empty_db_url, "after_the_edit")


def test_new_migration_is_applied_alone(db_url, sql_copy):
    (sql_copy / "0998_more.sql").write_text("create table more_things (id int);\n")
    applied = migrate(db_url, directory=sql_copy)
    assert [(m.version, m.name) for m in applied] == [(998, "more")]
    assert _exists(db_url, "more_things")
    assert migrate(db_url, directory=sql_copy) == []


def test_failed_migration_leaves_nothing_and_is_not_recorded(db_url, sql_copy):
    (sql_copy / "0998_broken.sql").write_text(
        "create table half_done (id int);\ninsert into half_done values ('not a number');\n"
    )
    with pytest.raises(MigrationError) as info:
        migrate(db_url, directory=sql_copy)
    assert "0998_broken.sql" in info.value.message
    assert not _exists(db_url, "half_done")
    assert 998 not in [r[0] for r in _ledger(db_url)]
    # fixed, it applies
    (sql_copy / "0998_broken.sql").write_text("create table half_done (id int);\n")
    assert [m.version for m in migrate(db_url, directory=sql_copy)] == [998]


def test_no_transaction_migration_can_build_an_index_concurrently(db_url, sql_copy):
    (sql_copy / "0998_concurrently.sql").write_text(
        "-- backscroll: no-transaction\ncreate index concurrently messages_by_body_length on messages (length(body));\n"
    )
    assert [m.version for m in migrate(db_url, directory=sql_copy)] == [998]
    assert _exists(db_url, "messages_by_body_length")


def test_duplicate_version_numbers_are_refused(tmp_path):
    (tmp_path / "0001_one.sql").write_text("select 1;")
    (tmp_path / "0001_other.sql").write_text("select 2;")
    with pytest.raises(MigrationError):
        load_migrations(tmp_path)


def test_files_not_named_like_migrations_are_ignored(tmp_path):
    (tmp_path / "0002_second.sql").write_text("select 2;")
    (tmp_path / "0001_first.sql").write_text("select 1;")
    (tmp_path / "README.md").write_text("notes")
    (tmp_path / "0003_Upper.sql").write_text("select 3;")
    (tmp_path / "draft.sql").write_text("select 4;")
    assert [(m.version, m.name) for m in load_migrations(tmp_path)] == [(1, "first"), (2, "second")]


def test_concurrent_migrate_waits_for_the_lock(empty_db_url):
    """A second migrate blocks on the advisory lock, then finds nothing to do."""
    results: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            results[name] = migrate(empty_db_url)
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            results[name] = exc

    with psycopg.connect(empty_db_url, autocommit=True) as holder:
        holder.execute("select pg_advisory_lock(%s)", (ADVISORY_LOCK_ID,))
        first = threading.Thread(target=run, args=("first",))
        second = threading.Thread(target=run, args=("second",))
        first.start()
        second.start()
        # both are parked on the lock: nothing applied, two backends waiting on it
        deadline = time.monotonic() + 10
        waiting = 0
        while time.monotonic() < deadline:
            waiting = holder.execute(
                "select count(*) from pg_locks where locktype = 'advisory' and not granted "
                "and database = (select oid from pg_database where datname = current_database())"
            ).fetchone()[0]
            if waiting == 2:
                break
            time.sleep(0.02)
        assert waiting == 2
        assert first.is_alive() and second.is_alive()
        assert holder.execute("select to_regclass('backscroll_migrations')").fetchone()[0] is None
        holder.execute("select pg_advisory_unlock(%s)", (ADVISORY_LOCK_ID,))
    first.join(30)
    second.join(30)
    assert not first.is_alive() and not second.is_alive()
    outcomes = sorted((len(r) if isinstance(r, list) else repr(r)) for r in results.values())
    assert outcomes == [0, len(SQL_FILES)], results
    assert [r[0] for r in _ledger(empty_db_url)] == list(range(1, len(SQL_FILES) + 1))


def test_vectors_written_before_0014_get_their_public_agent_on_upgrade(empty_db_url, tmp_path):
    """0015 fills in 0014's column for the vectors already there, outside a transaction (in
    committed chunks); 0016 and 0017 then swap the indexes."""
    from tests.world import open_world

    before = migrations_through(tmp_path, 13)
    migrate(empty_db_url, directory=before)
    w = open_world(empty_db_url)
    public = w.conversation("acme", "concierge", "t1", audience={"kind": "public", "namespace": "slack:acme"})
    # Messages written as the schema of the time takes them (today's ingest writes later columns).
    insert = ("insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace,"
              " audience_readers) values (%s, 'user', %s, 'finished', %s, 'slack:acme', %s) returning id")
    said_in_public = w.conn.execute(insert, (public, "the venue is confirmed", "public", [])).fetchone()["id"]
    said_to_one = w.conn.execute(insert, (public, "your deposit is refunded", "members", ["U1"])).fetchone()["id"]
    w.conn.execute("insert into embedding_models (model, dimensions, index_name) values ('m2', 2, 'm2_idx')")
    w.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                   "select unnest(%s::bigint[]), 'm2', '[1,0]'", ([said_in_public, said_to_one],))
    applied = [m.version for m in migrate(empty_db_url)]
    assert applied[:4] == [14, 15, 16, 17]
    rows = {r["message_id"]: r["public_agent_id"]
            for r in w.conn.execute("select message_id, public_agent_id from message_embeddings")}
    assert rows == {said_in_public: w.agent_id("acme", "concierge"), said_to_one: None}
    assert _exists(empty_db_url, "message_embeddings_public") and not _exists(empty_db_url, "messages_public")
    w.conn.close()


def test_a_workspace_on_simple_moves_to_multilingual_without_a_rebuild(empty_db_url, tmp_path):
    """0022: a `simple` document is a `multilingual` one whose language is not yet known, so the
    workspace switches in place (documents unchanged, nothing pending); each message gains its
    stems once its language is detected."""
    from backscroll.config import LanguageSettings
    from backscroll.search import maintenance
    from tests.world import open_world

    before = migrations_through(tmp_path, 21)
    migrate(empty_db_url, directory=before)
    w = open_world(empty_db_url)
    conv = w.conversation("acme", "concierge", "t1")
    insert = ("insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace,"
              " audience_readers) values (%s, 'user', %s, 'finished', 'workspace', 'web:demo', '{}') returning id")
    said = w.conn.execute(insert, (conv, "our researchers presented their findings")).fetchone()["id"]
    documents = "select message_id, tsv::text as tsv from message_search order by 1"
    old = w.conn.execute(documents).fetchall()
    assert w.conn.execute("select ts_config::text as c from workspaces").fetchone()["c"] == "simple"
    assert [m.version for m in migrate(empty_db_url)][0] == 22
    state = maintenance.language(w.conn, "acme")
    assert (state.ts_config, state.reindexing) == ("multilingual", False)
    assert w.conn.execute(documents).fetchall() == old
    assert maintenance.fill_languages(w.conn, 10, LanguageSettings()) == 1
    assert "'research':" in w.conn.execute("select tsv::text as t from message_search where message_id = %s",
                                          (said,)).fetchone()["t"]
    w.conn.close()


def test_text_stored_decomposed_before_0024_is_composed_and_found(empty_db_url, tmp_path):
    """0024: bodies, titles and names stored in NFD (`e` + U+0301) are composed on upgrade, and
    their documents follow, so the composed query finds them."""
    from tests.world import open_world

    decomposed = "re\u0301servation"
    migrate(empty_db_url, directory=migrations_through(tmp_path, 23))
    w = open_world(empty_db_url)
    conv = w.conversation("acme", "concierge", "t1", f"Hotel {decomposed}")
    insert = ("insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace,"
              " audience_readers) values (%s, 'user', %s, 'finished', 'workspace', 'web:demo', '{}') returning id")
    said = w.conn.execute(insert, (conv, f"the {decomposed} is confirmed")).fetchone()["id"]
    composed = "r\u00e9servation"
    found = ("select count(*) as n from message_search where message_id = %s "
             "and tsv @@ to_tsquery('multilingual', %s)")
    assert w.conn.execute(found, (said, composed)).fetchone()["n"] == 0  # the bug: one word, two spellings
    assert [m.version for m in migrate(empty_db_url)][:1] == [24]  # and whatever came after it
    assert w.conn.execute("select body from messages where id = %s", (said,)).fetchone()["body"] \
        == f"the {composed} is confirmed"
    assert w.conn.execute("select title from conversations where id = %s", (conv,)).fetchone()["title"] \
        == f"Hotel {composed}"
    assert w.conn.execute(found, (said, composed)).fetchone()["n"] == 1
    w.conn.close()


def test_status_tokens_arrive_on_upgrade_and_other_tokens_keep_their_rules(empty_db_url, tmp_path):
    """0025 adds the kind outside a transaction (an enum value is usable once committed), 0026 lets
    it, like admin, have no workspace; the other kinds still need theirs."""
    import psycopg
    from backscroll.access.auth import TokenKind, authenticate, create_token
    from tests.world import open_world

    migrate(empty_db_url, directory=migrations_through(tmp_path, 24))
    w = open_world(empty_db_url)
    try:
        _, admin = create_token(w.conn, TokenKind.admin)
        assert [m.version for m in migrate(empty_db_url)][:2] == [25, 26]
        assert authenticate(w.conn, f"Bearer {admin}").kind is TokenKind.admin
        _, status = create_token(w.conn, TokenKind.status)
        assert authenticate(w.conn, f"Bearer {status}").kind is TokenKind.status
        with pytest.raises(psycopg.errors.CheckViolation):
            create_token(w.conn, TokenKind.runtime)
    finally:
        w.conn.close()


def test_audience_statistics_are_counted_on_upgrade(empty_db_url, tmp_path):
    """0027 gives every document its audience key and counts the per-audience statistics from
    what is there, pending deltas included; they then stay exact through new writes and folds;
    0028 lets an external channel's message reach a DM of one of its readers."""
    from backscroll.search import maintenance
    from tests.db.test_ranking import assert_statistics_exact
    from tests.world import open_world

    migrate(empty_db_url, directory=migrations_through(tmp_path, 26))
    w = open_world(empty_db_url)
    try:
        insert = ("insert into messages (conversation_id, role, body, state, audience_kind, audience_namespace,"
                  " audience_readers) values (%s, 'user', %s, 'finished', %s, 'web:demo', %s) returning id")
        conv = w.conversation("acme", "concierge", "t1")
        for body, kind, readers in [("the harbour venue", "workspace", []), ("the harbour at noon", "members", ["u1"]),
                                    ("harbour harbour", "members", ["u2", "u1"]), ("venue", "members", ["u1", "u2"]),
                                    ("sealed harbour", "external", [])]:
            w.conn.execute(insert, (conv, body, kind, readers))
        assert w.conn.execute("select count(*) as n from search_term_deltas").fetchone()["n"] > 0
        assert [m.version for m in migrate(empty_db_url)][:2] == [27, 28]
        assert_statistics_exact(w)
        keys = w.conn.execute("select kind::text, readers, sealed_conversation from search_audiences order by id").fetchall()
        # Readers sorted (one key for {u1, u2} in either order); the sealed row keyed by its conversation.
        assert [(k["kind"], k["readers"], k["sealed_conversation"]) for k in keys] == [
            ("workspace", [], None), ("members", ["u1"], None), ("members", ["u1", "u2"], None), ("external", [], conv)]
        w.conn.execute(insert, (conv, "more harbour talk", "members", ["u1"]))
        assert_statistics_exact(w)
        maintenance.fold(w.conn)
        assert_statistics_exact(w)
    finally:
        w.conn.close()
