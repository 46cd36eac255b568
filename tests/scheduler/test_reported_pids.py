"""A pid a heartbeat names is ours only when the scheduler's side started it.

The attack: a sidecar reports another process's pid as its trainer, and that process's GPU
then looks free (``external_processes`` leaves our pids and their descendants out). A
reported pid counts only when it is the launched sidecar or a descendant of it, or, when the
launch record has no pid (shared mode: the user's server started it), a process of the job's
own user. Real processes on a GPU of a fake inventory (NVML's view, from a subclass of the
simulated one).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import subprocess
import sys
import time

import pytest
from elastic_gpu_sidecar.protocol import Grant, JobState

from jupyter_elastic_gpu.models import SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import GpuProcess, SimulatedInventory
from jupyter_elastic_gpu.scheduler.execution.launcher import BaseLauncher
from jupyter_elastic_gpu.scheduler.jobs import hash_secret
from jupyter_elastic_gpu.scheduler.port import views
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store

BODY = {"kind": "synthetic", "synthetic": {"work": 1e9, "throughput": {"1": 10}}}


@pytest.fixture
def processes():
    """Start real processes: ``start(with_child=False)`` -> (pid, child pid or None)."""
    started: list[subprocess.Popen] = []
    children: list[int] = []

    def start(with_child: bool = False) -> tuple[int, int | None]:
        code = "import time; time.sleep(300)"
        if with_child:  # a sidecar with its trainer below it
            code = (
                "import subprocess, sys, time; "
                f"p = subprocess.Popen([sys.executable, '-c', {code!r}]); "
                "print(p.pid, flush=True); time.sleep(300)"
            )
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        started.append(p)
        child = int(p.stdout.readline()) if with_child else None
        if child:
            children.append(child)
        return p.pid, child

    yield start
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for p in started:
        p.kill()
        p.wait()


class OnGpus(SimulatedInventory):
    """Four simulated GPUs, with the processes NVML would list on each."""

    def __init__(self) -> None:
        super().__init__(4)
        self.on: dict[str, list[int]] = {}

    def snapshot(self):
        infos = super().snapshot()
        for info in infos:
            info.processes = [GpuProcess(p, None, 100.0, None) for p in self.on.get(info.id, [])]
        return infos


class Launcher(BaseLauncher):
    def __init__(self, record: dict) -> None:
        super().__init__()
        self.record = record

    async def launch(self, request):
        return dict(self.record)


@contextlib.asynccontextmanager
async def running_job(tmp_path, user: str, launch: dict):
    """A service with one job of ``user`` running on GPU 0, its launch record ``launch``."""
    store = await Store.open(":memory:")
    inventory = OnGpus()
    svc = SchedulerService(store, inventory, Launcher(launch), lambda j: "", job_root=str(tmp_path))
    try:
        job = await svc.submit(Principal(user), parse(SubmitRequest, BODY, "job"))
        now = time.time()
        await svc.lifecycle.start(job, ["0"], now)
        job.state, job.launched_at, job.launch = JobState.RUNNING, now, dict(launch)
        job.desired, job.secret_hash = Grant(1, ["0"]), hash_secret("s")
        yield svc, inventory, job
    finally:
        await store.close()


def external(svc) -> dict[str, list[int]]:
    return {gpu: [p.pid for p in procs] for gpu, procs in svc.external().items() if procs}


async def test_naming_another_process_does_not_hide_its_gpu(tmp_path, processes):
    sidecar, trainer = processes(with_child=True)
    victim, _ = processes()  # someone else's work on GPU 3
    async with running_job(tmp_path, "ann", {"pid": sidecar}) as (svc, inventory, job):
        inventory.on = {"0": [trainer], "3": [victim]}
        beat = {"generation": 1, "gpus": ["0"], "state": "running"}
        await svc.heartbeat(job.id, "s", {**beat, "sidecar_pid": sidecar, "trainer_pid": victim})
        svc._gpu_cache_t = 0.0  # the next read sees the inventory as it is now
        assert external(svc) == {"3": [victim]}
        gpu3 = views.gpus(
            svc.gpu_infos(), svc.jobs, svc.holders(), svc.external(), "simulated", Principal("x")
        ).gpus[3]
        assert gpu3.healthy is False
        # Its real trainer, a child of the launched sidecar, is ours when reported too.
        await svc.heartbeat(job.id, "s", {**beat, "sidecar_pid": sidecar, "trainer_pid": trainer})
        assert external(svc) == {"3": [victim]}


async def test_without_a_launch_pid_only_the_jobs_users_processes_count(tmp_path, processes):
    """Shared mode: the user's own server started the sidecar; the scheduler has no pid."""
    mine, _ = processes()  # a process of this account
    async with running_job(tmp_path, "nobody-here", {"via": "agent"}) as (svc, inventory, job):
        inventory.on = {"3": [mine]}
        beat = {"generation": 1, "gpus": ["0"], "state": "running", "trainer_pid": mine}
        await svc.heartbeat(job.id, "s", beat)
        svc._gpu_cache_t = 0.0
        assert external(svc) == {"3": [mine]}, "a process of another user was taken as ours"
    async with running_job(tmp_path, getpass.getuser(), {"via": "agent"}) as (svc, inv, job):
        inv.on = {"0": [mine]}
        await svc.heartbeat(job.id, "s", beat)
        svc._gpu_cache_t = 0.0
        assert external(svc) == {}
