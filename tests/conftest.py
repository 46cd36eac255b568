"""Shared fixtures: a real Jupyter server with the extension (pytest-jupyter, in process), and
real server processes for the tests that kill and restart them."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from hubkit import hub  # noqa: F401  (a real JupyterHub, one per session: tests/hub)
from servers import FAST_SERVICE, JupyterServerProcess, free_port, kill_sidecars_under

pytest_plugins = ["pytest_jupyter.jupyter_server"]

#: How long a failed run waits, at its end, for threads its tests left running.
STUCK_THREAD_WAIT_S = 30.0
_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """A failed run ends with its report, whatever its tests left behind. A test cut short by
    its timeout can leave a thread that never ends (the database connection of a server whose
    clean-up it was in), and Python waits for such threads before it exits: the run would hang
    until CI's own limit and lose the report. A run that passed exits as usual."""
    status = config.stash.get(_EXIT_STATUS, 0)
    if status == 0:
        return
    deadline = time.monotonic() + STUCK_THREAD_WAIT_S
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    for thread in others:
        if not thread.daemon:
            thread.join(max(deadline - time.monotonic(), 0.0))
    stuck = [t.name for t in others if t.is_alive() and not t.daemon]
    if stuck:
        print(f"\nthreads left running by failed tests, not waited for: {stuck}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


@pytest.fixture(autouse=True)
def _no_sidecar_outlives_its_test(tmp_path):
    yield
    kill_sidecars_under(tmp_path)


@pytest.fixture
def jp_server_config(tmp_path):
    """The extension on 4 simulated GPUs, with short intervals so that tests run in seconds."""
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_elastic_gpu": True}},
        "ElasticGPUApp": {
            "simulated_gpus": 4,
            "db_path": str(tmp_path / "scheduler.sqlite"),
        },
        "SchedulerService": {
            "job_root": str(tmp_path / "jobs"),
            **{k.split(".")[1]: v for k, v in FAST_SERVICE.items()},
        },
    }


@pytest.fixture
def server_process(tmp_path):
    """Start real `jupyter server` processes (killed at the end of the test)."""
    started: list[JupyterServerProcess] = []

    def start(**kwargs) -> JupyterServerProcess:
        kwargs.setdefault("root", tmp_path)
        proc = JupyterServerProcess(**kwargs)
        proc.start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
    kill_sidecars_under(tmp_path)


@pytest.fixture
def scheduler_api(server_process):
    """(API root, token) of a running Jupyter server with the embedded scheduler."""
    proc = server_process(port=free_port())
    return proc.api_url, proc.token
