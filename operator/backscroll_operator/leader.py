"""Leader election on a coordination.k8s.io/v1 Lease, the way client-go's leaderelection does it.

Every replica watches (kopf runs in each); only the Lease's holder runs passes. The holder renews
every `lease_renew_s`; a replica that sees the same holder and renewTime for longer than
`leaseDurationSeconds` (timed by its own clock, so clock skew between nodes does not matter)
takes the Lease over with an update that carries the resourceVersion it read: two replicas
that try at once get one 200 and one 409. A holder that cannot renew stops acting after two
thirds of the duration, before anyone else may take over. A replica that stops cleanly releases
the Lease (holderIdentity emptied), so the other takes over at its next attempt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from .kube import Conflict, Kube, KubeError

log = logging.getLogger(__name__)


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Leader:
    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, duration_s: int, renew_s: float,
                 on_change: Callable[[bool], None] | None = None, on_error: Callable[[], None] | None = None):
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.duration_s, self.renew_s = duration_s, renew_s
        self.on_change, self.on_error = on_change, on_error
        self._valid_until = 0.0  # monotonic: passes run while now < this
        self._observed: tuple | None = None  # (holder, renewTime) as last read, and when it changed
        self._observed_at = 0.0
        self._leading = False

    def held(self) -> bool:
        return time.monotonic() < self._valid_until

    def _path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def _spec(self, transitions: int, acquired: str | None = None) -> dict:
        now = _micro_now()
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_s,
                "acquireTime": acquired or now, "renewTime": now, "leaseTransitions": transitions}

    def attempt(self) -> bool:
        """One try to acquire or renew; True while this replica leads."""
        started = time.monotonic()
        try:
            lease = self.kube._send("GET", f"{self._path()}/{self.name}")
        except KubeError as exc:
            if exc.status != 404:
                raise
            lease = None
        if lease is None:
            self.kube._send("POST", self._path(), {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(0)})
            return self._won(started)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, started
        if holder == self.identity:
            new = self._spec(spec.get("leaseTransitions") or 0, spec.get("acquireTime"))
        else:
            expired = started - self._observed_at > (spec.get("leaseDurationSeconds") or self.duration_s)
            if holder and not expired:
                self._lost()
                return False
            new = self._spec((spec.get("leaseTransitions") or 0) + 1)
        body = {**lease, "spec": new}
        self.kube._send("PUT", f"{self._path()}/{self.name}", body)  # 409 when someone wrote first
        if holder != self.identity:
            log.info("took the Lease %s/%s over from %r", self.namespace, self.name, holder or None)
        return self._won(started)

    def _won(self, started: float) -> bool:
        self._valid_until = started + self.duration_s * 2 / 3
        self._observed = None
        if not self._leading:
            self._leading = True
            log.info("leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name)
            if self.on_change:
                self.on_change(True)
        return True

    def _lost(self) -> None:
        self._valid_until = 0.0
        if self._leading:
            self._leading = False
            log.warning("no longer leading (Lease %s/%s)", self.namespace, self.name)
            if self.on_change:
                self.on_change(False)

    def tick(self) -> bool:
        try:
            return self.attempt()
        except Conflict:
            self._lost()  # another replica wrote first; it leads
            return False
        except (KubeError, httpx.HTTPError) as exc:
            log.warning("leader election: %s", exc)
            if self.on_error:
                self.on_error()
            if not self.held() and self._leading:
                self._lost()
            return False

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.renew_s):
            self.tick()
            if not self.held() and self._leading:
                self._lost()

    def release(self) -> None:
        """On a clean stop: empty the holder so that another replica need not wait out the Lease."""
        if not self._leading:
            return
        self._valid_until = 0.0
        self._leading = False
        try:
            lease = self.kube._send("GET", f"{self._path()}/{self.name}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _micro_now()}
                self.kube._send("PUT", f"{self._path()}/{self.name}", {**lease, "spec": spec})
                log.info("released the Lease %s/%s", self.namespace, self.name)
        except (KubeError, httpx.HTTPError) as exc:
            log.warning("could not release the Lease: %s", exc)


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def own_namespace() -> str:
    """The pod's namespace (its service account's), or default outside a cluster."""
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"
