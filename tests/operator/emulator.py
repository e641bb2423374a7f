"""kmock's Kubernetes emulator with the API server behaviour kopf and the operator rely on.

kmock stores objects and serves watches, but sets no uid, resourceVersion, generation or
creationTimestamp, ignores generateName, and answers a failed JSON-patch `test` with 500 instead of 422. This subclass
fills those in and nothing more; it also records every write, so tests can say "nothing was
written" after an operator restart.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from datetime import UTC, datetime

import kmock

GROUP, VERSION, PLURAL = "search.backscroll.dev", "v1alpha1", "searchindexes"
WRITES = (kmock.action.CREATE, kmock.action.UPDATE, kmock.action.DELETE)


class Emulator(kmock.KubernetesEmulator):
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._versions = itertools.count(1)
        self.writes: list[tuple[str, str, str | None, str]] = []  # (action, plural, name, subresource)
        self.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = kmock.ResourceInfo(
            kind="SearchIndex", singular="searchindex", namespaced=True, subresources={"status"},
            verbs={"get", "list", "watch", "create", "patch", "delete"})
        for key, kind in (("apps/v1/deployments", "Deployment"), ("batch/v1/jobs", "Job"),
                          ("v1/services", "Service"), ("v1/secrets", "Secret"), ("v1/events", "Event")):
            self.resources[key] = kmock.ResourceInfo(kind=kind, namespaced=True, subresources={"status"},
                                                     verbs={"get", "list", "watch", "create", "patch", "delete"})
        # kopf waits for these two to be discoverable before it watches anything.
        for key, kind in (("v1/namespaces", "Namespace"),
                          ("apiextensions.k8s.io/v1/customresourcedefinitions", "CustomResourceDefinition")):
            self.resources[key] = kmock.ResourceInfo(kind=kind, namespaced=False, verbs={"get", "list", "watch"})

    def _current(self, request) -> dict | None:
        key = (request.resource, request.namespace, request.name)
        if key in self.objects and not self.objects[key].deleted:
            return self.objects[key].raw
        return None

    async def _handle(self, request):
        if request.resource is not None and request.action in WRITES:
            self.writes.append((request.action.value, request.resource.plural, request.name,
                                getattr(request, "subresource", None) or ""))
        if request.resource is not None and request.action == kmock.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):  # kopf names its Events so
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            meta["resourceVersion"] = str(next(self._versions))
            meta["generation"] = 1
        elif request.resource is not None and request.action == kmock.action.UPDATE and request.name:
            current = self._current(request)
            if current is not None:
                meta = current.get("metadata", {})
                version = str(next(self._versions))
                if isinstance(request.data, list):  # JSON patch: its `test` ops are the optimistic lock
                    for op in request.data:
                        if op.get("op") == "test" and op.get("path") == "/metadata/resourceVersion" \
                                and op.get("value") != meta.get("resourceVersion"):
                            return await self._render_error(kmock.KubernetesError(
                                status=422, reason="Invalid", message="the resourceVersion test failed"))
                    request.data.append({"op": "replace", "path": "/metadata/resourceVersion", "value": version})
                elif isinstance(request.data, dict):
                    patch_meta = request.data.setdefault("metadata", {}) or {}
                    request.data["metadata"] = patch_meta
                    patch_meta["resourceVersion"] = version
                    # The API server counts spec changes only, and never through /status.
                    if "spec" in request.data and request.data["spec"] != current.get("spec") \
                            and not getattr(request, "subresource", None):
                        patch_meta["generation"] = (meta.get("generation") or 0) + 1
        return await super()._handle(request)


class Cluster:
    """The emulator on its own thread and event loop, so that sync tests (and KopfRunner, which
    runs the operator on a third thread) can reach it over HTTP while they block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self.emulator: Emulator | None = None
        self.url: str = ""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with Emulator() as emulator, kmock.Server(emulator) as server:
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._started.set()
            await self._stop.wait()

    def __enter__(self) -> Cluster:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the Kubernetes emulator did not start")
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
