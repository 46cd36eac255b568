"""The release deadline's clock, on the service with a virtual clock: when it starts, what
stops it, how long it is, and what a restart does to it (``scheduler/releases.py``)."""

from __future__ import annotations

import pytest
from elastic_gpu_sidecar.protocol import JobState
from servers import RecordingLauncher, recording_service, synthetic

from jupyter_elastic_gpu.errors import BadRequest, Unauthorized
from jupyter_elastic_gpu.models import EventKind, SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.releases import GRACE_FLOOR_S, RELEASE_TIMEOUT, owed
from jupyter_elastic_gpu.scheduler.service import SchedulerService

ANN = Principal("ann")
OPS = Principal("ops", admin=True)
T0 = 1_000_000.0


async def running(svc, launcher, spec: dict, now: float):
    """A job whose sidecar confirmed its first grant at ``now``."""
    job = await svc.submit(ANN, parse(SubmitRequest, spec, "job"))
    await svc.step(now)
    beat = {"generation": job.desired.generation, "gpus": job.desired.gpus, "state": "running"}
    await svc.heartbeat(job.id, launcher.secrets[job.id], beat)
    assert job.state == JobState.RUNNING
    return job, beat


async def test_the_grace_period_comes_from_the_checkpoint_interval_and_resize_cost(tmp_path):
    async with recording_service(tmp_path, checkpoint_interval=60, heartbeat_interval=2) as (
        svc,
        _,
    ):
        job = await svc.submit(ANN, parse(SubmitRequest, synthetic(1, 2), "job"))
        assert svc.releases.grace_s(job) == 60 + 4 * svc.default_resize_cost + 3 * 2
        job.resize_cost_s = 30.0  # measured: a slow restart gets longer
        assert svc.releases.grace_s(job) == 60 + 4 * 30 + 3 * 2
        svc.checkpoint_interval, job.resize_cost_s = 1.0, 0.1
        assert svc.releases.grace_s(job) == GRACE_FLOOR_S
        svc.release_grace = 7.0  # set: as set
        assert svc.releases.grace_s(job) == 7.0


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_a_grace_that_is_no_number_of_seconds_is_refused(tmp_path, value):
    with pytest.raises(Exception, match="release_grace must be 0 or more seconds"):
        SchedulerService(None, SimulatedInventory(1), RecordingLauncher(), str, release_grace=value)


async def test_a_confirmed_shrink_stops_the_clock_and_an_unconfirmed_one_voids(tmp_path):
    async with recording_service(tmp_path, release_grace=10.0) as (svc, launcher):
        a, _ = await running(svc, launcher, synthetic(1, 4), T0)
        secret = launcher.secrets[a.id]
        await svc.admin.drain(OPS, "3", {"drained": True})
        await svc.step(T0 + 1)
        assert a.state == JobState.RESIZING and owed(a) == ["3"]
        assert a.release_due == T0 + 1 + 10.0
        # The sidecar moves in time: the clock stops.
        new = {"generation": a.desired.generation, "gpus": a.desired.gpus, "state": "running"}
        await svc.heartbeat(a.id, secret, new)
        await svc.step(T0 + 2)
        assert a.state == JobState.RUNNING and a.release_due is None
        # Asked again, it keeps reporting the grant before: void at the deadline, not before.
        await svc.admin.drain(OPS, "2", {"drained": True})
        await svc.step(T0 + 3)
        await svc.heartbeat(a.id, secret, new)
        await svc.step(T0 + 3 + 9.9)
        assert a.state == JobState.RESIZING
        await svc.step(T0 + 3 + 10.0)
        assert a.state == JobState.FAILED and a.error.type == RELEASE_TIMEOUT
        assert a.held_gpus == [] and svc.holders() == {}
        with pytest.raises(Unauthorized):
            await svc.heartbeat(a.id, secret, new)
        kinds = [e["kind"] for e in await svc.store.events(a.id)]
        assert kinds.count(EventKind.DEADLINE) == 2


async def test_no_clock_runs_while_the_new_grant_waits_for_another_jobs_gpus(tmp_path):
    async with recording_service(tmp_path, release_grace=10.0) as (svc, launcher):
        a, a_beat = await running(svc, launcher, synthetic(2, 2), T0)
        b, _ = await running(svc, launcher, synthetic(2, 2), T0)
        # A moves to B's GPUs while B must leave them: A is told nothing until B has left,
        # so only B's clock runs.
        mine, theirs = a.desired.gpus, b.desired.gpus
        await svc.lifecycle.change(b, [], T0 + 1)
        await svc.lifecycle.change(a, theirs, T0 + 1)
        await svc.releases.step(T0 + 1)
        assert b.release_due is not None and a.release_due is None
        assert (await svc.heartbeat(a.id, launcher.secrets[a.id], a_beat)).gpus == mine
        await svc.releases.step(T0 + 20)
        assert b.state == JobState.FAILED and a.state == JobState.RESIZING
        await svc.releases.step(T0 + 21)
        assert a.release_due == T0 + 21 + 10.0  # told from now on: its clock starts now


async def test_a_restarted_scheduler_gives_each_holder_a_whole_grace_period(tmp_path):
    db = str(tmp_path / "s.sqlite")
    async with recording_service(tmp_path, db, release_grace=10.0) as (svc, launcher):
        a, _ = await running(svc, launcher, synthetic(1, 1), T0)
        await svc.cancel(ANN, a.id)
        await svc.releases.step(T0 + 1)
        assert a.release_due == T0 + 11
    async with recording_service(tmp_path, db, release_grace=10.0) as (svc, _):
        await svc.start()
        try:
            again = svc.jobs[a.id]
            assert again.state == JobState.STOPPING and again.release_due >= T0 + 11
            assert again.release_due > svc._last_account  # from its start, not before
        finally:
            await svc.stop()


async def test_a_forced_cancel_is_checked_before_anything_changes(tmp_path):
    async with recording_service(tmp_path) as (svc, launcher):
        a, _ = await running(svc, launcher, synthetic(1, 1), T0)
        with pytest.raises(BadRequest):
            await svc.cancel(ANN, a.id, {"force": 1})
        assert a.state == JobState.RUNNING
        await svc.cancel(ANN, a.id, {"force": True})
        assert a.state == JobState.CANCELLED and a.error.type == RELEASE_TIMEOUT
        assert "ended at once by ann" in a.reason and a.voided_at is not None
