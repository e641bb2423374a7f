"""`backscroll import`: conversations from a JSONL file."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config import Settings
from .common import connection


def cmd_import(args, settings: Settings) -> int:
    from ..ingest.importer import import_file

    path = Path(args.file)
    if not path.is_file():
        raise SystemExit(f"no such file: {path}")
    from ..search.maintenance import fold

    with connection(settings) as conn:
        report = import_file(conn, path, default_workspace=args.workspace, show_progress=not args.quiet,
                             rejects_path=Path(args.rejects) if args.rejects else None)
        # A bulk load leaves many BM25 deltas pending; fold them now rather than on the API's
        # next round (reads are exact either way; folded ones are cheaper to read).
        fold(conn)
    for number, reason in report.rejected:
        print(f"{path}:{number}: rejected: {reason}", file=sys.stderr)
    print(f"{report.lines} lines: {report.conversations} conversations imported, "
          f"{report.messages_created} new messages, {len(report.rejected)} lines rejected")
    return 1 if report.rejected else 0


def add_import(sub) -> None:
    p = sub.add_parser("import", help="bulk-load conversations from a JSONL file (idempotent)")
    p.add_argument("file")
    p.add_argument("--workspace", help="workspace slug for lines that name none")
    p.add_argument("--rejects", help="write rejected lines to this file, for fixing and re-running")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)
