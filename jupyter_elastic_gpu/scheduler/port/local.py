"""``LocalBackend``: the API answered by a ``SchedulerService`` in this process (the embedded
scheduler, or the shared scheduler itself), as typed models (``backend.Backend``).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from ...models import (
    Event,
    Events,
    Forgotten,
    Gpus,
    GpuView,
    GrantView,
    JobFilter,
    JobList,
    JobView,
    Launches,
    LeaseGrant,
    Logs,
    ProgressList,
    Queue,
    Shares,
    Status,
    SubmitRequest,
    Updates,
    Whoami,
    parse,
)
from .. import estimates
from ..principal import Principal
from ..service import SchedulerService
from . import views

NO_FILTER = views.NO_FILTER


class LocalBackend:
    def __init__(
        self, service: SchedulerService, mode: Literal["embedded", "daemon", "hub"] = "embedded"
    ) -> None:
        self.service, self.mode = service, mode

    async def whoami(self, who: Principal) -> Whoami:
        return Whoami(user=who.user, admin=who.admin, mode=self.mode)

    async def gpus(self, who: Principal) -> Gpus:
        s = self.service
        source = "simulated" if s.simulated else "nvml"
        outlook = await s.estimates.forecast()
        return views.gpus(
            s.gpu_infos(), s.jobs, s.holders(), s.external(), source, who, s.admin.drained, outlook
        )

    async def jobs(self, who: Principal, query: JobFilter = NO_FILTER) -> JobList:
        return views.job_list(self.service.jobs.values(), who, self.service.recent_jobs, query)

    async def submit(self, who: Principal, body: Any) -> JobView:
        request = parse(SubmitRequest, body, "job")
        return views.job_view(await self.service.submit(who, request))

    async def job(self, who: Principal, job_id: str) -> JobView:
        return views.job_view(self.service.get(who, job_id))

    async def open_lease(self, who: Principal, body: Any) -> LeaseGrant:
        return await self.service.interactive.open(who, body)

    async def cancel(self, who: Principal, job_id: str, body: Any = None) -> JobView:
        return views.job_view(await self.service.cancel(who, job_id, body))

    async def suspend(self, who: Principal, job_id: str) -> JobView:
        return views.job_view(await self.service.admin.suspend(who, job_id))

    async def resume(self, who: Principal, job_id: str) -> JobView:
        return views.job_view(await self.service.admin.resume(who, job_id))

    async def set_priority(self, who: Principal, job_id: str, body: Any) -> JobView:
        return views.job_view(await self.service.admin.set_priority(who, job_id, body))

    async def drain(self, who: Principal, gpu_id: str, body: Any) -> GpuView:
        gpu_id = await self.service.admin.drain(who, gpu_id, body)
        return next(g for g in (await self.gpus(who)).gpus if g.id == gpu_id)

    async def logs(self, who: Principal, job_id: str, tail: int) -> Logs:
        return Logs(**self.service.logs(who, job_id, tail))

    async def events(self, who: Principal, job_id: str) -> Events:
        self.service.get(who, job_id)
        rows = await self.service.store.events(job_id)
        return Events(events=[Event(**row) for row in rows])

    async def progress(self, who: Principal, job_id: str, since: float | None) -> ProgressList:
        self.service.get(who, job_id)
        return ProgressList(progress=await self.service.store.progress(job_id, since))

    async def queue(self, who: Principal) -> Queue:
        forecast = await self.service.estimates.forecast()
        queue = views.queue(self.service.jobs.values(), who, forecast, time.time())
        for entry in queue.queue:  # the caller's own, when a bound left them out (fresh
            if entry.name is not None and entry.estimated_end is None:  # entries: set them)
                entry.estimate_limit = estimates.limit(entry.id, forecast)
        return queue

    async def status(self, who: Principal, query: JobFilter = NO_FILTER) -> Status:
        s = self.service
        forecast = await s.estimates.forecast()
        return views.status(
            s.jobs.values(),
            s.gpu_infos(),
            s.holders(),
            who,
            s.recent_jobs,
            query,
            forecast,
            time.time(),
        )

    async def wait_updates(self, who: Principal, since: int, timeout: float) -> Updates:
        return Updates(version=await self.service.wait_updates(since, timeout))

    async def launches(self, who: Principal) -> Launches:
        return Launches(
            launches=self.service.pending_launches(who),
            expired=await self.service.retention.pending(who),
            ended=self.service.voided_launches(who),
        )

    async def removed(self, who: Principal, body: Any) -> Forgotten:
        return await self.service.retention.removed(who, body)

    async def keep(self, who: Principal, job_id: str, body: Any) -> JobView:
        return views.job_view(await self.service.retention.keep(who, job_id, body))

    async def heartbeat(self, job_id: str, secret: str, body: Any) -> GrantView:
        return await self.service.heartbeat(job_id, secret, body)

    async def shares(self, who: Principal) -> Shares:
        return Shares.model_validate(self.service.share_report(who))

    async def set_group_weight(self, who: Principal, group: str, body: Any) -> Shares:
        return Shares.model_validate(await self.service.set_group_weight(who, group, body))
