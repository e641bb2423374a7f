"""Browser fixtures: the API in a thread on a free port over the test's own database, and Debian's
headless Chromium driven by Playwright.

Playwright's own browser download does not work on these machines, so the browser is the system's
`/usr/bin/chromium` (`make browser-deps` installs it). A missing browser FAILS these tests: a run
must not pass by skipping them.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from backscroll.app import create_app
from tests.world import settings_for

CHROMIUM = os.environ.get("BACKSCROLL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
ARTIFACTS = Path(os.environ.get("BACKSCROLL_ARTIFACTS") or Path(__file__).parent / "artifacts")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no browser at {CHROMIUM}: run `make browser-deps` (apt-get install chromium)", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def server(db_url) -> str:
    """The API on 127.0.0.1:<free port>, serving this test's database; yields its base URL."""
    app = create_app(settings_for(db_url), db_url)
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, name=f"api-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the API did not start on port {port}")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture
def context(browser, request):
    size = getattr(request, "param", None) or {"width": 1280, "height": 720}
    ctx = browser.new_context(viewport=size)
    ctx.set_default_timeout(8000)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    p = context.new_page()
    errors: list[str] = []
    # An uncaught exception in the page's script is a failure whatever the test checks.
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    yield p
    assert not errors, f"the page threw: {errors}"


@pytest.fixture
def shot(request):
    """Save a screenshot of a state as a test artifact: <artifacts>/<test>--<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def save(page, name: str) -> Path:
        path = ARTIFACTS / f"{test}--{name}.png"
        page.screenshot(path=str(path), full_page=False)
        return path

    return save
