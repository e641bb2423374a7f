"""The real `kubectl` against the emulator: one kubeconfig and one discovery cache per test."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

KUBECTL = "/usr/bin/kubectl"


def kubectl_binary() -> str:
    found = shutil.which("kubectl") or (KUBECTL if Path(KUBECTL).exists() else None)
    if not found:
        # Not a skip: CI machines have kubectl, and a missing one must not pass quietly.
        raise RuntimeError("the operator's kubectl tests need the `kubectl` binary on PATH "
                           "(or at /usr/bin/kubectl); install kubectl >= 1.30")
    return found


class KubectlError(AssertionError):
    def __init__(self, args: list[str], code: int, stdout: str, stderr: str):
        super().__init__(f"kubectl {' '.join(args)} exited {code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
        self.code, self.stdout, self.stderr = code, stdout, stderr


class Kubectl:
    """Calls as `kubectl("get", "sidx")` return stdout and raise KubectlError (stdout and stderr
    in the message) on a non-zero exit; `.run(...)` returns the CompletedProcess instead."""

    def __init__(self, kubeconfig: Path, cache_dir: Path, request_timeout: str = "20s"):
        self.binary = kubectl_binary()
        self.kubeconfig, self.cache_dir, self.request_timeout = kubeconfig, cache_dir, request_timeout

    def command(self, *args: str) -> list[str]:
        return [self.binary, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}",
                f"--request-timeout={self.request_timeout}", *args]

    def run(self, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args), input=input, capture_output=True, text=True, timeout=timeout,
                              env={"HOME": str(self.cache_dir), "PATH": "/usr/bin:/bin"})

    def __call__(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        done = self.run(*args, input=input, timeout=timeout)
        if done.returncode != 0:
            raise KubectlError(list(args), done.returncode, done.stdout, done.stderr)
        return done.stdout

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "-o", "json"))
