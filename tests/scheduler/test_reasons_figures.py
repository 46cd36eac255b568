"""The figures behind the live service's reasons, as the API answers them: when a queued job
starts and whose end it waits for, and why GPUs stay idle."""

from __future__ import annotations

import contextlib
import re
import time

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
async def service(tmp_path, gpus: int):
    store = await Store.open(":memory:")
    svc = SchedulerService(
        store, SimulatedInventory(gpus), RecordingLauncher(), lambda j: "", job_root=str(tmp_path)
    )
    try:
        yield svc
    finally:
        await store.close()


def synthetic(work: float, lo: int, hi: int, throughput: dict[str, float]) -> SubmitRequest:
    body = {
        "kind": "synthetic",
        "min_gpus": lo,
        "max_gpus": hi,
        "synthetic": {"work": work, "throughput": throughput},
    }
    return parse(SubmitRequest, body, "job")


async def beat(svc, job, done: float, speed: float, state: str = "running") -> None:
    """A heartbeat of ``job``'s sidecar: on its grant, ``done`` samples at ``speed``/s, a
    measured resize cost of 6 s."""
    n = str(len(job.desired.gpus))
    await svc.heartbeat(
        job.id,
        svc.launcher.secrets[job.id],
        {
            "generation": job.desired.generation,
            "gpus": job.desired.gpus,
            "state": state,
            "throughput": {n: speed},
            "resize_cost_s": 6.0,
            "progress": {"t": time.time(), "samples": done, "samples_per_s": speed},
        },
    )


async def test_a_queued_job_says_whose_end_it_waits_for_and_when_it_starts(tmp_path):
    async with service(tmp_path, gpus=1) as svc:
        first = await svc.submit(ANN, synthetic(10_000, 1, 1, {"1": 10}))
        await svc.step(time.time())
        await beat(svc, first, done=9_000, speed=10.0)  # 100 s left
        assert first.state == JobState.RUNNING
        second = await svc.submit(ANN, synthetic(50_000, 1, 1, {"1": 10}))  # longer: waits
        await svc.step(time.time())
        assert second.state == JobState.QUEUED
        api = LocalBackend(svc)
        entry = next(e for e in (await api.queue(ANN)).queue if e.id == second.id)
        # 100 s of work left: "~2 min" from now, or "~1 min" on a machine slow enough for
        # tens of seconds to pass between the forecast and the answer.
        figures = rf"; starts in ~[12] min, when '{first.name}' finishes"
        held_by = f"queued: needs 1 GPU, 0 free; GPUs held by '{first.name}' (shorter)"
        assert entry.reason.startswith(held_by), entry.reason
        # The same as data: the kind, the holder by id and name, and the forecast's figures.
        assert entry.reason_kind == "waiting" and entry.reason_figures.needs == 1
        assert entry.reason_figures.holders[0].id == first.id
        assert entry.reason_figures.start_after.name == first.name
        assert re.search(figures + "$", entry.reason), entry.reason
        assert entry.estimated_start is not None
        status = await api.status(ANN)
        shown = next(j for j in status.jobs if j.id == second.id)
        assert re.search(figures + "$", shown.reason), shown.reason  # the CLI's status too
        assert status.idle is None and (await api.gpus(ANN)).idle is None  # no GPU is idle
        # The figures are the owner's: another user sees owner, size and state only.
        theirs = next(e for e in (await api.queue(BOB)).queue if e.id == second.id)
        assert theirs.reason == "queued" and theirs.reason_kind == "public"


async def test_idle_gpus_say_what_growing_the_running_job_would_cost_and_save(tmp_path):
    """The issue's case: a short job ends, two of four GPUs stay free, and the GPUs say why."""
    profile = {"1": 10, "2": 19, "4": 20}  # 4 GPUs are barely faster than 2
    async with service(tmp_path, gpus=4) as svc:
        long = await svc.submit(ANN, synthetic(100_000, 2, 4, profile))
        short = await svc.submit(ANN, synthetic(1_000, 2, 2, profile))
        started = time.time() - 600  # long ago: no cool-down after the start left
        await svc.step(started)
        assert len(long.desired.gpus) == 2 and len(short.desired.gpus) == 2
        await beat(svc, long, done=100_000 - 1_900, speed=19.0)  # 100 s left on 2 GPUs
        await beat(svc, short, done=1_000, speed=19.0, state="done")
        await svc.step(time.time())
        assert short.state == JobState.DONE
        assert len(long.desired.gpus) == 2  # growing to 4 saves 5 s: less than a resize
        assert long.reason == "running on 2 of up to 4 GPUs: 4 would save ~5 s, a resize costs ~6 s"
        api = LocalBackend(svc)
        want = f"2 GPUs idle: growing '{long.name}' to 4 would save ~5 s, a resize costs ~6 s"
        gpus = await api.gpus(ANN)
        assert gpus.idle == want and gpus.idle_kind == "idle"
        cause = gpus.idle_figures.causes[0]
        assert (cause.job.id, cause.kind, cause.figures.to) == (long.id, "resize_would_not_pay", 4)
        assert (await api.status(ANN)).idle == want
        # Another user learns why the GPUs are idle, not the figures of ann's job.
        assert (await api.gpus(BOB)).idle == (
            f"2 GPUs idle: growing {long.id} would not pay for its resize"
        )
