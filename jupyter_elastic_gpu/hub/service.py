"""``jupyter elastic-gpu hub-service``: the scheduler as a JupyterHub-managed service.

It is the shared scheduler (``server/daemon.py``), one web app, with the Hub as its identity
provider instead of a token file: the Hub starts it (``c.JupyterHub.services``) with its
name, URL, prefix, OAuth client and API token in the environment, and every caller is a Hub
user, authenticated by their token (``Authorization: token``: users' servers, scripts) or by
the OAuth cookie of a browser (``hub/identity.py``). The owner of a job is always that user.
Scopes say what each may do (``hub/scopes.py``). Users' servers forward to it in hub mode
(``c.ElasticGPUApp.hub_service_url``) and start their own users' trainers, as in shared mode;
sidecars heartbeat to it with their job's secret. It reports users with open jobs as active
to the Hub (``hub/activity.py``). The service's root leads to the admin page.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterable
from typing import Any, ClassVar
from urllib.parse import urlsplit

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from traitlets import Float, default

from ..errors import Forbidden
from ..scheduler.port.backend import Access, Forwarding, Operation
from ..server.daemon import DaemonServerApp, SchedulerDaemonApp, default_state_dir
from ..server.handlers import API_PREFIX
from . import scopes
from .activity import ActivityReporter
from .identity import HubIdentityProvider, HubPrincipal, principal_of_hub

#: This module is the hub service's Jupyter extension package.
PACKAGE = __name__
#: Where the service's root leads (the admin page, under its base URL).
ADMIN_PAGE = "elastic-gpu/admin"
#: The paths under the service's base URL that lead there: its root, and ``admin``.
ADMIN_ENTRIES = ("/?", "/admin/?")


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": PACKAGE, "app": HubServiceApp}]


class ScopedBackend(Forwarding):
    """The service's backend: an operation that changes something (``Access.CHANGE``) needs
    ``custom:elastic-gpu:submit`` (or admin); reads and sidecars' heartbeats pass."""

    async def forward(self, op: Operation, *args: Any, **kwargs: Any) -> Any:
        who = args[0] if op.access is Access.CHANGE else None  # (the caller comes first)
        if isinstance(who, HubPrincipal) and not (who.submits or who.admin):
            raise Forbidden(
                f"{who.user} may read elastic-gpu jobs but not submit or change them: "
                f"ask an admin of the Hub for the {scopes.SUBMIT} scope"
            )
        return await super().forward(op, *args, **kwargs)


class RootHandler(JupyterHandler):
    """The service's root (``/services/elastic-gpu/``, the Services menu's link) and
    ``/services/elastic-gpu/admin``, the address people guess: log in through the Hub, then
    the admin page (its query, such as a ``?token=`` the Hub ignores, left behind)."""

    @web.authenticated
    def get(self) -> None:
        self.redirect(url_path_join(self.base_url, ADMIN_PAGE))


class HubServiceServerApp(DaemonServerApp):
    """The shared scheduler's server, where the Hub says: base URL, address and port."""

    name = "jupyter-elastic-gpu-hub-service"

    @default("identity_provider_class")
    def _default_identity_provider_class(self) -> type:
        return HubIdentityProvider

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{scopes.SERVICE_NAME}/"

    @default("port")
    def _default_port(self) -> int:
        return urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "")).port or 10101

    @default("ip")
    def _default_ip(self) -> str:
        return urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "")).hostname or "127.0.0.1"

    def init_signal(self) -> None:
        super().init_signal()
        # The Hub stops its services with SIGINT: stop at once, with no prompt (as JupyterHub
        # does for users' servers).
        signal.signal(signal.SIGINT, self._signal_stop)

    def init_server_extensions(self) -> None:
        self.jpserver_extensions = {PACKAGE: True}
        super(DaemonServerApp, self).init_server_extensions()


class HubServiceApp(SchedulerDaemonApp):
    """The scheduler as a Hub service; every SchedulerDaemonApp setting applies."""

    name = "elastic_gpu_hub_service"
    description = "The elastic-gpu scheduler as a JupyterHub service"
    mode = "hub"
    serverapp_class = HubServiceServerApp
    how_to_authenticate = (
        "log in to JupyterHub, or send a Hub API token with the "
        f"{scopes.ACCESS} scope: 'Authorization: token <t>'"
    )
    classes: ClassVar[list] = [
        HubServiceServerApp,
        *(c for c in SchedulerDaemonApp.classes if c is not DaemonServerApp),
        HubIdentityProvider,
    ]
    aliases: ClassVar[dict] = {
        k: v for k, v in SchedulerDaemonApp.aliases.items() if k != "tokens-file"
    } | {"activity-interval": "HubServiceApp.activity_interval"}
    subcommands: ClassVar[dict] = {}

    activity_interval = Float(
        300.0,
        config=True,
        help="Seconds between two reports to the Hub that the users with queued or running "
        "jobs are active (so that jupyterhub-idle-culler spares them and their default "
        "server); 0 reports nothing.",
    )

    @classmethod
    def get_extension_package(cls) -> str:
        return PACKAGE

    @default("state_dir")
    def _default_state_dir(self) -> str:
        return str(default_state_dir().with_name("jupyter-elastic-gpu-hub"))

    @default("discovery")
    def _default_discovery(self) -> bool:
        return False  # users reach it through the Hub, not through a file on the box

    def api_url(self) -> str:
        """Where sidecars reach the service: the URL the Hub gives it (the service's ``url``,
        which the proxy and users' servers reach too), not the address it binds."""
        service_url = os.environ.get("JUPYTERHUB_SERVICE_URL")
        if not service_url:
            return super().api_url()
        return url_path_join(service_url, self.serverapp.base_url, API_PREFIX) + "/"

    def principal_of(self, user: Any) -> HubPrincipal:
        return principal_of_hub(user.hub_user)

    def initialize_settings(self) -> None:
        super().initialize_settings()
        self._activity_task: asyncio.Task | None = None

    def initialize_handlers(self) -> None:
        super().initialize_handlers()
        self.handlers.extend((path, RootHandler) for path in ADMIN_ENTRIES)

    async def _start_service(self, inventory: Any, launcher: Any) -> None:
        await super()._start_service(inventory, launcher)
        self.backend.set(ScopedBackend(self.backend.inner))
        hub_auth = self.serverapp.identity_provider.hub_auth
        if self.activity_interval > 0:
            reporter = ActivityReporter(
                hub_auth.api_url, hub_auth.api_token, self._open_jobs, self.activity_interval
            )
            self._activity_task = asyncio.create_task(reporter.run())

    def _open_jobs(self) -> Iterable[Any]:
        return self._service.jobs.values() if self._service else ()

    async def stop_extension(self) -> None:
        if self._activity_task:
            self._activity_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._activity_task
        await super().stop_extension()


def main(argv: list[str] | None = None) -> None:
    asks_for_help = any(arg.startswith("--help") for arg in argv or sys.argv[1:])
    if not os.environ.get("JUPYTERHUB_API_TOKEN") and not asks_for_help:
        sys.exit(
            "jupyter-elastic-gpu hub-service: error: no JUPYTERHUB_API_TOKEN: this command is "
            "started by JupyterHub (c.JupyterHub.services, see examples/jupyterhub_config.py)"
        )
    HubServiceApp.launch_instance(argv)
    if SchedulerDaemonApp.failure:
        sys.exit(f"jupyter-elastic-gpu hub-service: error: {SchedulerDaemonApp.failure}")


__all__ = ["HubServiceApp", "main"]
