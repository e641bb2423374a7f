"""The `backscroll` command beyond import and tokens: workspaces, migrate, settings."""

from __future__ import annotations

from backscroll import cli
from backscroll.config import get_settings
from backscroll.store.db import connect


def test_workspaces_create_and_list(cli_env, capsys):
    assert cli.main(["workspaces", "create", "acme", "--name", "Acme Corp"]) == 0
    assert cli.main(["workspaces", "create", "de", "--ts-config", "german"]) == 0
    assert cli.main(["workspaces", "create", "acme", "--name", "Acme Inc"]) == 0  # renames
    capsys.readouterr()
    with connect(cli_env) as conn:
        rows = conn.execute("select slug, name, ts_config::text as cfg from workspaces order by slug").fetchall()
    assert rows == [{"slug": "acme", "name": "Acme Inc", "cfg": "multilingual"},
                    {"slug": "de", "name": "de", "cfg": "german"}]
    assert cli.main(["workspaces", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["acme", "de"]


def test_the_deployments_text_search_configuration_is_the_default(cli_env, capsys, monkeypatch):
    monkeypatch.setenv("BACKSCROLL_TEXT_SEARCH_CONFIG", "french")
    assert cli.main(["workspaces", "create", "paris"]) == 0
    assert cli.main(["workspaces", "create", "berlin", "--ts-config", "german"]) == 0  # the flag wins
    with connect(cli_env) as conn:
        rows = conn.execute("select slug, ts_config::text as cfg from workspaces order by slug").fetchall()
    assert rows == [{"slug": "berlin", "cfg": "german"}, {"slug": "paris", "cfg": "french"}]
    get_settings.cache_clear()
    monkeypatch.setenv("BACKSCROLL_TEXT_SEARCH_CONFIG", "French; drop table workspaces")
    capsys.readouterr()
    assert cli.main(["workspaces", "create", "x"]) == 2  # refused by the setting's own check, clearly
    assert "invalid setting BACKSCROLL_TEXT_SEARCH_CONFIG" in capsys.readouterr().err


def test_workspaces_create_refuses_bad_input_cleanly(cli_env, capsys):
    assert cli.main(["workspaces", "create", "Bad Slug"]) == 1
    assert "rejected by the database" in capsys.readouterr().err
    assert cli.main(["workspaces", "create", "ok", "--ts-config", "klingon"]) == 1
    assert "klingon" in capsys.readouterr().err
    with connect(cli_env) as conn:
        assert conn.execute("select count(*) as n from workspaces").fetchone()["n"] == 0


def test_migrate_command_is_idempotent(cli_env, capsys):
    assert cli.main(["migrate"]) == 0
    assert "schema is up to date" in capsys.readouterr().out


def test_settings_hide_secrets(cli_env, capsys):
    assert cli.main(["settings"]) == 0
    out = capsys.readouterr().out
    assert "BACKSCROLL_DATABASE_URL" in out
    assert cli_env not in out
    assert "(set, hidden)" in out


def test_languages_and_reindex_detect_what_was_written_without_one(cli_env, capsys):
    """`backscroll languages` lists the stemmed languages and what the messages hold; `backscroll
    reindex` detects the language of messages written without it (from before migration 0022)."""
    from tests.world import open_world

    w = open_world(cli_env)
    try:
        c = w.conversation("acme", "concierge", "t1")
        w.message("acme", c, "The researchers presented their findings to the board", minute=1)
        w.message("acme", c, "Les chercheuses ont présenté leurs recherches au conseil", minute=2)
        w.conn.execute("update messages set language = null")
    finally:
        w.conn.close()
    capsys.readouterr()
    assert cli.main(["languages"]) == 0
    out = capsys.readouterr().out
    assert "(not yet detected)" in out and " 2 messages" in out
    assert cli.main(["reindex", "--quiet"]) == 0
    assert "2 messages' languages detected" in capsys.readouterr().out
    assert cli.main(["languages"]) == 0
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert lines["english"].split()[-2] == "1" and lines["french"].split()[-2] == "1"
    assert "(not yet detected)" not in "".join(lines.values())
