"""The REST routes and the websocket, as Jupyter handlers (docs/api.md, ``openapi.yaml``).

One set of handlers serves every deployment: the personal server, a user's server that
forwards to a shared scheduler, and the shared scheduler itself (``server/daemon.py``), which
is this same extension run standalone. Jupyter's authentication, XSRF and ``base_url`` apply
to all routes; sidecars reach one route, the heartbeat, with their per-job secret instead.
Each handler asks its app for the backend and for the caller's principal, and answers a
typed model or one error map (``errors.py``).

Each route reads at most its own body limit, decided before the body arrives: the handlers
stream their bodies (``stream_request_body``), so a Content-Length over the limit is refused
from the headers, and a chunked body is cut off where it passes the limit. The submit route of
a user's own server takes the passed variables; the shared scheduler's takes none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Awaitable
from http.client import responses
from typing import Any

from elastic_gpu_sidecar.protocol import MAX_GPU_ID_CHARS
from jupyter_server.auth.decorator import allow_unauthenticated, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join
from pydantic import BaseModel
from tornado import web
from tornado.web import stream_request_body
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ..errors import BadRequest, ElasticGPUError, NotFound, TooLarge, Unauthorized
from ..models import JobFilter
from ..models.base import load_json
from ..scheduler.principal import Principal
from . import admin_page, panel
from .credentials import scrub_query

#: Where the API lives under a server's base_url (the embedded and the shared scheduler alike).
API_PREFIX = "elastic-gpu/api"
JOB_ID = r"(?P<job_id>[A-Za-z0-9_\-]{1,64})"
#: A group name in a path (checked further by the backend).
GROUP = r"(?P<group>[^/]{1,1024})"
GPU_ID = rf"(?P<gpu_id>[A-Za-z0-9_\-:.]{{1,{MAX_GPU_ID_CHARS}}})"
#: Largest body of a submission to a user's own server (personal mode, or the server that
#: forwards to a shared scheduler): the variables passed with a job travel in it.
MAX_BODY_BYTES = 256 * 1024 * 1024
#: Largest body of a submission to the shared scheduler or the Hub service, which takes no
#: passed variables: a 1 MB script even at its most escaped, with its args, name and paths.
MAX_SUBMIT_BYTES = 8 * 1024 * 1024
#: Largest body of a heartbeat (a backlog of progress records) or of a list of removed jobs.
MAX_SMALL_BODY_BYTES = 1024 * 1024
#: Largest body of a route that takes a few fields (priority, drain, keep, weight, a lease).
MAX_FIELDS_BODY_BYTES = 64 * 1024
#: Largest body of a route that reads none (every GET; cancel, suspend, resume).
MAX_EMPTY_BODY_BYTES = 4 * 1024
#: A refused body up to this size is read to its end and dropped before the 413 goes out: a
#: client that reads its answer only once it has sent everything (urllib, requests) would
#: otherwise see the connection reset instead. A larger one is answered at once, as is one
#: whose client waits for ``100-continue``.
DRAIN_BYTES = 512 * 1024 * 1024
#: Longest a long poll of ``updates`` may wait.
MAX_POLL_S = 60.0
#: What the websocket ``ws`` sends (``?view=``): the status document, or the panel's channel.
WS_VIEWS = ("status", "panel")
#: The name of a websocket's pump task (one per open socket).
WS_PUMP = "elastic-gpu-ws-pump"
#: Seconds between two looks at the GPUs of a panel's socket while nothing else changes.
PANEL_GPU_S = 5.0
#: Fewest seconds between two messages of a panel's socket.
PANEL_MIN_INTERVAL_S = 0.25


class _ElasticHandler(ExtensionHandlerMixin):
    """What every route needs from its app: the backend, and who is asking."""

    @property
    def backend(self) -> Any:
        return self.extensionapp.backend

    async def principal(self) -> Principal:
        return self.extensionapp.principal_of(self.current_user)

    def _request_summary(self) -> str:
        """The request as tornado's warnings name it, without credentials: a refused request
        may carry a real token with a typo, or one meant for another service."""
        return f"{self.request.method} {scrub_query(self.request.uri or '')} ({self.request.remote_ip})"


def error_document(error: BaseException | None, status: int) -> dict[str, Any]:
    """What a client is told of an error, on every route and the websocket: the message that
    says what to do and a machine-readable ``reason`` (``errors.py``). A fault of ours says
    only where to look."""
    if isinstance(error, ElasticGPUError):
        return {"message": error.message, "reason": error.reason}
    if isinstance(error, web.HTTPError):  # tornado's and Jupyter's own refusals
        message = error.log_message % error.args if error.args else error.log_message
        return {"message": message or responses.get(status, "error"), "reason": error.reason}
    return {"message": f"internal error ({status}): see the server's log", "reason": "internal"}


def _size(n: int) -> str:
    return f"{n / 2**20:.3g} MB" if n >= 2**20 else f"{n / 2**10:.3g} kB"


@stream_request_body
class ElasticAPIHandler(_ElasticHandler, APIHandler):
    #: Every route needs a Jupyter user, whatever ServerApp.allow_unauthenticated_access says.
    require_user = True

    #: The largest body this route's POST or PUT reads; a larger one is refused unread.
    body_limit = MAX_EMPTY_BODY_BYTES

    def max_body_bytes(self) -> int:
        if self.request.method in ("GET", "HEAD"):
            return MAX_EMPTY_BODY_BYTES
        return self.body_limit

    def too_large(self, size: int | None) -> TooLarge:
        """The refusal of a body of ``size`` bytes (None: a chunked one, cut off) over this
        route's limit."""
        limit = _size(self._limit)
        if size is None:
            return TooLarge(f"the body is larger than {limit}, the most this route takes")
        return TooLarge(f"the body is {_size(size)}, more than the {limit} this route takes")

    async def prepare(self) -> None:
        # The body arrives after this, chunk by chunk (``data_received``), into request.body.
        self._body = bytearray()
        self.request.body = self._body  # type: ignore[assignment]
        self._refused: ElasticGPUError | web.HTTPError | None = None
        self._unread = 0
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
        self._limit = self.max_body_bytes()
        declared = self._declared()
        if declared is None or declared <= self._limit:
            return
        refused = self.too_large(declared)
        if not self.refuse(refused):
            self.fail(refused)

    def _declared(self) -> int | None:
        """The body's Content-Length; None when there is none (chunked, or no body) or it is
        malformed (tornado answers that)."""
        try:
            return int(self.request.headers.get("Content-Length", ""))
        except ValueError:
            return None

    def refuse(self, error: ElasticGPUError | web.HTTPError) -> bool:
        """Answer ``error`` once the body sent with the request has been read and dropped;
        False when it should be answered at once (no body, a chunked one, one too large to
        read, or a client waiting for ``100-continue``). Answered while the client still
        sends, the connection is closed with the body unread, and the client sees a reset or
        a broken pipe instead of the answer."""
        declared = self._declared()
        waits = self.request.headers.get("Expect", "").lower() == "100-continue"
        if not declared or declared > DRAIN_BYTES or waits:
            return False
        self.request.connection.set_max_body_size(declared)  # read to its end, then answer
        self._refused, self._unread = error, declared
        return True

    def data_received(self, chunk: bytes) -> None:
        if self._finished:
            return
        if self._refused is not None:  # a refused request's body, read and dropped
            self._unread -= len(chunk)
            if self._unread <= 0:
                self.fail(self._refused)
            return
        if len(self._body) + len(chunk) > self._limit:  # chunked, past the limit: cut off
            self.fail(self.too_large(None))
            return
        self._body += chunk

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
        tail = int(min(max(self.number("tail", 200) or 0, 0), 100_000))
        await self.answer(self.backend.logs(self.who, job_id, tail))


class EventsHandler(ElasticAPIHandler):
    async def get(self, job_id: str) -> None:
        await self.answer(self.backend.events(self.who, job_id))


class ProgressHandler(ElasticAPIHandler):
    async def get(self, job_id: str) -> None:
        since = self.number("since", None)
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
        since = int(min(max(self.number("since", 0) or 0, -1), 2**62))
        timeout = min(max(self.number("timeout", 25.0) or 0.0, 0.0), MAX_POLL_S)
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


class UpdatesSocket(_ElasticHandler, WebSocketMixin, WebSocketHandler, JupyterHandler):
    """Pushes the status document on every change (``?view=status``, the default), or the
    panel's GPUs, queue and jobs as a snapshot and then deltas (``?view=panel``)."""

    def set_default_headers(self) -> None:
        """No JupyterHandler headers on a websocket upgrade."""

    async def prepare(self, *args: Any, **kwargs: Any) -> None:
        """No credentials: 401 with the JSON message every route gives (Jupyter says 403)."""
        try:
            await super().prepare(*args, **kwargs)
        except web.HTTPError as e:  # ServerApp.allow_unauthenticated_access=False
            if e.status_code != 403 or self.current_user is not None or not self.check_host():
                raise
        if self.current_user is None:
            raise web.HTTPError(401, self.extensionapp.how_to_authenticate)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Refusals before the upgrade are the map every other route answers."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(error_document(error, status_code)))

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        self._view = self.get_query_argument("view", "status")
        if self._view not in WS_VIEWS:
            raise web.HTTPError(
                400, f"unknown view {self._view[:40]!r}: choose {' or '.join(WS_VIEWS)}"
            )
        self._who = await self.principal()
        await super().get(*args, **kwargs)

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open()
        pump = self._pump_panel if self._view == "panel" else self._pump_status
        self._pump_task = asyncio.create_task(self._guarded(pump()), name=WS_PUMP)

    async def _guarded(self, pump: Awaitable[None]) -> None:
        """Run a pump until the socket closes; a backend error is said, then the socket closes."""
        try:
            await pump
        except (WebSocketClosedError, asyncio.CancelledError):
            pass
        except ElasticGPUError as e:
            with contextlib.suppress(WebSocketClosedError):
                self.write_message(json.dumps({"type": "error", **error_document(e, e.status)}))
            self.close()

    async def _pump_status(self) -> None:
        version = -1
        while True:
            status = (await self.backend.status(self._who)).model_dump(mode="json")
            self.write_message(json.dumps({"type": "update", "version": version, "status": status}))
            version = (await self.backend.wait_updates(self._who, version, 25.0)).version

    async def _pump_panel(self) -> None:
        """A snapshot, then deltas (``panel.py``). The GPUs are looked at again every
        ``PANEL_GPU_S`` without a change of state too: their utilisation moves by itself."""
        who, clock = self._who, asyncio.get_running_loop().time
        version = (await self.backend.wait_updates(who, -1, 0.0)).version
        docs = await panel.documents(self.backend, who)
        await self.write_message(json.dumps(panel.snapshot(version, docs)))
        while True:
            since, pushed = version, clock()
            version = (await self.backend.wait_updates(who, version, PANEL_GPU_S)).version
            # At most one push every PANEL_MIN_INTERVAL_S: changes that come together (500
            # jobs' heartbeats) go out as one delta.
            await asyncio.sleep(max(0.0, pushed + PANEL_MIN_INTERVAL_S - clock()))
            if version != since:  # the documents read next are at least this new
                version = (await self.backend.wait_updates(who, -1, 0.0)).version
            keys = panel.DOCUMENTS if version != since else ("gpus",)
            fresh = {**docs, **await panel.documents(self.backend, who, keys)}
            message = panel.delta(version, docs, fresh)
            if message is None and version != since:
                message = {"type": "delta", "version": version}  # nothing new for this caller
            if message:
                await self.write_message(json.dumps(message))
                docs = fresh

    def on_message(self, message: Any) -> None:
        """Clients only listen."""

    def on_close(self) -> None:
        task = getattr(self, "_pump_task", None)
        if task:
            task.cancel()


class SharesHandler(ElasticAPIHandler):
    async def get(self) -> None:
        await self.answer(self.backend.shares(self.who))


class GroupWeightHandler(ElasticAPIHandler):
    body_limit = MAX_FIELDS_BODY_BYTES

    async def put(self, group: str) -> None:
        await self.answer(self.backend.set_group_weight(self.who, group, self.json_body()))


# -- interactive GPU leases (docs/interactive-gpus.md) ----------------------------------------
KERNEL_ID = r"(?P<kernel_id>[A-Za-z0-9\-]{1,64})"


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


#: (route under the API root, handler). Longer patterns first.
ROUTES: list[tuple[str, type]] = [
    ("whoami", WhoamiHandler),
    ("gpus", GpusHandler),
    (f"jobs/{JOB_ID}/cancel", CancelHandler),
    (f"jobs/{JOB_ID}/logs", LogsHandler),
    (f"jobs/{JOB_ID}/events", EventsHandler),
    (f"jobs/{JOB_ID}/progress", ProgressHandler),
    (f"jobs/{JOB_ID}", JobHandler),
    ("jobs", JobsHandler),
    ("leases", LeasesHandler),
    (f"kernels/{KERNEL_ID}/lease", KernelLeaseHandler),
    ("queue", QueueHandler),
    ("status", StatusHandler),
    ("updates", UpdatesHandler),
    ("launches", LaunchesHandler),
    (f"sidecar/{JOB_ID}/heartbeat", HeartbeatHandler),
    ("ws", UpdatesSocket),
    ("admin/shares", SharesHandler),
    (f"admin/groups/{GROUP}/weight", GroupWeightHandler),
    (f"jobs/{JOB_ID}/suspend", SuspendHandler),
    (f"jobs/{JOB_ID}/resume", ResumeHandler),
    (f"jobs/{JOB_ID}/priority", PriorityHandler),
    (f"jobs/{JOB_ID}/keep", KeepHandler),
    ("launches/removed", RemovedHandler),
    (f"gpus/{GPU_ID}/drain", DrainHandler),
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
