"""``ElasticGPUApp``: the Jupyter server extension (config section ``c.ElasticGPUApp``).

By default it embeds the scheduler in this server: SQLite in the Jupyter data dir, the GPUs
NVML finds (or simulated GPUs where there are none), sidecars started as this server's user.
With ``scheduler_url`` set it is a client of a shared ``jupyter elastic-gpu scheduler``
instead: the same routes, answered by that scheduler, and this server starts the sidecars of
its user's jobs so that trainers run as that user. The shared scheduler is this same app run
standalone (``server/daemon.py``). Under JupyterHub, ``hub_service_url`` (or the environment
variable the spawner sets) makes it a client of the Hub's ``elastic-gpu`` service the same way,
with the server's own Hub token; JUPYTERHUB_* variables alone never do (Binder sets them too).

The parts a lab may replace are classes: ``scheduler_class`` (the service and its settings,
``c.SchedulerService``), ``launcher_class`` and ``inventory_class``; policies come by name,
built in or from an installed package's entry point.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import getpass
import logging
import os
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import (
    Bool,
    Enum,
    Float,
    Int,
    List,
    TraitError,
    Type,
    Unicode,
    Union,
    default,
    validate,
)

from .._version import __version__
from ..errors import ElasticGPUError, Unavailable
from ..hub.scopes import ENV_SERVICE_URL
from ..notebook.client import ENV_TOKEN, api_root
from ..scheduler.execution.agent import LaunchAgent
from ..scheduler.execution.gpukinds import parse_simulated
from ..scheduler.execution.inventory import Inventory, detect
from ..scheduler.execution.launcher import BaseLauncher, LocalLauncher
from ..scheduler.interactive import InteractiveLeases
from ..scheduler.port.backend import Backend, Forwarding, Operation
from ..scheduler.port.local import LocalBackend
from ..scheduler.port.remote import RemoteBackend
from ..scheduler.principal import Principal
from ..scheduler.service import SchedulerService
from ..scheduler.storage.store import Store
from .handlers import API_PREFIX, handlers
from .identity import principal_of

#: Seconds after a failed start before a request starts the scheduler again: the fault may
#: be gone (a database repaired or made writable, the other scheduler on it stopped).
RETRY_START_S = 5.0
#: The logger of the package's modules that have no app at hand (the GPU inventory, the
#: launch agent).
PACKAGE_LOGGER = "jupyter_elastic_gpu"


def log_through(log: logging.Logger) -> None:
    """Make ``log`` (the app's logger) the parent of ``PACKAGE_LOGGER``: the package's lines
    take the app's level, prefix and destination, once each, instead of a bare line from
    Python's last-resort handler. The latest app started wins."""
    logging.getLogger(PACKAGE_LOGGER).parent = log


class ReadyBackend(Forwarding):
    """Hands requests to the backend once it is up. The database opens on the event loop, so
    the backend starts from the server's start hook, or from the first request if a host (a
    test harness, another server) never calls that hook. A start that failed is tried again
    by a request after ``RETRY_START_S``; until then every route answers why it failed."""

    def __init__(self, start: Callable[[], Awaitable[None]]) -> None:
        super().__init__()
        self._start = start
        self._task: asyncio.Task | None = None
        self._retry_at = 0.0
        self._stopped = False

    def ensure_started(self) -> asyncio.Task:
        if self._stopped:  # a request (a sidecar's heartbeat) while the server stops
            raise Unavailable("the elastic-gpu scheduler has stopped with this server")
        task = self._task
        if task is None or (
            task.done() and self.inner is None and time.monotonic() >= self._retry_at
        ):
            self._task = asyncio.ensure_future(self._run())
        return self._task

    async def _run(self) -> None:
        try:
            await self._start()
        except BaseException:
            self._retry_at = time.monotonic() + RETRY_START_S
            raise

    def set(self, backend: Backend) -> None:
        self.inner = backend

    async def stop(self) -> None:
        """End a start still under way (the server stops first): cancelled, the start closes
        what it opened. Left running, it would open the database after the server's stop had
        passed it by, and the connection's thread would keep the process from exiting. No
        start begins after this."""
        self._stopped = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def forward(self, op: Operation, *args: Any, **kwargs: Any) -> Any:
        try:
            await asyncio.wait_for(asyncio.shield(self.ensure_started()), timeout=60)
        except ElasticGPUError as e:  # it says what happened and what to do: raised as a
            fresh = type(e).__new__(type(e))  # copy, the failed start's own is raised again
            fresh.args = e.args
            fresh.__dict__.update(e.__dict__)
            raise fresh from None
        except Exception as e:
            raise Unavailable(
                f"the elastic-gpu scheduler did not start ({type(e).__name__}: {e}); see "
                "the server's log"
            ) from None
        return await super().forward(op, *args, **kwargs)


class ElasticGPUApp(ExtensionApp):
    name = "jupyter_elastic_gpu"
    description = "Elastic, adaptive GPU scheduling for this Jupyter server"
    version = __version__
    load_other_extensions = True
    #: What ``whoami`` calls the scheduler this app embeds.
    mode = "embedded"
    classes: ClassVar[list] = [
        *ExtensionApp.classes,
        SchedulerService,
        InteractiveLeases,
        LocalLauncher,
    ]

    scheduler_class = Type(
        SchedulerService,
        klass=SchedulerService,
        config=True,
        help="The scheduler service (its settings: c.SchedulerService.<name>).",
    )
    launcher_class = Type(
        LocalLauncher,
        klass=BaseLauncher,
        config=True,
        help="Starts sidecars (a subclass of jupyter_elastic_gpu.scheduler.execution.launcher.BaseLauncher).",
    )
    inventory_class = Type(
        None,
        klass=Inventory,
        allow_none=True,
        config=True,
        help="The GPU inventory (a subclass of jupyter_elastic_gpu.scheduler.execution.inventory."
        "Inventory, created without arguments). Default: NVML where there is a driver, "
        "simulated GPUs elsewhere (see simulated_gpus).",
    )
    simulated_gpus = Union(
        [Int(), Unicode()],
        default_value=0,
        config=True,
        help="Simulated GPUs (a job on N of them runs on N logical CPU devices): a count, or "
        "counts of kinds such as '2xA100-80GB,2xT4' to try a lab of mixed GPUs (a kind: "
        "letters, digits, '.', '_', '-'; one ending in a size such as -80GB has that memory). "
        "0 discovers the GPUs with NVML, and falls back to 4 simulated GPUs where there is no "
        "NVIDIA driver.",
    )

    dcgm_exporter_url = Unicode(
        "",
        config=True,
        help="A DCGM Exporter's metrics page on this machine (e.g. http://127.0.0.1:9400/metrics"
        "): how busy each MIG slice is on GPUs whose NVML does not say (A100, A30; Hopper's "
        "NVML does), from its DCGM_FI_PROF_GR_ENGINE_ACTIVE field. Empty: not read.",
    )

    @validate("dcgm_exporter_url")
    def _check_dcgm_exporter_url(self, proposal: Any) -> str:
        url = proposal["value"].strip()
        parts = urllib.parse.urlsplit(url)
        if url and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise TraitError(
                f"dcgm_exporter_url {url!r} is not an http(s) URL: give the exporter's page, "
                "such as http://127.0.0.1:9400/metrics, or leave it empty"
            )
        return url

    def _simulated(self) -> tuple[str, ...]:
        """The kinds of the simulated GPUs asked for (none: find the real ones); ValueError
        naming the setting for a bad description, which stops the start (checked here, not
        when the setting is loaded: a Jupyter server logs a refused setting and goes on with
        its default)."""
        try:
            return parse_simulated(self.simulated_gpus)
        except ValueError as e:
            raise ValueError(f"simulated_gpus: {e}") from None

    db_path = Unicode(
        config=True,
        help="SQLite database of the embedded scheduler (default: elastic-gpu/scheduler.sqlite "
        "in the Jupyter data dir).",
    )
    db_busy_timeout = Float(
        5.0,
        config=True,
        help="Seconds a write waits while another process holds the database locked; then the "
        "request answers 503, and nothing was changed.",
    )
    scheduler_url = Unicode(
        "",
        config=True,
        help="A shared scheduler to use instead of embedding one: its URL (e.g. "
        "http://127.0.0.1:9111/) or its API root. Empty: embed the scheduler in this server.",
    )
    scheduler_token = Unicode(
        "",
        config=True,
        help="This user's token for the shared scheduler (default: $ELASTIC_GPU_TOKEN).",
    )
    hub_service_url = Unicode(
        config=True,
        help="Hub mode: the URL of the JupyterHub service elastic-gpu (e.g. "
        "http://127.0.0.1:10101/services/elastic-gpu/) to use instead of embedding a "
        "scheduler, with this server's Hub token ($JUPYTERHUB_API_TOKEN). Default: "
        f"${ENV_SERVICE_URL}, which c.Spawner.environment sets; empty: not hub mode.",
    )
    admin_users = List(Unicode(), config=True, help="Users who see and steer every job.")
    freeze_gc = Bool(
        True,
        config=True,
        help="After start-up, move the server's long-lived objects out of the garbage "
        "collector's reach (gc.freeze): full collections of a loaded JupyterLab server otherwise "
        "pause every request for 100+ ms every few seconds, which sidecar heartbeats feel.",
    )
    cluster_backend = Enum(
        ["local", "ray"],
        "local",
        config=True,
        help="Where jobs run: 'local', this server's GPUs (the inventory and launcher "
        "settings above); 'ray', every node of a Ray cluster (ray_address): the scheduler "
        "places each job on one node's GPUs and starts its sidecar there (pip install "
        "'jupyter-elastic-gpu[ray]'; job dirs must be on storage every node sees).",
    )
    ray_address = Unicode(
        "",
        config=True,
        help="The Ray cluster's address, HOST:PORT of `ray start --head` (empty: $RAY_ADDRESS, "
        "or a cluster started on this machine). Users never see it.",
    )
    ray_allow_insecure = Bool(
        False,
        config=True,
        help="Use a Ray cluster reached without token authentication (RAY_AUTH_MODE=token). "
        "Anyone who reaches such a cluster can run code as its nodes' user: only for a "
        "trusted test setup.",
    )
    sidecar_url = Unicode(
        "",
        config=True,
        help="This server as sidecars on other machines reach it (e.g. http://10.0.0.1:8888/), "
        "for their heartbeats. Default: the server's own URL, which is right on one machine.",
    )
    launch_agent = Bool(
        True,
        config=True,
        help="With a shared scheduler, start the sidecars of this user's jobs from this server.",
    )
    kernel_gpus = Enum(
        ["leased", "all"],
        "leased",
        config=True,
        help="What the kernels this server starts may use. 'leased': no GPU (CUDA_VISIBLE_DEVICES"
        "=-1) unless the kernel holds a lease from the scheduler (kernel specs 'Python 3 (N "
        "GPUs)', %gpu_lease): every kernel of this server goes through the elastic-gpu-"
        "provisioner unless its kernel spec names another provisioner or "
        "c.KernelProvisionerFactory.default_provisioner_name names another default. Kernels "
        "started outside this server (nbclient, papermill, Voila standalone) follow their own "
        "kernel spec, or $JUPYTER_DEFAULT_PROVISIONER_NAME (docs/interactive-gpus.md). 'all': "
        "leave kernels as Jupyter starts them (every GPU visible).",
    )

    @default("db_path")
    def _db_path(self) -> str:
        return os.path.join(jupyter_data_dir(), "elastic-gpu", "scheduler.sqlite")

    @default("hub_service_url")
    def _hub_service_url(self) -> str:
        return os.environ.get(ENV_SERVICE_URL, "")

    @default("scheduler_token")
    def _scheduler_token(self) -> str:
        return os.environ.get(ENV_TOKEN, "")

    # -- identity ----------------------------------------------------------------------------
    #: What a request without valid credentials is told.
    how_to_authenticate = "log in to Jupyter (or send its token) to use this API"

    def principal_of(self, user: Any) -> Principal:
        return principal_of(user, self.owner, self.admin_users)

    # -- start and stop -----------------------------------------------------------------------
    def initialize_settings(self) -> None:
        log_through(self.log)
        self.owner = getpass.getuser()
        self.backend = ReadyBackend(self._start_backend)
        self._service: SchedulerService | None = None
        self._store: Store | None = None
        self._agent_task: asyncio.Task | None = None
        self._cluster: Any = None  # the Ray connection, in cluster_backend "ray"

        # interactive GPU leases: the provisioner in this process asks this app's backend
        from ..kernels.channel import register_app
        from ..kernels.defaults import provision_server_kernels

        register_app(self)
        if self.kernel_gpus == "leased" and self.mode == "embedded":  # a user's own server
            provision_server_kernels(self.serverapp, self.log)

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers())  # ExtensionApp prefixes base_url itself

    def api_url(self) -> str:
        """This server's API root as a local process reaches it."""
        return url_path_join(self.serverapp.connection_url, API_PREFIX) + "/"

    def sidecar_api_url(self) -> str:
        """This server's API root as sidecars reach it (``sidecar_url``, else ``api_url``)."""
        if not self.sidecar_url:
            return self.api_url()
        base = url_path_join(self.sidecar_url, self.serverapp.base_url)
        return url_path_join(base, API_PREFIX) + "/"

    #: A setting that was refused when the server linked this extension ("" if none).
    config_error: str = ""

    def _link_jupyter_server_extension(self, serverapp: Any) -> None:
        """Jupyter's extension loader logs a refused setting and goes on with the defaults
        (another database, policy or state folder than the one asked for): remember it, so
        that the scheduler does not start and every route says what to fix instead."""
        try:
            super()._link_jupyter_server_extension(serverapp)
        except Exception as e:
            self.config_error = f"{type(e).__name__}: {e}"
            raise

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        await self.backend.ensure_started()

    def service_defaults(self) -> dict[str, Any]:
        """Settings of the service this mode changes from the service's own defaults (a
        setting in the config wins)."""
        return {}

    async def _start_backend(self) -> None:
        if self.config_error:
            raise Unavailable(
                f"a setting of the elastic-gpu scheduler was refused ({self.config_error}): "
                "fix it in the Jupyter server's configuration and restart the server"
            )
        if self.scheduler_url or self.hub_service_url:
            await self._use_shared_scheduler()
            return
        if self.cluster_backend == "ray":
            inventory, launcher = await self._ray_cluster()
        else:
            if self.inventory_class is not None:
                inventory = self.inventory_class()
            else:
                self._simulated()
                inventory, _ = detect(self.simulated_gpus, dcgm_exporter_url=self.dcgm_exporter_url)
            launcher = self.launcher_class(parent=self)
        self._store = await Store.open(self.db_path, busy_timeout=self.db_busy_timeout)
        try:
            await self._start_service(inventory, launcher)
        except BaseException:  # let go of the database: a later start may try again
            if self._service:
                await self._service.stop()
            await self._store.close()
            self._store = self._service = None
            raise

    async def _ray_cluster(self) -> tuple[Inventory, BaseLauncher]:
        """Connect to the Ray cluster (off the event loop: it takes seconds)."""
        from ..scheduler.execution.ray_cluster import (
            RayCluster,
            RayInventory,
            RayLauncher,
            RayUnavailable,
        )

        try:
            cluster = await asyncio.to_thread(RayCluster, self.ray_address, self.ray_allow_insecure)
        except RayUnavailable as e:
            raise Unavailable(str(e)) from None
        self._cluster = cluster
        inventory = RayInventory(
            cluster, probe_nvml=not self._simulated(), dcgm_exporter_url=self.dcgm_exporter_url
        )
        launcher = await asyncio.to_thread(lambda: RayLauncher(cluster, parent=self))
        return inventory, launcher

    async def _start_service(self, inventory: Inventory, launcher: BaseLauncher) -> None:
        api = self.sidecar_api_url()
        configured = self.config.get(self.scheduler_class.__name__, {})
        defaults = {k: v for k, v in self.service_defaults().items() if k not in configured}
        self._service = self.scheduler_class(
            self._store,
            inventory,
            launcher,
            heartbeat_url=lambda job_id: f"{api}sidecar/{job_id}/heartbeat",
            parent=self,
            **defaults,
        )
        if self.mode == "embedded":  # this server runs the leased kernels: its word on them
            from ..kernels.activity import kernel_idle_s

            kernels = self.serverapp.kernel_manager
            self._service.interactive.kernel_idle = lambda job: kernel_idle_s(kernels, job)
        await self._service.start()
        self.backend.set(LocalBackend(self._service, mode=self.mode))
        if self.freeze_gc:
            gc.collect()
            gc.freeze()
        self.log.info(
            "elastic-gpu: %s scheduler (%s, %d %s GPUs), database %s",
            self.mode,
            self._service.policy,
            len(self._service.gpu_infos()),
            inventory.source,
            self.db_path,
        )

    async def _use_shared_scheduler(self) -> None:
        url, token = self.scheduler_url, self.scheduler_token
        if self.hub_service_url:  # the server's Hub token carries its user's service scopes
            url, token = self.hub_service_url, os.environ.get("JUPYTERHUB_API_TOKEN", "")
        if not token:
            self.log.error(
                "elastic-gpu: a shared scheduler but no token: set c.ElasticGPUApp."
                "scheduler_token or $ELASTIC_GPU_TOKEN (hub mode: $JUPYTERHUB_API_TOKEN)"
            )
        backend = RemoteBackend(api_root(url), token)
        self.backend.set(backend)
        if self.launch_agent:
            agent = LaunchAgent(backend, self.launcher_class(parent=self), Principal(self.owner))
            self._agent_task = asyncio.create_task(agent.run())
        self.log.info("elastic-gpu: using the shared scheduler at %s", url)

    async def stop_extension(self) -> None:
        """Stop deciding; sidecars and trainers keep running and are re-adopted on restart."""
        from ..kernels.channel import unregister_app

        unregister_app(self)
        await self.backend.stop()
        if self._agent_task:
            self._agent_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._agent_task
        service, store, cluster = self._service, self._store, self._cluster
        self._service = self._store = self._cluster = None  # a second stop has nothing to do
        try:
            if service:
                await service.stop()
        finally:
            if store:
                await store.close()
            if cluster is not None:
                cluster.close()


main = launch_new_instance = ElasticGPUApp.launch_instance
