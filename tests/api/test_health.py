"""The probes' verdicts: liveness without the database, readiness only on a reachable database
that has every migration this build ships. Their bodies stay fixed (test_auth.py)."""

from __future__ import annotations

from backscroll.api import health
from tests.world import client

UNAVAILABLE = {"status": "unavailable"}


def test_ready_on_a_migrated_database(db_url):
    with client(db_url) as http:
        r = http.get("/readyz")
    assert (r.status_code, r.json()) == (200, {"status": "ok"})


def test_not_ready_while_a_migration_of_this_build_is_missing(db_url, monkeypatch):
    # As when a new image rolls out before its migration Job has finished.
    newer = health.required_versions() | {max(health.required_versions()) + 1}
    monkeypatch.setattr(health, "required_versions", lambda: newer)
    with client(db_url) as http:
        r = http.get("/readyz")
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)


def test_lost_database_fails_readiness_but_not_liveness(db_url):
    with client(db_url) as http:
        http.app.state.service.pool.close()
        ready, live = http.get("/readyz"), http.get("/healthz")
    assert (ready.status_code, ready.json()) == (503, UNAVAILABLE)
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
