"""`backscroll-operator`: runs the kopf operator against the current kubeconfig or, in a pod,
its service account."""

from __future__ import annotations

import argparse
import urllib.parse

import kopf

from .config import OperatorConfig
from .handlers import register


def settings(argv: list[str] | None = None) -> tuple[argparse.Namespace, OperatorConfig]:
    """The command line over BACKSCROLL_OPERATOR_*: the flags win."""
    parser = argparse.ArgumentParser(prog="backscroll-operator", description=__doc__)
    parser.add_argument("-n", "--namespace", action="append", default=[],
                        help="watch this namespace (repeatable; default BACKSCROLL_OPERATOR_NAMESPACES, else all)")
    parser.add_argument("--verbose", action="store_true", help="log every request kopf handles")
    parser.add_argument("--metrics", metavar="URL",
                        help="serve Prometheus metrics at URL/metrics and the liveness probe at URL/healthz, "
                             "e.g. http://0.0.0.0:9090 (default: BACKSCROLL_OPERATOR_METRICS_PORT, else none)")
    parser.add_argument("--liveness", metavar="URL",
                        help="serve the liveness probe at this URL instead, e.g. http://0.0.0.0:8081/healthz "
                             "(the same server as the metrics: one port for both)")
    args = parser.parse_args(argv)

    config = OperatorConfig()
    update: dict = {}
    for flag, url in (("--metrics", args.metrics), ("--liveness", args.liveness)):
        if not url:
            continue
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or parts.port is None:
            parser.error(f"{flag} wants http://HOST:PORT[/PATH], not {url!r}")
        if update.get("metrics_port") not in (None, parts.port):
            parser.error("--metrics and --liveness are served by one server: give them the same port")
        update.update(metrics_host=parts.hostname or "0.0.0.0", metrics_port=parts.port)
        if flag == "--liveness" and parts.path not in ("", "/"):
            update["liveness_path"] = parts.path
    return args, config.model_copy(update=update)


def main(argv: list[str] | None = None) -> int:
    args, config = settings(argv)
    namespaces = args.namespace or config.namespaces
    kopf.configure(verbose=args.verbose)
    registry = kopf.OperatorRegistry()
    register(registry, config, namespaces)
    # standalone: no kopf peering objects; replicas elect a leader on a Lease of their own
    # (leader.py), and kopf's liveness endpoint is replaced by /healthz on the metrics server.
    kopf.run(registry=registry, standalone=True, clusterwide=not namespaces, namespaces=namespaces)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
