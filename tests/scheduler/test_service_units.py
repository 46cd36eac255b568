"""Scheduler logic that is hard to reach through a live run: concurrency, grant hand-over, and
settings refused at start."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time

import pytest
from elastic_gpu_sidecar.protocol import Grant, JobState
from servers import RecordingLauncher

from jupyter_elastic_gpu.core.reason_kinds import ReasonKind
from jupyter_elastic_gpu.core.reasons import Told
from jupyter_elastic_gpu.errors import BadRequest
from jupyter_elastic_gpu.models import EventKind, Heartbeat, SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.execution.launcher import PlaceGone
from jupyter_elastic_gpu.scheduler.jobs import hash_secret
from jupyter_elastic_gpu.scheduler.port import views
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.settings import POSITIVE_SECONDS
from jupyter_elastic_gpu.scheduler.storage.schema import MIGRATIONS
from jupyter_elastic_gpu.scheduler.storage.store import Store


def submit_request(body):
    return parse(SubmitRequest, body, "job")


async def test_concurrent_progress_writes_are_all_kept(tmp_path):
    store = await Store.open(str(tmp_path / "db.sqlite"))
    try:
        for round_ in range(10):
            await asyncio.gather(
                *(
                    store.add_progress(f"j{i}", [{"t": round_ + i / 1000, "samples": round_}])
                    for i in range(100)
                )
            )
        for i in range(0, 100, 17):
            rows = await store.progress(f"j{i}")
            assert [r["samples"] for r in rows] == list(range(10))
        assert await store.schema_version() == len(MIGRATIONS)
    finally:
        await store.close()


async def test_progress_history_is_bounded(tmp_path):
    store = await Store.open(str(tmp_path / "db.sqlite"), progress_limit=50)
    try:
        for t in range(300):
            await store.add_progress("j", [{"t": float(t)}])
        rows = await store.progress("j")
        assert 50 <= len(rows) < 150 and rows[-1]["t"] == 299.0
    finally:
        await store.close()


async def test_reopening_an_existing_database_keeps_the_jobs(tmp_path):
    path = str(tmp_path / "db.sqlite")
    store = await Store.open(path)
    await store.save_job({"id": "j1", "user": "ann", "state": "running", "submitted_at": 1.0})
    await store.close()
    store = await Store.open(path)  # migrations run again: nothing is dropped
    assert [j["id"] for j in await store.load_jobs()] == ["j1"]
    await store.close()


@contextlib.asynccontextmanager
async def service(tmp_path, inventory):
    """A scheduler on an in-memory database whose launches are only recorded."""
    store = await Store.open(":memory:")
    try:
        yield SchedulerService(
            store, inventory, RecordingLauncher(), lambda j: "", job_root=str(tmp_path)
        )
    finally:
        await store.close()


async def test_a_resumed_job_does_not_deadlock_a_shrinking_one(tmp_path):
    store = await Store.open(":memory:")
    launcher = RecordingLauncher()
    svc = SchedulerService(
        store, SimulatedInventory(4), launcher, lambda j: f"http://x/{j}", job_root=str(tmp_path)
    )
    who = Principal("ann")
    body = {
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 2,
        "synthetic": {"work": 1e6, "throughput": {"1": 10}},
    }
    a = await svc.submit(who, submit_request(body))
    b = await svc.submit(who, submit_request(body))
    now = time.time()
    # A ran on 0,1 and was suspended; B runs on 1,2.
    a.state, a.started_at = JobState.RUNNING, now
    a.desired, a.reported = Grant(1, ["0", "1"]), Heartbeat(generation=1, gpus=["0", "1"])
    a.launched_at = now
    await svc.lifecycle.requeue(a, Told(ReasonKind.SUSPENDED), now, kind=EventKind.SUSPENDED)
    b.state, b.started_at, b.launched_at = JobState.RUNNING, now, now
    b.desired, b.granted = Grant(3, ["1", "2"]), {3: ["1", "2"]}
    b.reported = Heartbeat(generation=3, gpus=["1", "2"], state="running")
    b.secret_hash = hash_secret("b-secret")
    # One decision: A resumes on 2,3 once B has shrunk to 1.
    await svc.lifecycle.start(a, ["2", "3"], now)
    await svc.lifecycle.change(b, ["1"], now)
    grant = await svc.heartbeat(
        b.id, "b-secret", {"generation": 3, "gpus": ["1", "2"], "state": "running"}
    )
    assert grant.gpus == ["1"], "B must be told to shrink: A's old GPUs are free"
    await svc._launch_ready(time.time())
    assert a.id not in launcher.launched  # B still runs on 2 until it restarts
    await svc.heartbeat(b.id, "b-secret", {"generation": 4, "gpus": ["1"], "state": "running"})
    await svc._launch_ready(time.time())
    assert a.id in launcher.launched
    await store.close()


class NodeLauncher(RecordingLauncher):
    """Each job's launch on a node of its own: the first job's node starts its sidecar only
    once the second job's launch is under way (a node slow to start actors), and ``gone``
    says which jobs' nodes left before starting anything."""

    def __init__(self) -> None:
        super().__init__()
        self.gone: set[str] = set()
        self.asked = 0
        self.second_asked = asyncio.Event()

    async def launch(self, request):
        self.asked += 1
        if self.asked == 1:
            await self.second_asked.wait()
        else:
            self.second_asked.set()
        if request.job_id in self.gone:
            raise PlaceGone("its node left the cluster")
        return await super().launch(request)


@pytest.mark.parametrize("first_node_leaves", [False, True])
async def test_a_node_slow_to_start_a_sidecar_holds_up_no_other_launch(tmp_path, first_node_leaves):
    """The launches of one round are made together: the second job is launched while the
    first job's node has not started its sidecar yet (one after another, this round would
    never end), and each launch ends in its own way."""
    store = await Store.open(":memory:")
    launcher = NodeLauncher()
    svc = SchedulerService(
        store, SimulatedInventory(4), launcher, lambda j: "", job_root=str(tmp_path)
    )
    who = Principal("ann")
    body = {
        "kind": "synthetic",
        "min_gpus": 2,
        "max_gpus": 2,
        "synthetic": {"work": 1e6, "throughput": {"2": 10}},
    }
    a = await svc.submit(who, submit_request(body))
    b = await svc.submit(who, submit_request(body))
    if first_node_leaves:
        launcher.gone.add(a.id)
    await asyncio.wait_for(svc.step(), 60)  # a bound on a failure, not a wait
    assert launcher.launched == ([b.id] if first_node_leaves else [b.id, a.id])
    assert b.state == JobState.STARTING and b.launched_at is not None
    if first_node_leaves:
        assert a.state == JobState.QUEUED and a.launched_at is None
        assert "its node left the cluster before its sidecar started" in a.reason, a.reason
    else:
        assert a.state == JobState.STARTING and a.launched_at is not None
    await store.close()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"restarts": "x"}, "restarts"),
        ({"throughput": [1]}, "throughput"),
        ({"throughput": {"1" + "0" * 310: 5.0}}, "throughput"),
        ({"throughput": {"1": 1e400}}, "throughput"),
        ({"progress": 3}, "progress"),
        ({"progress": {"t": 1, "samples": -1e308}}, "progress.samples"),
        ({"gpus": "0,1"}, "gpus"),
        ({"gpus": ["0; rm -rf /"]}, "gpus"),
        ({"state": "sleepy"}, "state"),
        ({"sidecar_pid": "x"}, "sidecar_pid"),
        ({"sidecar_pid": [1]}, "sidecar_pid"),
    ],
)
def test_malformed_heartbeats_are_refused(body, field):
    with pytest.raises(BadRequest, match=field):
        parse(Heartbeat, body, "heartbeat")


async def test_other_users_command_lines_stay_hidden_on_the_gpu_view(tmp_path):
    """A busy GPU shows who uses it to everyone; the command line only to its owner and admins."""
    from jupyter_elastic_gpu.scheduler.execution.inventory import GpuProcess

    class BusyInventory(SimulatedInventory):
        def snapshot(self):
            infos = super().snapshot()
            infos[1].processes = [GpuProcess(os.getpid(), "ann", 500.0, "python train.py --key s3")]
            return infos

    async with service(tmp_path, BusyInventory(2)) as svc:

        def seen(who):
            infos = svc.gpu_infos()
            gpu = views.gpus(infos, svc.jobs, svc.holders(), svc.external(), "simulated", who).gpus[
                1
            ]
            assert gpu.healthy is False
            return [p.command for p in gpu.external_processes]

        assert seen(Principal("ann")) == ["python train.py --key s3"]
        assert seen(Principal("root", admin=True)) == ["python train.py --key s3"]
        assert seen(Principal("bob")) == [None]


async def test_new_progress_alone_wakes_whoever_waits_for_updates(tmp_path):
    async with service(tmp_path, SimulatedInventory(2)) as svc:
        body = {"kind": "synthetic", "synthetic": {"work": 1e6, "throughput": {"1": 10}}}
        job = await svc.submit(Principal("ann"), submit_request(body))
        job.state, job.started_at, job.launched_at = JobState.RUNNING, time.time(), time.time()
        job.desired, job.secret_hash = Grant(1, ["0"]), hash_secret("s")
        beat = {"generation": 1, "gpus": ["0"], "state": "running"}
        first = {"t": 0.5, "samples": 0, "global_step": 0}
        await svc.heartbeat(job.id, "s", {**beat, "progress": first})
        since = svc.version  # from here on, only progress changes
        waiter = asyncio.create_task(svc.wait_updates(since, timeout=60))
        second = {"t": 1.0, "samples": 0, "global_step": 1}
        await svc.heartbeat(job.id, "s", {**beat, "progress": second})
        # Had the progress not woken it, the waiter would return ``since`` after its timeout.
        assert await waiter > since


@pytest.mark.parametrize("name", POSITIVE_SECONDS)
@pytest.mark.parametrize("value", [0.0, -5.0, math.nan])
def test_a_time_that_is_not_positive_is_refused_with_the_setting_named(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive number of seconds, got"):
        SchedulerService(None, None, RecordingLauncher(), str, **{name: value})


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_a_resize_cost_below_0_or_not_finite_is_refused(value):
    with pytest.raises(ValueError, match="default_resize_cost must be 0 or more seconds"):
        SchedulerService(None, None, RecordingLauncher(), str, default_resize_cost=value)


async def test_a_released_lease_that_ends_never_shows_another_ending(tmp_path):
    """A lease taken back ends saying why, from the moment it ends: a request served while its
    end is being written (each event write is an await) sees that reason, never a bare "done"
    (a CI run read one). Asked to give back again once over, it stays over."""
    store = await Store.open(":memory:")
    svc = SchedulerService(
        store, SimulatedInventory(2), RecordingLauncher(), lambda j: "", job_root=str(tmp_path)
    )
    seen: list[tuple[str, str, str]] = []
    write = store.add_event

    async def add_event(job_id, kind, message, data=None):
        job = svc.jobs.get(job_id) if job_id else None
        if job is not None:  # what a reader of the job sees while this write awaits
            seen.append((job.state.value, job.reason, kind))
        return await write(job_id, kind, message, data)

    store.add_event = add_event
    try:
        grant = await svc.interactive.open(Principal("ann"), {"gpus": 1})
        lease, secret = svc.jobs[grant.job.id], grant.secret
        await svc.step()
        assert lease.state == JobState.STARTING and lease.desired.gpus, lease.reason
        beat = {"job_id": lease.id, "generation": lease.desired.generation}
        await svc.heartbeat(
            lease.id, secret, {**beat, "gpus": lease.desired.gpus, "state": "running"}
        )
        assert lease.state == JobState.RUNNING

        why = "released: taken back for this test; ask for GPUs again"
        await svc.interactive.release(lease, why, time.time())
        assert lease.state == JobState.STOPPING and lease.reason == why
        await svc.heartbeat(lease.id, secret, {**beat, "gpus": [], "state": "done"})
        assert (lease.state, lease.reason) == (JobState.DONE, why)
        endings = [(state, reason) for state, reason, _ in seen if state == "done"]
        assert endings and set(endings) == {("done", why)}, seen

        await svc.interactive.release(lease, "released: once more", time.time())
        assert (lease.state, lease.reason) == (JobState.DONE, why)
    finally:
        await store.close()
