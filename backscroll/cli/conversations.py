"""`backscroll conversations`: the readers of members and external conversations."""

from __future__ import annotations

import sys

from pydantic import ValidationError

from ..config import Settings
from .common import connection


def cmd_conversations_set_readers(args, settings: Settings) -> int:
    from .. import ingest

    try:
        readers = ingest.ReadersIn(readers=args.reader)
    except ValidationError as exc:
        problems = "; ".join(f"--reader {e['loc'][-1] if len(e['loc']) > 1 else ''}: {e['msg']}".replace(" :", ":")
                             for e in exc.errors())
        print(f"backscroll: {problems}", file=sys.stderr)
        return 2
    with connection(settings, autocommit=False) as conn, conn.transaction():
        ws = ingest.workspace_id_for(conn, args.workspace)
        result = ingest.set_readers(conn, ws, args.id, readers)
    print(f"conversation {args.id}: {result['audience']['kind']} readers {', '.join(result['audience']['readers'])} "
          f"(were: {', '.join(result['previous_readers']) or 'none, sealed to itself'}); "
          f"{result['updated']['messages']} message(s) and {result['updated']['memories']} memory(ies) follow")
    return 0


def cmd_conversations_sealed(args, settings: Settings) -> int:
    from .. import ingest

    with connection(settings) as conn:
        rows = ingest.sealed_conversations(conn, ingest.workspace_id_for(conn, args.workspace))
    for r in rows:
        print(f"{r['id']:>10}  {r['audience_kind']:<9} {r['connector']:<24} {r['messages']:>7} messages  "
              f"{r['external_id']}  {r['title']}")
    print(f"{len(rows)} conversation(s) sealed to themselves: set their readers with "
          f"`backscroll conversations set-readers --workspace {args.workspace} ID --reader EXTERNAL_ID ...`",
          file=sys.stderr)
    return 0


def add_conversations(sub) -> None:
    cv = sub.add_parser("conversations", help="the readers of members and external conversations").add_subparsers(
        dest="action", required=True)
    p = cv.add_parser("set-readers", help="set a conversation's readers (the connector knows them); its inherited "
                                          "messages and memories take them at once")
    p.add_argument("id", type=int, help="the conversation's id")
    p.add_argument("--workspace", required=True, help="workspace slug")
    p.add_argument("--reader", action="append", required=True,
                   help="a reader's external id in the audience's namespace (repeat for each reader)")
    p.set_defaults(func=cmd_conversations_set_readers)
    p = cv.add_parser("sealed", help="list conversations stored with an external audience and no readers "
                                     "(disclosable only into themselves until their readers are set)")
    p.add_argument("--workspace", required=True, help="workspace slug")
    p.set_defaults(func=cmd_conversations_sealed)
