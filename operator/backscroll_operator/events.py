"""Core v1 Events about the operator's own objects (what `kubectl describe` lists): one poster for
the SearchIndex and the SearchWorkspace alike, the object's kind and apiVersion taken from its body."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from .kube import Kube, KubeError
from .names import MANAGED_BY

log = logging.getLogger(__name__)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def post_event(kube: Kube, body: dict, type_: str, reason: str, message: str) -> None:
    meta = body["metadata"]
    at = now()
    try:
        kube.create("events", meta["namespace"], {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": body["apiVersion"], "kind": body["kind"], "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"],
                               "resourceVersion": meta.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message[:1024],
            "source": {"component": MANAGED_BY}, "reportingComponent": MANAGED_BY,
            "firstTimestamp": at, "lastTimestamp": at, "count": 1})
    except KubeError as exc:  # an Event is news, not state: a lost one must not fail the pass
        log.warning("could not post event %s on %s: %s", reason, meta["name"], exc)
