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
async def service(tmp_path, gpus: int = 1, **settings):
    store = await Store.open(":memory:")
    launcher = RecordingLauncher()
    svc = SchedulerService(
        store,
        SimulatedInventory(gpus),
        launcher,
        lambda j: "",
        job_root=str(tmp_path),
        **settings,
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
    """Start ``job`` and have its sidecar report ``done`` samples at ``speed`` samples/s, with
    the records of the steady 20 s before (a settled pace: its end is told)."""
    await svc.step(time.time())
    assert job.state == JobState.STARTING
    now = time.time()
    backlog = [
        {"t": now - ago, "samples": done - ago * speed, "samples_per_s": speed} for ago in (20, 10)
    ]
    beat = {
        "generation": job.desired.generation,
        "gpus": job.desired.gpus,
        "state": "running",
        "throughput": {"1": speed},
        "resize_cost_s": 2.0,
        "backlog": backlog,
        "progress": {"t": now, "samples": done, "samples_per_s": speed},
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
        # A job that has not run has no pace to trust: its end is not told.
        assert by_id[second.id].estimated_end is None and by_id[second.id].estimating
        assert not by_id[first.id].estimating
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


async def test_no_end_is_told_until_the_pace_has_settled(tmp_path):
    """A first record slowed by tracing (an end 179 h away) is never told: the job view and
    the queue say ``estimating`` with no end, until its records agree over enough time."""
    async with service(tmp_path) as svc:
        job = await svc.submit(ANN, synthetic(work=72_000))
        await svc.step(time.time())
        backend = LocalBackend(svc)
        t0 = time.time()

        async def beat(t: float, done: float, speed: float, **more) -> None:
            body = {
                "generation": job.desired.generation,
                "gpus": job.desired.gpus,
                "state": "running",
                "progress": {"t": t, "samples": done, "samples_per_s": speed},
                **more,
            }
            await svc.heartbeat(job.id, svc.launcher.secrets[job.id], body)

        await beat(t0, 1.0, 0.11, throughput={"1": 0.11})
        view = (await backend.job(ANN, job.id)).model_dump()
        entry = next(e for e in (await backend.queue(ANN)).queue if e.id == job.id)
        assert view["estimating"] and view["eta_s"] is None
        assert entry.estimating and entry.estimated_end is None
        for t in range(1, 31):  # then 100 samples/s: settled once the first is out of reach
            await beat(t0 + t, 100.0 * t, 100.0, throughput={"1": 100.0})
        view = (await backend.job(ANN, job.id)).model_dump()
        assert not view["estimating"] and view["eta_s"] == pytest.approx(690, abs=1)
        # The forecast made on the first record is not reused: the end told is the settled one.
        entry = next(e for e in (await backend.queue(ANN)).queue if e.id == job.id)
        assert not entry.estimating
        assert entry.estimated_end == pytest.approx(time.time() + 690, abs=5)
        # Another user is not told whether ann's job is estimating.
        other = next(e for e in (await backend.queue(BOB)).queue if e.id == job.id)
        assert not other.estimating


async def test_a_policy_that_looks_ahead_chooses_once_per_change_and_forecasts_its_mode(tmp_path):
    """``adaptive`` with ``lookahead`` (docs/policies.md): the service's decisions choose a mode
    when the jobs change; the queue's forecast plays that mode and chooses nothing."""
    params = {"lookahead": True, "makespan_weight": 0.0}
    async with service(tmp_path, policy_params=params) as svc:
        look = svc.decider.chooser
        first = await svc.submit(ANN, synthetic(work=10_000))
        await run(svc, first, done=9_000)
        assert look.rollouts == 2  # the first job: both modes played forward once
        second = await svc.submit(ANN, synthetic(work=50_000))
        await svc.step(time.time())
        await svc.step(time.time())
        assert look.rollouts == 4  # an arrival: once more, and not at the next decision
        queue = (await LocalBackend(svc).queue(ANN)).queue
        by_id = {e.id: e for e in queue}
        assert by_id[second.id].estimated_start == by_id[first.id].estimated_end is not None
        assert look.rollouts == 4  # the forecast chose nothing
