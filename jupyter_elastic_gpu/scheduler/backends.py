"""One API, two places it can be answered from.

Handlers call a backend with the principal making the request and get typed models back.
``LocalBackend`` answers from a ``SchedulerService`` in this process (the embedded scheduler,
or the shared scheduler itself); ``RemoteBackend`` forwards to a shared scheduler with this
user's token, so a user's Jupyter server offers the same routes whichever mode it is in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ValidationError
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..errors import Relayed, Unavailable
from ..models import (
    Event,
    Events,
    Forgotten,
    Gpus,
    GpuView,
    GroupWeightRequest,
    JobFilter,
    JobList,
    JobView,
    KeepChange,
    Launches,
    LeaseGrant,
    LeaseView,
    Logs,
    ProgressList,
    Queue,
    Removed,
    Shares,
    Status,
    SubmitRequest,
    Updates,
    Whoami,
    parse,
)
from . import estimates, views
from .principal import Principal
from .service import SchedulerService
from .shares import check_group
from .storage import jobdirs

M = TypeVar("M", bound=BaseModel)
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
        ids = [g.id for g in s.gpu_infos()]
        forecast = await s.estimates.forecast()
        return views.status(
            s.jobs.values(), ids, s.holders(), who, s.recent_jobs, query, forecast, time.time()
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

    async def heartbeat(self, job_id: str, secret: str, body: Any) -> LeaseView:
        return await self.service.heartbeat(job_id, secret, body)

    async def shares(self, who: Principal) -> Shares:
        return Shares.model_validate(self.service.share_report(who))

    async def set_group_weight(self, who: Principal, group: str, body: Any) -> Shares:
        return Shares.model_validate(await self.service.set_group_weight(who, group, body))


class RemoteBackend:
    """Forward to a shared scheduler as this server's user (the token says who)."""

    mode = "daemon"

    def __init__(self, api_url: str, token: str, timeout: float = 30.0) -> None:
        self.api_url = api_url
        self.token = token
        self.timeout = timeout
        self.client = AsyncHTTPClient()

    async def _call(
        self,
        model: type[M],
        method: str,
        path: str,
        body: Any = None,
        query: dict | None = None,
        timeout: float | None = None,
    ) -> M:
        url = self.api_url + path + (f"?{urlencode(query)}" if query else "")
        request = HTTPRequest(
            url,
            method=method,
            body=json.dumps(body) if body is not None else None,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            request_timeout=timeout or self.timeout,
            allow_nonstandard_methods=True,
        )
        try:
            response = await self.client.fetch(request)
        except HTTPClientError as e:
            message, reason = f"the shared scheduler answered {e.code}", None
            if e.response is not None and e.response.body:
                with contextlib.suppress(ValueError, AttributeError):
                    doc = json.loads(e.response.body)
                    message, reason = doc.get("message") or message, doc.get("reason")
            raise Relayed(e.code, message, reason) from None
        except OSError as e:
            raise Unavailable(
                f"cannot reach the shared scheduler at {self.api_url}: {e}; is "
                "`jupyter elastic-gpu scheduler` running?"
            ) from None
        try:
            return model.model_validate_json(response.body or b"{}")
        except ValidationError as e:
            raise Unavailable(
                f"the shared scheduler at {self.api_url} answered {path} with a document this "
                f"version does not understand ({e.error_count()} problems): are both the same "
                "version of jupyter-elastic-gpu?"
            ) from None

    async def whoami(self, who: Principal) -> Whoami:
        return await self._call(Whoami, "GET", "whoami")

    async def gpus(self, who: Principal) -> Gpus:
        return await self._call(Gpus, "GET", "gpus")

    async def jobs(self, who: Principal, query: JobFilter = NO_FILTER) -> JobList:
        return await self._call(JobList, "GET", "jobs", query=query.as_query() or None)

    async def submit(self, who: Principal, body: Any) -> JobView:
        request = parse(SubmitRequest, body, "job")  # refuse a bad body here, with the same words
        sent = request.model_dump(mode="json", exclude={"inputs"}, exclude_none=True)
        job = await self._call(JobView, "POST", "jobs", sent)
        if request.inputs:  # this server runs as the user: it writes them where the trainer reads
            try:
                jobdirs.write_inputs(job.job_dir, request.inputs)
            except Exception:
                with contextlib.suppress(Exception):  # a job without its inputs must not run
                    await self.cancel(who, job.id)
                raise
        return job

    async def job(self, who: Principal, job_id: str) -> JobView:
        return await self._call(JobView, "GET", f"jobs/{job_id}")

    async def open_lease(self, who: Principal, body: Any) -> LeaseGrant:
        return await self._call(LeaseGrant, "POST", "leases", body)

    async def cancel(self, who: Principal, job_id: str, body: Any = None) -> JobView:
        return await self._call(JobView, "POST", f"jobs/{job_id}/cancel", body or {})

    async def suspend(self, who: Principal, job_id: str) -> JobView:
        return await self._call(JobView, "POST", f"jobs/{job_id}/suspend", {})

    async def resume(self, who: Principal, job_id: str) -> JobView:
        return await self._call(JobView, "POST", f"jobs/{job_id}/resume", {})

    async def set_priority(self, who: Principal, job_id: str, body: Any) -> JobView:
        return await self._call(JobView, "POST", f"jobs/{job_id}/priority", body)

    async def drain(self, who: Principal, gpu_id: str, body: Any) -> GpuView:
        return await self._call(GpuView, "POST", f"gpus/{gpu_id}/drain", body)

    async def logs(self, who: Principal, job_id: str, tail: int) -> Logs:
        """Read here, as this server's user: the shared scheduler authorises the caller and
        says where the job dir is, and never opens job files itself (docs/security.md)."""
        job = await self.job(who, job_id)
        return Logs(**await asyncio.to_thread(jobdirs.logs, job.job_dir, tail))

    async def events(self, who: Principal, job_id: str) -> Events:
        return await self._call(Events, "GET", f"jobs/{job_id}/events")

    async def progress(self, who: Principal, job_id: str, since: float | None) -> ProgressList:
        query = {"since": since} if since is not None else None
        return await self._call(ProgressList, "GET", f"jobs/{job_id}/progress", query=query)

    async def queue(self, who: Principal) -> Queue:
        return await self._call(Queue, "GET", "queue")

    async def status(self, who: Principal, query: JobFilter = NO_FILTER) -> Status:
        return await self._call(Status, "GET", "status", query=query.as_query() or None)

    async def wait_updates(self, who: Principal, since: int, timeout: float) -> Updates:
        query = {"since": since, "timeout": timeout}
        return await self._call(Updates, "GET", "updates", query=query, timeout=timeout + 10)

    async def launches(self, who: Principal) -> Launches:
        return await self._call(Launches, "GET", "launches")

    async def removed(self, who: Principal, body: Any) -> Forgotten:
        sent = parse(Removed, body, "removed jobs").model_dump(mode="json")
        return await self._call(Forgotten, "POST", "launches/removed", sent)

    async def keep(self, who: Principal, job_id: str, body: Any) -> JobView:
        kept = parse(KeepChange, body, "keep").kept
        return await self._call(JobView, "POST", f"jobs/{job_id}/keep", {"kept": kept})

    async def heartbeat(self, job_id: str, secret: str, body: Any) -> LeaseView:
        raise Relayed(404, "sidecars of a shared scheduler heartbeat to the scheduler itself")

    async def shares(self, who: Principal) -> Shares:
        return await self._call(Shares, "GET", "admin/shares")

    async def set_group_weight(self, who: Principal, group: str, body: Any) -> Shares:
        check_group(group)
        weight = parse(GroupWeightRequest, body, "group weight").weight
        path = f"admin/groups/{quote(group, safe='')}/weight"
        return await self._call(Shares, "PUT", path, {"weight": weight})
