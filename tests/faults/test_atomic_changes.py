"""Nothing half-changed: a request (or a round of the decision loop) whose write fails leaves
the scheduler's memory as it was, and the loop survives the fault and retries.

The service runs in this process on a real SQLite file, and the fault is real: another
connection holds SQLite's write lock past the store's busy timeout. The launcher only records
launches: these tests are about what the scheduler keeps, not about processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

import pytest
from elastic_gpu_sidecar.protocol import JobState
from faultkit import write_locked
from servers import RecordingLauncher

from jupyter_elastic_gpu.errors import StorageUnavailable
from jupyter_elastic_gpu.models import SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.jobs import hash_secret
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store

ANN = Principal("ann")
BODY = {
    "kind": "synthetic",
    "min_gpus": 1,
    "max_gpus": 2,
    "synthetic": {"work": 1e6, "throughput": {"1": 10, "2": 19}},
}


@contextlib.asynccontextmanager
async def scheduler(tmp_path):
    store = await Store.open(str(tmp_path / "db.sqlite"), busy_timeout=0.2)
    svc = SchedulerService(
        store, SimulatedInventory(4), RecordingLauncher(), lambda j: "", job_root=str(tmp_path)
    )
    svc.log = logging.getLogger("test-atomic")
    try:
        yield svc
    finally:
        await svc.stop()
        await store.close()


#: What accrues with time whatever the database does (liveness, time queued or on GPUs).
CLOCKS = {"last_heartbeat", "queued_s", "attained_gpu_s"}


def memory(svc: SchedulerService) -> dict:
    """Everything the scheduler keeps of its jobs (its clocks aside)."""
    return {
        job_id: {k: v for k, v in json.loads(json.dumps(job.to_dict())).items() if k not in CLOCKS}
        for job_id, job in svc.jobs.items()
    }


async def rows(store: Store, table: str) -> int:
    async with store.db.execute(f"SELECT COUNT(*) FROM {table}") as cur:
        return (await cur.fetchone())[0]


async def running(svc: SchedulerService) -> tuple:
    """A job started by a decision and confirmed by its sidecar's heartbeat."""
    job = await svc.submit(ANN, parse(SubmitRequest, BODY, "job"))
    await svc.step(time.time())
    secret = "s3cret"
    job.secret_hash = hash_secret(secret)
    beat = {"generation": job.desired.generation, "gpus": job.desired.gpus, "state": "running"}
    await svc.heartbeat(job.id, secret, beat)
    assert job.state == JobState.RUNNING
    return job, secret


async def test_refused_requests_change_nothing(tmp_path):
    async with scheduler(tmp_path) as svc:
        job, secret = await running(svc)
        before, events = memory(svc), await rows(svc.store, "events")
        beat = {
            "generation": job.desired.generation,
            "gpus": job.desired.gpus,
            "state": "done",
            "progress": {"t": time.time(), "samples": 1e6},
            "backlog": [{"t": time.time() - 1, "samples": 9e5}],
        }
        with write_locked(tmp_path / "db.sqlite"):
            with pytest.raises(StorageUnavailable, match="stayed locked"):
                await svc.submit(ANN, parse(SubmitRequest, BODY, "job"))
            with pytest.raises(StorageUnavailable):
                await svc.cancel(ANN, job.id)
            with pytest.raises(StorageUnavailable):
                await svc.heartbeat(job.id, secret, beat)
            assert memory(svc) == before, "a refused request changed the scheduler's memory"
        assert await rows(svc.store, "events") == events
        assert await rows(svc.store, "progress") == 0
        # the same heartbeat again, once the database answers: all of it is taken
        await svc.heartbeat(job.id, secret, beat)
        assert job.state == JobState.DONE
        assert await rows(svc.store, "progress") == 2


async def test_a_refused_decision_changes_nothing_and_the_loop_retries(tmp_path, caplog):
    async with scheduler(tmp_path) as svc:
        job = await svc.submit(ANN, parse(SubmitRequest, BODY, "job"))
        before = memory(svc)
        caplog.set_level(logging.WARNING, logger="test-atomic")
        await svc.start()  # its loop runs from the next await on: the lock is held by then
        job = svc.jobs[job.id]  # as the started service loaded it
        with write_locked(tmp_path / "db.sqlite"):
            with pytest.raises(StorageUnavailable):
                await svc.step(time.time())
            assert memory(svc) == before and job.state == JobState.QUEUED
            deadline = time.monotonic() + 30
            while "round failed" not in caplog.text and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert job.state == JobState.QUEUED and not svc.launcher.launched
        deadline = time.monotonic() + 30  # the fault is gone: the loop carries on by itself
        # (the round that launches says so once it is over)
        while (
            not svc.launcher.launched or "answers again" not in caplog.text
        ) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert svc.launcher.launched == [job.id] and job.state == JobState.STARTING
        assert caplog.text.count("round failed") == 1, "the fault is said once, not every round"
        assert "answers again" in caplog.text


async def test_the_progress_of_a_sidecar_given_up_on_is_kept(tmp_path):
    """A sidecar the scheduler declared lost, heard from again: it is told to stop, and the
    progress its heartbeat carried (acknowledged by the 200) is stored all the same."""
    async with scheduler(tmp_path) as svc:
        job, secret = await running(svc)
        await svc.lifecycle.lost(job, time.time(), silent=60.0)
        assert job.state == JobState.QUEUED
        now = time.time()
        beat = {
            "generation": 1,
            "gpus": ["0"],
            "state": "running",
            "progress": {"t": now, "samples": 20.0},
            "backlog": [{"t": now - 1, "samples": 10.0}],
        }
        grant = await svc.heartbeat(job.id, secret, beat)
        assert grant.action == "stop"
        assert [r["samples"] for r in await svc.store.progress(job.id)] == [10.0, 20.0]


def test_undo_restores_every_kind_of_change():
    """What the service does to a record (set fields, add to and remove from its lists and
    dicts) is undone whole by ``Undo`` (a copy one level down, not a deep copy)."""
    from elastic_gpu_sidecar.protocol import Grant

    from jupyter_elastic_gpu.scheduler.jobs import JobRecord
    from jupyter_elastic_gpu.scheduler.storage.atomic import Undo

    job = JobRecord(
        id="j-1", user="ann", name="j", spec=parse(SubmitRequest, BODY, "job"), job_dir="/x"
    )
    job.granted[1] = ["0"]
    job.history.append({"t": 1.0, "gpus": ["0"], "why": "start"})
    before = json.dumps(job.to_dict(), sort_keys=True)
    undo = Undo()
    undo.keep(job)
    job.state, job.reason = JobState.RUNNING, "running"
    job.desired = Grant(2, ["0", "1"])
    job.granted[2] = ["0", "1"]
    del job.granted[1]
    job.history.append({"t": 2.0, "gpus": ["0", "1"], "why": "grow"})
    job.throughput[2] = 19.0
    job.launch = {"pid": 1}
    job.notes.append("changed")
    undo.keep(job)  # a second keep does not replace the first copy
    undo.restore()
    assert json.dumps(job.to_dict(), sort_keys=True) == before
