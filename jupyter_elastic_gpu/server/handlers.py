"""The REST routes as Jupyter handlers: Jupyter's auth, XSRF and base_url apply to all of them.

The user is the hub user under JupyterHub, otherwise the account this server runs as (a plain
Jupyter server has one user; its token proves it). Sidecars reach one route, the heartbeat,
with their per-job secret instead of a Jupyter token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ..scheduler.backends import ApiError
from ..scheduler.routes import ROUTES, HeartbeatRoute
from ..scheduler.service import Principal

API_PREFIX = "elastic-gpu/api"


class _Identity:
    """Who is asking, from Jupyter's authenticated user."""

    @property
    def backend(self) -> Any:
        return self.settings["elastic_gpu_backend"]

    async def principal(self) -> Principal:
        user = self.current_user
        hub_user = getattr(user, "hub_user", None)
        admins = set(self.settings.get("elastic_gpu_admin_users", ()))
        if isinstance(hub_user, dict) and hub_user.get("name"):
            name = hub_user["name"]
            return Principal(name, bool(hub_user.get("admin")) or name in admins)
        name = self.settings["elastic_gpu_owner"]
        return Principal(name, name in admins)


class ElasticAPIHandler(_Identity, ExtensionHandlerMixin, APIHandler):
    #: Every route needs a Jupyter user, whatever ServerApp.allow_unauthenticated_access says.
    require_user = True

    async def prepare(self) -> None:
        await super().prepare()
        if self.require_user and self.current_user is None:
            raise web.HTTPError(403, "log in to Jupyter (or send its token) to use this API")


class HeartbeatHandler(HeartbeatRoute, ElasticAPIHandler):
    """Authenticated by the job's secret (Bearer), so Jupyter's login and XSRF do not apply."""

    require_user = False

    @allow_unauthenticated
    async def post(self, job_id: str) -> None:
        await HeartbeatRoute.post(self, job_id)

    def check_xsrf_cookie(self) -> None:
        return None


class UpdatesSocket(
    _Identity, WebSocketMixin, WebSocketHandler, ExtensionHandlerMixin, JupyterHandler
):
    """Pushes the status document on every change (the sidebar and widgets listen here)."""

    def set_default_headers(self) -> None:
        """No JupyterHandler headers on a websocket upgrade."""

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        self._who = await self.principal()
        await super().get(*args, **kwargs)

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open()
        self._pump_task = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        version = -1
        try:
            while True:
                status = await self.backend.status(self._who)
                self.write_message(
                    json.dumps({"type": "update", "version": version, "status": status})
                )
                version = (await self.backend.wait_updates(self._who, version, 25.0))["version"]
        except (WebSocketClosedError, asyncio.CancelledError):
            pass
        except ApiError as e:
            with contextlib.suppress(WebSocketClosedError):
                self.write_message(json.dumps({"type": "error", "message": e.message}))
            self.close()

    def on_message(self, message: Any) -> None:
        """Clients only listen."""

    def on_close(self) -> None:
        task = getattr(self, "_pump_task", None)
        if task:
            task.cancel()


def handlers(base_url: str) -> list[tuple[str, type]]:
    """(URL pattern, handler) for every route, under ``{base_url}elastic-gpu/api/``."""
    out = []
    for route, mixin in ROUTES:
        if mixin is HeartbeatRoute:
            cls = HeartbeatHandler
        else:
            cls = type(f"{mixin.__name__}Handler", (mixin, ElasticAPIHandler), {})
        out.append((url_path_join(base_url, API_PREFIX, route), cls))
    out.append((url_path_join(base_url, API_PREFIX, "ws"), UpdatesSocket))
    return out


__all__ = ["API_PREFIX", "handlers"]
