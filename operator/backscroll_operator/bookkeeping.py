"""kopf's bookkeeping, kept by each replica for itself.

kopf decides whether a change is new by comparing the object with the last state it handled (its
diff base), and it tracks its handlers' retries (progress). Kept in annotations, both are shared by
every replica: two replicas that see the same object differently then overwrite each other's
state without end. They do during every upgrade whose CRD grew a defaulted field: the old
operator's watch still serves the object from the API server's storage for the old schema (until
the server tears it down, up to twice its request timeout), without the field, while the new
operator's watch serves it with the default filled in; each replica found a change in what the
other wrote, handled it and wrote its own view back, dozens of writes a second.

Kept in memory, each replica compares the object with what it handled itself. Nothing is lost on
a restart that matters here: a replica that starts sees every object as created, and its handler
is the same reconcile pass whatever kopf calls the cause. Only the retry wake-up (a "touch"
annotation after a handler's delay) is still written, under the operator's group, which kopf marks
as its own so that no replica counts it as a change.
"""

from __future__ import annotations

import copy
import threading

import kopf

from .names import GROUP


class ReplicaDiffBase(kopf.AnnotationsDiffBaseStorage):
    """The last state this replica handled, per object uid. The annotation of earlier releases
    (`<group>/last-handled`) is left out of the comparison, as before, and never written."""

    def __init__(self) -> None:
        super().__init__(prefix=GROUP, key="last-handled")
        self._handled: dict[str, object] = {}
        self._lock = threading.Lock()

    def fetch(self, *, body):
        with self._lock:
            return copy.deepcopy(self._handled.get(body.metadata.uid))

    def store(self, *, body, patch, essence) -> None:
        with self._lock:
            self._handled[body.metadata.uid] = copy.deepcopy(essence)


class ReplicaProgress(kopf.AnnotationsProgressStorage):
    """Handler progress (retries, delays) per object uid and handler id; `touch` stays kopf's
    annotation, which is how a delayed retry gets a new event."""

    def __init__(self) -> None:
        super().__init__(prefix=GROUP)
        self._records: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()

    def fetch(self, *, key, body):
        with self._lock:
            record = self._records.get((body.metadata.uid, key))
        return dict(record) if record is not None else None

    def store(self, *, key, record, body, patch) -> None:
        with self._lock:
            self._records[body.metadata.uid, key] = dict(record)

    def purge(self, *, key, body, patch) -> None:
        with self._lock:
            self._records.pop((body.metadata.uid, key), None)
