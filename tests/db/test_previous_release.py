"""Expand/contract, held by the previous release itself (docs/upgrades.md): the code from before
the newest migration, taken from git, serves and embeds on this checkout's schema while each new
migration runs (its transaction open, its locks held) and after it committed, a restarted pod
included: what a rolling upgrade does, where the old pods keep serving while the migration Job
runs and until the new ones replace them.

"The previous release" is the commit before the one that added the newest migration file (HEAD
while that file is not committed yet): a clean clone has it, no tag or registry is needed. A
shallow clone does not: fetch the history (`git fetch --unshallow`) first.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tarfile
import io
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from backscroll.store.migrate import load_definitions, load_migrations, migrate
from backscroll.store.owner import Owner
from tests.semantic.fakes import FakeEmbeddings
from tests.world import open_world

ROOT = Path(__file__).resolve().parents[2]
MODEL, DIMS = "fake-8", 8
# Longer than the API's statement timeout (5 s): a request blocked on a migration's lock answers
# 503 before the client gives up, and says so.
CLIENT_TIMEOUT_S = 30


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def previous_release() -> str:
    newest = load_migrations()[-1]
    path = f"sql/{newest.version:04d}_{newest.name}.sql"
    added = _git("log", "--diff-filter=A", "--format=%H", "-1", "--", path)
    return _git("rev-parse", f"{added}^" if added else "HEAD")


@pytest.fixture(scope="module")
def old_code(tmp_path_factory) -> Path:
    commit = previous_release()
    folder = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "backscroll", "sql"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def _env(old_code: Path, url: str, fake: FakeEmbeddings, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKSCROLL_")}
    env.update({"PYTHONPATH": str(old_code), "BACKSCROLL_DATABASE_URL": url, "BACKSCROLL_EMBEDDINGS_MODEL": MODEL,
                "BACKSCROLL_EMBEDDINGS_URL": fake.url, "BACKSCROLL_EMBEDDINGS_DIMENSIONS": str(DIMS),
                "BACKSCROLL_SCHEMA_WAIT_S": "0", "BACKSCROLL_MAINTENANCE_INTERVAL_S": "60", **extra})
    return env


def _old(old_code: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "backscroll.cli", *args], env=env, cwd=old_code,
                          capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OldApi:
    def __init__(self, old_code: Path, env: dict):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "backscroll.cli", "serve", "--workers", "1", "--host", "127.0.0.1",
             "--port", str(self.port)], env=env, cwd=old_code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def wait_ready(self) -> OldApi:
        deadline = time.monotonic() + 120  # a busy machine starts an interpreter slowly: wait, do not time it
        while True:
            try:
                if httpx.get(f"{self.base}/readyz", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, self.proc.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the previous release's API did not become ready"
            time.sleep(0.3)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _search(api: OldApi, reader: str, title: str) -> None:
    found = httpx.get(f"{api.base}/v1/agent-sessions", params={"q": "rose room"}, timeout=CLIENT_TIMEOUT_S,
                      headers={"Authorization": f"Bearer {reader}"})
    assert found.status_code == 200, (title, found.text)
    assert title in [s["title"] for s in found.json()["sessions"]], (title, found.json())


def _exercise(api: OldApi, old_code: Path, env: dict, ingest: str, reader: str, fake: FakeEmbeddings,
              moment: str) -> None:
    """What old pods do: ingest, search, embed (the worker, a process of its own). Each must work
    at `moment`."""
    h = {"Authorization": f"Bearer {ingest}"}
    conv = httpx.post(f"{api.base}/v1/conversations", headers=h, timeout=CLIENT_TIMEOUT_S,
                      json={"agent": "concierge", "connector": {"type": "web", "name": "demo"},
                            "external_id": f"thread-{moment}", "title": f"Booking {moment}",
                            "creator": {"external_id": "alice"}})
    assert conv.status_code == 201, (moment, conv.text)
    msg = httpx.post(f"{api.base}/v1/conversations/{conv.json()['id']}/messages", headers=h, timeout=CLIENT_TIMEOUT_S,
                     json={"role": "user", "body": f"move the dinner to the Rose Room ({moment})",
                           "speaker": {"external_id": "alice"}})
    assert msg.status_code == 201, (moment, msg.text)
    _search(api, reader, f"Booking {moment}")
    embedded = len(fake.texts())
    worker = _old(old_code, env, "worker", "--once")
    assert worker.returncode == 0, (moment, worker.stdout, worker.stderr)
    assert any(moment in text for text in fake.texts()[embedded:]), (moment, worker.stderr)


def test_the_previous_release_serves_and_embeds_during_and_after_the_migration(empty_db_url, old_code):
    url = empty_db_url
    fake = FakeEmbeddings(dims=DIMS).start()
    apis: list[OldApi] = []
    try:
        env = _env(old_code, url, fake)
        probe = subprocess.run([sys.executable, "-c", "import backscroll; print(backscroll.__file__)"], env=env,
                               cwd=old_code, capture_output=True, text=True, check=True).stdout
        assert probe.startswith(str(old_code)), probe
        apis.append(OldApi(old_code, env))  # an interpreter starts slowly: beside the migration
        done = _old(old_code, env, "migrate", "--model", MODEL, "--dimensions", str(DIMS))
        assert done.returncode == 0, done.stderr
        with psycopg.connect(url) as conn:
            old_version = conn.execute("select max(version) from backscroll_migrations").fetchone()[0]
        new = [m for m in load_migrations() if m.version > old_version]
        assert new, "the previous release has every migration of this checkout"

        world = open_world(url)
        ingest = world.token("ingest", "acme")
        reader = world.token("reader", "acme", actor="alice")
        world.conn.close()
        api = apis[0].wait_ready()

        for mig in new:
            if not mig.transactional:
                continue  # built concurrently (CREATE INDEX CONCURRENTLY): it holds no lock that blocks
            with psycopg.connect(url) as conn:  # the migration's transaction, open while the old pods work
                conn.execute(mig.sql)
                _exercise(api, old_code, env, ingest, reader, fake, f"during-{mig.version}")
                conn.rollback()
        applied = migrate(url, owner=Owner("uid-of-the-index", "team/search"))
        assert [m.version for m in applied] == [m.version for m in new]
        # A database of the previous release gets every definitions file the first time (it has no
        # ledger of them yet), and its functions are then this checkout's.
        assert [d.name for d in applied.definitions] == [d.name for d in load_definitions()]
        # Rolled back, the previous release's migrate accepts the schema (the new steps are expand-only).
        again = _old(old_code, env, "migrate")
        assert again.returncode == 0, again.stderr
        apis.append(OldApi(old_code, env))  # an old pod (re)started after the migration
        _exercise(api, old_code, env, ingest, reader, fake, "after")
        _search(apis[1].wait_ready(), reader, "Booking after")
    finally:
        for api in apis:
            api.close()
        fake.stop()
