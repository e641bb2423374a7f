"""What the Helm chart's Jobs run, in the operator image (`python -m backscroll_operator.chartjobs`).

`quickstart-password`: the quickstart PostgreSQL's Secret, created once with a generated password
and then kept. The chart renders no password: one made by `randAlphaNum` at render time changes
on every `helm template` (Argo CD renders that way, where `lookup` sees nothing), and the database
would keep the first while the Secret moved on. Created by this Job, the Secret is nobody's
manifest: a sync neither rewrites nor prunes it.

`uninstall`: Helm's pre-delete hook. It deletes the release's SearchWorkspaces (the operator
revokes their tokens while their index is still there), then its SearchIndex, and waits until each
is gone, while the operator and its RBAC still exist: with `deletionPolicy: delete` the operator
runs the purge or the erasure and removes its finalizer. Without the hook, `helm uninstall` deleted
the operator beside them and the finalizers stayed for good.

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


def uninstall(kube: Kube, namespace: str, name: str | None, timeout_s: float, out=sys.stdout,
              workspaces: list[tuple[str, str]] = ()) -> bool:
    """Deletes the release's SearchWorkspaces (their tokens revoked while the index they name is
    still there), then its SearchIndex, each waited for until gone; False when one is still there
    when `timeout_s` is spent."""
    deadline = time.monotonic() + timeout_s
    done = all([_delete_and_wait(kube, "searchworkspaces", "searchworkspace", ns, ws, deadline, out)
                for ns, ws in workspaces])
    if name is not None:
        done = _delete_and_wait(kube, "searchindexes", "searchindex", namespace, name, deadline, out) and done
    return done


def _delete_and_wait(kube: Kube, plural: str, kind: str, namespace: str, name: str, deadline: float, out) -> bool:
    body = kube.get(plural, namespace, name)
    if body is None:
        print(f"{kind} {namespace}/{name} does not exist: nothing to delete", file=out)
        return True
    if not body["metadata"].get("deletionTimestamp"):
        kube.delete(plural, namespace, name)
        print(f"{kind} {namespace}/{name} deleted; waiting for the operator to finish "
              f"(finalizers: {body['metadata'].get('finalizers') or 'none'})", file=out, flush=True)
    last = None
    while time.monotonic() < deadline:
        body = kube.get(plural, namespace, name)
        if body is None:
            print(f"{kind} {namespace}/{name} is gone", file=out)
            return True
        ready = next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
        now = (tuple(body["metadata"].get("finalizers") or ()), ready.get("reason"), ready.get("message"))
        if now != last:
            print(f"waiting: finalizers {list(now[0])}, Ready reason {now[1]}: {now[2]}", file=out, flush=True)
            last = now
        time.sleep(2)
    print(f"{kind} {namespace}/{name} still exists (finalizers {list(last[0]) if last else []}): the operator has "
          f"not finished with it; see `kubectl describe {kind} {name} -n {namespace}`. To uninstall without it: "
          f"kubectl patch {kind} {name} -n {namespace} --type=json "
          "-p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'", file=out)
    return False


def _namespaced(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name:
        raise argparse.ArgumentTypeError(f"NAMESPACE/NAME, not {text!r}")
    return namespace, name


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
    remove = commands.add_parser("uninstall", help="delete the release's SearchWorkspaces, then its SearchIndex, "
                                                   "and wait until they are gone")
    remove.add_argument("--namespace", required=True)
    remove.add_argument("--searchindex", default=None)
    remove.add_argument("--searchworkspace", type=_namespaced, action="append", default=[], metavar="NAMESPACE/NAME")
    remove.add_argument("--timeout", type=float, default=600, help="seconds to wait (default 600)")
    args = parser.parse_args(argv)
    kube = Kube()
    if args.command == "quickstart-password":
        print(quickstart_password(kube, args.namespace, args.secret, args.user, args.database, args.host))
        return 0
    return 0 if uninstall(kube, args.namespace, args.searchindex, args.timeout, workspaces=args.searchworkspace) else 1


if __name__ == "__main__":
    raise SystemExit(main())
