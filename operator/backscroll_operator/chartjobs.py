"""What the Helm chart's Jobs run, in the operator image (`python -m backscroll_operator.chartjobs`).

`quickstart-password`: the quickstart PostgreSQL's Secret, created once with a generated password
and then kept. The chart renders no password: one made by `randAlphaNum` at render time changes
on every `helm template` (Argo CD renders that way, where `lookup` sees nothing), and the database
would keep the first while the Secret moved on. Created by this Job, the Secret is nobody's
manifest: a sync neither rewrites nor prunes it.

`uninstall`: Helm's pre-delete hook. It deletes the release's SearchIndex and waits until it is
gone, while the operator and its RBAC still exist: with `deletionPolicy: delete` the operator runs
the purge and removes its finalizer. Without the hook, `helm uninstall` deleted the operator beside
the index and the finalizer stayed for good.

Both print what they did, never a Secret's value.
"""

from __future__ import annotations

import argparse
import secrets
import string
import sys
import time

from .kube import Conflict, Kube

ALPHABET = string.ascii_letters + string.digits


def quickstart_password(kube: Kube, namespace: str, secret: str, user: str, database: str, host: str) -> str:
    if kube.get("secrets", namespace, secret) is not None:
        return f"secret {namespace}/{secret} exists: kept (its password is the database's)"
    password = "".join(secrets.choice(ALPHABET) for _ in range(32))
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret, "annotations": {
                "backscroll.dev/not-for-production": "quickstart PostgreSQL from the Helm chart"}},
            "stringData": {"password": password,
                           "uri": f"postgresql://{user}:{password}@{host}:5432/{database}"}}
    try:
        kube.create("secrets", namespace, body)
    except Conflict:  # another run created it first: that one is kept
        return f"secret {namespace}/{secret} exists: kept (its password is the database's)"
    return f"secret {namespace}/{secret} created with a generated password"


def uninstall(kube: Kube, namespace: str, name: str, timeout_s: float, out=sys.stdout) -> bool:
    """Deletes the SearchIndex and waits until it is gone; False when it is still there at the end."""
    index = kube.get("searchindexes", namespace, name)
    if index is None:
        print(f"searchindex {namespace}/{name} does not exist: nothing to delete", file=out)
        return True
    if not index["metadata"].get("deletionTimestamp"):
        kube.delete("searchindexes", namespace, name)
        print(f"searchindex {namespace}/{name} deleted; waiting for the operator to finish "
              f"(finalizers: {index['metadata'].get('finalizers') or 'none'})", file=out, flush=True)
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        index = kube.get("searchindexes", namespace, name)
        if index is None:
            print(f"searchindex {namespace}/{name} is gone", file=out)
            return True
        ready = next((c for c in (index.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
        now = (tuple(index["metadata"].get("finalizers") or ()), ready.get("reason"), ready.get("message"))
        if now != last:
            print(f"waiting: finalizers {list(now[0])}, Ready reason {now[1]}: {now[2]}", file=out, flush=True)
            last = now
        time.sleep(2)
    print(f"searchindex {namespace}/{name} still exists after {timeout_s:.0f} s (finalizers "
          f"{list(last[0]) if last else []}): the operator has not finished its purge; see `kubectl describe "
          f"searchindex {name} -n {namespace}`. To uninstall without purging the database: kubectl patch "
          f"searchindex {name} -n {namespace} --type=json -p '[{{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}}]'",
          file=out)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backscroll_operator.chartjobs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    password = commands.add_parser("quickstart-password", help="create the quickstart database's Secret once")
    password.add_argument("--namespace", required=True)
    password.add_argument("--secret", required=True)
    password.add_argument("--user", required=True)
    password.add_argument("--database", required=True)
    password.add_argument("--host", required=True, help="the database Service's DNS name")
    remove = commands.add_parser("uninstall", help="delete a SearchIndex and wait until it is gone")
    remove.add_argument("--namespace", required=True)
    remove.add_argument("--searchindex", required=True)
    remove.add_argument("--timeout", type=float, default=600, help="seconds to wait (default 600)")
    args = parser.parse_args(argv)
    kube = Kube()
    if args.command == "quickstart-password":
        print(quickstart_password(kube, args.namespace, args.secret, args.user, args.database, args.host))
        return 0
    return 0 if uninstall(kube, args.namespace, args.searchindex, args.timeout) else 1


if __name__ == "__main__":
    raise SystemExit(main())
