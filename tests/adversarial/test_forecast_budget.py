"""The queue's forecast under its budget: one forward run at a time shared by every reader,
none waiting past the budget, and estimates that say which bound left them out."""

from __future__ import annotations

import asyncio
import contextlib
import time

from servers import RecordingLauncher

from jupyter_elastic_gpu.models import SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.port.local import LocalBackend
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store

ANN = Principal("ann")


@contextlib.asynccontextmanager
async def service(tmp_path, **settings):
    store = await Store.open(":memory:")
    svc = SchedulerService(
        store,
        SimulatedInventory(1),
        RecordingLauncher(),
        lambda j: "",
        job_root=str(tmp_path),
        **settings,
    )
    try:
        yield svc
    finally:
        await store.close()


def synthetic(work: float) -> SubmitRequest:
    body = {
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {"work": work, "throughput": {"1": 10.0}},
    }
    return parse(SubmitRequest, body, "job")


async def until(predicate, timeout: float = 30.0) -> None:
    """Wait for ``predicate`` on the event loop, yielding to it between looks."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_readers_never_wait_past_the_budget_and_share_one_run(tmp_path):
    """With a budget of almost nothing, ten readers at once answer from the forecast there
    is (none yet: every estimate of theirs says 'time'), one forward run starts for all of
    them, and it stops after its first decision, saying so."""
    async with service(tmp_path, forecast_budget=1e-9) as svc:
        jobs = [await svc.submit(ANN, synthetic(work=1_000 * (i + 1))) for i in range(6)]
        await svc.step(time.time())
        backend = LocalBackend(svc)
        answers = await asyncio.gather(*(backend.queue(ANN) for _ in range(10)))
        for answer in answers:
            assert [e.estimate_limit for e in answer.queue] == ["time"] * len(jobs)
            assert all(e.estimated_end is None for e in answer.queue)
        await until(lambda: svc.estimates.runs == 1)
        ahead = await svc.estimates.forecast()  # the same version: that run's forecast
        assert svc.estimates.runs == 1
        assert ahead.limits == ("time",) and ahead.decisions == 1 and not ahead.complete
        queue = (await backend.queue(ANN)).queue
        running = [e for e in queue if e.gpus]
        assert len(running) == 1 and running[0].estimate_limit == "time"
        assert all(e.estimate_limit == "time" for e in queue)


async def test_the_forecast_plays_forward_the_first_jobs_only(tmp_path):
    """``forecast_jobs`` bounds the jobs played forward: the one holding the GPU and the
    first in queue order get estimates, the others none, saying 'jobs'."""
    async with service(tmp_path, forecast_jobs=3, forecast_budget=60.0) as svc:
        for i in range(6):
            await svc.submit(ANN, synthetic(work=1_000 * (i + 1)))
        await svc.step(time.time())
        queue = (await LocalBackend(svc).queue(ANN)).queue
        ahead = await svc.estimates.forecast()
        assert ahead.limits == ("jobs",) and not ahead.complete
        assert len(ahead.skipped) == 3
        # (The forecast's ends: the queue tells them once each job's pace has settled.)
        assert queue[0].gpus and ahead.estimates[queue[0].id].end is not None
        ends = {i for i, guess in ahead.estimates.items() if guess.end is not None}
        estimated = [e for e in queue if e.id in ends]
        assert [e.id for e in estimated] == [e.id for e in queue[:3]]
        for entry in queue[:3]:
            assert entry.estimate_limit is None
        for entry in queue[3:]:
            assert entry.id in ahead.skipped
            assert entry.estimate_limit == "jobs" and entry.estimated_start is None
