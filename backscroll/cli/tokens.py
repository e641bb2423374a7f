"""`backscroll tokens`: create, register (a secret from the environment), list and revoke API tokens."""

from __future__ import annotations

import os
import sys

from ..config import Settings
from .common import connection


def register_from_env(settings: Settings, kind: str, name: str, variable: str) -> None:
    """`tokens register` and `migrate --register-status-token-env`: the secret is read from the
    environment (argv is visible to every process on the machine, and in a Pod's spec), stored as
    its digest, and never printed."""
    from ..access.auth import TokenKind, register_token

    secret = os.environ.get(variable, "").strip()
    if not secret:
        raise SystemExit(f"backscroll: environment variable {variable} is not set or empty: it must hold the token")
    with connection(settings) as conn:
        token_id, created, revoked = register_token(conn, TokenKind(kind), name, secret)
    if created:
        rotated = f"; revoked the previous {kind} token(s) named {name!r}: {', '.join(map(str, revoked))}" if revoked else ""
        print(f"registered {kind} token {token_id} ({name!r}) from ${variable}{rotated}", file=sys.stderr)
    else:
        print(f"{kind} token {token_id} from ${variable} is already registered; nothing changed", file=sys.stderr)


def cmd_tokens_create(args, settings: Settings) -> int:
    from ..access.auth import INSTALLATION_KINDS, TokenKind
    from ..errors import BackscrollError
    from ..ingest import workspaces

    kind = TokenKind(args.kind)
    with connection(settings, autocommit=False) as conn:
        try:
            workspace_id = None
            if kind not in INSTALLATION_KINDS and not args.workspace:
                raise SystemExit(f"a {kind.value} token needs --workspace")
            if kind is TokenKind.reader and not args.actor:
                raise SystemExit("a reader token needs --actor NAMESPACE/EXTERNAL_ID (the person reading)")
            if args.workspace:  # an admin token with one is scoped to that workspace
                workspace_id, _ = workspaces.for_token(conn, None, args.workspace)
            agents = None
            if kind in (TokenKind.reader, TokenKind.runtime) and args.agents != "all":
                agents = [s for s in (args.agents or "").split(",") if s]
                if not agents:
                    raise SystemExit("give --agents all, or a comma-separated list of agent slugs")
            token_id, secret = workspaces.issue_token(
                conn, kind, workspace_id=workspace_id, workspace_slug=args.workspace or "", actor=args.actor,
                display_name=args.display_name, agents=agents, name=args.name)
        except BackscrollError as exc:
            raise SystemExit(f"backscroll: {exc.message}") from None
        conn.commit()
    print(f"created {kind.value} token {token_id}; it is shown once and cannot be recovered:", file=sys.stderr)
    print(secret)
    return 0


def cmd_tokens_register(args, settings: Settings) -> int:
    register_from_env(settings, args.kind, args.name, args.from_env)
    return 0


def cmd_tokens_list(args, settings: Settings) -> int:
    from ..access.auth import list_tokens

    with connection(settings) as conn:
        for t in list_tokens(conn):
            state = "revoked" if t["revoked_at"] else "active"
            agents = "all" if t["agent_ids"] is None else ",".join(map(str, t["agent_ids"]))
            print(f"{t['id']:>5} {t['kind']:<8} {state:<8} {t['hint']}…  ws={t['workspace'] or '-'} "
                  f"actor={t['actor'] or '-'} agents={agents}  {t['name']}")
    return 0


def cmd_tokens_revoke(args, settings: Settings) -> int:
    from ..access.auth import revoke_token

    with connection(settings) as conn:
        if not revoke_token(conn, args.id):
            print(f"no active token {args.id}", file=sys.stderr)
            return 1
    print(f"revoked token {args.id}")
    return 0


def add_tokens(sub) -> None:
    tk = sub.add_parser("tokens", help="create, list and revoke API tokens").add_subparsers(dest="action", required=True)
    p = tk.add_parser("create", help="create a token; the secret is printed once")
    p.add_argument("--kind", required=True, choices=["reader", "runtime", "ingest", "admin", "status"],
                   help="status: reads GET /v1/status and nothing else")
    p.add_argument("--workspace", help="workspace slug (all kinds but admin and status; an admin token with one "
                                       "is scoped to that workspace)")
    p.add_argument("--actor", help="reader: the person, as NAMESPACE/EXTERNAL_ID (e.g. web:demo/alice)")
    p.add_argument("--display-name", help="reader: the person's display name, if the actor is new")
    p.add_argument("--agents", default="all", help="reader/runtime: 'all' or comma-separated agent slugs")
    p.add_argument("--name", default="", help="a label for listings")
    p.set_defaults(func=cmd_tokens_create)
    p = tk.add_parser("register", help="store a token whose secret was generated elsewhere (read from an environment "
                                       "variable, never from argv); revokes older live tokens of the same kind and name")
    p.add_argument("--kind", required=True, choices=["status", "admin"])
    p.add_argument("--name", required=True, help="the token's name: registering a new secret under it rotates it")
    p.add_argument("--from-env", required=True, metavar="VAR", help="the environment variable holding the secret")
    p.set_defaults(func=cmd_tokens_register)
    p = tk.add_parser("list", help="list tokens (never their secrets)")
    p.set_defaults(func=cmd_tokens_list)
    p = tk.add_parser("revoke", help="revoke a token by id")
    p.add_argument("id", type=int)
    p.set_defaults(func=cmd_tokens_revoke)
