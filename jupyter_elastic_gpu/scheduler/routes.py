"""The REST routes, written once and served by the Jupyter extension and by the daemon.

Each route is a small mixin that needs four things from the handler it is mixed into:
``self.backend``, ``await self.principal()`` (who is asking), ``self.reply(obj, status)`` and
``self.fail(ApiError)``. ``server/handlers.py`` mixes them into Jupyter's ``APIHandler``;
``scheduler/daemon.py`` into a plain tornado handler with per-user tokens.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .backends import ApiError, api_error

JOB_ID = r"(?P<job_id>[A-Za-z0-9_\-]{1,64})"


def _float(handler: Any, name: str, default: float | None) -> float | None:
    raw = handler.get_query_argument(name, None)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ApiError(400, f"query argument {name!r} must be a finite number, got {raw!r}")
    return value


class _Route:
    """Shared plumbing: parse JSON, answer JSON, turn service errors into HTTP answers."""

    def reply(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(obj))

    def fail(self, error: ApiError) -> None:
        self.set_status(error.status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": error.message, "reason": error.reason}))

    async def _answer(self, call, status: int = 200) -> None:
        try:
            result = await call()
        except Exception as e:
            self.fail(api_error(e))
            return
        self.reply(result, status)

    def json_body(self) -> Any:
        if not self.request.body:
            return {}
        try:
            return json.loads(self.request.body)
        except ValueError as e:
            raise ApiError(400, f"the body is not valid JSON ({e})", "bad-request") from None


class WhoamiRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.whoami(who))


class GpusRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.gpus(who))


class JobsRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.jobs(who))

    async def post(self) -> None:
        who = await self.principal()

        async def submit():
            return await self.backend.submit(who, self.json_body())

        await self._answer(submit, 201)


class JobRoute(_Route):
    async def get(self, job_id: str) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.job(who, job_id))


class CancelRoute(_Route):
    async def post(self, job_id: str) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.cancel(who, job_id), 202)


class LogsRoute(_Route):
    async def get(self, job_id: str) -> None:
        who = await self.principal()

        async def logs():
            tail = _float(self, "tail", 200)
            return await self.backend.logs(who, job_id, int(tail))

        await self._answer(logs)


class EventsRoute(_Route):
    async def get(self, job_id: str) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.events(who, job_id))


class ProgressRoute(_Route):
    async def get(self, job_id: str) -> None:
        who = await self.principal()

        async def progress():
            return await self.backend.progress(who, job_id, _float(self, "since", None))

        await self._answer(progress)


class QueueRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.queue(who))


class StatusRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.status(who))


class UpdatesRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()

        async def updates():
            since = int(_float(self, "since", 0) or 0)
            timeout = min(max(_float(self, "timeout", 25.0) or 0.0, 0.0), 60.0)
            return await self.backend.wait_updates(who, since, timeout)

        await self._answer(updates)


class LaunchesRoute(_Route):
    async def get(self) -> None:
        who = await self.principal()
        await self._answer(lambda: self.backend.launches(who))


class HeartbeatRoute(_Route):
    """Sidecars authenticate with their per-job secret, not as a user."""

    async def post(self, job_id: str) -> None:
        header = self.request.headers.get("Authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret:
            self.fail(ApiError(401, "a sidecar must send 'Authorization: Bearer <job secret>'"))
            return

        async def beat():
            return await self.backend.heartbeat(job_id, secret.strip(), self.json_body())

        await self._answer(beat)


#: (route under the API root, mixin). The order matters: longer patterns first.
ROUTES: list[tuple[str, type]] = [
    ("whoami", WhoamiRoute),
    ("gpus", GpusRoute),
    (f"jobs/{JOB_ID}/cancel", CancelRoute),
    (f"jobs/{JOB_ID}/logs", LogsRoute),
    (f"jobs/{JOB_ID}/events", EventsRoute),
    (f"jobs/{JOB_ID}/progress", ProgressRoute),
    (f"jobs/{JOB_ID}", JobRoute),
    ("jobs", JobsRoute),
    ("queue", QueueRoute),
    ("status", StatusRoute),
    ("updates", UpdatesRoute),
    ("launches", LaunchesRoute),
    (f"sidecar/{JOB_ID}/heartbeat", HeartbeatRoute),
]
