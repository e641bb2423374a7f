"""Issue 31, data safety: an image older than the database's schema refuses to start, and a
database belongs to one SearchIndex (sql/0030), whose migrate, purge and `models drop` refuse
another's database. docs/upgrades.md has the rules these hold."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from backscroll import cli
from backscroll.config import get_settings
from backscroll.errors import DatabaseOwnedElsewhere, SchemaNewerThanImage
from backscroll.store.migrate import check_compatible, load_migrations, migrate, migrations_root
from backscroll.store.owner import Owner, current_owner

NEXT = max(m.version for m in load_migrations()) + 1


def _later_release(tmp_path: Path, header: str) -> Path:
    """The migrations of a release after this one: the checkout's, plus one step."""
    folder = tmp_path / "later-sql"
    shutil.copytree(migrations_root(), folder)
    (folder / f"{NEXT:04d}_later_step.sql").write_text(f"{header}-- a later release's step\nselect 1;\n")
    return folder


@pytest.fixture
def env(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("BACKSCROLL_DATABASE_URL", db_url)
    monkeypatch.setenv("BACKSCROLL_SCHEMA_WAIT_S", "5")
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_an_image_older_than_a_contract_migration_refuses_to_migrate_serve_and_work(db_url, env, tmp_path, capsys):
    migrate(db_url, _later_release(tmp_path, "-- backscroll: contract\n"))
    with pytest.raises(SchemaNewerThanImage, match=f"{NEXT:04d}_later_step.sql"):
        migrate(db_url)
    capsys.readouterr()
    assert cli.main(["migrate"]) == 3  # its own exit status: the operator's status tells it apart
    assert cli.main(["serve", "--workers", "1", "--port", "1"]) == 3
    env.setenv("BACKSCROLL_EMBEDDINGS_MODEL", "some-model")
    env.setenv("BACKSCROLL_EMBEDDINGS_URL", "http://127.0.0.1:9/v1")
    env.setenv("BACKSCROLL_EMBEDDINGS_DIMENSIONS", "8")
    get_settings.cache_clear()
    assert cli.main(["worker", "--once"]) == 3
    err = capsys.readouterr().err
    assert err.count("the database's schema is newer than this image") == 3, err
    assert f"run an image that ships {NEXT:04d}_later_step.sql or later" in err


def test_an_expand_only_migration_of_a_later_release_is_no_reason_to_refuse(db_url, tmp_path):
    # The previous release keeps serving while the next one's expand step runs (docs/upgrades.md).
    migrate(db_url, _later_release(tmp_path, ""))
    assert migrate(db_url) == []
    with psycopg.connect(db_url) as conn:
        check_compatible(conn)


def test_the_ledger_records_which_migrations_are_contract_steps(db_url, tmp_path):
    migrate(db_url, _later_release(tmp_path, "-- backscroll: contract\n"))
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("select version from backscroll_migrations where contract").fetchall()
    assert rows == [(NEXT,)]
    assert not any(m.contract for m in load_migrations()), "the checkout's migrations are expand-only so far"


def test_migrate_claims_the_database_and_refuses_another_searchindex(empty_db_url, env, capsys):
    first, second = Owner("uid-first", "team/search"), Owner("uid-second", "team/other")
    migrate(empty_db_url, owner=first)
    assert migrate(empty_db_url, owner=Owner("uid-first", "team/renamed")) == []
    with psycopg.connect(empty_db_url) as conn:
        assert current_owner(conn) == Owner("uid-first", "team/renamed")
    with pytest.raises(DatabaseOwnedElsewhere, match="belongs to SearchIndex team/renamed"):
        migrate(empty_db_url, owner=second)
    env.setenv("BACKSCROLL_DATABASE_URL", empty_db_url)
    env.setenv("BACKSCROLL_OWNER_UID", second.uid)
    get_settings.cache_clear()
    capsys.readouterr()
    assert cli.main(["migrate"]) == 4
    assert "belongs to SearchIndex team/renamed (uid uid-first)" in capsys.readouterr().err
    with psycopg.connect(empty_db_url) as conn:
        assert current_owner(conn).uid == first.uid


def test_purge_and_models_drop_refuse_another_searchindexs_database(db_url, env, capsys):
    migrate(db_url, owner=Owner("uid-first", "team/search"))
    env.setenv("BACKSCROLL_OWNER_UID", "uid-second")
    get_settings.cache_clear()
    assert cli.main(["purge", "--yes-delete-all-data"]) == 4
    assert cli.main(["models", "drop", "some-model", "--yes", "--quiet"]) == 4
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select to_regclass('messages') is not null").fetchone()[0]
    env.setenv("BACKSCROLL_OWNER_UID", "uid-first")
    get_settings.cache_clear()
    assert cli.main(["purge", "--yes-delete-all-data"]) == 0
    with psycopg.connect(db_url) as conn:
        assert not conn.execute("select to_regclass('backscroll_owner') is not null").fetchone()[0]
