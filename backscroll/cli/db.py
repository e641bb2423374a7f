"""The database's schema and what is stored: `migrate`, `purge`, `schema`, and `settings`."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config import Settings, explain
from .common import connection, guard_owner, url_of
from .tokens import register_from_env


def _owner(settings: Settings):
    from ..store.owner import Owner

    if not settings.database.owner_uid:
        return None
    return Owner(settings.database.owner_uid, settings.database.owner_name or settings.database.owner_uid)


def cmd_migrate(args, settings: Settings) -> int:
    from ..store.migrate import migrate
    from ..store.prerequisites import wait_for_prerequisites

    url = url_of(settings)
    wait_for_prerequisites(url, settings.database.schema_wait_s)
    applied = migrate(url, owner=_owner(settings)).labels()  # migrations, then definitions files
    for label in applied:
        print(f"applied {label}")
    if not applied:
        print("schema is up to date")
    if args.model:
        from ..embeddings.vectors import register_model

        dimensions = args.dimensions or settings.embeddings.embeddings_dimensions
        if not dimensions:
            raise SystemExit("--model needs --dimensions (or BACKSCROLL_EMBEDDINGS_DIMENSIONS)")
        model, created = register_model(url, args.model, dimensions)
        state = "registered" if created else "already registered"
        print(f"model {model.model} ({model.dimensions} dimensions) {state}; index {model.index_name} is ready")
    elif args.dimensions:
        raise SystemExit("--dimensions goes with --model")
    if args.register_status_token_env:
        register_from_env(settings, "status", args.status_token_name, args.register_status_token_env)
    return 0


def cmd_purge(args, settings: Settings) -> int:
    from ..store.purge import purge

    if not args.yes_delete_all_data:
        print("backscroll: purge deletes every conversation, message, vector and token Backscroll stored, and its "
              "schema; nothing of it can be recovered. Run it again with --yes-delete-all-data", file=sys.stderr)
        return 2
    guard_owner(settings)
    done = purge(url_of(settings))
    print(f"purged {len(done.tables)} tables, {len(done.functions)} functions, {len(done.types)} types and "
          f"{len(done.configurations)} text search configurations; the extensions stay. "
          "`backscroll migrate` starts again from nothing")
    return 0


def cmd_schema(args, settings: Settings) -> int:
    from ..store.schema import render, trigger_table, with_trigger_table

    if args.migrate:
        from ..store.migrate import migrate

        migrate(url_of(settings))
    with connection(settings) as conn:
        text = render(conn)
        if args.architecture:
            document = Path(args.architecture)
            document.write_text(with_trigger_table(document.read_text(encoding="utf-8"), trigger_table(conn)),
                                encoding="utf-8")
            print(f"wrote the trigger table in {args.architecture}", file=sys.stderr)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_settings(args, settings: Settings) -> int:
    for line in explain(settings):
        print(line)
    return 0


def add_migrate(sub) -> None:
    p = sub.add_parser("migrate", help="apply pending migrations (idempotent, under an advisory lock)")
    p.add_argument("--model", help="also register this embedding model and build its vector index (concurrently)")
    p.add_argument("--dimensions", type=int, help="the model's vector size (default BACKSCROLL_EMBEDDINGS_DIMENSIONS)")
    p.add_argument("--register-status-token-env", metavar="VAR",
                   help="then register the status token whose secret environment variable VAR holds, as "
                        "`tokens register --kind status` does (idempotent; a new secret revokes the old one)")
    p.add_argument("--status-token-name", default="status", metavar="NAME",
                   help="the registered status token's name (default: status)")
    p.set_defaults(func=cmd_migrate)


def add_purge(sub) -> None:
    p = sub.add_parser("purge", help="drop everything Backscroll stored in the database (the opposite of migrate; "
                                     "extensions stay)")
    p.add_argument("--yes-delete-all-data", action="store_true", help="required: there is no undo")
    p.set_defaults(func=cmd_purge)


def add_schema(sub) -> None:
    p = sub.add_parser("schema", help="print the current definition of every function, trigger and index "
                                      "(what docs/schema.sql holds)")
    p.add_argument("--write", metavar="FILE", help="write it to FILE instead of standard output")
    p.add_argument("--migrate", action="store_true", help="apply pending migrations first")
    p.add_argument("--architecture", metavar="FILE",
                   help="also rewrite the trigger table between its markers in FILE (docs/architecture.md)")
    p.set_defaults(func=cmd_schema)


def add_settings(sub) -> None:
    p = sub.add_parser("settings", help="print every setting with its help text")
    p.set_defaults(func=cmd_settings)
