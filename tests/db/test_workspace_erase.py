"""`backscroll workspaces erase SLUG --yes-erase-workspace-data` (backscroll/erasure.py): nothing of the erased
workspace is left in any table (found from the catalog, not from a list), the other workspace's
search answers and statistics are exactly what they were, and an erasure killed midway finishes
when it is run again."""

from __future__ import annotations

import pytest

from backscroll import cli
from backscroll.access.auth import authenticate
from backscroll.embeddings.vectors import register_model
from backscroll.errors import Unauthenticated
from backscroll.search import maintenance, sessions
from backscroll.search.cursor import CursorCodec
from backscroll.erasure import erase_workspace
from tests.db.conftest import LIMITS
from tests.world import DECLARED, World, open_world

MODEL = "fake-4"

# Every bigint column of the schema, with the table it names by its name: `x_id` or `..._x_id`.
COLUMNS = """
select c.table_name as tbl, c.column_name as col
  from information_schema.columns c
  join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
 where c.table_schema = current_schema() and t.table_type = 'BASE TABLE' and c.data_type = 'bigint'
 order by 1, 2
"""
PARENTS = {"workspace_id": "workspaces", "agent_id": "agents", "conversation_id": "conversations",
           "message_id": "messages", "audience_id": "search_audiences"}


def _columns(conn) -> list[tuple[str, str, str]]:
    """(table, column, parent table) for every column named after a parent's id."""
    found = []
    for r in conn.execute(COLUMNS):
        for suffix, parent in PARENTS.items():
            if (r["col"] == suffix or r["col"].endswith("_" + suffix)) and r["tbl"] != parent:
                found.append((r["tbl"], r["col"], parent))
    return found


def _vector(i: int) -> str:
    v = [((i * 7 + k) % 5) / 5 + 0.1 for k in range(4)]
    norm = sum(x * x for x in v) ** 0.5
    return "[" + ",".join(str(x / norm) for x in v) + "]"


def _populate(w: World, ws: str, words: str) -> dict:
    conversations, messages = [], []
    for agent in ("concierge", "scout"):
        for n in range(4):
            c = w.conversation(ws, agent, f"{agent}-{n}", f"Rose {words} {n}", creator="ann" if n % 2 else None,
                               audience={"kind": "members", "namespace": "web:demo", "readers": ["ann", "bob"]}
                               if n == 3 else None)
            conversations.append(c)
            for m in range(3):
                messages.append(w.message(ws, c, f"the rose room {words} booking {n} {m}", minute=n * 10 + m,
                                          role="user" if m % 2 == 0 else "assistant", speaker="ann"))
    turn = w.turn(ws, "concierge", conversations[0], requester="ann", loaded=messages[:2])
    w.conn.execute(
        "insert into memories (workspace_id, agent_id, body, audience_kind, audience_namespace, source_message_ids)"
        " values (%s, %s, %s, 'workspace', 'web:demo', %s)",
        (w.workspace(ws), w.agent_id(ws, "concierge"), f"ann likes the rose room {words}", messages[:1]))
    w.actor_id(ws, "slack:acme", "U1")
    w.link(ws, "concierge", ("web:demo", "ann"), ("slack:acme", "U1"))
    for i, m in enumerate(messages):
        w.conn.execute("insert into message_embeddings (message_id, model, embedding) values (%s, %s, %s::vector)"
                       " on conflict do nothing", (m, MODEL, _vector(i)))
    w.conn.execute("insert into embedding_usage (workspace_id, operation, model, purpose, items, ok)"
                   " values (%s, 'embed_documents', %s, 'message', 3, true)", (w.workspace(ws), MODEL))
    tokens = [w.token("reader", ws, actor="ann", agents=["concierge", "scout"]), w.token("ingest", ws)]
    return {"conversations": conversations, "messages": messages, "turn": turn, "tokens": tokens}


def _fold(w: World) -> None:
    maintenance.fold(w.conn)
    assert w.conn.execute("select count(*) as n from search_term_deltas").fetchone()["n"] == 0


UNTIED = """
select c.relname as tbl from pg_attribute a join pg_class c on c.oid = a.attrelid
 where c.relnamespace = current_schema()::regnamespace and c.relkind = 'r' and a.attname = 'agent_id'
   and not a.attisdropped
   and not exists (select 1 from pg_constraint k where k.conrelid = c.oid and k.contype = 'f'
                                                  and a.attnum = any(k.conkey))
 order by 1
"""


def _agent_keyed(w: World, agents: list[int]) -> dict[str, list]:
    """Every row of every table whose agent_id no foreign key ties to agents (the statistics and
    coverage counters, the search sidecar), of the given agents: compared exactly before and after."""
    out = {}
    for r in w.conn.execute(UNTIED).fetchall():
        rows = w.conn.execute(f"select * from {r['tbl']} where agent_id = any(%s) order by 1, 2, 3",
                              (agents,)).fetchall()
        out[r["tbl"]] = [tuple(v) for v in (x.values() for x in rows)]
    return out


def _answers(w: World, token: str, codec: CursorCodec) -> list:
    principal = authenticate(w.conn, f"Bearer {token}")
    scope = sessions.resolve_scope(w.conn, principal, None)
    out = []
    for q in ("rose room", "booking", "globex"):
        page = sessions.search(w.conn, scope, codec, q, None, 100, LIMITS, settings=DECLARED)
        out.append(page)
    out.append(sessions.recent(w.conn, scope, codec, None, 100)["sessions"])
    return out


def _assert_nothing_left(w: World, ws_id: int) -> None:
    columns = _columns(w.conn)
    with_workspace = [t for t, c, _ in columns if c == "workspace_id"]
    assert {"conversations", "memories", "agents", "api_tokens", "message_search", "embedding_usage"} <= set(
        with_workspace)
    for table in with_workspace:
        n = w.conn.execute(f"select count(*) as n from {table} where workspace_id = %s", (ws_id,)).fetchone()["n"]
        assert n == 0, f"{table}: {n} row(s) of the erased workspace"
    assert {("search_term_stats", "agent_id"), ("search_audience_doc_stats", "audience_id"),
            ("embedding_outbox", "message_id"), ("turns", "answering_message_id")} <= {(t, c) for t, c, _ in columns}
    for table, col, parent in columns:
        n = w.conn.execute(f"select count(*) as n from {table} x where x.{col} is not null"
                           f" and not exists (select 1 from {parent} p where p.id = x.{col})").fetchone()["n"]
        assert n == 0, f"{table}.{col}: {n} row(s) naming a {parent} row that no longer exists"


@pytest.fixture
def two(db_url):
    register_model(db_url, MODEL, 4)
    w = open_world(db_url)
    try:
        yield w, _populate(w, "acme", "acme"), _populate(w, "globex", "globex")
    finally:
        w.conn.close()


def _erase_and_check(w: World, acme: dict, globex: dict, codec: CursorCodec, erase) -> None:
    acme_id, globex_id = w.workspace("acme"), w.workspace("globex")
    globex_agents = [w.agent_id("globex", a) for a in ("concierge", "scout")]
    _fold(w)
    # Something of acme is in every kind of row the check looks at.
    assert w.conn.execute("select count(*) as n from search_term_stats where agent_id = %s",
                          (w.agent_id("acme", "concierge"),)).fetchone()["n"] > 0
    assert w.conn.execute("select count(*) as n from embedding_audience_coverage_stats where agent_id = %s",
                          (w.agent_id("acme", "scout"),)).fetchone()["n"] > 0
    statistics = _agent_keyed(w, globex_agents)
    assert statistics["search_term_stats"] and statistics["embedding_coverage_stats"]
    answers = _answers(w, globex["tokens"][0], codec)
    assert answers[0] and answers[1]

    erase()

    w.workspaces.pop("acme")
    assert w.conn.execute("select count(*) as n from workspaces where id = %s", (acme_id,)).fetchone()["n"] == 0
    for token in acme["tokens"]:
        with pytest.raises(Unauthenticated):
            authenticate(w.conn, f"Bearer {token}")
    _fold(w)  # a delta left behind would come back as a counter here
    _assert_nothing_left(w, acme_id)
    assert _agent_keyed(w, globex_agents) == statistics
    assert _answers(w, globex["tokens"][0], codec) == answers
    assert w.workspace("globex") == globex_id


def test_erasing_a_workspace_leaves_nothing_of_it_and_the_other_unchanged(two, codec, cli_env, capsys):
    w, acme, globex = two
    assert cli.main(["workspaces", "erase", "acme"]) == 2  # refused without the flag: nothing deleted
    assert "--yes-erase-workspace-data" in capsys.readouterr().err
    assert w.conn.execute("select count(*) as n from messages").fetchone()["n"] == 2 * len(acme["messages"])

    def erase():
        assert cli.main(["workspaces", "erase", "acme", "--yes-erase-workspace-data"]) == 0

    _erase_and_check(w, acme, globex, codec, erase)
    out = capsys.readouterr().out
    assert "deleted 24 messages" in out and "2 live token(s) revoked" in out
    assert "rose" not in out.lower()  # progress in rows, never content

    assert cli.main(["workspaces", "erase", "acme", "--yes-erase-workspace-data"]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_an_erasure_killed_midway_finishes_when_run_again(two, codec):
    w, acme, globex = two

    class Killed(Exception):
        pass

    before_kill: list[str] = []

    def kill_after_some_batches(line: str) -> None:
        before_kill.append(line)
        if "deleted" in line and "conversations" in line:
            raise Killed(line)

    def erase():
        with pytest.raises(Killed):
            erase_workspace(w.conn, "acme", batch=5, progress=kill_after_some_batches)
        assert w.conn.execute("select count(*) as n from messages m join conversations c on c.id = m.conversation_id"
                              " where c.workspace_id = %s", (w.workspace("acme"),)).fetchone()["n"] == 0
        assert w.conn.execute("select count(*) as n from conversations where workspace_id = %s",
                              (w.workspace("acme"),)).fetchone()["n"] == 3  # 8, less the first batch of 5
        # 24 messages in transactions of at most 5, then the first 5 conversations; no content printed.
        assert [line.split(": ", 1)[1] for line in before_kill[1:]] == [
            "deleted 5 messages (5 so far)", "deleted 5 messages (10 so far)", "deleted 5 messages (15 so far)",
            "deleted 5 messages (20 so far)", "deleted 4 messages (24 so far)", "deleted 5 conversations (5 so far)"]
        assert "revoked" in before_kill[0]
        assert w.conn.execute("select count(*) as n from api_tokens where workspace_id = %s and revoked_at is null",
                              (w.workspace("acme"),)).fetchone()["n"] == 0  # revoked before anything is deleted
        lines = []
        done = erase_workspace(w.conn, "acme", batch=5, progress=lines.append)
        assert done.found and done.deleted["conversations"] == 3 and done.deleted["messages"] == 0
        assert erase_workspace(w.conn, "acme").found is False

    _erase_and_check(w, acme, globex, codec, erase)
