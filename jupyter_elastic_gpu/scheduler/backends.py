"""One API, two places it can be answered from.

Handlers call a backend with the principal making the request. ``LocalBackend`` answers from a
``SchedulerService`` in this process (the embedded scheduler, or the daemon itself);
``RemoteBackend`` forwards to a shared ``jupyter elastic-gpu scheduler`` daemon with this
user's token, so a user's Jupyter server offers the same routes whichever mode it is in.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any
from urllib.parse import urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from .jobs import full_view
from .launcher import write_inputs
from .requests import BadRequest, parse_submit
from .service import Forbidden, NotFound, Principal, SchedulerService, Unauthorized


class ApiError(Exception):
    """An error with the HTTP status and the sentence to show the user."""

    def __init__(self, status: int, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason


def api_error(e: Exception) -> ApiError:
    """Map the service's exceptions to HTTP answers."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, BadRequest):
        return ApiError(400, str(e), "bad-request")
    if isinstance(e, Unauthorized):
        return ApiError(401, str(e), "unauthorized")
    if isinstance(e, Forbidden):
        return ApiError(403, str(e), "forbidden")
    if isinstance(e, NotFound):
        return ApiError(404, str(e), "not-found")
    raise e


class LocalBackend:
    def __init__(self, service: SchedulerService, mode: str = "embedded") -> None:
        self.service, self.mode = service, mode

    async def whoami(self, who: Principal) -> dict[str, Any]:
        return {"user": who.user, "admin": who.admin, "mode": self.mode}

    async def gpus(self, who: Principal) -> dict[str, Any]:
        return self.service.gpu_view(who)

    async def jobs(self, who: Principal) -> dict[str, Any]:
        return {"jobs": self.service.job_views(who)}

    async def submit(self, who: Principal, body: Any) -> dict[str, Any]:
        return full_view(await self.service.submit(who, parse_submit(body)))

    async def job(self, who: Principal, job_id: str) -> dict[str, Any]:
        return full_view(self.service.get(who, job_id))

    async def cancel(self, who: Principal, job_id: str) -> dict[str, Any]:
        return full_view(await self.service.cancel(who, job_id))

    async def logs(self, who: Principal, job_id: str, tail: int) -> dict[str, Any]:
        return self.service.logs(who, job_id, tail)

    async def events(self, who: Principal, job_id: str) -> dict[str, Any]:
        return {"events": await self.service.events(who, job_id)}

    async def progress(self, who: Principal, job_id: str, since: float | None) -> dict[str, Any]:
        return {"progress": await self.service.progress(who, job_id, since)}

    async def queue(self, who: Principal) -> dict[str, Any]:
        return {"queue": self.service.queue_view(who)}

    async def status(self, who: Principal) -> dict[str, Any]:
        return self.service.status_view(who)

    async def wait_updates(self, who: Principal, since: int, timeout: float) -> dict[str, Any]:
        return {"version": await self.service.wait_updates(since, timeout)}

    async def launches(self, who: Principal) -> dict[str, Any]:
        return {"launches": self.service.pending_launches(who)}

    async def heartbeat(self, job_id: str, secret: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest("the heartbeat body must be a JSON object")
        return await self.service.heartbeat(job_id, secret, body)


class RemoteBackend:
    """Forward to a shared daemon as this server's user (the token says who)."""

    mode = "daemon"

    def __init__(self, api_url: str, token: str, timeout: float = 30.0) -> None:
        self.api_url = api_url.rstrip("/") + "/"
        self.token = token
        self.timeout = timeout
        self.client = AsyncHTTPClient()

    async def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
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
            message = f"the shared scheduler answered {e.code}"
            if e.response is not None and e.response.body:
                with contextlib.suppress(ValueError):
                    message = json.loads(e.response.body).get("message", message)
            raise ApiError(e.code, message) from None
        except OSError as e:
            raise ApiError(
                503,
                f"cannot reach the shared scheduler at {self.api_url}: {e}; is "
                "`jupyter elastic-gpu scheduler` running?",
                "unavailable",
            ) from None
        return json.loads(response.body) if response.body else {}

    async def whoami(self, who: Principal) -> dict[str, Any]:
        return await self._call("GET", "whoami")

    async def gpus(self, who: Principal) -> dict[str, Any]:
        return await self._call("GET", "gpus")

    async def jobs(self, who: Principal) -> dict[str, Any]:
        return await self._call("GET", "jobs")

    async def submit(self, who: Principal, body: Any) -> dict[str, Any]:
        parse_submit(body)  # refuse a bad body here, with the same message
        inputs = body.get("inputs")
        job = await self._call("POST", "jobs", {**body, "inputs": {}})
        if inputs:  # this server runs as the user: it writes them where the trainer reads
            write_inputs(job["job_dir"], inputs)
        return job

    async def job(self, who: Principal, job_id: str) -> dict[str, Any]:
        return await self._call("GET", f"jobs/{job_id}")

    async def cancel(self, who: Principal, job_id: str) -> dict[str, Any]:
        return await self._call("POST", f"jobs/{job_id}/cancel", {})

    async def logs(self, who: Principal, job_id: str, tail: int) -> dict[str, Any]:
        return await self._call("GET", f"jobs/{job_id}/logs", query={"tail": tail})

    async def events(self, who: Principal, job_id: str) -> dict[str, Any]:
        return await self._call("GET", f"jobs/{job_id}/events")

    async def progress(self, who: Principal, job_id: str, since: float | None) -> dict[str, Any]:
        query = {"since": since} if since is not None else None
        return await self._call("GET", f"jobs/{job_id}/progress", query=query)

    async def queue(self, who: Principal) -> dict[str, Any]:
        return await self._call("GET", "queue")

    async def status(self, who: Principal) -> dict[str, Any]:
        return await self._call("GET", "status")

    async def wait_updates(self, who: Principal, since: int, timeout: float) -> dict[str, Any]:
        return await self._call(
            "GET", "updates", query={"since": since, "timeout": timeout}, timeout=timeout + 10
        )

    async def launches(self, who: Principal) -> dict[str, Any]:
        return await self._call("GET", "launches")

    async def heartbeat(self, job_id: str, secret: str, body: Any) -> dict[str, Any]:
        raise ApiError(404, "sidecars of a shared scheduler heartbeat to the daemon itself")
