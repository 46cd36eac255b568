"""What a job's reason says in each state, after real decisions of the live service."""

from __future__ import annotations

import contextlib
import time

from elastic_gpu_sidecar.protocol import JobState
from servers import RecordingLauncher

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.core.schedule import decide
from jupyter_elastic_gpu.models import SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store

ANN = Principal("ann")


@contextlib.asynccontextmanager
async def service(tmp_path, gpus: int = 4):
    store = await Store.open(":memory:")
    try:
        yield SchedulerService(
            store,
            SimulatedInventory(gpus),
            RecordingLauncher(),
            lambda j: "",
            job_root=str(tmp_path),
        )
    finally:
        await store.close()


def synthetic(min_gpus=1, max_gpus=2, work=1e6) -> SubmitRequest:
    body = {
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": work, "throughput": {"1": 10, "2": 19}},
    }
    return parse(SubmitRequest, body, "job")


async def test_a_starting_job_says_it_is_starting(tmp_path):
    async with service(tmp_path) as svc:
        job = await svc.submit(ANN, synthetic())
        await svc.step(time.time())  # admitted, and its sidecar launched
        assert job.state == JobState.STARTING and job.launched_at is not None
        await svc.step(time.time())  # a decision while it starts
        assert job.state == JobState.STARTING
        assert "resize" not in job.reason, job.reason
        assert job.reason.startswith(f"starting on {len(job.desired.gpus)} GPU"), job.reason


async def test_a_cancel_under_way_keeps_saying_so(tmp_path):
    async with service(tmp_path) as svc:
        job = await svc.submit(ANN, synthetic())
        await svc.step(time.time())
        await svc.cancel(ANN, job.id)
        assert job.state == JobState.STOPPING
        said = job.reason
        await svc.step(time.time())  # the stopping job's GPUs are kept as they are
        assert job.reason == said and "cancel" in said, job.reason


def test_one_job_ahead_is_singular():
    gpus = (Gpu("0"),)
    speed = SpeedModel({1: 1.0})
    running = Job("r", 0.0, total_work=100.0, speed=speed, gpus=("0",), started=True)
    waiting = Job("w", 1.0, total_work=1e6, speed=speed)
    reason = str(
        decide(make_policy("adaptive"), Snapshot(gpus, (running, waiting)), 2.0).reasons["w"]
    )
    assert reason.endswith("; GPUs held by r (shorter)"), reason
