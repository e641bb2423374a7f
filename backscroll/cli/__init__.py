"""The `backscroll` command."""

# One module per command group; each adds its commands' parsers beside their handlers and
# imports what a command runs when it runs (a command's start-up loads only what it uses).
from __future__ import annotations

import argparse
import logging
import signal
import sys

from pydantic import ValidationError

from ..config import Settings, get_settings
from . import conversations, db, demo, embeddings, importing, language, serve, tokens, workspaces
from .demo import DEMO_MODULES
from .embeddings import admin_authorizer
from .serve import available_cpus, serving_socket

# What the tests and bench/ use beside main, by the names they had when this was one module.
__all__ = ["DEMO_MODULES", "admin_authorizer", "available_cpus", "build_parser", "main", "serving_socket"]

# The commands, in the order `backscroll --help` lists them.
COMMANDS = (serve.add_serve, db.add_migrate, db.add_purge, embeddings.add_worker, embeddings.add_backfill,
            embeddings.add_models, demo.add_demo, importing.add_import, workspaces.add_workspaces,
            conversations.add_conversations, language.add_languages, language.add_reindex, tokens.add_tokens,
            db.add_schema, db.add_settings)


def _settings() -> Settings:
    return get_settings()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="backscroll", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it with the handler that was there
    # before. The default handler would kill the process on the spot, skipping the atexit handler
    # that stops the embedded PostgreSQL; exiting through SystemExit runs it.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        # httpx logs every request at INFO: one line per embeddings batch and status probe.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = _settings()
    except ValidationError as exc:  # a setting from the environment or .env that cannot be used
        for error in exc.errors():
            name = "BACKSCROLL_" + "_".join(str(part) for part in error["loc"]).upper()
            print(f"backscroll: invalid setting {name}: {error['msg']}", file=sys.stderr)
        return 2
    try:
        return args.func(args, settings) or 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clean message for the person at the terminal
        from ..errors import BackscrollError

        if isinstance(exc, BackscrollError):
            print(f"backscroll: {exc.message}", file=sys.stderr)
            return exc.exit_code
        import psycopg

        # Input the database refuses (a slug its check rejects, an unknown text search
        # configuration) is the person's to fix, not a crash.
        if isinstance(exc, psycopg.errors.IntegrityError | psycopg.errors.DataError | psycopg.errors.UndefinedObject):
            print(f"backscroll: rejected by the database: {exc.diag.message_primary}", file=sys.stderr)
            return 1
        raise

