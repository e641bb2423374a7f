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
