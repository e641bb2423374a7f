"""`backscroll workspaces`: create, declare (the operator's SearchWorkspace Job), retire, erase, list, and a workspace's language."""

from __future__ import annotations

import os
import sys

from ..config import Settings
from .common import connection, guard_owner, positive


def cmd_workspaces_create(args, settings: Settings) -> int:
    from ..ingest import workspaces
    from ..search.maintenance import check_text_search_config

    with connection(settings, autocommit=False) as conn:  # a refusal (BackscrollError) is main's to print
        cfg = check_text_search_config(conn, args.ts_config or settings.language.text_search_config)
        ws_id, _ = workspaces.create(conn, args.slug, args.name, cfg, rename=True)
        conn.commit()
    print(f"workspace {args.slug} (id {ws_id})")
    return 0


TOKENS_VARIABLE = "BACKSCROLL_WORKSPACE_TOKENS"


def cmd_workspaces_apply(args, settings: Settings) -> int:
    """A declared workspace and its tokens (the operator's SearchWorkspace Job): the tokens are
    described by $BACKSCROLL_WORKSPACE_TOKENS (JSON: name, kind, agents and `env`, the variable
    that holds each secret), the secrets read from the environment, never from argv, never printed."""
    import json

    from ..access.auth import TokenKind
    from ..access.workspace_tokens import Declared
    from ..ingest.workspaces import declare

    tokens = []
    if args.tokens_from_env:
        try:
            described = json.loads(os.environ.get(TOKENS_VARIABLE) or "[]")
        except ValueError as exc:
            raise SystemExit(f"backscroll: ${TOKENS_VARIABLE} is not JSON: {exc}") from None
        for item in described:
            secret = os.environ.get(item["env"], "").strip()
            if not secret:
                raise SystemExit(f"backscroll: token {item['name']}: environment variable {item['env']} is not set "
                                 "or empty: it must hold the token")
            agents = item.get("agents")
            tokens.append(Declared(item["name"], TokenKind(item["kind"]), secret,
                                   tuple(agents) if agents is not None else None))
    from ..errors import BadRequest, Conflict, DeclarationRefused

    with connection(settings) as conn:
        try:
            applied = declare(conn, args.slug, args.name, args.ts_config, args.prefix, tokens)
        except (BadRequest, Conflict) as exc:
            raise DeclarationRefused(exc.message) from None
        if applied.ts_config_change:
            from ..search.maintenance import request_reindex

            current, wanted = applied.ts_config_change
            request_reindex(conn, args.slug, wanted)
            applied.lines.append(f"workspace {args.slug}: text search configuration {current} -> {wanted} requested; "
                                 "its documents are rebuilt in the background (`backscroll workspaces language` "
                                 "shows progress)")
    for line in applied.lines:
        print(line)
    print(f"workspace {args.slug} (id {applied.workspace_id}): {len(tokens)} declared token(s) live")
    return 0


def cmd_workspaces_revoke_declared(args, settings: Settings) -> int:
    from ..access.workspace_tokens import revoke_declared

    with connection(settings) as conn:
        lines = revoke_declared(conn, args.prefix)
    for line in lines:
        print(line)
    print(f"{len(lines)} token(s) under {args.prefix!r} revoked; the workspace's data is kept")
    return 0


def cmd_workspaces_erase(args, settings: Settings) -> int:
    from ..erasure import erase_workspace

    if not args.yes_erase_workspace_data:
        print(f"backscroll: erase deletes every conversation, message, memory, vector, statistic and token of "
              f"workspace {args.slug!r}, and the workspace; nothing of it can be recovered. Run it again with "
              "--yes-erase-workspace-data", file=sys.stderr)
        return 2
    guard_owner(settings)
    with connection(settings) as conn:
        if args.revoke_prefix:
            # The declaration's tokens, the installation-wide ones (status) included, even when the
            # workspace is already gone.
            from ..access.workspace_tokens import revoke_declared

            revoked = revoke_declared(conn, args.revoke_prefix)
            for line in revoked:
                print(line)
            print(f"{len(revoked)} token(s) under {args.revoke_prefix!r} revoked")
        done = erase_workspace(conn, args.slug, batch=args.batch, progress=print)
    if not done.found:
        print(f"workspace {args.slug!r} does not exist: nothing to do")
        return 0
    print(f"workspace {args.slug} (id {done.workspace_id}) erased: "
          + ", ".join(f"{n} {what}" for what, n in done.deleted.items()))
    return 0


def cmd_workspaces_retire(args, settings: Settings) -> int:
    """DELETE /v1/admin/workspaces/SLUG on the command line: its tokens revoked, no new one taken,
    its data kept (erasing it is `workspaces erase`)."""
    from ..ingest import workspaces

    with connection(settings) as conn:
        ws, revoked = workspaces.retire(conn, None, args.slug)
    print(f"workspace {args.slug} retired at {ws['retired_at']:%Y-%m-%d %H:%M:%S %Z}: {len(revoked)} token(s) "
          "revoked now; it takes no new token and its data is kept")
    return 0


def cmd_workspaces_list(args, settings: Settings) -> int:
    from ..ingest import workspaces

    with connection(settings) as conn:
        rows = workspaces.listing(conn, None)
    for r in rows:
        retired = "  (retired)" if r["retired_at"] else ""
        print(f"{r['slug']:<24} {r['agents']:>6} agents {r['conversations']:>8} conversations  {r['ts_config']}  "
              f"{r['name']}{retired}")
    return 0


def cmd_workspaces_language(args, settings: Settings) -> int:
    from ..errors import BackscrollError
    from ..search.maintenance import language, reindex, request_reindex

    names = None if args.speaker_names is None else args.speaker_names == "on"
    with connection(settings) as conn:
        try:
            if args.ts_config is None and names is None:
                state = language(conn, args.slug)
            else:
                state = request_reindex(conn, args.slug, args.ts_config, names)
        except BackscrollError as exc:
            raise SystemExit(f"backscroll: {exc.message}") from None
        _print_language(state)
        if args.wait and state.reindexing:
            reindex(conn, settings.search.reindex_batch_size, progress=True)
            _print_language(language(conn, args.slug))
    return 0


def _print_language(state) -> None:
    print(f"workspace {state.workspace}: {state.ts_config}, speaker names {'on' if state.speaker_names else 'off'}")
    if state.reindexing:
        print(f"  rebuilding for {state.ts_config_next}, speaker names "
              f"{'on' if state.speaker_names_next else 'off'}: {state.rebuilt:,} of {state.documents:,} documents "
              "(search answers with the current configuration until the swap)")


def add_workspaces(sub) -> None:
    ws = sub.add_parser("workspaces", help="create and list workspaces").add_subparsers(dest="action", required=True)
    p = ws.add_parser("create", help="create a workspace (or rename it)")
    p.add_argument("slug")
    p.add_argument("--name")
    p.add_argument("--ts-config", default=None,
                   help="text search configuration (default: BACKSCROLL_TEXT_SEARCH_CONFIG, which defaults to multilingual)")
    p.set_defaults(func=cmd_workspaces_create)
    p = ws.add_parser("apply", help="create or adopt a workspace and register its declared tokens (the operator's "
                                    "SearchWorkspace Job; secrets from the environment, never argv)")
    p.add_argument("--slug", required=True)
    p.add_argument("--name", help="display name (a new workspace's default: the slug; an adopted one's kept)")
    p.add_argument("--ts-config", default=None,
                   help="text search configuration: a new workspace's; an existing one's changes through the "
                        "language path (rebuilt in the background)")
    p.add_argument("--prefix", required=True,
                   help="the declaration's token name prefix, ending in '/' (the operator's: sw:NAMESPACE/NAME/); "
                        "live tokens under it that are not declared are revoked")
    p.add_argument("--tokens-from-env", action="store_true",
                   help=f"register the tokens ${TOKENS_VARIABLE} describes (JSON list of name, kind, agents, env)")
    p.set_defaults(func=cmd_workspaces_apply)
    p = ws.add_parser("revoke-declared", help="revoke every token under a declaration's prefix (its data stays; "
                                              "`workspaces erase` deletes it)")
    p.add_argument("--prefix", required=True)
    p.set_defaults(func=cmd_workspaces_revoke_declared)
    p = ws.add_parser("erase", help="delete a workspace and all of its data: its tokens revoked first, then its "
                                    "messages, conversations, memories and actors in batches (each its own "
                                    "transaction; run it again to finish an interrupted erasure), then its "
                                    "statistics and the workspace itself (the operator's deletionPolicy: delete)")
    p.add_argument("slug")
    p.add_argument("--yes-erase-workspace-data", action="store_true", help="required: there is no undo")
    p.add_argument("--batch", type=positive, default=1000, help="rows per transaction (default 1000)")
    p.add_argument("--revoke-prefix", default=None,
                   help="first revoke every token under a declaration's prefix (the operator's SearchWorkspace "
                        "with deletionPolicy: delete), as `workspaces revoke-declared` does")
    p.set_defaults(func=cmd_workspaces_erase)
    p = ws.add_parser("retire", help="revoke a workspace's tokens and refuse new ones; its data is kept "
                                     "(as DELETE /v1/admin/workspaces/SLUG)")
    p.add_argument("slug")
    p.set_defaults(func=cmd_workspaces_retire)
    p = ws.add_parser("list", help="list workspaces")
    p.set_defaults(func=cmd_workspaces_list)
    p = ws.add_parser("language", help="show or change a workspace's text search configuration (rebuilt in the background)")
    p.add_argument("slug")
    p.add_argument("--ts-config", default=None,
                   help="multilingual (each message stemmed in its own language), simple (no stemming), or one "
                        "language for every message: english, french, german, ... (\\dF in psql lists them)")
    p.add_argument("--speaker-names", choices=["on", "off"], default=None,
                   help="put each message's speaker name into its document (weight class A)")
    p.add_argument("--wait", action="store_true", help="rebuild now, in the foreground, with a progress bar")
    p.set_defaults(func=cmd_workspaces_language)
