"""The API image, run with podman: it migrates an empty database, serves /healthz, takes a
conversation over HTTP and finds it again (issue 30: images that exist and run)."""

from __future__ import annotations

import urllib.parse

import psycopg

from tests.images.support import ROOT, free_port, http, tcp_url, wait_http

# As the operator runs it (builders: restricted Pod Security, read-only root, /tmp an emptyDir).
LOCKED_DOWN = ("--read-only", "--tmpfs", "/tmp:rw,mode=1777", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges")


def test_the_api_image_migrates_serves_and_answers_a_search(images, podman, empty_db_url, pg_doors):
    url = tcp_url(empty_db_url, pg_doors)
    db = ("--env", f"BACKSCROLL_DATABASE_URL={url}")

    migrated = podman.run(images.api, "migrate", options=(*LOCKED_DOWN, *db))
    assert migrated.returncode == 0
    with psycopg.connect(empty_db_url) as conn:
        applied = conn.execute("select count(*) from backscroll_migrations").fetchone()[0]
    assert applied == len(list((ROOT / "sql").glob("*.sql"))), migrated.stderr
    again = podman.run(images.api, "migrate", options=(*LOCKED_DOWN, *db))
    assert again.returncode == 0, "migrate is idempotent"

    port = free_port()
    api = podman.start(images.api, "serve", options=(
        *LOCKED_DOWN, *db, "--env", "BACKSCROLL_HOST=127.0.0.1", "--env", f"BACKSCROLL_PORT={port}",
        "--env", "BACKSCROLL_API_WORKERS=1"))
    base = f"http://127.0.0.1:{port}"
    status, body = wait_http(f"{base}/healthz", why=lambda: podman.logs(api))
    assert status == 200, body
    assert wait_http(f"{base}/readyz", why=lambda: podman.logs(api))[0] == 200

    # Tokens by the image's own CLI, the data over the container's HTTP port.
    def cli(*args: str) -> str:
        return podman.run(images.api, *args, options=(*LOCKED_DOWN, *db)).stdout.strip().splitlines()[-1]

    cli("workspaces", "create", "imagecheck")
    ingest = cli("tokens", "create", "--kind", "ingest", "--workspace", "imagecheck", "--name", "image-ingest")
    reader = cli("tokens", "create", "--kind", "reader", "--workspace", "imagecheck",
                 "--actor", "web:imagecheck/alice", "--agents", "all", "--name", "image-reader")
    status, created = http("POST", f"{base}/v1/conversations", ingest, {
        "agent": "concierge", "connector": {"type": "web", "name": "imagecheck"}, "external_id": "img-1",
        "title": "Container check", "creator": {"external_id": "alice"}})
    assert status == 201, created
    conversation = created["id"]
    status, message = http("POST", f"{base}/v1/conversations/{conversation}/messages", ingest, {
        "role": "user", "speaker": {"external_id": "alice"}, "body": "the marmalade shipment arrives on Tuesday"})
    assert status == 201, message

    status, found = http("GET", f"{base}/v1/agent-sessions?" + urllib.parse.urlencode({"q": "marmalade"}), reader)
    assert status == 200, found
    assert [s["id"] for s in found["sessions"]] == [conversation]
    assert found["sessions"][0]["match"]["on"] == ["content"]
    assert found["mode"] == "lexical"
    status, nothing = http("GET", f"{base}/v1/agent-sessions?q=marmalade", None)
    assert status == 401, nothing
