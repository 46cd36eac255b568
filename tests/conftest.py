"""Shared fixtures: a real Jupyter server with the extension (pytest-jupyter, in process), and
real server processes for the tests that kill and restart them."""

from __future__ import annotations

import pytest
from hubkit import hub  # noqa: F401  (a real JupyterHub, one per session: tests/hub)
from servers import FAST_SERVICE, JupyterServerProcess, free_port, kill_sidecars_under

pytest_plugins = ["pytest_jupyter.jupyter_server"]


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
