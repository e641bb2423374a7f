"""The kopf handlers of SearchWorkspace: thin, everything they decide is in workspace_reconcile.

A pass runs on kopf's create, update and resume; on an event of the SearchWorkspace while it is
being deleted, of its Jobs, and of its SearchIndex (a migration finishing releases the workspaces
waiting for it); and at every resync (interval_s), which is how a deleted or edited token Secret is
noticed: Secrets are read by name, never listed or watched. Passes for one SearchWorkspace never
overlap; only the leader runs them. The finalizer is the operator's own (no kopf finalizer).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

import httpx
import kopf

from . import workspaces as ws_
from .events import now, post_event
from .kube import KubeError, NotFound
from .names import GROUP, VERSION, controller_of
from .status import merge_conditions
from .workspace_reconcile import Result, reconcile

log = logging.getLogger(__name__)
RESOURCE = (GROUP, VERSION, ws_.PLURAL)


class WorkspacePasses:
    def __init__(self, passes):
        self.passes = passes  # the SearchIndex passes: their client, leader and config
        self.locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    @property
    def kube(self):
        return self.passes.kube

    def request(self, namespace: str, name: str) -> None:
        if not self.passes.leads() or self.kube is None:
            return
        with self.locks[f"{namespace}/{name}"]:
            try:
                body = self.kube.get(ws_.PLURAL, namespace, name)
                if body is not None:
                    self._publish(body, reconcile(self.kube, body))
            except (KubeError, httpx.HTTPError) as exc:
                self.passes.metrics.errors.labels("pass").inc()
                log.warning("pass for searchworkspace %s/%s: %s", namespace, name, exc)

    def _publish(self, body: dict, result: Result | None) -> None:
        meta = body["metadata"]
        for type_, reason, message in (result.events if result else []):
            self.event(body, type_, reason, message)
        if result is None or result.reason == "Deleted":
            return
        old = body.get("status") or {}
        prior = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        ready = {"type": "Ready", "status": "True" if result.ready else "False", "reason": result.reason,
                 "message": result.message[:1024]}
        # A new reason is an Event; lastTransitionTime moves with the status only (as a SearchIndex's).
        changed = (prior.get("status"), prior.get("reason")) != (ready["status"], result.reason)
        conditions = merge_conditions(old.get("conditions"), [ready], now(), meta.get("generation"))
        new = {"observedGeneration": meta.get("generation"), **result.fields, "conditions": conditions}
        if {k: old.get(k) for k in new} != new:
            try:
                self.kube.patch(ws_.PLURAL, meta["namespace"], meta["name"], {"status": new}, subresource="status")
            except NotFound:
                return
        if changed:
            self.event(body, "Normal" if result.ready else "Warning", result.reason, result.message)

    def event(self, body: dict, type_: str, reason: str, message: str) -> None:
        post_event(self.kube, body, type_, reason, message)

    def resync(self, stop: threading.Event, namespaces: list[str]) -> None:
        while not stop.wait(self.passes.config.interval_s):
            if self.kube is None or not self.passes.leads():
                continue
            try:
                bodies = [b for ns in namespaces or [None] for b in self.kube.list(ws_.PLURAL, ns, {})]
            except Exception as exc:  # noqa: BLE001 (the thread must outlive an API server outage)
                log.warning("resync could not list SearchWorkspaces: %s", exc)
                continue
            for body in bodies:
                if stop.is_set():
                    return
                try:
                    self.request(body["metadata"]["namespace"], body["metadata"]["name"])
                except Exception:  # noqa: BLE001
                    log.exception("resync pass for searchworkspace %s failed", body["metadata"]["name"])


def register(registry: kopf.OperatorRegistry, passes, namespaces: list[str] | None = None) -> WorkspacePasses:
    wp = WorkspacePasses(passes)
    stop = threading.Event()

    @kopf.on.startup(registry=registry)
    def start_workspace_resync(**_):
        threading.Thread(target=wp.resync, args=(stop, namespaces or []), name="workspace-resync",
                         daemon=True).start()

    @kopf.on.cleanup(registry=registry)
    def stop_workspace_resync(**_):
        stop.set()

    @kopf.on.resume(*RESOURCE, id="workspace", registry=registry)
    @kopf.on.create(*RESOURCE, id="workspace", registry=registry)
    @kopf.on.update(*RESOURCE, id="workspace", field="spec", registry=registry)
    def changed(body, **_):
        wp.request(body["metadata"]["namespace"], body["metadata"]["name"])

    @kopf.on.event(*RESOURCE, id="workspace-deleting", registry=registry,
                   when=lambda body, **_: bool(body.get("metadata", {}).get("deletionTimestamp")))
    def deleting(body, **_):
        wp.request(body["metadata"]["namespace"], body["metadata"]["name"])

    @kopf.on.event("batch", "v1", "jobs", id="workspace-jobs", registry=registry,
                   labels={ws_.WORKSPACE_LABEL: kopf.PRESENT})
    def job(body, **_):
        name = controller_of(body, ws_.KIND)
        if name is not None:
            wp.request(body["metadata"]["namespace"], name)

    @kopf.on.event(GROUP, VERSION, "searchindexes", id="workspace-index", registry=registry)
    def index(body, **_):
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if not passes.leads() or passes.kube is None:
            return
        try:
            listed = passes.kube.list(ws_.PLURAL, namespace, {})
        except KubeError as exc:  # the SearchWorkspace CRD not installed: nothing waits for this index
            log.debug("could not list SearchWorkspaces in %s: %s", namespace, exc)
            return
        for workspace in listed:
            if ((workspace.get("spec") or {}).get("indexRef") or {}).get("name") == name:
                wp.request(namespace, workspace["metadata"]["name"])

    return wp
