"""Fixtures of the fault suite: the figures each test records for benchmarks/audit.py."""

from __future__ import annotations

import pytest
from faultkit import Audit
from servers import JupyterServerProcess, free_port, kill_sidecars_under


@pytest.fixture(autouse=True)
def audit(request):
    """The figures of this test (appended to $ELASTIC_GPU_AUDIT_OUT when it is set): every
    test of the suite is a run of its scenario in benchmarks/audit.py."""
    figures = Audit(request.node.nodeid)
    yield figures
    figures.flush()


@pytest.fixture
def launch(tmp_path):
    """Start real `jupyter server` processes, stopped at the end of the test;
    ``launch(scheduler=False, ...)`` waits for the Jupyter server only (for a scheduler
    expected not to start)."""
    started: list[JupyterServerProcess] = []

    def start(scheduler: bool = True, **kwargs) -> JupyterServerProcess:
        kwargs.setdefault("root", tmp_path)
        kwargs.setdefault("port", free_port())
        proc = JupyterServerProcess(**kwargs)
        started.append(proc)
        proc.start(scheduler=scheduler)
        return proc

    yield start
    for proc in started:
        proc.stop()
    kill_sidecars_under(tmp_path)
