"""The websocket ``ws``: the status document on every change, or the panel's channel.

Its refusals before the upgrade are the map every route answers (``base.error_document``); a
backend error after it is sent as a message and the socket closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from typing import Any

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ..errors import ElasticGPUError
from . import panel
from .base import ElasticHandler, error_document

#: What the websocket ``ws`` sends (``?view=``): the status document, or the panel's channel.
WS_VIEWS = ("status", "panel")
#: The name of a websocket's pump task (one per open socket).
WS_PUMP = "elastic-gpu-ws-pump"
#: Seconds between two looks at the GPUs of a panel's socket while nothing else changes.
PANEL_GPU_S = 5.0
#: Fewest seconds between two messages of a panel's socket.
PANEL_MIN_INTERVAL_S = 0.25


class UpdatesSocket(ElasticHandler, WebSocketMixin, WebSocketHandler, JupyterHandler):
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
