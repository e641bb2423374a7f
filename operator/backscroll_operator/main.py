"""`backscroll-operator`: runs the kopf operator against the current kubeconfig or, in a pod,
its service account."""

from __future__ import annotations

import argparse

import kopf

from .config import OperatorConfig
from .handlers import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="backscroll-operator", description=__doc__)
    parser.add_argument("-n", "--namespace", action="append", default=[],
                        help="watch this namespace (repeatable; default BACKSCROLL_OPERATOR_NAMESPACES, else all)")
    parser.add_argument("--verbose", action="store_true", help="log every request kopf handles")
    parser.add_argument("--liveness", metavar="URL", help="serve kopf's liveness probe, e.g. http://0.0.0.0:8081/healthz")
    args = parser.parse_args(argv)

    config = OperatorConfig()
    namespaces = args.namespace or config.namespaces
    kopf.configure(verbose=args.verbose)
    registry = kopf.OperatorRegistry()
    register(registry, config, namespaces)
    # standalone: one replica, no peering objects to install; the Deployment runs a single pod.
    kopf.run(registry=registry, standalone=True, clusterwide=not namespaces, namespaces=namespaces,
             liveness_endpoint=args.liveness)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
