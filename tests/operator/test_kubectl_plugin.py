"""`kubectl backscroll status NAME` (issue 31, item 6): the pinned kubectl finds the plugin
`kubectl-backscroll` on PATH (this package's console script) and it prints one screen about a live
SearchIndex on the real control plane, reconciled by the real operator: mode, models and coverage,
the rollout and what it waits for, migrations, backfills with rate and ETA, pods, recent Events.

`pytest -s` shows the screen (the sample in the issue's closing note comes from here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import eventually, report
from .test_gitops import SAMPLES, secret

NEW = "arctic-embed-l-v2.0@256"
BIN = Path(sys.executable).parent  # where pip put the console scripts, kubectl-backscroll among them


def plugin(kubectl, *args: str) -> subprocess.CompletedProcess:
    # kubectl stops looking for a plugin name at the first flag: the kubeconfig comes from the
    # environment, as it does for a person.
    env = {"HOME": str(kubectl.cache_dir), "KUBECONFIG": str(kubectl.kubeconfig),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    return subprocess.run([kubectl.binary, "backscroll", *args], capture_output=True, text=True, env=env, timeout=60)


def test_kubectl_backscroll_status_prints_one_screen(kubectl, namespace, api, operator, status_server, gate):
    assert (BIN / "kubectl-backscroll").exists(), "pip install -e . installs the plugin's console script"
    backfill = gate("backfill")
    with operator():
        secret(kubectl, "backscroll-db", uri="postgresql://u:p@db/backscroll")
        index = yaml.safe_load((SAMPLES / "searchindex.yaml").read_text())
        index["spec"]["embeddings"] = {"model": NEW, "dimensions": 256, "external": {"url": "https://emb.example/v1"}}
        index["spec"]["worker"] = {"pod": {"nodeSelector": backfill.selector}}  # the backfill keeps running
        status_server.reports["search"] = report(
            "degraded", NEW, dimensions=256, embedded=425, total=1000,
            degradation={"category": "backfilling", "coverage": 0.425, "detail": "hybrid over embedded messages"})
        kubectl("apply", "-f", "-", input=yaml.safe_dump(index))
        eventually(lambda: api.condition("search", "BackfillComplete").get("reason") == "Backfilling")
        eventually(lambda: (api.get("searchindexes", "search")["status"].get("models") or [{}])[0].get("embedded") == 425)

        done = plugin(kubectl, "status", "search")
        print(done.stdout)
        assert done.returncode == 0, done.stderr
        screen = done.stdout.splitlines()
        assert screen[0].startswith(f"SearchIndex {namespace}/search")
        assert f"Mode:       degraded   model {NEW}   coverage 42.5%" in screen
        assert "Ready:      False (WorkerNotReady)" in done.stdout, "its worker's pod is held by the gate"
        (model,) = [line.split() for line in screen if line.strip().startswith(NEW)]
        assert model[1:] == ["256", "serving", "425", "1000", "42.5%"]
        assert "Rollout:    Backfilling" in done.stdout and "Waits for:  the backfill Job" in screen
        assert "Migrations: True (Succeeded)" in done.stdout
        (fill,) = [line.split() for line in screen if line.strip().startswith("search-backfill-")]
        assert fill[1:4] == [NEW, "Running", "425/1000"] and fill[4].endswith("/s") and fill[5] != "-"
        assert any("worker" in line and "Pending" in line for line in screen), "the worker pod, held by the gate"
        assert "Events (last" in done.stdout
        assert len(screen) <= 50, "one screen"

        missing = plugin(kubectl, "status", "nothing")
        assert missing.returncode == 1
        assert missing.stderr.strip() == f'error: searchindex "nothing" not found in namespace "{namespace}"'
