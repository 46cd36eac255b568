"""The REST routes and the websocket, as Jupyter handlers (docs/api.md, ``openapi.yaml``):
one handler per path of the route table (``scheduler/port/routes.py``), with its methods.

One set of handlers serves every deployment: the personal server, a user's server that
forwards to a shared scheduler, and the shared scheduler itself (``server/daemon.py``), which
is this same extension run standalone. Jupyter's authentication, XSRF and ``base_url`` apply
to all routes; sidecars reach one route, the heartbeat, with their per-job secret instead.
Each handler asks its app for the backend and for the caller's principal, and answers a
typed model or one error map (``errors.py``).

Each route reads at most its own body limit, decided before the body arrives
(``bodies.py``). The submit route of a user's own server takes the passed variables; the
shared scheduler's takes none. The websocket is ``updates_socket.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from pydantic import BaseModel
from tornado import web
from tornado.web import stream_request_body

from ..errors import BadRequest, ElasticGPUError, NotFound, TooLarge, Unauthorized
from ..models import JobFilter
from ..models.base import load_json
from ..models.queries import LogsQuery, ProgressQuery, UpdatesQuery
from ..scheduler.port.routes import API_PREFIX, SOCKET_PATH, paths
from ..scheduler.principal import Principal
from . import admin_page
from .base import ElasticHandler, error_document
from .bodies import (
    MAX_BODY_BYTES,
    MAX_FIELDS_BODY_BYTES,
    MAX_SMALL_BODY_BYTES,
    MAX_SUBMIT_BYTES,
    StreamedBody,
)
from .updates_socket import UpdatesSocket

#: Longest a long poll of ``updates`` may wait.
MAX_POLL_S = 60.0


@stream_request_body
class ElasticAPIHandler(ElasticHandler, StreamedBody, APIHandler):
    #: Every route needs a Jupyter user, whatever ServerApp.allow_unauthenticated_access says.
    require_user = True

    async def prepare(self) -> None:
        self._start_body()
        try:
            try:
                await super().prepare()  # the user, the host, XSRF
            except web.HTTPError as e:  # allow_unauthenticated_access=False: a bare 403
                if e.status_code != 403 or not self._lacks_credentials():
                    raise
            self._require_user()
        except web.HTTPError as e:
            if not self.refuse(e):
                raise
            return
        if self.require_user:
            self._who = await self.principal()
        self._check_declared()

    def check_xsrf_cookie(self) -> None:
        if hasattr(self, "_jupyter_current_user"):  # tornado asks once before prepare: skip it
            self._require_user()  # no credentials at all: say so (401) before XSRF (403)
        super().check_xsrf_cookie()

    def _require_user(self) -> None:
        if self.require_user and self._jupyter_current_user is None:
            raise web.HTTPError(401, self.extensionapp.how_to_authenticate)

    def _lacks_credentials(self) -> bool:
        """Refused only for want of a user (not for its host): the answer is our 401."""
        return self.require_user and self.current_user is None and self.check_host()

    def reply(self, result: Any, status: int = 200) -> None:
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(result, allow_nan=False))

    async def answer(self, result: Awaitable[Any], status: int = 200) -> None:
        """Answer with ``result``; an error it raises is answered by ``write_error``."""
        self.reply(await result, status)

    def fail(self, error: BaseException) -> None:
        """Answer ``error`` now (from ``prepare`` or a body's chunk, outside a route method)."""
        status = getattr(error, "status", None) or getattr(error, "status_code", 500)
        self.send_error(status, exc_info=(type(error), error, None))

    def send_error(self, status_code: int = 500, **kwargs: Any) -> None:
        """An ``ElasticGPUError`` is answered with its own status (tornado's is 500)."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, ElasticGPUError):
            status_code = error.status
        super().send_error(status_code, **kwargs)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every route's errors as one map (``error_document``)."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(error_document(error, status_code)))

    def log_exception(self, typ: Any, value: BaseException | None, tb: Any) -> None:
        """An ``ElasticGPUError`` is an answer that says what to do, not a fault of ours."""
        if not isinstance(value, ElasticGPUError):
            super().log_exception(typ, value, tb)

    @property
    def who(self) -> Principal:
        """The caller (set by ``prepare`` on every route that needs a user)."""
        return self._who

    def json_body(self) -> Any:
        """The body as JSON (``{}`` when empty), or BadRequest."""
        return load_json(self.request.body)

    def number(self, name: str, default: float | None) -> float | None:
        """A finite number from the query string, or BadRequest."""
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise BadRequest(f"query argument {name!r} must be a finite number, got {raw[:50]!r}")
        return value

    def job_filter(self) -> JobFilter:
        """The query's job filter (``all``, ``state``, ``user``, ``since``), or BadRequest."""
        return JobFilter.from_query(lambda name: self.get_query_argument(name, None))


class WhoamiHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.whoami(self.who))


class GpusHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.gpus(self.who))


class JobsHandler(ElasticAPIHandler):
    def max_body_bytes(self) -> int:
        if self.request.method != "POST":
            return super().max_body_bytes()
        if self._takes_inputs:
            return MAX_BODY_BYTES  # variables passed with the job travel in the submission
        return MAX_SUBMIT_BYTES

    @property
    def _takes_inputs(self) -> bool:
        """A user's own server writes a job's passed variables; the shared scheduler takes
        none (the user's server keeps them)."""
        return self.extensionapp.mode == "embedded"

    def too_large(self, size: int | None) -> TooLarge:
        refused = super().too_large(size)
        if self.request.method != "POST" or self._takes_inputs:
            return refused
        return TooLarge(
            f"{refused.message}: the shared scheduler takes no passed variables (inputs); "
            "submit through your own Jupyter server, which writes them into the job's directory"
        )

    async def get(self) -> None:
        await self.answer(self.backend.jobs(self.who, self.job_filter()))

    async def post(self) -> None:
        await self.answer(self.backend.submit(self.who, self.json_body()), 201)


class JobHandler(ElasticAPIHandler):
    async def get(self, job_id: str) -> None:
        await self.answer(self.backend.job(self.who, job_id))


class CancelHandler(ElasticAPIHandler):
    async def post(self, job_id: str) -> None:
        await self.answer(self.backend.cancel(self.who, job_id, self.json_body()), 202)


class SuspendHandler(ElasticAPIHandler):
    async def post(self, job_id: str) -> None:
        await self.answer(self.backend.suspend(self.who, job_id), 202)


class ResumeHandler(ElasticAPIHandler):
    async def post(self, job_id: str) -> None:
        await self.answer(self.backend.resume(self.who, job_id))


class PriorityHandler(ElasticAPIHandler):
    body_limit = MAX_FIELDS_BODY_BYTES

    async def post(self, job_id: str) -> None:
        await self.answer(self.backend.set_priority(self.who, job_id, self.json_body()))


class DrainHandler(ElasticAPIHandler):
    body_limit = MAX_FIELDS_BODY_BYTES

    async def post(self, gpu_id: str) -> None:
        await self.answer(self.backend.drain(self.who, gpu_id, self.json_body()))


class LogsHandler(ElasticAPIHandler):
    async def get(self, job_id: str) -> None:
        tail = int(min(max(self.number("tail", LogsQuery.default("tail")) or 0, 0), 100_000))
        await self.answer(self.backend.logs(self.who, job_id, tail))


class EventsHandler(ElasticAPIHandler):
    async def get(self, job_id: str) -> None:
        await self.answer(self.backend.events(self.who, job_id))


class ProgressHandler(ElasticAPIHandler):
    async def get(self, job_id: str) -> None:
        since = self.number("since", ProgressQuery.default("since"))
        await self.answer(self.backend.progress(self.who, job_id, since))


class QueueHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.queue(self.who))


class StatusHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.status(self.who, self.job_filter()))


class KeepHandler(ElasticAPIHandler):
    body_limit = MAX_FIELDS_BODY_BYTES

    async def post(self, job_id: str) -> None:
        await self.answer(self.backend.keep(self.who, job_id, self.json_body()))


class RemovedHandler(ElasticAPIHandler):
    body_limit = MAX_SMALL_BODY_BYTES

    async def post(self) -> None:
        await self.answer(self.backend.removed(self.who, self.json_body()))


class UpdatesHandler(ElasticAPIHandler):
    async def get(self) -> None:
        since = int(min(max(self.number("since", UpdatesQuery.default("since")) or 0, -1), 2**62))
        timeout = min(
            max(self.number("timeout", UpdatesQuery.default("timeout")) or 0.0, 0.0), MAX_POLL_S
        )
        await self.answer(self.backend.wait_updates(self.who, since, timeout))


class LaunchesHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.launches(self.who))


class HeartbeatHandler(ElasticAPIHandler):
    """Sidecars authenticate with their per-job secret (Bearer), so Jupyter's login and XSRF
    do not apply."""

    require_user = False
    body_limit = MAX_SMALL_BODY_BYTES

    @allow_unauthenticated
    async def post(self, job_id: str) -> None:
        header = self.request.headers.get("Authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized("a sidecar must send 'Authorization: Bearer <job secret>'")
        # The raw body: the service checks the secret first, then parses (nothing of an
        # unauthenticated request is parsed).
        await self.answer(self.backend.heartbeat(job_id, secret.strip(), self.request.body))

    def check_xsrf_cookie(self) -> None:
        return None


class SharesHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.shares(self.who))


class GroupWeightHandler(ElasticAPIHandler):
    body_limit = MAX_FIELDS_BODY_BYTES

    async def put(self, group: str) -> None:
        await self.answer(self.backend.set_group_weight(self.who, group, self.json_body()))


# -- interactive GPU leases (docs/interactive-gpus.md) ----------------------------------------


class LeasesHandler(ElasticAPIHandler):
    """``POST leases``: GPUs for a kernel, asked by its provisioner as the kernel's user."""

    body_limit = MAX_FIELDS_BODY_BYTES

    async def post(self) -> None:
        await self.answer(self.backend.open_lease(self.who, self.json_body()), 201)


class KernelLeaseHandler(ElasticAPIHandler):
    """``POST kernels/ID/lease``: lease GPUs for one of this server's running kernels and
    restart it with them (``%gpu_lease``); the kernel is left alone when none can be had."""

    body_limit = MAX_FIELDS_BODY_BYTES

    async def post(self, kernel_id: str) -> None:
        from ..kernels.restart import restart_with_lease

        body = self.json_body()
        await self.answer(restart_with_lease(self.serverapp, kernel_id, body), 202)


# -- end of interactive GPU leases ------------------------------------------------------------


class NoRouteHandler(ElasticAPIHandler):
    """Any other path under the API root, with any method and any credentials: a JSON 404
    (not the Jupyter server's HTML page or redirect)."""

    require_user = False

    async def prepare(self) -> None:
        await super().prepare()
        if self._finished or self._refused is not None:  # (a body too large: 413 first)
            return
        missing = NotFound("no such route: docs/api.md lists the routes")
        if not self.refuse(missing):
            self.fail(missing)

    def check_xsrf_cookie(self) -> None:
        return None


#: The handler of each route of the table (``routes.ROUTE_TABLE``), by the route's name: the
#: routes of one path share one handler, which defines exactly their methods (a test checks).
HANDLERS: dict[str, type] = {
    "whoami": WhoamiHandler,
    "gpus": GpusHandler,
    "jobs": JobsHandler,
    "submit": JobsHandler,
    "open_lease": LeasesHandler,
    "lease_kernel": KernelLeaseHandler,
    "job": JobHandler,
    "cancel": CancelHandler,
    "logs": LogsHandler,
    "events": EventsHandler,
    "progress": ProgressHandler,
    "queue": QueueHandler,
    "status": StatusHandler,
    "wait_updates": UpdatesHandler,
    "launches": LaunchesHandler,
    "removed": RemovedHandler,
    "heartbeat": HeartbeatHandler,
    "suspend": SuspendHandler,
    "resume": ResumeHandler,
    "set_priority": PriorityHandler,
    "keep": KeepHandler,
    "drain": DrainHandler,
    "shares": SharesHandler,
    "set_group_weight": GroupWeightHandler,
}

#: (route under the API root as a pattern, handler): one per path of the table, and the
#: websocket.
ROUTES: list[tuple[str, type]] = [
    *((same[0].pattern(), HANDLERS[same[0].name]) for same in paths().values()),
    (SOCKET_PATH, UpdatesSocket),
]


def handlers() -> list[tuple]:
    """(URL pattern, handler) for every route, then a JSON 404 for any other path under the
    API root, then the admin page; ExtensionApp puts ``base_url`` in front."""
    routes = [(url_path_join("/", API_PREFIX, route), cls) for route, cls in ROUTES]
    return [
        *routes,
        (url_path_join("/", API_PREFIX) + "(?:/.*)?", NoRouteHandler),
        *admin_page.handlers(API_PREFIX),
    ]
