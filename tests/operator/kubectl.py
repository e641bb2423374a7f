"""The pinned `kubectl` (built with the control plane, tests/cluster) with one kubeconfig and one
discovery cache per test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


class KubectlError(AssertionError):
    def __init__(self, args: list[str], code: int, stdout: str, stderr: str):
        super().__init__(f"kubectl {' '.join(args)} exited {code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
        self.code, self.stdout, self.stderr = code, stdout, stderr


class Kubectl:
    """Calls as `kubectl("get", "sidx")` return stdout and raise KubectlError (stdout and stderr
    in the message) on a non-zero exit; `.run(...)` returns the CompletedProcess instead."""

    def __init__(self, binary: Path, kubeconfig: Path, cache_dir: Path):
        self.binary = str(binary)
        self.kubeconfig, self.cache_dir = kubeconfig, cache_dir

    def command(self, *args: str) -> list[str]:
        return [self.binary, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}", *args]

    def run(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args), input=input, capture_output=True, text=True, timeout=timeout,
                              env={"HOME": str(self.cache_dir), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        done = self.run(*args, input=input, timeout=timeout)
        if done.returncode != 0:
            raise KubectlError(list(args), done.returncode, done.stdout, done.stderr)
        return done.stdout

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "-o", "json"))
