"""`backscroll workspaces apply` and `revoke-declared` (a SearchWorkspace's registration Job, issue
32): a declared workspace created or adopted, its tokens registered from the environment by name,
rotated by a new secret, revoked when no longer declared; secrets never printed."""

from __future__ import annotations

import json
import secrets

import psycopg
from psycopg.rows import dict_row

from backscroll.access.auth import authenticate
from backscroll.cli import main
from backscroll.errors import Unauthenticated

PREFIX = "sw:team-a/acme/"


def secret() -> str:
    return "bks_" + secrets.token_urlsafe(32)


def apply(monkeypatch, capsys, tokens: dict[str, tuple[str, str, list[str] | None]], *extra: str) -> str:
    described = []
    for i, (name, (kind, value, agents)) in enumerate(tokens.items()):
        monkeypatch.setenv(f"BACKSCROLL_TOKEN_{i}", value)
        described.append({"name": name, "kind": kind, "agents": agents, "env": f"BACKSCROLL_TOKEN_{i}"})
    monkeypatch.setenv("BACKSCROLL_WORKSPACE_TOKENS", json.dumps(described))
    code = main(["workspaces", "apply", "--slug", "acme", "--name", "Acme", "--prefix", PREFIX,
                 "--tokens-from-env", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    for _, value, _ in tokens.values():
        assert value not in out.out + out.err
    return out.out


def live(url: str, token: str):
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        try:
            return authenticate(conn, f"Bearer {token}")
        except Unauthenticated:
            return None


def test_apply_creates_registers_rotates_and_revokes(cli_env, monkeypatch, capsys):
    ingest, runtime = secret(), secret()
    out = apply(monkeypatch, capsys, {"connector": ("ingest", ingest, None),
                                      "agent": ("runtime", runtime, ["concierge"])}, "--ts-config", "english")
    assert "created workspace acme" in out and f"({PREFIX}connector)" in out
    with psycopg.connect(cli_env, autocommit=True, row_factory=dict_row) as conn:
        ws = conn.execute("select id, name, ts_config::text as cfg from workspaces where slug = 'acme'").fetchone()
        agent = conn.execute("select id from agents where workspace_id = %s and slug = 'concierge'",
                             (ws["id"],)).fetchone()
    assert (ws["name"], ws["cfg"]) == ("Acme", "english") and agent is not None
    assert live(cli_env, ingest).workspace_id == ws["id"] and live(cli_env, ingest).kind.value == "ingest"
    assert live(cli_env, runtime).agent_ids == (agent["id"],)
    # The same declaration again changes nothing (the Job retried): both stay live.
    out = apply(monkeypatch, capsys, {"connector": ("ingest", ingest, None),
                                      "agent": ("runtime", runtime, ["concierge"])})
    assert "adopted workspace acme" in out and "registered already" in out
    assert live(cli_env, ingest) and live(cli_env, runtime)
    # A new secret under a name rotates it; a name no longer declared is revoked.
    rotated = secret()
    out = apply(monkeypatch, capsys, {"connector": ("ingest", rotated, None)})
    assert live(cli_env, rotated) and live(cli_env, ingest) is None and live(cli_env, runtime) is None
    assert f"({PREFIX}agent): no longer declared" in out
    # Deleting the declaration revokes what is left; the workspace stays.
    assert main(["workspaces", "revoke-declared", "--prefix", PREFIX]) == 0
    assert live(cli_env, rotated) is None
    assert "the workspace's data is kept" in capsys.readouterr().out


def test_a_workspace_made_by_hand_is_adopted_not_duplicated(cli_env, monkeypatch, capsys):
    assert main(["workspaces", "create", "acme", "--name", "Old", "--ts-config", "simple"]) == 0
    token = secret()
    out = apply(monkeypatch, capsys, {"connector": ("ingest", token, None)}, "--ts-config", "english")
    assert "adopted workspace acme" in out and "renamed workspace acme: 'Old' -> 'Acme'" in out
    assert "simple -> english requested" in out  # through the language path, not silently ignored
    with psycopg.connect(cli_env, autocommit=True, row_factory=dict_row) as conn:
        assert conn.execute("select count(*) as n from workspaces where slug = 'acme'").fetchone()["n"] == 1


def test_tokens_outside_the_prefix_are_untouched_and_a_revoked_secret_stays_revoked(cli_env, monkeypatch, capsys):
    assert main(["workspaces", "create", "acme"]) == 0
    monkeypatch.setenv("OTHER", other := secret())
    assert main(["tokens", "register", "--kind", "status", "--name", "operator:x/y", "--from-env", "OTHER"]) == 0
    first = secret()
    apply(monkeypatch, capsys, {"connector": ("ingest", first, None)})
    apply(monkeypatch, capsys, {"connector": ("ingest", secret(), None)})
    assert live(cli_env, other) is not None
    monkeypatch.setenv("BACKSCROLL_TOKEN_0", first)
    assert main(["workspaces", "apply", "--slug", "acme", "--prefix", PREFIX, "--tokens-from-env"]) != 0
    assert "revoked" in capsys.readouterr().err and live(cli_env, first) is None


def test_a_declared_admin_token_is_scoped_to_its_workspace_and_a_retired_one_takes_none(cli_env, monkeypatch, capsys):
    admin = secret()
    apply(monkeypatch, capsys, {"ops": ("admin", admin, None)})
    principal = live(cli_env, admin)
    assert principal.kind.value == "admin" and principal.workspace_id is not None  # never installation-wide
    with psycopg.connect(cli_env, autocommit=True) as conn:
        conn.execute("insert into workspace_retirements (workspace_id) select id from workspaces where slug = 'acme'")
    monkeypatch.setenv("BACKSCROLL_TOKEN_0", secret())
    assert main(["workspaces", "apply", "--slug", "acme", "--prefix", PREFIX, "--tokens-from-env"]) == 5, "refused: no retry"
    assert "is retired" in capsys.readouterr().err
