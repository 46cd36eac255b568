"""Finished jobs expire after the retention (records and files), unless kept; crash-safe.

The service runs on a real SQLite file with a launcher that only records launches; time is
the ``now`` given to ``step``, so a retention of days passes without waiting.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pytest
from servers import RecordingLauncher

from jupyter_elastic_gpu.errors import BadRequest, Forbidden, StorageUnavailable
from jupyter_elastic_gpu.models import EventKind, SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.agent import LaunchAgent
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.port.local import LocalBackend
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage import jobdirs
from jupyter_elastic_gpu.scheduler.storage.retention import DAY_S
from jupyter_elastic_gpu.scheduler.storage.store import Store

ALICE, BOB = Principal("alice"), Principal("bob")
SYNTHETIC = {"kind": "synthetic", "synthetic": {"work": 1e9, "throughput": {"1": 10}}}


class SharedLauncher(RecordingLauncher):
    """As a shared scheduler's: it starts nothing itself, users' servers do."""

    starts_processes = False


@contextlib.asynccontextmanager
async def service(tmp_path, days: float = 1.0, launcher=None):
    store = await Store.open(str(tmp_path / "db.sqlite"))
    try:
        yield SchedulerService(
            store,
            SimulatedInventory(2),
            launcher or RecordingLauncher(),
            lambda j: "",
            job_root=str(tmp_path / "jobs"),
            job_retention_days=days,
        )
    finally:
        await store.close()


async def finished_job(s: SchedulerService, who: Principal = ALICE):
    """A cancelled job whose directory holds what a run leaves: logs, checkpoints, a model."""
    job = await s.submit(who, parse(SubmitRequest, SYNTHETIC, "job"))
    await s.cancel(who, job.id)  # queued: cancelled at once
    assert job.final and job.finished_at is not None
    with jobdirs.job_dir_fd(job.job_dir) as fd:
        for name in ("trainer.log", "model.keras"):
            with open(os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
                f.write("x")
        os.mkdir("checkpoints", dir_fd=fd)
    (tmp_path_of(job) / "checkpoints" / "ckpt-1").write_text("weights")
    await s.store.add_progress(job.id, [{"t": 1.0, "samples": 1}])
    return job


def tmp_path_of(job) -> Path:
    return Path(job.job_dir)


async def rows(s: SchedulerService, table: str, job_id: str) -> int:
    column = "id" if table in ("jobs", "expired") else "job_id"
    async with s.store.db.execute(
        f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (job_id,)
    ) as c:
        return (await c.fetchone())[0]


async def test_finished_jobs_expire_with_their_files_unless_kept(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("not the job's")
    async with service(tmp_path, days=2) as s:
        old, kept, young = [await finished_job(s) for _ in range(3)]
        os.symlink(outside, tmp_path_of(old) / "link-out")  # removed, never followed
        await s.retention.keep(ALICE, kept.id, {"kept": True})
        running = await s.submit(ALICE, parse(SubmitRequest, SYNTHETIC, "job"))
        t0 = max(j.finished_at for j in (old, kept, young))
        young.finished_at = t0 + DAY_S  # ended a day after the others

        await s.step(now=t0 + 1.9 * DAY_S)  # within the retention: nothing goes
        assert {old.id, kept.id, young.id, running.id} <= set(s.jobs)

        await s.step(now=t0 + 2.1 * DAY_S)
        assert old.id not in s.jobs and {kept.id, young.id, running.id} <= set(s.jobs)
        assert not tmp_path_of(old).exists() and outside.read_text() == "not the job's"
        for table in ("jobs", "progress", "events", "expired"):
            assert await rows(s, table, old.id) == 0, table
        assert await rows(s, "jobs", kept.id) == 1 and tmp_path_of(kept).is_dir()
        [event] = [e for e in await s.store.events() if e["kind"] == EventKind.EXPIRED]
        assert event["data"] == {"jobs": [old.id]} and "2 days after they ended" in event["message"]

        await s.step(now=t0 + 3.2 * DAY_S)
        assert young.id not in s.jobs and not tmp_path_of(young).exists()
        await s.step(now=t0 + 1000 * DAY_S)  # kept, and open jobs, never expire
        assert {kept.id, running.id} <= set(s.jobs) and tmp_path_of(kept).is_dir()

        await s.retention.keep(ALICE, kept.id, {"kept": False})
        await s.step(now=t0 + 1001 * DAY_S)
        assert kept.id not in s.jobs and not tmp_path_of(kept).exists()


async def test_a_retention_of_0_keeps_every_job(tmp_path):
    async with service(tmp_path, days=0) as s:
        job = await finished_job(s)
        await s.step(now=job.finished_at + 10_000 * DAY_S)
        assert job.id in s.jobs and tmp_path_of(job).is_dir()


async def test_only_the_owner_or_an_admin_keeps_a_job_and_a_bad_body_changes_nothing(tmp_path):
    async with service(tmp_path) as s:
        job = await finished_job(s)
        with pytest.raises(Forbidden, match="belongs to alice"):
            await s.retention.keep(BOB, job.id, {"kept": True})
        for body in ({}, {"kept": "yes"}, {"kept": 1}, {"kept": True, "x": 1}, []):
            with pytest.raises(BadRequest):
                await s.retention.keep(ALICE, job.id, body)
        assert not job.kept
        await s.retention.keep(Principal("ops", admin=True), job.id, {"kept": True})
        assert job.kept
        [saved] = [j for j in await s.store.load_jobs() if j["id"] == job.id]
        assert saved["kept"] is True
        kinds = [e["kind"] for e in await s.store.events(job.id)]
        assert kinds.count(EventKind.KEPT) == 1


async def test_a_failed_expiry_changes_nothing(tmp_path, monkeypatch):
    async with service(tmp_path) as s:
        job = await finished_job(s)
        real_write = s.store._write

        async def failing(sql, *args, **kwargs):
            if sql.startswith("DELETE FROM events"):
                raise sqlite3.OperationalError("disk I/O error")
            return await real_write(sql, *args, **kwargs)

        monkeypatch.setattr(s.store, "_write", failing)
        with pytest.raises(StorageUnavailable):
            await s.step(now=job.finished_at + 2 * DAY_S)
        assert job.id in s.jobs and tmp_path_of(job).is_dir()
        assert await rows(s, "jobs", job.id) == 1 and await rows(s, "expired", job.id) == 0
        monkeypatch.setattr(s.store, "_write", real_write)
        await s.step(now=job.finished_at + 3 * DAY_S)  # the next round does it
        assert job.id not in s.jobs and not tmp_path_of(job).exists()


async def test_a_crash_after_the_expiry_removes_the_directory_on_the_next_start(tmp_path):
    async with service(tmp_path) as s:
        job = await finished_job(s)
        await s.store.expire([(job.id, job.user, job.job_dir)], job.finished_at)  # then: crash
    async with service(tmp_path) as s:
        await s.start()
        await s.stop()
        assert job.id not in s.jobs and tmp_path_of(job).is_dir()
        await s.step(now=job.finished_at + 1.0)
        assert not tmp_path_of(job).exists() and await rows(s, "expired", job.id) == 0


async def test_shared_mode_each_users_server_removes_its_users_directories(tmp_path):
    async with service(tmp_path, launcher=SharedLauncher()) as s:
        mine, theirs = await finished_job(s, ALICE), await finished_job(s, BOB)
        await s.step(now=max(mine.finished_at, theirs.finished_at) + 2 * DAY_S)
        assert mine.id not in s.jobs and theirs.id not in s.jobs
        # The shared scheduler removes no file itself: it lists them for their owners.
        assert tmp_path_of(mine).is_dir() and tmp_path_of(theirs).is_dir()
        backend = LocalBackend(s, mode="daemon")
        listed = await backend.launches(ALICE)
        assert [(e.id, e.job_dir) for e in listed.expired] == [(mine.id, mine.job_dir)]

        await LaunchAgent(backend, RecordingLauncher(), ALICE).run_once()
        assert not tmp_path_of(mine).exists() and tmp_path_of(theirs).is_dir()
        assert (await backend.launches(ALICE)).expired == []
        # Bob's server cannot forget Alice's entries, nor Alice Bob's.
        await backend.removed(ALICE, {"jobs": [theirs.id]})
        assert [e.id for e in (await backend.launches(BOB)).expired] == [theirs.id]


def test_only_a_directory_named_after_its_job_is_removed(tmp_path):
    folder = tmp_path / "jobs" / "j-1"
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "jobs").chmod(0o700)
    with pytest.raises(Exception, match="not the directory of job j-2"):
        jobdirs.remove_job_dir(str(folder), "j-2")
    assert folder.is_dir()
    assert jobdirs.remove_job_dir(str(folder), "j-1") is True and not folder.exists()
    assert jobdirs.remove_job_dir(str(folder), "j-1") is False  # gone already: done
