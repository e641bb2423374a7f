"""One pass for one SearchWorkspace: what the cluster and the database should hold, step by step.

1. The operator's finalizer (`revoke-tokens`) is on the object while it lives.
2. The SearchIndex it names exists and has applied its migrations (else WaitingForIndex).
3. The operator's Secret holds a secret per declared token: generated when missing, regenerated
   when its delivered Secret was deleted (rotation), dropped when the token is no longer declared.
4. The registration Job for exactly these secrets and this declaration (its name is their hash)
   ran: `backscroll workspaces apply` registered their digests and revoked the rest (Registering,
   RegistrationFailed).
5. Only then is each token written to its target Secret (a changed or edited one rewritten: drift),
   and the Secrets of undeclared tokens deleted. A write RBAC refuses is SecretWriteForbidden.

Deleting the SearchWorkspace runs the revoke Job, then deletes every delivered Secret (one in
another namespace has no owner reference to be garbage-collected by) and drops the finalizer.
Secrets are read one by one by name, never listed: a rotation by deletion is noticed at the next
pass (an event on the SearchWorkspace or its Jobs, or the resync every interval_s).
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import workspaces as ws_
from .kube import Conflict, Kube, KubeError, NotFound
from .names import Owner
from .reconcile import create_once, failure, remove_others
from .spec import SpecError
from .spec import parse as parse_index
from .status import JobState

log = logging.getLogger(__name__)


class Stop(Exception):
    """The pass stops here with Ready=False for this reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass
class Result:
    ready: bool
    reason: str
    message: str
    fields: dict = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)


def new_secret() -> str:
    # The shape `backscroll` makes and `validate_secret` accepts: the prefix and 256 random bits.
    return "bks_" + secrets.token_urlsafe(32)


def _decoded(secret: dict | None) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in ((secret or {}).get("data") or {}).items()}


def _delivered(secret: dict | None) -> dict[str, str]:
    text = (((secret or {}).get("metadata") or {}).get("annotations") or {}).get(ws_.DELIVERED_ANNOTATION)
    try:
        return dict(json.loads(text)) if text else {}
    except ValueError:
        return {}


def _ours(secret: dict, ws: Owner) -> bool:
    labels = (secret.get("metadata") or {}).get("labels") or {}
    return labels.get(ws_.WORKSPACE_LABEL) == ws.name and labels.get(ws_.WORKSPACE_NAMESPACE_LABEL) == ws.namespace


@contextmanager
def _secret_access(namespace: str, name: str):
    """A Secret RBAC keeps the operator from (another namespace not granted) stops the pass."""
    try:
        yield
    except KubeError as exc:
        if exc.status != 403:
            raise
        raise Stop("SecretWriteForbidden", f"the operator may not write Secret {namespace}/{name}: RBAC refused it "
                                           f"({exc.status}); grant the namespace {namespace} with the chart's "
                                           "operator.tokenNamespaces") from None


def set_finalizers(kube: Kube, ws: Owner, body: dict, finalizers: list[str]) -> None:
    kube.patch(ws_.PLURAL, ws.namespace, ws.name, [
        {"op": "test", "path": "/metadata/resourceVersion", "value": body["metadata"]["resourceVersion"]},
        {"op": "add", "path": "/metadata/finalizers", "value": finalizers}],
        content_type="application/json-patch+json")


def _index(kube: Kube, ws: Owner, name: str):
    body = kube.get("searchindexes", ws.namespace, name)
    if body is None:
        raise Stop("WaitingForIndex", f"SearchIndex {name} does not exist in {ws.namespace}")
    if body["metadata"].get("deletionTimestamp"):
        raise Stop("WaitingForIndex", f"SearchIndex {name} is being deleted")
    conditions = {c.get("type"): c for c in (body.get("status") or {}).get("conditions") or []}
    if conditions.get("MigrationsApplied", {}).get("status") != "True":
        raise Stop("WaitingForIndex", f"SearchIndex {name} has not applied its migrations yet")
    try:
        return parse_index(body.get("spec") or {})
    except SpecError as exc:
        raise Stop("WaitingForIndex", f"SearchIndex {name}'s spec is invalid: {exc}") from None


def _remove_target(kube: Kube, ws: Owner, where: str) -> None:
    namespace, _, name = where.partition("/")
    with _secret_access(namespace, name):
        live = kube.get("secrets", namespace, name)
        if live is not None and _ours(live, ws):
            log.info("deleting secret %s (its token is revoked)", where)
            kube.delete("secrets", namespace, name)


def _write_target(kube: Kube, ws: Owner, token: ws_.WorkspaceToken, value: str, *, delivered: bool) -> bool:
    """The token in its target Secret; True when it was written (created or drift corrected).

    A token already delivered to this Secret is never delivered again: a Secret gone since this
    pass looked (deleted by hand in between) asks for a rotation, which the next pass makes;
    writing the old secret back would undo the deletion and keep a token its owner discarded."""
    manifest = ws_.target_secret(ws, token, value)
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    with _secret_access(namespace, name):
        live = kube.get("secrets", namespace, name)
        if live is None and delivered:
            log.info("secret %s/%s was deleted during this pass: token %s rotates on the next", namespace, name,
                     token.name)
            return False
        if live is None:
            log.info("writing token %s to secret %s/%s", token.name, namespace, name)
            kube.create("secrets", namespace, manifest)
            return True
        if not _ours(live, ws):
            raise Stop("SecretConflict", f"Secret {namespace}/{name} exists and is not this SearchWorkspace's: "
                                         "rename the target or delete that Secret")
        if _decoded(live).get(token.secret.key) == value:
            return False
        log.info("rewriting secret %s/%s (it drifted)", namespace, name)
        kube.patch("secrets", namespace, name, {"data": {token.secret.key: base64.b64encode(value.encode()).decode()},
                                                "metadata": {"labels": manifest["metadata"]["labels"]}})
        return True


def finalize(kube: Kube, ws: Owner, body: dict) -> Result | None:
    """One step of a deletion; None once the finalizer is gone (or was never there)."""
    finalizers = list(body["metadata"].get("finalizers") or [])
    if ws_.FINALIZER not in finalizers:
        return None
    events = []
    index_name = ((body.get("spec") or {}).get("indexRef") or {}).get("name") or ""
    try:
        index = _index(kube, ws, index_name)
    except Stop as stop:  # no index to revoke in: nothing of its API answers any more either
        index = None
        events.append(("Warning", "TokensNotRevoked", f"{stop.message}: the tokens could not be revoked in its "
                                                      "database; their Secrets are deleted"))
    if index is not None:
        erase = ws_.erased_slug(body)
        job = ws_.revoke_job(ws, index, erase)
        state = JobState.of(job["metadata"]["name"], create_once(kube, ws, "jobs", job))
        if state.phase == "running":
            if erase:
                return Result(False, "Erasing", f"job {state.name} revokes the tokens, then erases workspace {erase} "
                                                "and its data (deletionPolicy: delete) before the SearchWorkspace goes")
            return Result(False, "Revoking", f"job {state.name} revokes the tokens before the SearchWorkspace goes")
        if state.phase == "failed":
            if erase:
                return Result(False, "ErasureFailed", f"job {state.name} failed: {failure(kube, ws, state.name)}; "
                              f"the tokens may be live and the data partly erased: delete the job to try again (an "
                              f"erasure resumes where it stopped), or remove the finalizer {ws_.FINALIZER}")
            return Result(False, "RevocationFailed", f"job {state.name} failed: {failure(kube, ws, state.name)}; the "
                          f"tokens may be live: delete the job to try again, or remove the finalizer {ws_.FINALIZER}")
        events.append(("Normal", "TokensRevoked", f"job {state.name} revoked every token of {ws_.prefix(ws)}"))
        if erase:
            events.append(("Normal", "WorkspaceErased", f"job {state.name} erased workspace {erase} and its data"))
    secret = kube.get("secrets", ws.namespace, ws_.tokens_secret_name(ws))
    for where in sorted(set(_delivered(secret).values())):
        try:
            _remove_target(kube, ws, where)
        except Stop as stop:
            events.append(("Warning", stop.reason, stop.message))
    set_finalizers(kube, ws, body, [f for f in finalizers if f != ws_.FINALIZER])
    return Result(False, "Deleted", "tokens revoked, Secrets deleted", events=events)


def converge(kube: Kube, ws: Owner, body: dict, spec: ws_.SearchWorkspaceSpec) -> Result:
    finalizers = list(body["metadata"].get("finalizers") or [])
    if ws_.FINALIZER not in finalizers:
        set_finalizers(kube, ws, body, [*finalizers, ws_.FINALIZER])
    fields = {"index": spec.index_ref.name, "slug": spec.slug, "tokens": f"0/{len(spec.tokens)}"}
    try:
        index = _index(kube, ws, spec.index_ref.name)
        return _converge(kube, ws, spec, index, fields)
    except Stop as stop:
        return Result(False, stop.reason, stop.message, fields)


def _converge(kube: Kube, ws: Owner, spec: ws_.SearchWorkspaceSpec, index, fields: dict) -> Result:
    events: list[tuple[str, str, str]] = []
    name = ws_.tokens_secret_name(ws)
    own = kube.get("secrets", ws.namespace, name)
    values, delivered = _decoded(own), _delivered(own)
    declared = {t.name: t for t in spec.tokens}
    targets = {t.name: "/".join(ws_.target(ws, t)) for t in spec.tokens}  # namespace/name
    before = dict(values)
    for token in spec.tokens:
        where = targets[token.name]
        if token.name not in values:
            values[token.name] = new_secret()
        elif delivered.get(token.name) == where:
            namespace, _, target = where.partition("/")
            with _secret_access(namespace, target):
                gone = kube.get("secrets", namespace, target) is None
            if gone:  # deleted by hand: that is how a token is rotated
                values[token.name] = new_secret()
                delivered.pop(token.name)
                events.append(("Normal", "TokenRotated", f"token {token.name}: its Secret {where} was deleted; a new "
                                                         "secret is registered and the old one revoked"))
    for stale in set(values) - set(declared):
        values.pop(stale)
    if own is None:
        create_once(kube, ws, "secrets", ws_.tokens_secret(ws, values, delivered))
    elif values != before:
        data = {k: (base64.b64encode(v.encode()).decode() if k in values else None)
                for k, v in {**before, **values}.items()}
        kube.patch("secrets", ws.namespace, name, {"data": data, "metadata": {"annotations": {
            ws_.DELIVERED_ANNOTATION: json.dumps(delivered, sort_keys=True)}}})
    digests = {k: ws_.token_digest(v) for k, v in values.items()}
    job = ws_.register_job(ws, spec, index, digests)
    live = create_once(kube, ws, "jobs", job)
    state = JobState.of(job["metadata"]["name"], live)
    fields["registrationJob"] = state.name
    if state.phase == "running":
        return Result(False, "Registering", f"job {state.name} registers the tokens' digests", fields, events)
    if state.phase == "failed":
        return Result(False, "RegistrationFailed", f"job {state.name} failed: {failure(kube, ws, state.name)}",
                      fields, events)
    remove_others(kube, ws, "jobs", ws_.REGISTER, keep={state.name})
    registered_at = (live.get("status") or {}).get("completionTime")
    token_status, problems = [], []
    for token in spec.tokens:
        where = targets[token.name]
        try:
            if delivered.get(token.name) not in (None, where):
                _remove_target(kube, ws, delivered[token.name])  # moved: the old place no longer holds it
            _write_target(kube, ws, token, values[token.name], delivered=delivered.get(token.name) == where)
            delivered[token.name] = where
            token_status.append({"name": token.name, "kind": token.kind, "secret": where,
                                 **({"registeredAt": registered_at} if registered_at else {})})
        except Stop as stop:
            problems.append(stop)
    for stale in sorted(set(delivered) - set(declared)):
        try:
            _remove_target(kube, ws, delivered.pop(stale))
            events.append(("Normal", "TokenRevoked", f"token {stale} is no longer declared: revoked, Secret deleted"))
        except Stop as stop:
            problems.append(stop)
    if delivered != _delivered(own) or own is None:
        kube.patch("secrets", ws.namespace, name, {"metadata": {"annotations": {
            ws_.DELIVERED_ANNOTATION: json.dumps(delivered, sort_keys=True)}}})
    fields["tokens"] = f"{len(token_status)}/{len(spec.tokens)}"
    fields["tokenStatus"] = token_status
    if problems:
        return Result(False, problems[0].reason, "; ".join(p.message for p in problems), fields, events)
    return Result(True, "Ready", f"workspace {spec.slug}: {len(token_status)} token(s) registered and delivered",
                  fields, events)


def reconcile(kube: Kube, body: dict) -> Result | None:
    """The pass; None when the object is gone (its finalizer removed)."""
    ws = Owner.from_body(body, ws_.KIND)
    if body["metadata"].get("deletionTimestamp"):
        return finalize(kube, ws, body)
    try:
        spec = ws_.parse(body.get("spec"))
    except SpecError as exc:
        return Result(False, "InvalidSpec", str(exc))
    try:
        return converge(kube, ws, body, spec)
    except (NotFound, Conflict) as exc:  # changed under us: the next pass sees it
        return Result(False, "Retrying", str(exc))
