"""The admin API (issue 32, item 3): workspaces and tokens over HTTP, on a real database.

An installation-wide admin token (no workspace) acts on every workspace; a workspace-scoped one on
its own alone, and another workspace or a token of one is answered exactly as one that does not
exist. Tokens made here work at once and stop at once when revoked; every action leaves an
admin_audit row that holds no secret.
"""

from __future__ import annotations

import logging

from tests.api.support import assert_error, conversation_body
from tests.world import bearer, client


def _audit(world) -> list[dict]:
    return world.conn.execute("select * from admin_audit order by id").fetchall()


def _make(http, admin: str, **body) -> dict:
    r = http.post("/v1/admin/tokens", headers=bearer(admin), json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_workspaces_are_created_listed_and_read(db_url, world):
    admin = world.token("admin")
    with client(db_url) as http:
        r = http.post("/v1/admin/workspaces", headers=bearer(admin),
                      json={"slug": "beta", "name": "Beta Ltd", "text_search_config": "english"})
        assert r.status_code == 201, r.text
        created = r.json()
        assert {k: created[k] for k in ("slug", "name", "text_search_config", "retired_at", "agents",
                                        "conversations")} == {
            "slug": "beta", "name": "Beta Ltd", "text_search_config": "english", "retired_at": None,
            "agents": 0, "conversations": 0}
        # The slug is taken: 409, and the existing workspace is unchanged (no rename over HTTP).
        r = http.post("/v1/admin/workspaces", headers=bearer(admin), json={"slug": "beta", "name": "Other"})
        assert "exists already" in assert_error(r, 409, "workspace_exists")["message"]
        r = http.post("/v1/admin/workspaces", headers=bearer(admin), json={"slug": "gamma"})
        assert r.status_code == 201 and r.json()["name"] == "gamma", r.text
        assert r.json()["text_search_config"] == "multilingual"  # BACKSCROLL_TEXT_SEARCH_CONFIG's default
        r = http.get("/v1/admin/workspaces", headers=bearer(admin))
        assert r.status_code == 200, r.text
        assert [w["slug"] for w in r.json()["workspaces"]] == ["beta", "gamma"] and r.json()["next"] is None
        r = http.get("/v1/admin/workspaces/beta", headers=bearer(admin))
        assert r.status_code == 200 and r.json() == created, r.text
        assert "no workspace 'nope'" in assert_error(http.get("/v1/admin/workspaces/nope", headers=bearer(admin)),
                                                     404, "not_found")["message"]
        # Pages by slug: limit clamped (0 reads as 1), `next` leads on.
        r = http.get("/v1/admin/workspaces?limit=0", headers=bearer(admin))
        assert [w["slug"] for w in r.json()["workspaces"]] == ["beta"] and r.json()["next"] == "beta"
        r = http.get("/v1/admin/workspaces?limit=1&after=beta", headers=bearer(admin))
        assert [w["slug"] for w in r.json()["workspaces"]] == ["gamma"] and r.json()["next"] is None
        assert http.get("/v1/admin/workspaces?limit=1000000", headers=bearer(admin)).status_code == 200


def test_bad_workspace_input_is_400_and_writes_nothing(db_url, world):
    admin = world.token("admin")
    with client(db_url) as http:
        for body in ({"slug": "Not A Slug"}, {"slug": "x" * 64}, {}, {"slug": "ok", "extra": 1},
                     {"slug": "ok", "name": ""}, {"slug": "ok", "text_search_config": "no such; drop"}):
            assert_error(http.post("/v1/admin/workspaces", headers=bearer(admin), json=body), 400, "invalid_request")
        r = http.post("/v1/admin/workspaces", headers=bearer(admin), json={"slug": "ok", "text_search_config": "klingon"})
        assert "this server has" in assert_error(r, 400, "invalid_text_search_config")["message"]
        assert_error(http.get("/v1/admin/workspaces/BAD%20SLUG", headers=bearer(admin)), 400, "invalid_request")
        assert_error(http.get("/v1/admin/tokens?after=-1", headers=bearer(admin)), 400, "invalid_request")
        assert_error(http.get("/v1/admin/workspaces?after=%00", headers=bearer(admin)), 400, "invalid_request")
        r = http.post("/v1/admin/tokens", headers=bearer(admin), json={"kind": "ingest", "workspace": "ok",
                                                                      "name": "a\u0000b"})
        assert_error(r, 400, "invalid_request")
        assert_error(http.post("/v1/admin/tokens/abc/revoke", headers=bearer(admin)), 400, "invalid_request")
    assert world.conn.execute("select count(*) as n from workspaces where slug = 'ok'").fetchone()["n"] == 0


def test_a_workspace_admin_sees_and_acts_on_its_own_workspace_alone(db_url, world):
    acme_conv = world.conversation("acme", "concierge", "t1", "Rose Room", creator="alice")
    beta_conv = world.conversation("beta", "concierge", "t1", "Blue Room", creator="bob")
    beta_turn = world.turn("beta", "concierge", beta_conv)
    acme_turn = world.turn("acme", "concierge", acme_conv)
    scoped = world.token("admin", "acme")
    with client(db_url) as http:
        r = http.get("/v1/admin/workspaces", headers=bearer(scoped))
        assert [w["slug"] for w in r.json()["workspaces"]] == ["acme"], r.text
        assert http.get("/v1/admin/workspaces/acme", headers=bearer(scoped)).status_code == 200
        # Another workspace reads as one that does not exist: the same status, code and words.
        other = assert_error(http.get("/v1/admin/workspaces/beta", headers=bearer(scoped)), 404, "not_found")
        missing = assert_error(http.get("/v1/admin/workspaces/nope", headers=bearer(scoped)), 404, "not_found")
        assert other["message"].replace("beta", "nope") == missing["message"]
        other = assert_error(http.get("/v1/workspaces/beta/search-settings", headers=bearer(scoped)), 404)
        missing = assert_error(http.get("/v1/workspaces/nope/search-settings", headers=bearer(scoped)), 404)
        assert other["message"].replace("beta", "nope") == missing["message"]
        r = http.put("/v1/workspaces/beta/search-settings", headers=bearer(scoped), json={"text_search_config": "english"})
        assert_error(r, 404, "not_found")
        assert http.get("/v1/workspaces/acme/search-settings", headers=bearer(scoped)).status_code == 200
        assert_error(http.get(f"/v1/turns/{beta_turn}/trace", headers=bearer(scoped)), 404, "not_found")
        assert http.get(f"/v1/turns/{acme_turn}/trace", headers=bearer(scoped)).status_code == 200
        # The installation's routes and its workspaces' lifecycle are an installation-wide admin's.
        for method, path, body in [("GET", "/metrics", None), ("GET", "/v1/status", None),
                                   ("POST", "/v1/admin/workspaces", {"slug": "delta"}),
                                   ("DELETE", "/v1/admin/workspaces/acme", None),
                                   ("DELETE", "/v1/admin/workspaces/beta", None)]:
            error = assert_error(http.request(method, path, headers=bearer(scoped), json=body), 403, "forbidden")
            assert "installation-wide admin" in error["message"], (path, error)
        # An admin token it makes is refused: only an installation-wide admin mints admin tokens.
        r = http.post("/v1/admin/tokens", headers=bearer(scoped), json={"kind": "admin"})
        assert "installation-wide" in assert_error(r, 403, "forbidden")["message"]
    beta = world.conn.execute("select name, ts_config_next, exists (select from workspace_retirements r "
                              "where r.workspace_id = w.id) as retired from workspaces w where slug = 'beta'")
    assert beta.fetchone() == {"name": "Beta", "ts_config_next": None, "retired": False}


def test_a_workspace_admin_lists_and_revokes_its_workspace_tokens_alone(db_url, world):
    world.workspace("beta")
    admin = world.token("admin")
    scoped = world.token("admin", "acme")
    with client(db_url) as http:
        acme_ingest = _make(http, admin, kind="ingest", workspace="acme", name="connector")
        beta_ingest = _make(http, admin, kind="ingest", workspace="beta")
        # A scoped admin makes tokens for its own workspace (named or left out), never another's.
        own = _make(http, scoped, kind="runtime")
        assert own["workspace"] == "acme"
        r = http.post("/v1/admin/tokens", headers=bearer(scoped), json={"kind": "ingest", "workspace": "beta"})
        other = assert_error(r, 404, "not_found")
        r = http.post("/v1/admin/tokens", headers=bearer(scoped), json={"kind": "ingest", "workspace": "nope"})
        assert other["message"].replace("beta", "nope") == assert_error(r, 404, "not_found")["message"]

        listed = http.get("/v1/admin/tokens", headers=bearer(scoped)).json()["tokens"]
        assert {t["workspace"] for t in listed} == {"acme"}
        assert {acme_ingest["id"], own["id"]} <= {t["id"] for t in listed}
        assert beta_ingest["id"] not in {t["id"] for t in listed}
        everything = http.get("/v1/admin/tokens", headers=bearer(admin)).json()["tokens"]
        assert {beta_ingest["id"], acme_ingest["id"]} <= {t["id"] for t in everything}
        assert None in {t["workspace"] for t in everything}  # the installation-wide admin itself

        # Another workspace's token is answered as a token that does not exist, and stays live.
        other = assert_error(http.post(f"/v1/admin/tokens/{beta_ingest['id']}/revoke", headers=bearer(scoped)),
                             404, "not_found")
        missing = assert_error(http.post("/v1/admin/tokens/999999/revoke", headers=bearer(scoped)), 404, "not_found")
        assert other["message"].replace(str(beta_ingest["id"]), "999999") == missing["message"]
        assert http.get("/v1/whoami", headers=bearer(beta_ingest["secret"])).status_code == 200

        # Its own workspace's token: revoked, at once; again: the same revoked_at, revoked_now false.
        r = http.post(f"/v1/admin/tokens/{acme_ingest['id']}/revoke", headers=bearer(scoped))
        assert r.status_code == 200 and r.json()["revoked_now"] is True, r.text
        again = http.post(f"/v1/admin/tokens/{acme_ingest['id']}/revoke", headers=bearer(scoped))
        assert again.json() == {**r.json(), "revoked_now": False}
        assert_error(http.get("/v1/whoami", headers=bearer(acme_ingest["secret"])), 401, "unauthenticated")
        # The installation-wide admin reaches any workspace's token.
        r = http.post(f"/v1/admin/tokens/{beta_ingest['id']}/revoke", headers=bearer(admin))
        assert r.status_code == 200 and r.json()["revoked_now"] is True
        assert_error(http.get("/v1/whoami", headers=bearer(beta_ingest["secret"])), 401, "unauthenticated")


def test_tokens_made_over_http_work_at_once(db_url, world):
    world.conversation("acme", "concierge", "seed", "Seed", creator="alice")
    world.conversation("acme", "support", "seed", "Support seed", creator="carol")
    admin = world.token("admin")
    with client(db_url) as http:
        ingest = _make(http, admin, kind="ingest", workspace="acme")
        assert ingest["secret"].startswith("bks_ingest_") and ingest["hint"] == ingest["secret"][:len(ingest["hint"])]
        r = http.post("/v1/conversations", headers=bearer(ingest["secret"]),
                      json=conversation_body("thread-9", "Rose Room booking"))
        assert r.status_code == 201, r.text
        reader = _make(http, admin, kind="reader", workspace="acme", actor="web:demo/alice",
                       display_name="Alice", agents=["concierge"])
        assert (reader["actor"], reader["agents"]) == ("web:demo/alice", ["concierge"])
        r = http.get("/v1/agent-sessions", headers=bearer(reader["secret"]))
        assert r.status_code == 200, r.text
        assert "Rose Room booking" in {s["title"] for s in r.json()["sessions"]}
        assert "Support seed" not in {s["title"] for s in r.json()["sessions"]}
        runtime = _make(http, admin, kind="runtime", workspace="acme")
        assert runtime["agents"] is None
        assert http.get("/v1/whoami", headers=bearer(runtime["secret"])).json()["agent_ids"] == "all"
        # A workspace-scoped admin token made by the installation-wide admin acts as one at once.
        scoped = _make(http, admin, kind="admin", workspace="acme")
        r = http.get("/v1/admin/workspaces", headers=bearer(scoped["secret"]))
        assert [w["slug"] for w in r.json()["workspaces"]] == ["acme"]
        # Revoked over HTTP: 401 on the next request.
        http.post(f"/v1/admin/tokens/{reader['id']}/revoke", headers=bearer(admin))
        assert_error(http.get("/v1/agent-sessions", headers=bearer(reader["secret"])), 401, "unauthenticated")
        # Listing shows metadata and never a secret; last_used_at is stamped by use.
        r = http.get("/v1/admin/tokens", headers=bearer(admin))
        for made in (ingest, reader, runtime, scoped):
            assert made["secret"] not in r.text
        listed = {t["id"]: t for t in r.json()["tokens"]}
        assert listed[ingest["id"]]["last_used_at"] is not None
        assert listed[reader["id"]]["revoked_at"] is not None
        assert "secret" not in listed[ingest["id"]] and "digest" not in listed[ingest["id"]]
        # Pages by id.
        first = http.get("/v1/admin/tokens?limit=2", headers=bearer(admin)).json()
        rest = http.get(f"/v1/admin/tokens?after={first['next']}", headers=bearer(admin)).json()
        assert [t["id"] for t in first["tokens"] + rest["tokens"]] == sorted(listed)


def test_bad_token_requests_are_400_and_make_nothing(db_url, world):
    world.conversation("acme", "concierge", "seed", "Seed", creator="alice")
    admin = world.token("admin")
    before = world.conn.execute("select count(*) as n from api_tokens").fetchone()["n"]
    with client(db_url) as http:
        cases = [({"kind": "status"}, "invalid_request"),
                 ({"kind": "ingest", "workspace": "acme", "extra": 1}, "invalid_request"),
                 ({"kind": "reader", "workspace": "acme", "actor": "alice"}, "invalid_request"),
                 ({"kind": "reader", "workspace": "acme"}, "invalid_actor"),
                 ({"kind": "ingest", "workspace": "acme", "agents": ["concierge"]}, "invalid_token_request"),
                 ({"kind": "ingest", "workspace": "acme", "actor": "web:demo/alice"}, "invalid_token_request"),
                 ({"kind": "runtime", "workspace": "acme", "agents": []}, "invalid_request"),
                 ({"kind": "runtime", "workspace": "acme", "agents": ["concierge", "ghost"]}, "unknown_agent"),
                 ({"kind": "ingest"}, "invalid_token_request"),  # an installation-wide admin names the workspace
                 ({"kind": "admin"}, "invalid_token_request"),   # no installation-wide admin token over HTTP
                 ({"kind": "ingest", "workspace": "acme", "name": "x" * 201}, "invalid_request")]
        for body, code in cases:
            error = assert_error(http.post("/v1/admin/tokens", headers=bearer(admin), json=body), 400, code)
            assert "ghost" in error["message"] if code == "unknown_agent" else True
    assert world.conn.execute("select count(*) as n from api_tokens").fetchone()["n"] == before


def test_retiring_a_workspace_revokes_its_tokens_and_keeps_its_data(db_url, world):
    conv = world.conversation("acme", "concierge", "t1", "Rose Room", creator="alice")
    world.message("acme", conv, "The Rose Room is booked")
    admin = world.token("admin")
    acme_tokens = [world.token("ingest", "acme"), world.token("reader", "acme", actor="alice"),
                   world.token("admin", "acme")]
    beta = world.token("ingest", "beta")
    with client(db_url) as http:
        r = http.delete("/v1/admin/workspaces/acme", headers=bearer(admin))
        assert r.status_code == 200, r.text
        retired = r.json()
        assert retired["data"] == "retained" and len(retired["revoked_token_ids"]) == 3
        assert retired["workspace"]["retired_at"] is not None and retired["workspace"]["conversations"] == 1
        for token in acme_tokens:
            assert_error(http.get("/v1/whoami", headers=bearer(token)), 401, "unauthenticated")
        assert http.get("/v1/whoami", headers=bearer(beta)).status_code == 200
        again = http.delete("/v1/admin/workspaces/acme", headers=bearer(admin)).json()
        assert again["revoked_token_ids"] == [] and again["workspace"] == retired["workspace"]
        r = http.post("/v1/admin/tokens", headers=bearer(admin), json={"kind": "ingest", "workspace": "acme"})
        assert_error(r, 409, "workspace_retired")
        assert_error(http.post("/v1/admin/workspaces", headers=bearer(admin), json={"slug": "acme"}), 409)
        assert_error(http.delete("/v1/admin/workspaces/nope", headers=bearer(admin)), 404, "not_found")
    kept = world.conn.execute("select count(*) as n from messages m join conversations c on c.id = m.conversation_id "
                              "where c.workspace_id = %s", (world.workspace("acme"),)).fetchone()["n"]
    assert kept == 1


def test_every_admin_action_writes_an_audit_row_without_a_secret(db_url, world, caplog):
    admin = world.token("admin")
    scoped = world.token("admin", "acme")
    world.workspace("beta")
    caplog.set_level(logging.DEBUG)
    with client(db_url) as http:
        http.post("/v1/admin/workspaces", headers=bearer(admin), json={"slug": "gamma"})
        http.post("/v1/admin/workspaces", headers=bearer(admin), json={"slug": "gamma"})  # 409
        made = _make(http, admin, kind="ingest", workspace="gamma")
        made_scoped = _make(http, scoped, kind="runtime")
        http.get("/v1/admin/tokens", headers=bearer(scoped))
        http.post(f"/v1/admin/tokens/{made['id']}/revoke", headers=bearer(scoped))  # another workspace's: 404
        http.post(f"/v1/admin/tokens/{made['id']}/revoke", headers=bearer(admin))
        http.get("/v1/admin/workspaces/beta", headers=bearer(scoped))  # 404
        http.put("/v1/workspaces/acme/search-settings", headers=bearer(scoped), json={"text_search_config": "english"})
        http.delete("/v1/admin/workspaces/gamma", headers=bearer(admin))
    ids = {"admin": world.conn.execute("select id from api_tokens where workspace_id is null and kind = 'admin'")
           .fetchone()["id"]}
    acme = world.workspace("acme")
    rows = [(r["action"], r["target_workspace"], r["target_token_id"], r["outcome"], r["token_workspace_id"])
            for r in _audit(world)]
    assert rows == [
        ("workspace.create", "gamma", None, "ok", None),
        ("workspace.create", "gamma", None, "workspace_exists", None),
        ("token.create.ingest", "gamma", made["id"], "ok", None),
        ("token.create.runtime", "acme", made_scoped["id"], "ok", acme),
        ("token.list", None, None, "ok", acme),
        ("token.revoke", None, made["id"], "not_found", acme),
        ("token.revoke", None, made["id"], "ok", None),
        ("workspace.get", "beta", None, "not_found", acme),
        ("workspace.search_settings", "acme", None, "ok", acme),
        ("workspace.retire", "gamma", None, "ok", None),
    ]
    assert _audit(world)[0]["token_id"] == ids["admin"]
    text = repr(_audit(world))
    for secret in (made["secret"], made_scoped["secret"], admin, scoped):
        assert secret not in text
        assert secret not in caplog.text  # never logged
    # A failed action left its audit row and nothing else: no second gamma, the 404 revoked nothing.
    assert world.conn.execute("select count(*) as n from workspaces where slug = 'gamma'").fetchone()["n"] == 1
