"""Shared fixtures: a real Jupyter server with the extension (pytest-jupyter, in process), and
real server processes for the tests that kill and restart them."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from hubkit import hub  # noqa: F401  (a real JupyterHub, one per session: tests/hub)
from servers import (
    FAST_SERVICE,
    DaemonProcess,
    JupyterServerProcess,
    claim_port_slot,
    free_port,
    kill_sidecars_under,
)

pytest_plugins = ["pytest_jupyter.jupyter_server", "cpu_report"]

#: How long a failed run waits, at its end, for threads its tests left running.
STUCK_THREAD_WAIT_S = 30.0
_EXIT_STATUS = pytest.StashKey[int]()


#: Test files that run one after the other on one worker when the suite runs on several
#: (``make test``: pytest-xdist, ``--dist loadfile``); every other file is a unit of its own,
#: so its module-wide servers start once. The real TensorFlow stories (a resize that pays off,
#: a job that grows back) never run beside each other; a JupyterHub and a Ray cluster are one
#: per worker, so their files stay together. The Ray files run with the TensorFlow ones, never
#: beside them: Ray gives a starting node 30 s (hard-coded) to register, which a 2-core machine
#: busy with a trainer on each core misses. The Binder files (an image built, two notebooks
#: run: a fifth of the suite's work) are a unit of their own, or this group would be the run's
#: longest part by far. Paths are from the repository's root.
WORKER_GROUPS = {
    "tensorflow": (
        "tests/browser/test_job_card_in_lab.py",
        "tests/notebook/test_notebooks.py",
        "tests/scheduler/test_live.py",
        "tests/sidecar/test_sidecar_callbacks.py",
        "tests/sidecar/test_sidecar_tf.py",
        "tests/cluster/",
    ),
    "hub": (
        "tests/hub/",
        "tests/browser/test_hub_login.py",
        "tests/browser/test_admin_page.py",
        "tests/security/test_trainer_env.py",
    ),
}


#: The units (groups of ``WORKER_GROUPS``, files) that take minutes each, handed to the workers
#: first: units go out in collection order, and one of these started last would be the run's
#: tail while the other workers sit idle.
FIRST = (
    "tensorflow",
    "tests/binder/",
    "hub",
    "tests/scheduler/test_live_frameworks.py",
    "tests/sidecar/test_sidecar_lightning.py",
)


def pytest_configure(config):
    """The session's own ports (``servers.claim_port_slot``): taken by the controller of a
    pytest-xdist run, whose workers inherit the slot, or by a run without workers."""
    if not hasattr(config, "workerinput"):
        claim_port_slot()


def unit_of(path: str) -> str:
    """The unit of work of the test file at ``path``: its group's name, else itself."""
    return next((g for g, files in WORKER_GROUPS.items() if path.startswith(files)), path)


#: The fast tier (``make test-fast``, ``pytest -m fast``): tests that start no server, no
#: sidecar, no trainer and no browser (the pure core, the simulator, the models, and the units
#: of the service with its real SQLite), so a change to them is checked in about a minute. A
#: file belongs here when each of its tests takes well under a second or two on 2 cores.
FAST_TIER = (
    "tests/core/",
    "tests/sim/",
    "tests/adversarial/test_forecast_budget.py",
    "tests/faults/test_atomic_changes.py",
    "tests/notebook/test_job_text.py",
    "tests/notebook/test_train_options.py",
    "tests/scheduler/test_api.py",
    "tests/scheduler/test_backend_seam.py",
    "tests/scheduler/test_estimates.py",
    "tests/scheduler/test_generated.py",
    "tests/scheduler/test_gpu_kinds.py",
    "tests/scheduler/test_job_framework.py",
    "tests/scheduler/test_job_history.py",
    "tests/scheduler/test_panel.py",
    "tests/scheduler/test_reasons.py",
    "tests/scheduler/test_reasons_figures.py",
    "tests/scheduler/test_routes.py",
    "tests/scheduler/test_release_clock.py",
    "tests/scheduler/test_service_units.py",
    "tests/scheduler/test_waits.py",
    "tests/sidecar/test_frameworks.py",
)


def pytest_collection_modifyitems(config, items):
    """Marks the fast tier's tests ``fast``; puts the units of ``FIRST`` first (a stable sort:
    each file stays whole and in its order)."""
    root = config.rootpath
    paths = {item: item.path.relative_to(root).as_posix() for item in items}
    for item in items:
        if paths[item].startswith(FAST_TIER):
            item.add_marker(pytest.mark.fast)

    def rank(item) -> int:
        unit = unit_of(paths[item])
        return next((i for i, first in enumerate(FIRST) if unit.startswith(first)), len(FIRST))

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it, never called
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the files of ``WORKER_GROUPS`` kept together. (xdist's own
    ``loadgroup`` does not group under pytest 9.2: pytest-dev/pytest-xdist#1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid.split("::", 1)[0])

    # in collection order (FIRST first), not by their number of tests: a unit of a few long
    # tests (the Binder image and its notebooks) would be handed out last
    config.option.loadscopereorder = False
    return GroupedFiles(config, log)


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
    """Every test has a tmp_path, under which the sidecars it starts keep their job dirs."""
    yield
    kill_sidecars_under(tmp_path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Once more after every fixture's teardown: pytest-jupyter's in-process server cleans up
    after the fixtures of this conftest, and its scheduler, still deciding meanwhile, can start
    a queued job then (a sidecar that found no server to answer it trained on after the run)."""
    tmp = item.funcargs.get("tmp_path")
    try:
        return (yield)
    finally:
        if tmp is not None:
            kill_sidecars_under(tmp)


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


@pytest.fixture
def daemon(tmp_path):
    """A running `jupyter elastic-gpu scheduler` and its tokens: alice, bob, and ops (admin)."""
    d = DaemonProcess(tmp_path, free_port())
    d.state.mkdir(parents=True)
    tokens = {user: d.add_user(user, admin=user == "ops") for user in ("alice", "bob", "ops")}
    d.start()
    yield d, tokens
    d.stop()


@pytest.fixture
def user_server(daemon, server_process):
    """Starts a user's own Jupyter server, a client of ``daemon`` with that user's token."""
    d, tokens = daemon

    def start(user: str):
        return server_process(
            port=free_port(),
            name=user,
            token=f"{user}-jupyter-token",
            config={"scheduler_url": d.api_url, "scheduler_token": tokens[user]},
        )

    return start
