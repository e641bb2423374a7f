"""Every answer says: store nothing on the way, and do not guess the content type (issue 20)."""

from __future__ import annotations

from tests.world import bearer

WS = "acme"


def _protected(r) -> None:
    assert r.headers.get("cache-control") == "no-store", (r.request.url, r.status_code, dict(r.headers))
    assert r.headers.get("x-content-type-options") == "nosniff", (r.request.url, r.status_code, dict(r.headers))


def test_searches_transcripts_errors_and_probes_carry_no_store_and_nosniff(world, http):
    conv = world.conversation(WS, "concierge", "c-1", "Planning", creator="U_A")
    world.message(WS, conv, "the kestrelbrook offsite is in May")
    reader = bearer(world.token("reader", WS, actor="U_A", agents=["concierge"]))
    answers = [
        http.get("/v1/agent-sessions", params={"q": "kestrelbrook"}, headers=reader),
        http.get("/v1/agent-sessions", headers=reader),
        http.get(f"/v1/agent-sessions/{conv}/messages", headers=reader),
        http.get("/v1/agent-sessions", headers=bearer("bks_unknown")),  # 401
        http.get("/v1/agent-sessions/999999", headers=reader),  # 404
        http.get("/v1/agent-sessions", params={"limit": "many"}, headers=reader),  # 400
        http.post("/v1/conversations", content=b"x" * (9 * 1024 * 1024), headers=reader),  # 413
        http.get("/healthz"),
        http.get("/"),
    ]
    assert [r.status_code for r in answers] == [200, 200, 200, 401, 404, 400, 413, 200, 200]
    for r in answers[:-1]:
        _protected(r)
    # The sidebar's page holds no data and says how it may be cached itself (revalidated each time).
    page = answers[-1]
    assert page.headers["cache-control"] == "no-cache" and page.headers["x-content-type-options"] == "nosniff"
