"""The kopf handlers: thin, everything they decide is in spec, rollout, builders, reconcile and status.

Every trigger runs the same pass for one SearchIndex (`Passes.run`): kopf's create, update and
resume handlers; an event on any child the operator manages (a Deployment scaled by hand, a
Service deleted, a Job finished), so drift is reverted within seconds of happening; and a resync
thread every `interval_s`, which reads the API's status and notices rotated Secrets. Passes for
one SearchIndex never overlap, and a burst of child events queues at most one more pass.

No kopf timer or daemon: kopf puts a finalizer on every object that has one, and deleting a
SearchIndex would then hang whenever the operator is down. The only finalizer is the operator's
own, and only with `deletionPolicy: delete` (docs/operator.md, "Deletion").
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections import defaultdict

import httpx
import kopf

from . import __version__
from . import status as derive
from .bookkeeping import ReplicaDiffBase, ReplicaProgress
from .config import OperatorConfig
from .deletion import finalize, sync_finalizer
from .events import now, post_event
from .kube import Kube, KubeError, NoCredentials, NotFound, bearer, configuration
from .leader import Leader, own_namespace
from .metrics import Metrics, Server
from .names import GROUP, KIND, MANAGED_BY, PLURAL, VERSION, Owner, controller_of
from .reconcile import Blocked, converge
from .spec import SpecError, parse, unknown_fields
from .workspace_handlers import register as register_workspaces

RESOURCE = (GROUP, VERSION, PLURAL)
CHILDREN = (("apps", "v1", "deployments"), ("", "v1", "services"), ("batch", "v1", "jobs"),
            ("policy", "v1", "poddisruptionbudgets"), ("autoscaling", "v2", "horizontalpodautoscalers"),
            ("networking.k8s.io", "v1", "networkpolicies"))

CNPG_CLUSTERS = ("postgresql.cnpg.io", "v1", "clusters")

CHILD_SELECTOR = f"app.kubernetes.io/managed-by={MANAGED_BY}"

log = logging.getLogger(__name__)


def _plain(value) -> dict:
    return json.loads(json.dumps(value or {}))


def _registered(old: dict) -> dict[str, int]:
    return {m["model"]: m["dimensions"] for m in old.get("models") or [] if "dimensions" in m}


class Passes:
    """One reconcile pass per SearchIndex at a time, whoever asks."""

    def __init__(self, config: OperatorConfig, version: str = __version__):
        self.config = config
        self.version = version  # recorded in each status it writes (status.operatorVersion)
        self.unknown: set[str] = set()  # spec fields this version does not know, logged once each
        self.locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self.queued: set[str] = set()
        self.guard = threading.Lock()
        self.kube: Kube | None = None
        self.metrics = Metrics()
        self.leader: Leader | None = None  # None: no leader election, every pass runs
        self.wake = threading.Event()  # an early resync (leadership taken over)
        self.server: Server | None = None

    def leads(self) -> bool:
        """Followers watch, but run no pass: only the Lease's holder writes."""
        return self.leader is None or self.leader.held()

    def _timed(self, body: dict, final: bool, trigger: str) -> None:
        started, outcome = time.monotonic(), "error"
        try:
            outcome = self._pass(body, final=final) or "ok"
        except kopf.PermanentError:
            outcome = "invalid_spec"
            raise
        except kopf.TemporaryError as exc:  # raised `from None`: the cause is still its context
            outcome = "blocked" if isinstance(exc.__context__, Blocked) else "error"
            raise
        finally:
            self.metrics.pass_done(trigger, outcome, time.monotonic() - started)

    def request(self, namespace: str, name: str, trigger: str = "event") -> None:
        """A pass for namespace/name, from a child's event or the resync: coalesced, because a
        Deployment's rollout alone sends a dozen events and one pass after them sees them all."""
        if not self.leads():
            return
        key = f"{namespace}/{name}"
        with self.guard:
            if key in self.queued:
                return  # a pass is waiting already, and it will read the object after this event
            self.queued.add(key)
        with self.locks[key]:
            with self.guard:
                self.queued.discard(key)
            try:
                body = self.kube.get("searchindexes", namespace, name)
                if body is not None:
                    self._timed(body, False, trigger)
                else:
                    self.metrics.forget(namespace, name)
            except (KubeError, httpx.HTTPError) as exc:
                self.metrics.errors.labels("pass").inc()
                log.warning("pass for %s: %s", key, exc)

    def run(self, body, final: bool) -> None:
        """A pass for the body kopf handed over (create, update, resume)."""
        if not self.leads():
            return  # the leader handles it; after a takeover, the resync catches up
        meta = body["metadata"]
        with self.locks[f"{meta['namespace']}/{meta['name']}"]:
            fresh = self.kube.get("searchindexes", meta["namespace"], meta["name"])
            if fresh is not None:
                self._timed(fresh, final, "change")

    def _publish(self, body: dict, old: dict, new: dict) -> None:
        # An unchanged status is not written: every write would wake every watcher of SearchIndexes.
        new = {**new, "operatorVersion": self.version}
        changed = {key: value for key, value in new.items() if old.get(key) != value}
        if changed:
            meta = body["metadata"]
            try:
                self.kube.patch("searchindexes", meta["namespace"], meta["name"], {"status": changed},
                                subresource="status")
            except NotFound:
                self.metrics.forget(meta["namespace"], meta["name"])
                return  # deleted meanwhile: nothing to report on, nobody to tell
        self.metrics.index(body["metadata"]["namespace"], body["metadata"]["name"], {**old, **new})
        for type_, reason, message in derive.transitions(old, new):
            post_event(self.kube, body, type_, reason, message)

    def _pass(self, body: dict, final: bool) -> str | None:
        """`final`: kopf's change handlers, whose errors kopf should see (a permanent one stops
        retries; a temporary one retries after retry_delay_s). Other triggers' are recorded in
        the status only: the next event or resync comes back by itself."""
        owner = Owner.from_body(body)
        old = _plain(body.get("status"))
        generation = body["metadata"].get("generation")
        ready = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        deleting = bool(body["metadata"].get("deletionTimestamp"))
        if not final and not deleting and ready.get("reason") == "InvalidSpec" and \
                old.get("observedGeneration") == generation and old.get("operatorVersion") == self.version:
            # Refused already, with an Event. A new generation gets a new look, and so does a new
            # operator version: its rules may accept what the last one refused (a field it knows).
            return "skipped"
        try:
            if deleting:
                # Without the dimensions check: a spec that became invalid must not block its deletion.
                failure = finalize(self.kube, owner, body, parse(_plain(body.get("spec"))))
                if failure is not None:
                    self._publish(body, old, derive.failed(old, generation, *failure, now()))
                return "deleting"
            self._say_unknown(_plain(body.get("spec")))
            spec = parse(_plain(body.get("spec")), registered=_registered(old))
            sync_finalizer(self.kube, owner, body, spec)
            outcome = converge(self.kube, owner, spec, self.config, remembered=old.get("rollout"),
                               migration=old.get("migration"))
        except SpecError as exc:
            self._publish(body, old, derive.failed(old, generation, "InvalidSpec", str(exc), now()))
            if final:
                raise kopf.PermanentError(f"invalid spec: {exc}") from None
            return "invalid_spec"
        except Blocked as exc:
            self._publish(body, old, derive.failed(old, generation, exc.reason, str(exc), now()))
            if final:
                raise kopf.TemporaryError(str(exc), delay=self.config.retry_delay_s) from None
            return "blocked"
        except (KubeError, httpx.HTTPError) as exc:  # refused or failed on the way: the next pass retries
            log.warning("pass for %s/%s: %s", owner.namespace, owner.name, exc)
            self.metrics.errors.labels("pass").inc()
            if final:
                raise kopf.TemporaryError(str(exc), delay=self.config.retry_delay_s) from None
            return "error"
        self._publish(body, old, derive.derive(spec, outcome.facts, generation, old, now(), outcome.plan))

    def _say_unknown(self, spec: dict) -> None:
        for path in unknown_fields(spec):
            if path not in self.unknown:
                self.unknown.add(path)
                log.warning("%s is not known to operator %s: ignored, the rest of the spec is reconciled (the "
                            "CRD is newer than the operator; upgrade the operator)", path, self.version)

    def resync(self, stop: threading.Event, namespaces: list[str]) -> None:
        """Every interval_s, a pass for every SearchIndex: the API's status, rotated Secrets."""
        while not stop.is_set():
            self.wake.wait(self.config.interval_s)
            self.wake.clear()
            if stop.is_set():
                return
            try:
                bodies = [b for ns in namespaces or [None]
                          for b in self.kube.list("searchindexes", ns, {})]
            except Exception as exc:  # noqa: BLE001 (the thread must outlive an API server outage)
                self.metrics.errors.labels("resync").inc()
                log.warning("resync could not list SearchIndexes: %s", exc)
                continue
            self.metrics.listed()  # what the liveness probe reads: followers list too
            for body in bodies:
                if stop.is_set():
                    return
                try:
                    self.request(body["metadata"]["namespace"], body["metadata"]["name"], "resync")
                except Exception:  # noqa: BLE001
                    log.exception("resync pass for %s failed", body["metadata"]["name"])


def register(registry: kopf.OperatorRegistry, config: OperatorConfig, namespaces: list[str] | None = None,
             version: str = __version__) -> Passes:
    passes = Passes(config, version)
    stop = threading.Event()

    @kopf.on.login(registry=registry)
    def login(**_):
        # kopf's own login reads $KUBECONFIG as it was when `kubernetes` was first imported;
        # this one reads it now, the same way the operator's client does.
        try:
            cfg = configuration()
        except NoCredentials as exc:
            raise kopf.PermanentError(str(exc)) from None  # retrying cannot make a kubeconfig appear
        scheme, _, token = (bearer(cfg) or "").partition(" ")
        return kopf.ConnectionInfo(server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
                                   scheme=scheme or None, token=token or None,
                                   certificate_path=cfg.cert_file, private_key_path=cfg.key_file)

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_):
        # kopf's bookkeeping stays in this replica (bookkeeping.py: shared, two versions side by
        # side overwrote each other's), and out of the status, which holds only what people read.
        settings.persistence.progress_storage = ReplicaProgress()
        settings.persistence.diffbase_storage = ReplicaDiffBase()
        settings.persistence.finalizer = f"{GROUP}/kopf-finalizer"
        # The children's lists and watches ask the server for the operator's own objects only: a
        # cluster-wide operator must not receive every Deployment, Service and Job of the cluster
        # to filter them itself (the handlers' `labels=` alone filters on this side).
        for group, version, plural in CHILDREN:
            settings.watching.label_selectors[group, version, plural] = CHILD_SELECTOR
        # kopf turns its own warnings (retries, failures) into Events too; info-level chatter not.
        settings.posting.level = logging.WARNING
        settings.posting.reporting_component = MANAGED_BY
        # httpx logs every request at INFO: the resync alone would drown the operator's own log.
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
        # Never closed: a pass still running in its thread at shutdown may be using it, and the
        # process exits right after.
        try:
            passes.kube = Kube()
        except NoCredentials as exc:
            raise kopf.PermanentError(str(exc)) from None
        if config.metrics_port is not None:
            passes.server = Server(passes.metrics, config.metrics_host, config.metrics_port,
                                   config.liveness_stale_s, health_path=config.liveness_path).start()
        if config.leader_election:
            identity = config.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

            def changed_leader(leading: bool) -> None:
                passes.metrics.leader.set(1 if leading else 0)
                if leading:
                    passes.wake.set()  # a pass for every index now: changes made meanwhile
                else:
                    passes.metrics.forget_all()  # the new leader's gauges are the ones to read

            passes.leader = Leader(passes.kube, config.lease_namespace or own_namespace(), config.lease_name,
                                   identity, config.lease_duration_s, config.lease_renew_s,
                                   on_change=changed_leader, on_error=passes.metrics.errors.labels("lease").inc)
            passes.leader.tick()  # before kopf's first handlers: a lone replica leads from the start
            threading.Thread(target=passes.leader.run, args=(stop,), name="leader", daemon=True).start()
        threading.Thread(target=passes.resync, args=(stop, namespaces or []), name="resync", daemon=True).start()

    @kopf.on.cleanup(registry=registry)
    def cleanup(**_):
        stop.set()
        passes.wake.set()
        if passes.leader is not None:
            passes.leader.release()
        if passes.server is not None:
            passes.server.stop()

    # Explicit ids: kopf names handlers in its annotations, logs and Events by them.
    @kopf.on.resume(*RESOURCE, id="reconcile", registry=registry)
    @kopf.on.create(*RESOURCE, id="reconcile", registry=registry)
    @kopf.on.update(*RESOURCE, id="reconcile", field="spec", registry=registry)
    def changed(body, **_):
        passes.run(body, final=True)

    @kopf.on.event(*RESOURCE, id="deleting", registry=registry,
                   when=lambda body, **_: bool(body.get("metadata", {}).get("deletionTimestamp")))
    def deleting(body, **_):
        passes.request(body["metadata"]["namespace"], body["metadata"]["name"], "deleting")

    for group, version, plural in CHILDREN:
        @kopf.on.event(group, version, plural, id=f"child-{plural}", registry=registry,
                       labels={"app.kubernetes.io/managed-by": MANAGED_BY})
        def child(body, **_):
            owner = controller_of(body, KIND)
            if owner is not None:
                passes.request(body["metadata"]["namespace"], owner, "child")

    # A CloudNativePG cluster becoming Ready starts the migrations waiting for it at once, not at
    # the next resync. kopf watches the kind only where its CRD is installed.
    @kopf.on.event(*CNPG_CLUSTERS, id="cnpg-cluster", registry=registry)
    def cnpg_cluster(body, **_):
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        for index in passes.kube.list("searchindexes", namespace, {}) if passes.leads() else []:
            ref = (((index.get("spec") or {}).get("database") or {}).get("cnpgClusterRef") or {}).get("name")
            if ref == name:
                passes.request(namespace, index["metadata"]["name"], "child")

    # SearchWorkspaces (tenants as code): their own handlers, on the same client and leader.
    register_workspaces(registry, passes, namespaces)
    return passes
