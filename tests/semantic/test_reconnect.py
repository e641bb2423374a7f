"""The worker and the backfill ride out a database outage (issue 20): PostgreSQL's connections are
cut mid-batch and new ones refused for a while, as a restart or a failover does; both reconnect
with backoff and finish, each message embedded once, nothing lost."""

from __future__ import annotations

import threading
import time

import psycopg

from backscroll.embeddings.backfill import run_backfill
from backscroll.embeddings.worker import Worker
from tests.semantic.conftest import FAKE_MODEL, fake_settings
from tests.semantic.test_backfill import corpus, register
from tests.semantic.test_worker import messages
from tests.world import open_world

OUTAGE_S = 1.5


class Outage:
    """Cuts every connection to the test's database and refuses new ones for OUTAGE_S."""

    def __init__(self, pg_url: str, db_url: str):
        self.pg_url = pg_url
        self.dbname = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
        self.happened = threading.Event()
        self.over = threading.Event()

    def cut(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("alter database {} with allow_connections false").format(
                psycopg.sql.Identifier(self.dbname)))
            admin.execute("select pg_terminate_backend(pid) from pg_stat_activity "
                          "where datname = %s and pid <> pg_backend_pid()", (self.dbname,))
        self.happened.set()
        threading.Timer(OUTAGE_S, self.restore).start()

    def restore(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("alter database {} with allow_connections true").format(
                psycopg.sql.Identifier(self.dbname)))
        self.over.set()

    def after_request(self, gateway, n: int) -> None:
        """Cut the database right after the gateway's n-th embedding call answered."""
        embed, calls = gateway.embed_documents, []

        def embed_then_cut(*args, **kwargs):
            vectors = embed(*args, **kwargs)
            calls.append(1)
            if len(calls) == n:
                self.cut()
            return vectors

        gateway.embed_documents = embed_then_cut


def _vectors(db_url: str) -> list[int]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("select message_id from message_embeddings order by 1")]


def test_the_worker_reconnects_after_an_outage_and_embeds_everything_once(pg_url, db_url, world, fake,
                                                                           fake_model, gateway_factory):
    ids = messages(world, "acme", 12)
    settings = fake_settings(db_url, fake, worker={"worker_batch_size": 4, "worker_poll_s": 0.05},
                             database={"database_retry_max_s": 1.0})
    gateway = gateway_factory(settings)
    outage = Outage(pg_url, db_url)
    outage.after_request(gateway, 2)  # mid-batch: vectors in hand, their transaction about to be cut
    stop = threading.Event()
    worker = Worker(settings, db_url, gateway=gateway, stop=stop)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120  # a busy machine is slow; it is not timed
        while time.monotonic() < deadline and not (outage.over.is_set() and _vectors(db_url) == ids):
            assert thread.is_alive(), "the worker exited when the database went away"
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(timeout=60)
        worker.close()
    assert outage.happened.is_set() and worker.stats.reconnects >= 1
    # counted in its metrics too (backscroll_worker_reconnects_total)
    assert worker.metrics.value("backscroll_worker_reconnects_total", {"model": worker.model.model}) \
        == worker.stats.reconnects
    assert _vectors(db_url) == ids  # each message once (the vectors' key is the message and model)
    after = open_world(db_url)
    try:
        assert after.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 0
    finally:
        after.conn.close()


def test_a_backfill_reconnects_after_an_outage_and_finishes(pg_url, db_url, world, fake, gateway_factory):
    made = corpus(world, {"acme": 10, "hotel": 10})
    register(world)
    settings = fake_settings(db_url, fake, database={"database_retry_max_s": 1.0})
    gateway = gateway_factory(settings)
    outage = Outage(pg_url, db_url)
    outage.after_request(gateway, 3)
    result = run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway, batch_size=4, quiet=True)
    assert outage.happened.is_set()
    assert (result.state, result.covered, result.total) == ("finished", 20, 20)
    assert _vectors(db_url) == sorted(made["acme"] + made["hotel"])
