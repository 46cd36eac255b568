"""Fixtures of the adversarial suite: the real servers of ``fuzzservers``."""

from __future__ import annotations

import pytest
from fuzzservers import Daemon, InProcess, synthetic, write_recorder
from servers import DaemonProcess, free_port


@pytest.fixture
def jp_server_config(jp_server_config, tmp_path):
    """8 simulated GPUs; sidecars are the recording stand-in (``fuzzservers.RECORDER``)."""
    jp_server_config["LocalLauncher"] = {"python": str(write_recorder(tmp_path))}
    jp_server_config["ElasticGPUApp"]["simulated_gpus"] = 8
    return jp_server_config


@pytest.fixture
def fuzz_server(
    jp_serverapp, http_server, http_server_port, jp_base_url, jp_asyncio_loop, tmp_path
):
    """The pytest-jupyter server, listening on a real socket, for a worker thread to drive."""
    return InProcess(
        jp_serverapp, http_server_port[-1], jp_base_url, jp_asyncio_loop, tmp_path / "launches"
    )


@pytest.fixture
def fuzz_daemon(tmp_path):
    """A shared scheduler process; alice's and bob's jobs have ended, so it stays idle."""
    proc = DaemonProcess(tmp_path, free_port())
    proc.state.mkdir(parents=True)
    tokens = {
        "alice": proc.add_user("alice"),
        "bob": proc.add_user("bob"),
        "ops": proc.add_user("ops", admin=True),
    }
    proc.start()
    try:
        daemon = Daemon(proc, tokens)
        for user in ("alice", "bob"):
            code, job = daemon.api("POST", "jobs", user, synthetic(f"{user}-job", 1, 2))
            assert code == 201, job
            daemon.finish(user, job["id"])
            daemon.jobs[user] = job["id"]
        yield daemon
    finally:
        proc.stop()
