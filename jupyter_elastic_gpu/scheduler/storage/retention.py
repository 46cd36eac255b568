"""Finished jobs expire: after ``SchedulerService.job_retention_days`` a done, failed or
cancelled job is forgotten (its record, progress and events) and its directory removed,
unless its owner (or an admin) kept it (``POST jobs/ID/keep``).

Crash-safe in two steps. One transaction deletes the job's rows and lists its directory in
the ``expired`` table; once the directory is gone, its row there goes too. A crash in between
leaves the row, and the next round removes the directory again (a missing one counts as
removed). The directory is removed by the job owner's side, as every job file is written and
read (``jobdirs.remove_job_dir``): this service when it starts the sidecars itself; in shared
mode each user's own server, which finds its user's expired jobs in ``GET launches`` and says
when their directories are gone (``POST launches/removed``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ...errors import Conflict
from ...models import EventKind, Expired, Forgotten, KeepChange, Removed, parse
from ..jobs import JobRecord
from ..lifecycle import Lifecycle
from ..principal import Principal
from ..settings import SchedulerSettings
from . import jobdirs
from .atomic import atomically
from .store import Store

DAY_S = 86400.0
#: Seconds between two looks for expired jobs.
INTERVAL_S = 60.0
#: Most jobs forgotten in one transaction (a first start after years: a few rounds, not one).
BATCH = 200


class Retention:
    """The expiry of one service's finished jobs, run from its loop (``step``).

    Given the job table (an expired job leaves it), ``get`` (the job a caller may change, or
    NotFound / Forbidden), the store and lifecycle it writes through, the live settings
    (``job_retention_days``), ``removes_dirs`` (this side removes job dirs itself: it starts
    the sidecars, as their owner), the log and ``changed``, for watchers to see the change."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        get: Callable[..., JobRecord],
        store: Store,
        lifecycle: Lifecycle,
        settings: SchedulerSettings,
        removes_dirs: bool,
        log: logging.Logger,
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.jobs, self.get, self.store, self.lifecycle = jobs, get, store, lifecycle
        self.settings, self.removes_dirs, self.log = settings, removes_dirs, log
        self.changed = changed
        self._last = -float("inf")

    def due(self, now: float) -> list[JobRecord]:
        """Finished jobs not kept whose end lies more than the retention before ``now``."""
        days = self.settings.job_retention_days
        if days <= 0:
            return []
        cutoff = now - days * DAY_S
        return [
            j
            for j in self.jobs.values()
            if j.final and not j.kept and j.finished_at is not None and j.finished_at <= cutoff
        ]

    async def step(self, now: float) -> None:
        """Forget the jobs past the retention, then remove the dirs left to remove (at most
        once every ``INTERVAL_S``)."""
        if now - self._last < INTERVAL_S:
            return
        self._last = now
        due = sorted(self.due(now), key=lambda j: (j.finished_at or 0.0, j.id))[:BATCH]
        if due:
            days = self.settings.job_retention_days
            async with self.store.transaction():
                await self.store.expire([(j.id, j.user, j.job_dir) for j in due], now)
                await self.store.add_event(
                    None,
                    EventKind.EXPIRED,
                    f"{len(due)} finished jobs expired ({days:g} days after they ended): "
                    "their records and files are removed",
                    {"jobs": [j.id for j in due]},
                    t=now,
                )
            for job in due:
                self.jobs.pop(job.id, None)
            await self.changed()
        if self.removes_dirs:
            await self.remove_dirs()

    async def remove_dirs(self) -> None:
        """Remove the directory of every expired job still listed, then forget it."""
        store = self.store
        for row in await store.expired():
            try:
                await asyncio.to_thread(jobdirs.remove_job_dir, row["job_dir"], row["id"])
            except (OSError, Conflict) as e:  # said once: removing it again would fail again
                self.log.warning(
                    "elastic-gpu: expired job %s: its directory %s is left in place: %s",
                    row["id"],
                    row["job_dir"],
                    getattr(e, "message", None) or e,
                )
            await store.forget_expired([row["id"]])

    async def pending(self, who: Principal) -> list[Expired]:
        """Shared mode: ``who``'s expired jobs whose directories their server is to remove."""
        if self.removes_dirs:
            return []
        rows = await self.store.expired(who.user)
        return [Expired(id=r["id"], job_dir=r["job_dir"]) for r in rows]

    async def removed(self, who: Principal, body: object) -> Forgotten:
        """``POST launches/removed``: the dirs of these expired jobs of ``who`` are gone."""
        ids = parse(Removed, body, "removed jobs").jobs
        await self.store.forget_expired(ids, who.user)
        return Forgotten(jobs=ids)

    async def keep(self, who: Principal, job_id: str, body: object) -> JobRecord:
        """``POST jobs/ID/keep``: keep the job past the retention (owner or admin), or not."""
        kept = parse(KeepChange, body, "keep").kept
        job = self.get(who, job_id, change=True)
        if job.kept != kept:
            async with atomically(self.store, job):
                job.kept = kept
                await self.lifecycle.save(job)
                await self.store.add_event(
                    job.id,
                    EventKind.KEPT,
                    f"{who.user} kept {job.name}: it never expires"
                    if kept
                    else f"{who.user} no longer keeps {job.name}: it expires with the others",
                )
            await self.changed()
        return job
