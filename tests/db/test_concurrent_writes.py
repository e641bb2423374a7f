"""Concurrent writers into one conversation (issue 20, found by issue 19's load benchmark): agents
stream and connectors retry, so one thread receives concurrent appends all the time."""

from __future__ import annotations

import threading

from backscroll import ingest
from backscroll.store.db import connect

WS = "acme"


def test_eight_concurrent_appenders_to_one_conversation_lose_nothing(world, db_url):
    conv = world.conversation(WS, "concierge", "busy-thread")
    ws = world.workspace(WS)
    errors: list[BaseException] = []
    written: list[list[int]] = [[] for _ in range(8)]

    def appender(k: int) -> None:
        with connect(db_url, autocommit=True) as conn:
            for i in range(63 if k < 4 else 62):
                try:
                    with conn.transaction():
                        msg = ingest.MessageIn(external_id=f"w{k}-{i}", role="user", body=f"writer {k} says {i}")
                        written[k].append(ingest.append_message(conn, ws, conv, msg)[0])
                except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                    errors.append(exc)

    threads = [threading.Thread(target=appender, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = world.conn.execute("select id, external_id from messages where conversation_id = %s order by id",
                              (conv,)).fetchall()
    assert len(rows) == 500 and len({r["external_id"] for r in rows}) == 500
    # Each writer's messages in the order it had them accepted.
    for k in range(8):
        assert written[k] == sorted(written[k])
    assert world.conn.execute("select count(*) as n from message_search where conversation_id = %s",
                              (conv,)).fetchone()["n"] == 500
