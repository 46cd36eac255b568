"""``RemoteBackend``: the API forwarded to a shared scheduler (or the Hub service) with this
server's user's token, so that a user's Jupyter server offers the same routes in every mode.
What needs the user's own rights (writing a job's passed variables, reading its log) is done
here, as that user; the shared scheduler never opens job files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlencode

from pydantic import ValidationError
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ...errors import Relayed, Unavailable
from ...models import (
    Events,
    Forgotten,
    Gpus,
    GpuView,
    GrantView,
    GroupWeightRequest,
    JobFilter,
    JobList,
    JobView,
    KeepChange,
    Launches,
    LeaseGrant,
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
from ..principal import Principal
from ..shares import check_group
from ..storage import jobdirs
from .routes import route
from .views import NO_FILTER


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
        name: str,
        body: Any = None,
        query: dict | None = None,
        timeout: float | None = None,
        **params: str,
    ) -> Any:
        """Route ``name`` of the table (its method, path and answer's model), with the path
        parameters ``params``."""
        spec = route(name)
        path = spec.url(**params)
        if body is None and spec.method != "GET":
            body = {}
        url = self.api_url + path + (f"?{urlencode(query)}" if query else "")
        request = HTTPRequest(
            url,
            method=spec.method,
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
            return spec.response.model_validate_json(response.body or b"{}")
        except ValidationError as e:
            raise Unavailable(
                f"the shared scheduler at {self.api_url} answered {path} with a document this "
                f"version does not understand ({e.error_count()} problems): are both the same "
                "version of jupyter-elastic-gpu?"
            ) from None

    async def whoami(self, who: Principal) -> Whoami:
        return await self._call("whoami")

    async def gpus(self, who: Principal) -> Gpus:
        return await self._call("gpus")

    async def jobs(self, who: Principal, query: JobFilter = NO_FILTER) -> JobList:
        return await self._call("jobs", query=query.as_query() or None)

    async def submit(self, who: Principal, body: Any) -> JobView:
        request = parse(SubmitRequest, body, "job")  # refuse a bad body here, with the same words
        sent = request.model_dump(mode="json", exclude={"inputs"}, exclude_none=True)
        job = await self._call("submit", sent)
        if request.inputs:  # this server runs as the user: it writes them where the trainer reads
            try:
                jobdirs.write_inputs(job.job_dir, request.inputs)
            except Exception:
                with contextlib.suppress(Exception):  # a job without its inputs must not run
                    await self.cancel(who, job.id)
                raise
        return job

    async def job(self, who: Principal, job_id: str) -> JobView:
        return await self._call("job", job_id=job_id)

    async def open_lease(self, who: Principal, body: Any) -> LeaseGrant:
        return await self._call("open_lease", body)

    async def cancel(self, who: Principal, job_id: str, body: Any = None) -> JobView:
        return await self._call("cancel", body, job_id=job_id)

    async def suspend(self, who: Principal, job_id: str) -> JobView:
        return await self._call("suspend", job_id=job_id)

    async def resume(self, who: Principal, job_id: str) -> JobView:
        return await self._call("resume", job_id=job_id)

    async def set_priority(self, who: Principal, job_id: str, body: Any) -> JobView:
        return await self._call("set_priority", body, job_id=job_id)

    async def drain(self, who: Principal, gpu_id: str, body: Any) -> GpuView:
        return await self._call("drain", body, gpu_id=gpu_id)

    async def logs(self, who: Principal, job_id: str, tail: int) -> Logs:
        """Read here, as this server's user: the shared scheduler authorises the caller and
        says where the job dir is, and never opens job files itself (docs/security.md)."""
        job = await self.job(who, job_id)
        return Logs(**await asyncio.to_thread(jobdirs.logs, job.job_dir, tail))

    async def events(self, who: Principal, job_id: str) -> Events:
        return await self._call("events", job_id=job_id)

    async def progress(self, who: Principal, job_id: str, since: float | None) -> ProgressList:
        query = {"since": since} if since is not None else None
        return await self._call("progress", query=query, job_id=job_id)

    async def queue(self, who: Principal) -> Queue:
        return await self._call("queue")

    async def status(self, who: Principal, query: JobFilter = NO_FILTER) -> Status:
        return await self._call("status", query=query.as_query() or None)

    async def wait_updates(self, who: Principal, since: int, timeout: float) -> Updates:
        query = {"since": since, "timeout": timeout}
        return await self._call("wait_updates", query=query, timeout=timeout + 10)

    async def launches(self, who: Principal) -> Launches:
        return await self._call("launches")

    async def removed(self, who: Principal, body: Any) -> Forgotten:
        sent = parse(Removed, body, "removed jobs").model_dump(mode="json")
        return await self._call("removed", sent)

    async def keep(self, who: Principal, job_id: str, body: Any) -> JobView:
        kept = parse(KeepChange, body, "keep").kept
        return await self._call("keep", {"kept": kept}, job_id=job_id)

    async def heartbeat(self, job_id: str, secret: str, body: Any) -> GrantView:
        raise Relayed(404, "sidecars of a shared scheduler heartbeat to the scheduler itself")

    async def shares(self, who: Principal) -> Shares:
        return await self._call("shares")

    async def set_group_weight(self, who: Principal, group: str, body: Any) -> Shares:
        check_group(group)
        weight = parse(GroupWeightRequest, body, "group weight").weight
        return await self._call("set_group_weight", {"weight": weight}, group=group)
