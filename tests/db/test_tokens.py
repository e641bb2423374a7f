"""API tokens: stored as SHA-256 digests, revocable, printed once by the CLI."""

from __future__ import annotations

import hashlib

import pytest

from backscroll import cli
from backscroll.access.auth import MAX_TOKEN_CHARS, TokenKind, authenticate, create_token, list_tokens, revoke_token
from backscroll.store.db import connect
from backscroll.errors import Forbidden, Unauthenticated

WS = "acme"


def _rows(conn) -> list[dict]:
    return conn.execute("select *, t::text as whole from api_tokens t order by id").fetchall()


def _assert_secret_not_stored(conn, secret: str) -> None:
    random_part = secret.split("_", 2)[2]
    for row in _rows(conn):
        assert random_part not in row["whole"]
        for value in row.values():
            if isinstance(value, (bytes, memoryview)):
                assert bytes(value) != secret.encode()
                assert random_part.encode() not in bytes(value)


def test_token_is_stored_as_its_sha256_digest(world):
    ws = world.workspace(WS)
    token_id, secret = create_token(world.conn, TokenKind.ingest, name="connector", workspace_id=ws)
    [row] = _rows(world.conn)
    assert row["id"] == token_id
    assert bytes(row["digest"]) == hashlib.sha256(secret.encode()).digest()
    assert secret.startswith("bks_ingest_")
    assert secret.startswith(row["hint"]) and len(row["hint"]) < len(secret) - 32
    _assert_secret_not_stored(world.conn, secret)


def test_secrets_are_random_and_long(world):
    ws = world.workspace(WS)
    secrets_ = {create_token(world.conn, TokenKind.ingest, workspace_id=ws)[1] for _ in range(20)}
    assert len(secrets_) == 20
    assert all(len(s.split("_", 2)[2]) >= 43 for s in secrets_)  # 256 bits in base64url


def test_authenticate_binds_the_token_row(world):
    ws = world.workspace(WS)
    c = world.conversation(WS, "concierge", "t1")
    assert c
    secret = world.token("reader", WS, actor="bob", agents=["concierge"])
    principal = authenticate(world.conn, f"Bearer {secret}")
    assert principal.kind is TokenKind.reader
    assert principal.workspace_id == ws
    assert principal.actor_id == world.actor_id(WS, "web:demo", "bob")
    assert principal.agent_ids == (world.agent_id(WS, "concierge"),)
    assert authenticate(world.conn, f"bearer   {secret}  ").token_id == principal.token_id
    admin = authenticate(world.conn, f"Bearer {world.token('admin')}")
    assert admin.kind is TokenKind.admin and admin.agent_ids is None and admin.workspace_id is None


BAD_HEADERS = [None, "", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Token abc", "Bearer bks_reader_nope",
               "Bearer " + "x" * (MAX_TOKEN_CHARS + 1), "Bearer bks_ünïcode"]


def test_bad_credentials_are_unauthenticated(world):
    secret = world.token("admin")
    for header in BAD_HEADERS + [f"Basic {secret}", f"Bearer {secret}x", f"Bearer {secret[:-1]}", secret]:
        with pytest.raises(Unauthenticated) as info:
            authenticate(world.conn, header)
        assert info.value.status == 401, header


def test_the_digest_itself_is_not_a_token(world):
    _, secret = create_token(world.conn, TokenKind.admin)
    with pytest.raises(Unauthenticated):
        authenticate(world.conn, f"Bearer {hashlib.sha256(secret.encode()).hexdigest()}")


def test_revoked_token_fails_authentication(world):
    ws = world.workspace(WS)
    token_id, secret = create_token(world.conn, TokenKind.ingest, workspace_id=ws)
    _, other = create_token(world.conn, TokenKind.ingest, workspace_id=ws)
    assert authenticate(world.conn, f"Bearer {secret}").token_id == token_id
    assert revoke_token(world.conn, token_id) is True
    with pytest.raises(Unauthenticated):
        authenticate(world.conn, f"Bearer {secret}")
    assert revoke_token(world.conn, token_id) is False  # already revoked
    assert authenticate(world.conn, f"Bearer {other}").kind is TokenKind.ingest  # the other still works


def test_last_used_at_is_touched(world):
    token_id, secret = create_token(world.conn, TokenKind.admin)
    assert world.conn.execute("select last_used_at from api_tokens").fetchone()["last_used_at"] is None
    authenticate(world.conn, f"Bearer {secret}")
    assert world.conn.execute("select last_used_at from api_tokens").fetchone()["last_used_at"] is not None


def test_require_checks_the_kind(world):
    ws = world.workspace(WS)
    principal = authenticate(world.conn, f"Bearer {create_token(world.conn, TokenKind.ingest, workspace_id=ws)[1]}")
    assert principal.require(TokenKind.ingest, TokenKind.admin) is principal
    with pytest.raises(Forbidden):
        principal.require(TokenKind.reader)


def test_schema_refuses_tokens_without_their_bindings(world):
    import psycopg

    with pytest.raises(psycopg.errors.CheckViolation):
        create_token(world.conn, TokenKind.ingest)  # no workspace
    with pytest.raises(psycopg.errors.CheckViolation):
        create_token(world.conn, TokenKind.reader, workspace_id=world.workspace(WS))  # no actor


# --------------------------------------------------------------------------------------------- CLI


def test_cli_tokens_create_prints_the_secret_once(cli_env, capsys, world):
    c = world.conversation(WS, "concierge", "t1")
    world.conversation(WS, "billing", "t2")
    assert c
    code = cli.main(["tokens", "create", "--kind", "reader", "--workspace", WS, "--actor", "slack:acme/U42",
                     "--display-name", "Priya", "--agents", "concierge,billing", "--name", "priya's laptop"])
    out, err = capsys.readouterr()
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1
    secret = lines[0]
    assert secret.startswith("bks_reader_")
    assert (out + err).count(secret) == 1
    assert "shown once" in err
    with connect(cli_env) as conn:
        principal = authenticate(conn, f"Bearer {secret}")
        assert principal.kind is TokenKind.reader
        assert set(principal.agent_ids) == {world.agent_id(WS, "concierge"), world.agent_id(WS, "billing")}
        actor = conn.execute("select namespace, external_id, display_name from actors where id = %s",
                             (principal.actor_id,)).fetchone()
        assert actor == {"namespace": "slack:acme", "external_id": "U42", "display_name": "Priya"}
        _assert_secret_not_stored(conn, secret)
        [row] = list_tokens(conn)
        assert row["name"] == "priya's laptop"

    assert cli.main(["tokens", "list"]) == 0
    out, _ = capsys.readouterr()
    assert secret not in out
    assert secret[:12] in out  # the hint tells tokens apart

    assert cli.main(["tokens", "revoke", str(principal.token_id)]) == 0
    capsys.readouterr()
    with connect(cli_env) as conn, pytest.raises(Unauthenticated):
        authenticate(conn, f"Bearer {secret}")
    assert cli.main(["tokens", "revoke", str(principal.token_id)]) == 1
    assert cli.main(["tokens", "list"]) == 0
    assert "revoked" in capsys.readouterr().out


def test_cli_tokens_create_admin_and_all_agents(cli_env, capsys, world):
    world.workspace(WS)
    assert cli.main(["tokens", "create", "--kind", "admin"]) == 0
    admin = capsys.readouterr().out.strip()
    assert cli.main(["tokens", "create", "--kind", "runtime", "--workspace", WS]) == 0
    runtime = capsys.readouterr().out.strip()
    with connect(cli_env) as conn:
        assert authenticate(conn, f"Bearer {admin}").kind is TokenKind.admin
        principal = authenticate(conn, f"Bearer {runtime}")
        assert principal.kind is TokenKind.runtime and principal.agent_ids is None


INCOMPLETE = [
    (["--kind", "ingest"], "needs --workspace"),
    (["--kind", "ingest", "--workspace", "nope"], "no workspace"),
    (["--kind", "reader", "--workspace", WS], "needs --actor"),
    (["--kind", "reader", "--workspace", WS, "--actor", "alice"], "NAMESPACE/EXTERNAL_ID"),
    (["--kind", "reader", "--workspace", WS, "--actor", "web:demo/alice", "--agents", "ghost"], "ghost"),
    (["--kind", "reader", "--workspace", WS, "--actor", "web:demo/alice", "--agents", ","], "agent slugs"),
]


def test_cli_tokens_create_refuses_incomplete_requests(cli_env, capsys, world):
    world.workspace(WS)
    for argv, message in INCOMPLETE:
        with pytest.raises(SystemExit) as info:
            cli.main(["tokens", "create", *argv])
        assert message in str(info.value.code), argv
        assert "bks_" not in capsys.readouterr().out
    # nothing was stored, not even the actor of a refused reader token
    assert world.conn.execute("select count(*) as n from api_tokens").fetchone()["n"] == 0
    assert world.conn.execute("select count(*) as n from actors").fetchone()["n"] == 0


# ------------------------------------------------------------------------------- status tokens


def _status_secret(tag: str = "a") -> str:
    return "bks_status_" + (tag * 43)[:43]


def _live(conn, kind: str = "status") -> list[dict]:
    return conn.execute("select id, name, hint from api_tokens where kind = %s and revoked_at is null order by id",
                        (kind,)).fetchall()


def test_cli_tokens_create_status_needs_no_workspace(cli_env, capsys):
    assert cli.main(["tokens", "create", "--kind", "status", "--name", "monitor"]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("bks_status_")
    with connect(cli_env) as conn:
        principal = authenticate(conn, f"Bearer {secret}")
        assert principal.kind is TokenKind.status and principal.workspace_id is None
        with pytest.raises(Forbidden):
            principal.require(TokenKind.admin)


def test_cli_tokens_register_stores_the_digest_is_idempotent_and_rotates(cli_env, capsys, monkeypatch):
    first, second = _status_secret("a"), _status_secret("b")
    monkeypatch.setenv("OP_TOKEN", first)
    assert cli.main(["tokens", "register", "--kind", "status", "--name", "operator", "--from-env", "OP_TOKEN"]) == 0
    assert cli.main(["tokens", "register", "--kind", "status", "--name", "operator", "--from-env", "OP_TOKEN"]) == 0
    out, err = capsys.readouterr()
    assert "already registered" in err
    assert first not in out + err and first[11:30] not in out + err  # never printed, not even in part
    with connect(cli_env) as conn:
        [row] = _live(conn)  # the second run changed nothing
        assert authenticate(conn, f"Bearer {first}").kind is TokenKind.status
        _assert_secret_not_stored(conn, first)
        assert bytes(conn.execute("select digest from api_tokens").fetchone()["digest"]) == hashlib.sha256(
            first.encode()).digest()
        # Another name is another token: rotation under "operator" leaves it alone.
        _, other = create_token(conn, TokenKind.status, name="monitor")

    # The Kubernetes Secret regenerated: the new secret is registered and the old one revoked.
    monkeypatch.setenv("OP_TOKEN", second)
    assert cli.main(["tokens", "register", "--kind", "status", "--name", "operator", "--from-env", "OP_TOKEN"]) == 0
    assert f"revoked the previous status token(s) named 'operator': {row['id']}" in capsys.readouterr().err
    with connect(cli_env) as conn:
        assert [r["name"] for r in _live(conn)] == ["monitor", "operator"]
        assert authenticate(conn, f"Bearer {second}").kind is TokenKind.status
        assert authenticate(conn, f"Bearer {other}").kind is TokenKind.status
        with pytest.raises(Unauthenticated):
            authenticate(conn, f"Bearer {first}")

    # A revoked secret never comes back to life.
    monkeypatch.setenv("OP_TOKEN", first)
    assert cli.main(["tokens", "register", "--kind", "status", "--name", "operator", "--from-env", "OP_TOKEN"]) == 1
    assert "revoked" in capsys.readouterr().err
    with connect(cli_env) as conn, pytest.raises(Unauthenticated):
        authenticate(conn, f"Bearer {first}")


BAD_SECRETS = [
    ("tok_status_" + "a" * 43, "starts with 'bks_'"),
    ("bks_short", "43 to 124 characters"),
    ("bks_" + "a" * 125, "43 to 124 characters"),
    ("bks_status_" + "a" * 40 + " x", "base64url"),
    ("bks_status_" + "é" * 43, "base64url"),
]


def test_cli_tokens_register_refuses_what_is_not_a_token_without_echoing_it(cli_env, capsys, monkeypatch):
    for secret, message in BAD_SECRETS:
        monkeypatch.setenv("OP_TOKEN", secret)
        assert cli.main(["tokens", "register", "--kind", "status", "--name", "op", "--from-env", "OP_TOKEN"]) == 1
        out, err = capsys.readouterr()
        assert message in err, (secret, err)
        assert secret not in out + err
    monkeypatch.delenv("OP_TOKEN")
    with pytest.raises(SystemExit) as info:
        cli.main(["tokens", "register", "--kind", "status", "--name", "op", "--from-env", "OP_TOKEN"])
    assert "OP_TOKEN is not set" in str(info.value.code)
    with connect(cli_env) as conn:
        assert conn.execute("select count(*) as n from api_tokens").fetchone()["n"] == 0


def test_a_live_secret_of_another_kind_is_refused(world):
    from backscroll.access.auth import register_token
    from backscroll.errors import Conflict

    _, admin = create_token(world.conn, TokenKind.admin)
    with pytest.raises(Conflict, match="already a live admin token"):
        register_token(world.conn, TokenKind.status, "operator", admin)
    assert _live(world.conn) == []


def test_migrate_registers_the_status_token_after_migrating(cli_env, capsys, monkeypatch):
    monkeypatch.setenv("BACKSCROLL_STATUS_TOKEN", _status_secret("c"))
    argv = ["migrate", "--register-status-token-env", "BACKSCROLL_STATUS_TOKEN", "--status-token-name", "operator"]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "registered status token" in err and "already registered" in err
    assert _status_secret("c") not in out + err
    with connect(cli_env) as conn:
        assert [r["name"] for r in _live(conn)] == ["operator"]
        assert authenticate(conn, f"Bearer {_status_secret('c')}").kind is TokenKind.status
