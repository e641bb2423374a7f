"""A pytest plugin for tests/mutation/run.py: which tests ran, which failed, how long each took.

Loaded with `-p killers_plugin` (run.py puts this folder on PYTHONPATH). With
BACKSCROLL_MUTATION_SELECT naming a JSON list of node ids, only those tests run (the rest of the
files on the command line are deselected), so a node id that no longer exists is reported as not
collected instead of stopping pytest. At the end it writes BACKSCROLL_MUTATION_REPORT (JSON):
{"tests": {nodeid: {"outcome": "passed" | "failed" | "skipped", "seconds": s}},
 "collected": [nodeid, ...], "exitstatus": n}. A test's seconds are its call's and teardown's (and
its setup's only where that failed). A module that fails to import is a failed test whose node id
is the module's path.
"""

from __future__ import annotations

import json
import os

_tests: dict[str, dict] = {}
_collected: set[str] = set()


def pytest_collection_modifyitems(session, config, items):
    select = os.environ.get("BACKSCROLL_MUTATION_SELECT")
    if select:
        with open(select) as f:
            wanted = set(json.load(f))
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            items[:] = [item for item in items if item.nodeid in wanted]
            config.hook.pytest_deselected(items=dropped)
    _collected.update(item.nodeid for item in items)


def pytest_collectreport(report):
    if report.failed:
        _tests[report.nodeid or "<collection>"] = {"outcome": "failed", "seconds": 0.0}


def pytest_runtest_logreport(report):
    entry = _tests.setdefault(report.nodeid, {"outcome": "passed", "seconds": 0.0})
    # A passed setup is left out of a test's seconds: the first test's would hold the session's
    # fixtures (the embedded PostgreSQL, the migrated template).
    if not (report.when == "setup" and report.passed):
        entry["seconds"] += report.duration
    if report.failed:
        entry["outcome"] = "failed"
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("BACKSCROLL_MUTATION_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"tests": _tests, "collected": sorted(_collected), "exitstatus": int(exitstatus)}, f)
