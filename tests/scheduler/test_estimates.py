"""The queue's estimated starts and ends, from the live service's own state."""

from __future__ import annotations

import contextlib
import time

import pytest
from elastic_gpu_sidecar.protocol import JobState
from servers import RecordingLauncher

from jupyter_elastic_gpu.models import SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.port.local import LocalBackend
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store

ANN, BOB = Principal("ann"), Principal("bob")


@contextlib.asynccontextmanager
async def service(tmp_path, gpus: int = 1):
    store = await Store.open(":memory:")
    launcher = RecordingLauncher()
    svc = SchedulerService(
        store, SimulatedInventory(gpus), launcher, lambda j: "", job_root=str(tmp_path)
    )
    try:
        yield svc
    finally:
        await store.close()


def synthetic(work: float, speed: float = 10.0) -> SubmitRequest:
    body = {
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {"work": work, "throughput": {"1": speed}},
    }
    return parse(SubmitRequest, body, "job")


async def run(svc, job, done: float, speed: float = 10.0) -> None:
    """Start ``job`` and have its sidecar report ``done`` samples at ``speed`` samples/s."""
    await svc.step(time.time())
    assert job.state == JobState.STARTING
    beat = {
        "generation": job.desired.generation,
        "gpus": job.desired.gpus,
        "state": "running",
        "throughput": {"1": speed},
        "resize_cost_s": 2.0,
        "progress": {"t": time.time(), "samples": done, "samples_per_s": speed},
    }
    await svc.heartbeat(job.id, svc.launcher.secrets[job.id], beat)
    assert job.state == JobState.RUNNING


async def test_a_queued_job_is_expected_when_the_running_one_ends(tmp_path):
    async with service(tmp_path) as svc:
        first = await svc.submit(ANN, synthetic(work=10_000))
        await run(svc, first, done=9_000)  # 1000 samples left at 10/s: 100 s
        second = await svc.submit(ANN, synthetic(work=50_000))  # longer: it waits
        await svc.step(time.time())
        before = time.time()
        queue = (await LocalBackend(svc).queue(ANN)).queue
        by_id = {e.id: e for e in queue}
        end, start = by_id[first.id].estimated_end, by_id[second.id].estimated_start
        assert by_id[first.id].estimated_start is None  # it holds its GPU
        assert before + 100 - 2 <= end <= time.time() + 100 + 2  # to the second
        assert start == end
        # Its start pays the resize cost assumed until a job has measured its own.
        assert by_id[second.id].estimated_end == pytest.approx(
            start + svc.default_resize_cost + 5_000, abs=1
        )
        # Another user sees when nothing of ann's starts or ends.
        for entry in (await LocalBackend(svc).queue(BOB)).queue:
            assert entry.estimated_start is None and entry.estimated_end is None


async def test_one_forward_run_per_change_that_matters(tmp_path):
    async with service(tmp_path) as svc:
        backend = LocalBackend(svc)
        first = await svc.submit(ANN, synthetic(work=10_000))
        await run(svc, first, done=1_000)
        await backend.queue(ANN)
        runs = svc.estimates.runs
        await backend.queue(ANN)
        await backend.queue(BOB)
        assert svc.estimates.runs == runs  # the same version: the same forecast
        beat = {
            "generation": first.desired.generation,
            "gpus": first.desired.gpus,
            "state": "running",
            "progress": {"t": time.time(), "samples": 2_000, "samples_per_s": 10.0},
        }
        version = svc.version
        await svc.heartbeat(first.id, svc.launcher.secrets[first.id], beat)
        assert svc.version > version
        await backend.queue(ANN)
        assert svc.estimates.runs == runs  # progress alone: reused
        await svc.submit(ANN, synthetic(work=50_000))
        await backend.queue(ANN)
        assert svc.estimates.runs == runs + 1  # a new job: forecast again
