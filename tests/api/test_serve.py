"""`backscroll serve --workers N`: several processes answer on one port, each with its own pools."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from backscroll.cli import available_cpus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _requests_counted(text: str, status: str) -> float:
    """The sum of backscroll_http_requests_total over routes for one status, from /metrics."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("backscroll_http_requests_total{") and f'status="{status}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_serve_runs_the_workers_asked_for(db_url, world, tmp_path):
    admin = world.token("admin")
    port = _free_port()
    env = {**os.environ, "BACKSCROLL_DATABASE_URL": db_url, "BACKSCROLL_MAINTENANCE_INTERVAL_S": "60"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from backscroll.cli import main; raise SystemExit(main())", "serve",
         "--workers", "2", "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # A busy machine may take long to start two interpreters: wait for it, do not time it.
        deadline = time.monotonic() + 180
        while True:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
                if ready.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(0.5)
        answers = [httpx.get(f"http://127.0.0.1:{port}/v1/whoami", timeout=10).status_code for _ in range(20)]
        assert set(answers) == {401}  # every worker authenticates
        workers = [c for c in _children(proc.pid) if Path(f"/proc/{c}/cmdline").read_bytes().find(b"spawn") >= 0]
        assert len(workers) == 2, _children(proc.pid)
        # /metrics adds up every worker's counts, whichever worker answers it.
        for _ in range(6):
            scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {admin}"},
                                timeout=10)
            assert scraped.status_code == 200, scraped.text
            assert _requests_counted(scraped.text, "401") >= 20, scraped.text[:2000]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_available_cpus_is_at_least_one_and_at_most_the_machine():
    assert 1 <= available_cpus() <= (os.cpu_count() or 1)


def test_the_workers_socket_sends_without_waiting_for_acks():
    """Without TCP_NODELAY on the socket the workers share, each response waited ~40 ms."""
    import uvicorn

    from backscroll.cli import serving_socket

    sock = serving_socket(uvicorn.Config("backscroll.app:worker_app", factory=True, host="127.0.0.1",
                                         port=_free_port(), workers=2))
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        sock.close()
