"""How a kernel's provisioner reaches the scheduler, as the kernel's user.

Inside a Jupyter server with this extension (kernels started by JupyterLab, or by Voila as a
server extension) the provisioner asks the extension's own backend, whatever its mode: the
embedded scheduler, or the shared or JupyterHub one with the server's own token. Anywhere else
(nbclient, papermill, a kernel started by a kernel) it finds the scheduler as the CLI does
(``notebook/discovery.py``): ``ELASTIC_GPU_URL``, the Jupyter server among its parents, or the
shared daemon. Heartbeats go to the URL the scheduler gave with the lease, with its secret.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..errors import ElasticGPUError, Relayed, Unavailable

#: The Jupyter server extension running in this process, if any (set by ``ElasticGPUApp``).
_app: Any = None


def register_app(app: Any) -> None:
    global _app
    _app = app


def unregister_app(app: Any) -> None:
    """Forget ``app`` once it stopped (a later server in this process registers its own;
    none left: the provisioner finds the scheduler as the CLI does)."""
    global _app
    if _app is app:
        _app = None


class Channel:
    """The calls a provisioner makes; every answer is the API's JSON document."""

    async def open(self, body: dict) -> dict:
        raise NotImplementedError

    async def queue(self) -> dict:
        raise NotImplementedError

    async def beat(self, lease: dict, body: dict) -> dict:
        """POST the heartbeat ``body`` for ``lease`` (the answer to POST leases: its URL and secret)."""
        request = HTTPRequest(
            lease["heartbeat_url"],
            method="POST",
            body=json.dumps(body),
            headers={
                "Authorization": f"Bearer {lease['secret']}",
                "Content-Type": "application/json",
            },
            request_timeout=10.0,
        )
        try:
            response = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as e:
            raise Relayed(e.code, f"the scheduler answered {e.code} to a lease heartbeat") from None
        except OSError as e:
            raise Unavailable(f"cannot reach the scheduler for a lease heartbeat: {e}") from None
        return json.loads(response.body or b"{}")


class InServer(Channel):
    """The extension's backend in this process, as the server's user."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def _who(self) -> Any:
        from ..scheduler.principal import Principal

        return Principal(self.app.owner)

    async def open(self, body: dict) -> dict:
        lease = await self.app.backend.open_lease(self._who(), body)
        return lease.model_dump(mode="json")

    async def queue(self) -> dict:
        return (await self.app.backend.queue(self._who())).model_dump(mode="json")

    async def beat(self, lease: dict, body: dict) -> dict:
        from ..scheduler.port.local import LocalBackend

        if not isinstance(self.app.backend.inner, LocalBackend):  # a shared scheduler: over HTTP
            return await super().beat(lease, body)
        job_id = lease["job"]["id"]
        view = await self.app.backend.heartbeat(job_id, lease["secret"], json.dumps(body).encode())
        return view.model_dump(mode="json")


class OverHttp(Channel):
    """The scheduler found as the CLI finds it, with the synchronous client in a thread."""

    def __init__(self) -> None:
        from ..notebook.discovery import discover

        self.client = discover().client(timeout=30)

    async def _call(self, method: Callable[..., dict], *args: Any) -> dict:
        from ..notebook.client import SchedulerError

        try:
            return await asyncio.to_thread(method, *args)
        except SchedulerError as e:
            raise Relayed(e.status or 503, e.message, e.reason) from None

    async def open(self, body: dict) -> dict:
        return await self._call(self.client.open_lease, body)

    async def queue(self) -> dict:
        return await self._call(self.client.queue)


def channel() -> Channel:
    """The way to the scheduler from this process; ElasticGPUError when there is none."""
    if _app is not None:
        return InServer(_app)
    try:
        return OverHttp()
    except Exception as e:  # SchedulerError: says what was tried and how to fix it
        raise Unavailable(getattr(e, "message", str(e))) from None


__all__ = [
    "Channel",
    "ElasticGPUError",
    "InServer",
    "OverHttp",
    "channel",
    "register_app",
    "unregister_app",
]
