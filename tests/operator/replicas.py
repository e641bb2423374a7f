"""Operator replicas for the HA and metrics tests: the real operator (kopf, a fresh registry,
`handlers.register`) on a thread and event loop of its own, so that two can run side by side
against one emulator and either can be stopped (its cleanup runs, as on SIGTERM)."""

from __future__ import annotations

import asyncio
import threading

import kopf

from backscroll_operator.config import OperatorConfig
from backscroll_operator.handlers import Passes, register

from .conftest import NS


class Replica:
    def __init__(self, config: OperatorConfig):
        self.config = config
        self.registry = kopf.OperatorRegistry()
        self.passes: Passes = register(self.registry, config)
        self.settings = kopf.OperatorSettings()
        self.settings.watching.server_timeout = 10
        self.settings.scanning.disabled = True  # as in conftest's `operator`
        self.settings.queueing.idle_timeout = 0.5
        self.settings.queueing.exit_timeout = 1
        self.settings.posting.idle_timeout = 0.2
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"replica-{config.identity}", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(kopf.operator(registry=self.registry, settings=self.settings, standalone=True,
                                      namespaces=[NS], stop_flag=self.stop_flag))
        except BaseException as exc:  # noqa: BLE001 (reported by stop())
            self.error = exc

    def start(self) -> Replica:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the replica did not stop"
        assert self.error is None, repr(self.error)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.passes.server.port}"


class Replicas:
    """`with Replicas(status_server) as start:` then `start(identity, **settings)` starts one;
    every one still running is stopped on the way out."""

    def __init__(self, status_server):
        self.started: list[Replica] = []
        self.defaults = dict(interval_s=0.3, retry_delay_s=0.5, status_timeout_s=2, lease_duration_s=3,
                             lease_renew_s=0.3, status_url=status_server.url + "/{namespace}/{name}/v1/status")

    def __enter__(self):
        return self.start

    def start(self, identity: str, **overrides) -> Replica:
        replica = Replica(OperatorConfig(**{**self.defaults, "identity": identity, **overrides})).start()
        self.started.append(replica)
        return replica

    def __exit__(self, *exc) -> None:
        for replica in self.started:
            replica.stop_flag.set()
        for replica in self.started:
            replica.thread.join(30)
