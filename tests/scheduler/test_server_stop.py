"""A server stopped while its scheduler is still starting (connecting to a Ray cluster on a
loaded machine, loading a large database) ends that start and closes what it opened: left
running, the start opened the database after the stop had passed, and the connection's thread
kept the process from exiting (pytest sat at its summary until killed). So did a start that a
request (a sidecar's heartbeat) began after the stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jupyter_elastic_gpu.errors import Unavailable
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store


class StuckService(SchedulerService):
    """A scheduler whose start does not end by itself, once the database is open."""

    reached: asyncio.Event

    async def start(self) -> None:
        type(self).reached.set()
        await asyncio.Event().wait()


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ElasticGPUApp"]["scheduler_class"] = StuckService
    return jp_server_config


def lasting_threads() -> set[threading.Thread]:
    """The threads a process waits for before it exits."""
    return {t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()}


async def test_a_server_stopped_mid_start_closes_the_database_it_opened(
    jp_serverapp, jp_server_config
):
    StuckService.reached = asyncio.Event()
    before = lasting_threads()
    app = next(iter(jp_serverapp.extension_manager.extension_apps["jupyter_elastic_gpu"]))
    start = app.backend.ensure_started()
    await asyncio.wait_for(StuckService.reached.wait(), 60)
    assert app._store is not None and lasting_threads() - before  # the database's thread
    await app.stop_extension()
    assert start.done()
    for thread in lasting_threads() - before:
        thread.join(30)
    assert not lasting_threads() - before
    # a request while the server stops (a sidecar's heartbeat) starts nothing again
    with pytest.raises(Unavailable, match="stopped with this server"):
        app.backend.ensure_started()
    assert not lasting_threads() - before
    # its lock is let go: another scheduler can open the database
    store = await Store.open(jp_server_config["ElasticGPUApp"]["db_path"])
    await store.close()
