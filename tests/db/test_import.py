"""`backscroll import`: one conversation per JSONL line, each line whole or not at all."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from backscroll import cli
from backscroll.ingest import importer
from backscroll.store.db import connect

WS = "acme"


def conversation(external_id: str, *messages: dict, **extra) -> dict:
    line = {
        "agent": "support",
        "connector": {"type": "slack", "name": "acme"},
        "external_id": external_id,
        "title": f"Conversation {external_id}",
        "creator": {"external_id": "U42", "display_name": "Priya"},
        "messages": list(messages),
    }
    line.update(extra)
    return line


def message(external_id: str, body: str = "hello", **extra) -> dict:
    return {"external_id": external_id, "role": "user", "speaker": {"external_id": "U42"}, "body": body,
            "created_at": "2026-03-02T10:00:00Z", **extra}


def jsonl(*lines: dict | bytes | str) -> bytes:
    out = []
    for line in lines:
        if isinstance(line, dict):
            out.append(json.dumps(line).encode())
        elif isinstance(line, str):
            out.append(line.encode())
        else:
            out.append(line)
    return b"\n".join(out) + b"\n"


# line numbers below are the physical lines of MIXED
MIXED = jsonl(
    conversation("good-1", message("m1", "Can we move the migration to Saturday?"), message("m2", "Yes")),  # 1
    "",                                                                                                 # 2 blank
    '{"agent": "support", "connector": ',                                                             # 3 bad JSON
    conversation("good-2", message("m1", "rose"), workspace=WS),                                      # 4
    conversation("unknown-field", message("m1"), colour="red"),                                       # 5
    conversation("nul-escaped", message("m1", "a\x00b")),                                             # 6
    b'{"agent": "support", "title": "raw \x00 byte"}',                                                # 7
    json.dumps(conversation("latin-1", message("m1", "CAFE"))).encode().replace(b"CAFE", b"caf\xe9"),  # 8
    conversation("bad-second", message("m1", "first is fine"), message("m2", role="wizard")),         # 9
    conversation("bad-second-late", message("m1", "first is fine"), {"role": "user", "body": "no id"}),  # 10
    conversation("good-3", message("m1", "a"), message("m2", "b"), message("m3", "c")),               # 11
)
GOOD = {"good-1": 2, "good-2": 1, "good-3": 3}
REJECTED = [3, 5, 6, 7, 8, 9, 10]


def counts(conn) -> dict:
    return conn.execute(
        "select (select count(*) from conversations) as conversations, (select count(*) from messages) as messages,"
        "       (select count(*) from message_search) as documents, (select count(*) from actors) as actors,"
        "       (select count(*) from agents) as agents"
    ).fetchone()


@pytest.fixture
def conn(db_url):
    with connect(db_url, autocommit=True) as c:
        c.execute("insert into workspaces (slug, name) values (%s, 'Acme')", (WS,))
        yield c


def test_import_stream_reports_bad_lines_and_keeps_the_good(conn):
    report = importer.import_stream(conn, io.BytesIO(MIXED), default_workspace=WS)
    assert [n for n, _ in report.rejected] == REJECTED
    reasons = dict(report.rejected)
    assert "JSON" in reasons[3]
    assert "colour" in reasons[5]
    assert "NUL" in reasons[6]
    assert "JSON" in reasons[7]
    assert "UTF-8" in reasons[8]
    assert reasons[9].startswith("messages.1.role")
    assert "external_id" in reasons[10]
    assert report.lines == 10  # the blank line is not a line of data
    assert report.conversations == len(GOOD)
    assert report.messages_created == sum(GOOD.values())
    rows = conn.execute("select c.external_id, count(m.id) as n from conversations c "
                        "left join messages m on m.conversation_id = c.id group by 1").fetchall()
    assert {r["external_id"]: r["n"] for r in rows} == GOOD


def test_a_rejected_line_leaves_nothing_behind(conn):
    """The second message fails inside the transaction, after the conversation and the first
    message were written: both must be rolled back, and the agent and actors too."""
    line = conversation("half", message("m1", "first is fine"), {"role": "user", "body": "no external id"},
                        agent="newcomer", creator={"external_id": "U99"})
    before = counts(conn)
    report = importer.import_stream(conn, io.BytesIO(jsonl(line)), default_workspace=WS)
    assert [n for n, _ in report.rejected] == [1]
    assert counts(conn) == before
    assert conn.execute("select count(*) as n from agents where slug = 'newcomer'").fetchone()["n"] == 0


def test_rerunning_the_same_file_creates_nothing(conn):
    first = importer.import_stream(conn, io.BytesIO(MIXED), default_workspace=WS)
    after_first = counts(conn)
    stamps = conn.execute("select id, last_active_at, updated_at from conversations order by id").fetchall()
    second = importer.import_stream(conn, io.BytesIO(MIXED), default_workspace=WS)
    assert counts(conn) == after_first
    assert second.messages_created == 0
    assert second.conversations == first.conversations
    assert second.rejected == first.rejected
    assert conn.execute("select id, last_active_at, updated_at from conversations order by id").fetchall() == stamps


def test_a_line_that_rewrites_a_finished_message_is_rejected_whole(conn):
    """A finished message is final (as PATCH says): a re-import that changes one is refused,
    and nothing else of that line lands either."""
    importer.import_stream(conn, io.BytesIO(jsonl(conversation("c1", message("m1", "rose")))), default_workspace=WS)
    before = counts(conn)
    changed = conversation("c1", message("m1", "tulip"), message("m2", "new"), title="Renamed")
    report = importer.import_stream(conn, io.BytesIO(jsonl(changed)), default_workspace=WS)
    assert report.messages_created == 0
    assert [(n, "finished" in reason) for n, reason in report.rejected] == [(1, True)]
    assert counts(conn) == before
    assert conn.execute("select title from conversations").fetchone()["title"] != "Renamed"
    assert {r["body"] for r in conn.execute("select body from messages")} == {"rose"}


def test_a_changed_line_updates_the_conversation_and_adds_messages(conn):
    importer.import_stream(conn, io.BytesIO(jsonl(conversation("c1", message("m1", "rose")))), default_workspace=WS)
    before = counts(conn)
    changed = conversation("c1", message("m1", "rose"), message("m2", "new"), title="Renamed")
    report = importer.import_stream(conn, io.BytesIO(jsonl(changed)), default_workspace=WS)
    assert report.messages_created == 1 and report.rejected == []
    assert counts(conn) == {**before, "messages": before["messages"] + 1, "documents": before["documents"] + 1}
    assert conn.execute("select title from conversations").fetchone()["title"] == "Renamed"
    assert {r["body"] for r in conn.execute("select body from messages")} == {"rose", "new"}


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def test_imported_history_keeps_its_own_times(conn):
    """A line without a conversation created_at began with its first message, not at import time:
    otherwise every imported conversation reads as active today, in file order."""
    early = conversation("early", message("m1", created_at="2026-01-05T10:00:00Z"),
                         message("m2", created_at="2026-01-06T09:00:00Z"))
    late = conversation("late", message("m1", created_at="2026-03-02T10:00:00Z"))
    dated = conversation("dated", message("m1", created_at="2026-02-01T00:00:00Z"),
                         created_at="2025-12-24T18:00:00Z")
    importer.import_stream(conn, io.BytesIO(jsonl(late, early, dated)), default_workspace=WS)
    rows = {r["external_id"]: (r["created_at"], r["last_active_at"]) for r in
            conn.execute("select external_id, created_at, last_active_at from conversations")}
    assert rows == {
        "early": (_utc(2026, 1, 5, 10), _utc(2026, 1, 6, 9)),
        "late": (_utc(2026, 3, 2, 10), _utc(2026, 3, 2, 10)),
        "dated": (_utc(2025, 12, 24, 18), _utc(2026, 2, 1)),
    }


ODD_LINES = [
    (b"[1, 2]", "line"),
    (b"null", "line"),
    (b'"a string"', "line"),
    (b"{}", "agent"),
    (b'{"agent": ' + b"1" * 5000 + b"}", "JSON"),
    (b"\xef\xbb\xbf{}", "JSON"),  # a byte-order mark is not JSON
]


def test_odd_lines_are_rejected_not_fatal(conn):
    good = jsonl(conversation("good", message("m1")))
    for raw, reason in ODD_LINES:
        report = importer.import_stream(conn, io.BytesIO(raw + b"\n" + good), default_workspace=WS)
        assert [n for n, _ in report.rejected] == [1], (raw[:20], report.rejected)
        assert reason in report.rejected[0][1], (raw[:20], report.rejected)
        assert report.conversations == 1


def test_deeply_nested_line_is_rejected_not_fatal(conn):
    deep = b'{"agent": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    report = importer.import_stream(conn, io.BytesIO(deep + b"\n" + jsonl(conversation("good", message("m1")))),
                                    default_workspace=WS)
    assert [n for n, _ in report.rejected] == [1]
    assert report.conversations == 1


def test_lone_surrogate_is_rejected_not_fatal(conn):
    line = json.dumps(conversation("surrogate", message("m1", "x"))).replace('"x"', '"\\ud800"')
    report = importer.import_stream(conn, io.BytesIO(jsonl(line, conversation("good", message("m1")))),
                                    default_workspace=WS)
    assert [n for n, _ in report.rejected] == [1]
    assert report.conversations == 1
    assert counts(conn)["conversations"] == 1


def test_workspace_is_required_and_must_exist(conn):
    lines = jsonl(conversation("a", message("m1")), conversation("b", message("m1"), workspace="nope"))
    report = importer.import_stream(conn, io.BytesIO(lines))
    assert [n for n, _ in report.rejected] == [1, 2]
    assert "workspace" in report.rejected[0][1]
    assert "nope" in report.rejected[1][1]
    assert counts(conn)["conversations"] == 0


def test_a_retired_workspace_takes_no_import(conn):
    """Retired (its tokens revoked, its data kept): `backscroll import` refuses it as the API does,
    every line with workspace_retired, nothing written."""
    from backscroll.ingest import workspaces

    workspaces.retire(conn, None, WS)
    report = importer.import_stream(conn, io.BytesIO(jsonl(conversation("a", message("m1")))), default_workspace=WS)
    assert report.codes == {1: "workspace_retired"}
    assert "workspace 'acme' is retired" in report.rejected[0][1]
    assert counts(conn)["conversations"] == 0


def test_windows_line_endings_and_no_final_newline(conn):
    data = (json.dumps(conversation("a", message("m1"))) + "\r\n"
            + json.dumps(conversation("b", message("m1")))).encode()
    report = importer.import_stream(conn, io.BytesIO(data), default_workspace=WS)
    assert report.rejected == []
    assert report.conversations == 2


def test_unicode_line_separators_inside_a_line_do_not_split_it(conn):
    line = conversation("ls", message("m1", "one\u2028two\u0085three"))
    data = json.dumps(line, ensure_ascii=False).encode() + b"\n"
    report = importer.import_stream(conn, io.BytesIO(data), default_workspace=WS)
    assert report.rejected == []
    assert conn.execute("select body from messages").fetchone()["body"] == "one\u2028two\u0085three"


def test_import_file_writes_rejects(conn, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(MIXED)
    rejects = tmp_path / "rejects.jsonl"
    report = importer.import_file(conn, path, default_workspace=WS, show_progress=False, rejects_path=rejects)
    assert [n for n, _ in report.rejected] == REJECTED
    physical = MIXED.split(b"\n")
    written = rejects.read_text(encoding="utf-8").splitlines()
    assert len(written) == len(REJECTED)
    expected = [physical[n - 1].decode("utf-8", errors="replace") for n in REJECTED]
    assert written == expected


# --------------------------------------------------------------------------------------------- CLI


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_import(cli_env, capsys, tmp_path):
    assert run_cli(capsys, "workspaces", "create", WS)[0] == 0
    path = tmp_path / "history.jsonl"
    path.write_bytes(MIXED)
    code, out, err = run_cli(capsys, "import", str(path), "--workspace", WS, "--quiet")
    assert code == 1
    reported = [line for line in err.splitlines() if ": rejected: " in line]
    assert [int(line.split(":")[1]) for line in reported] == REJECTED
    assert all(line.startswith(f"{path}:") for line in reported)
    assert f"{len(GOOD)} conversations imported" in out
    assert f"{sum(GOOD.values())} new messages" in out
    assert f"{len(REJECTED)} lines rejected" in out
    with connect(cli_env) as conn:
        first = counts(conn)
    assert first["conversations"] == len(GOOD) and first["messages"] == sum(GOOD.values())

    code, out, err = run_cli(capsys, "import", str(path), "--workspace", WS, "--quiet")
    assert code == 1
    assert "0 new messages" in out
    with connect(cli_env) as conn:
        assert counts(conn) == first


def test_cli_import_exit_code_is_zero_when_every_line_lands(cli_env, capsys, tmp_path):
    run_cli(capsys, "workspaces", "create", WS)
    path = tmp_path / "clean.jsonl"
    path.write_bytes(jsonl(conversation("a", message("m1")), conversation("b", message("m1"), message("m2"))))
    code, out, err = run_cli(capsys, "import", str(path), "--workspace", WS, "--quiet")
    assert code == 0, err
    assert "2 conversations imported, 3 new messages, 0 lines rejected" in out
    assert "rejected:" not in err
    code, out, _ = run_cli(capsys, "import", str(path), "--workspace", WS, "--quiet")
    assert code == 0
    assert "0 new messages" in out


def test_cli_import_rejects_file_and_missing_file(cli_env, capsys, tmp_path):
    run_cli(capsys, "workspaces", "create", WS)
    path = tmp_path / "in.jsonl"
    path.write_bytes(MIXED)
    rejects = tmp_path / "bad.jsonl"
    code, _, _ = run_cli(capsys, "import", str(path), "--workspace", WS, "--quiet", "--rejects", str(rejects))
    assert code == 1
    assert len(rejects.read_text(encoding="utf-8").splitlines()) == len(REJECTED)
    with pytest.raises(SystemExit) as info:
        cli.main(["import", str(tmp_path / "missing.jsonl"), "--quiet"])
    assert "no such file" in str(info.value.code)


def test_cli_import_into_an_unknown_workspace_rejects_every_line(cli_env, capsys, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl(conversation("a", message("m1"))))
    code, out, err = run_cli(capsys, "import", str(path), "--workspace", "nope", "--quiet")
    assert code == 1
    assert f"{path}:1: rejected: unknown workspace 'nope'" in err


def test_a_line_is_written_in_one_statement_with_the_same_rules(conn):
    """Issue 19: a line's messages go in one statement, so the sidecar, the BM25 deltas (one row
    per lexeme, not per message) and the evidence are written once for the line; replays keep
    their meaning: nothing twice, a streaming message may still finish."""
    many = [message(f"m{i}", f"invoice {i} for the harbour office") for i in range(100)]
    many.append(message("live", "half writ", state="streaming"))
    conn.execute("select backscroll_fold_search_stats(1000000)")
    report = importer.import_stream(conn, io.BytesIO(jsonl(conversation("c1", *many))), default_workspace=WS)
    assert (report.messages_created, report.rejected) == (101, [])
    ids = [r["id"] for r in conn.execute("select id from messages order by id")]
    external = [r["external_id"] for r in conn.execute("select external_id from messages order by id")]
    assert external == [m["external_id"] for m in many] and len(ids) == 101
    assert conn.execute("select count(*) as n from message_source_evidence").fetchone()["n"] == 101
    per_lexeme = conn.execute("select lexeme, count(*) as n, sum(delta) as df from search_term_deltas "
                              "group by 1").fetchall()
    assert {r["lexeme"]: (r["n"], r["df"]) for r in per_lexeme}["invoice"] == (1, 100)
    # The same line again, its streaming message finished: one message changes, none is created.
    many[-1] = message("live", "half written, now whole")
    again = importer.import_stream(conn, io.BytesIO(jsonl(conversation("c1", *many))), default_workspace=WS)
    assert (again.messages_created, again.rejected) == (0, [])
    assert [r["id"] for r in conn.execute("select id from messages order by id")] == ids
    assert conn.execute("select body, state::text as state from messages where external_id = 'live'").fetchone() \
        == {"body": "half written, now whole", "state": "finished"}
    assert conn.execute("select count(*) as n from message_search").fetchone()["n"] == 101
