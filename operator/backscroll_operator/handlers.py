"""The kopf handlers: thin, everything they decide is in spec, builders, reconcile and status.

Create, update and resume (the operator started with the SearchIndex already there) run one
reconcile pass; a timer runs the same pass every `interval_s`, which is what advances the Jobs
(the backfill starts once the migration succeeded) and refreshes mode and coverage. Passes for
one SearchIndex never overlap: the timer and a change handler take the same lock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from datetime import UTC, datetime

import kopf

from . import status as derive
from .config import OperatorConfig
from .kube import Kube, NoCredentials, bearer, configuration
from .names import GROUP, PLURAL, VERSION, Owner
from .reconcile import Blocked, converge
from .spec import SpecError, parse

RESOURCE = (GROUP, VERSION, PLURAL)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain(value) -> dict:
    return json.loads(json.dumps(value or {}))


def _publish(body, patch, old: dict, new: dict) -> None:
    # An unchanged status is not written: every write would wake every watcher of SearchIndexes.
    if any(old.get(key) != value for key, value in new.items()):
        patch.status.update(new)
    for type_, reason, message in derive.transitions(old, new):
        kopf.event(body, type=type_, reason=reason, message=message)


def _registered(old: dict) -> dict[str, int]:
    return {m["model"]: m["dimensions"] for m in old.get("models") or [] if "dimensions" in m}


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> None:
    locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def reconcile(body, patch, memo, final: bool) -> None:
        """One pass. `final`: a change handler, whose errors kopf should see (a permanent one
        stops retries; a temporary one retries after retry_delay_s). The timer's are recorded
        in the status only: it comes back by itself."""
        owner = Owner.from_body(body)
        old = _plain(body.get("status"))
        generation = body["metadata"].get("generation")
        with locks[owner.uid]:
            try:
                spec = parse(_plain(body.get("spec")), registered=_registered(old))
                facts = converge(memo.kube, owner, spec, config)
            except SpecError as exc:
                _publish(body, patch, old, derive.failed(old, generation, "InvalidSpec", str(exc), _now()))
                if final:
                    raise kopf.PermanentError(f"invalid spec: {exc}") from None
                return
            except Blocked as exc:
                _publish(body, patch, old, derive.failed(old, generation, exc.reason, str(exc), _now()))
                if final:
                    raise kopf.TemporaryError(str(exc), delay=config.retry_delay_s) from None
                return
            _publish(body, patch, old, derive.derive(spec, facts, generation, old, _now()))

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
    def startup(settings: kopf.OperatorSettings, memo, **_):
        # kopf's bookkeeping goes in annotations under the operator's own group, so the status
        # holds only what a platform team reads.
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP, key="last-handled")
        settings.persistence.finalizer = f"{GROUP}/finalizer"
        # kopf turns its own warnings (retries, failures) into Events too; info-level chatter not.
        settings.posting.level = logging.WARNING
        settings.posting.reporting_component = "backscroll-operator"
        # On shutdown, let a pass that is half-way through its writes finish rather than abandon it
        # (kopf cannot cancel a sync handler); an idle timer exits at once anyway.
        settings.background.instant_exit_timeout = config.status_timeout_s + 5
        # httpx logs every request at INFO: the timer alone would drown the operator's own log.
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
        # Never closed: a timer pass still running in its thread at shutdown may be using it,
        # and the process exits right after.
        try:
            memo.kube = Kube()
        except NoCredentials as exc:
            raise kopf.PermanentError(str(exc)) from None

    # Explicit ids: kopf names handlers in its annotations, logs and Events by them.
    @kopf.on.resume(*RESOURCE, id="reconcile", registry=registry)
    @kopf.on.create(*RESOURCE, id="reconcile", registry=registry)
    @kopf.on.update(*RESOURCE, id="reconcile", field="spec", registry=registry)
    def changed(body, patch, memo, **_):
        reconcile(body, patch, memo, final=True)

    @kopf.timer(*RESOURCE, id="refresh", interval=config.interval_s, initial_delay=config.interval_s,
                registry=registry)
    def tick(body, patch, memo, **_):
        ready = next((c for c in (body.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        if ready.get("reason") == "InvalidSpec" and \
                (body.get("status") or {}).get("observedGeneration") == body["metadata"].get("generation"):
            return  # refused already, with an Event; a new generation gets a new look
        reconcile(body, patch, memo, final=False)
