"""A stop always stops: bounded waits never swallow a cancellation (scheduler/waits.py)."""

from __future__ import annotations

import asyncio

import pytest
from servers import RecordingLauncher

from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store
from jupyter_elastic_gpu.scheduler.waits import wait_at_most

#: Loop turns between a wake-up and the cancellation: they cover the moment the wait's inner
#: task has finished and its caller has not yet resumed (where ``asyncio.wait_for`` of
#: Python < 3.12 loses the cancellation).
TURNS = range(8)


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.parametrize("n", TURNS)
async def test_a_loop_woken_as_it_is_cancelled_stops(n):
    wake = asyncio.Event()

    async def loop():
        while True:
            wake.clear()
            await wait_at_most(wake.wait(), 60.0)

    task = asyncio.create_task(loop())
    await turns(2)  # parked in its wait
    wake.set()
    await turns(n)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=30.0)
    assert done and task.cancelled(), f"cancelled {n} turns after a wake-up, the loop ran on"


async def test_what_finished_in_time_what_did_not_and_what_failed():
    assert await wait_at_most(asyncio.sleep(0), 30.0) is True
    slow = asyncio.Event()
    assert await wait_at_most(slow.wait(), 0.0) is False

    async def fails():
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await wait_at_most(fails(), 30.0)


async def test_a_wait_on_a_condition_that_times_out_gives_its_lock_back():
    cond = asyncio.Condition()
    async with cond:
        # A timeout above zero: the wait has begun (it let go of the lock) when it is cut.
        assert await wait_at_most(cond.wait_for(lambda: False), 0.01) is False
        assert cond.locked()  # taken back before the return, as on entry: the exit releases it
    assert not cond.locked()
    async with cond:  # nothing left waiting holds or wants it
        cond.notify_all()


@pytest.mark.parametrize("n", TURNS)
async def test_the_scheduler_stops_when_poked_just_before(tmp_path, n):
    store = await Store.open(":memory:")
    try:
        svc = SchedulerService(
            store, SimulatedInventory(2), RecordingLauncher(), str, job_root=str(tmp_path)
        )
        await svc.start()
        await svc.step()
        svc.poke()
        await turns(n)
        stop = asyncio.ensure_future(svc.stop())
        done, _ = await asyncio.wait({stop}, timeout=30.0)
        assert done, f"stop() did not end: poked {n} turns before it, the loop ran on"
        stop.result()
    finally:
        await store.close()
