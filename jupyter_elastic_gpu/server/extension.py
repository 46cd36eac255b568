"""``ElasticGPUApp``: the Jupyter server extension (config section ``c.ElasticGPUApp``).

By default it embeds the scheduler in this server: SQLite in the Jupyter data dir, the GPUs
NVML finds (or simulated GPUs where there are none), sidecars started as this server's user.
With ``scheduler_url`` set it is a client of a shared ``jupyter elastic-gpu scheduler`` daemon
instead: the same routes, answered by the daemon, and this server starts the sidecars of its
user's jobs so that trainers run as that user.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import getpass
import os
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default, validate

from .._version import __version__
from ..core.policies import POLICIES
from ..scheduler.agent import LaunchAgent
from ..scheduler.backends import LocalBackend, RemoteBackend
from ..scheduler.inventory import detect
from ..scheduler.launcher import LocalLauncher
from ..scheduler.service import Principal, SchedulerService, ServiceConfig
from ..scheduler.store import Store
from .handlers import API_PREFIX, handlers


class _ReadyBackend:
    """Hands requests to the backend once it is up. The database opens on the event loop, so
    the backend starts from the server's start hook, or from the first request if a host (a
    test harness, another server) never calls that hook."""

    def __init__(self, start: Any) -> None:
        self._start = start
        self._task: asyncio.Task | None = None
        self.backend: Any = None

    def ensure_started(self) -> asyncio.Task:
        if self._task is None:
            self._task = asyncio.ensure_future(self._start())
        return self._task

    def set(self, backend: Any) -> None:
        self.backend = backend

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            await asyncio.wait_for(asyncio.shield(self.ensure_started()), timeout=60)
            return await getattr(self.backend, name)(*args, **kwargs)

        return call


class ElasticGPUApp(ExtensionApp):
    name = "jupyter_elastic_gpu"
    description = "Elastic, adaptive GPU scheduling for this Jupyter server"
    version = __version__
    load_other_extensions = True

    simulated_gpus = Int(
        0,
        config=True,
        help="Number of simulated GPUs (N logical CPU devices per job). 0 discovers the GPUs "
        "with NVML, and falls back to 4 simulated GPUs where there is no NVIDIA driver.",
    )
    db_path = Unicode(
        config=True,
        help="SQLite database of the embedded scheduler (default: elastic-gpu/scheduler.sqlite "
        "in the Jupyter data dir).",
    )
    policy = Unicode(
        "adaptive",
        config=True,
        help=f"Scheduling policy: one of {', '.join(sorted(POLICIES))}.",
    )
    policy_params = Dict(
        config=True,
        help="Parameters of the policy, e.g. {'aging_s': 1800} for adaptive "
        "(docs/policies.md lists them).",
    )
    tick_interval = Float(60.0, config=True, help="Seconds between periodic decisions.")
    heartbeat_interval = Float(2.0, config=True, help="Seconds between sidecar heartbeats.")
    heartbeat_timeout = Float(
        30.0,
        config=True,
        help="A sidecar silent this long (with its process gone) is declared lost and its job "
        "queued again, to resume from its last checkpoint.",
    )
    checkpoint_root = Unicode(
        config=True,
        help="Folder for job directories (scripts, checkpoints, logs, models); default: "
        "elastic-gpu/jobs in the Jupyter data dir.",
    )
    checkpoint_interval = Float(
        60.0, config=True, help="Seconds between periodic checkpoints of a running job."
    )
    user_gpu_cap = Int(0, config=True, help="Most GPUs one user may hold at a time (0: no cap).")
    default_resize_cost = Float(
        6.0,
        config=True,
        help="Seconds a resize is assumed to cost until the job has measured its own.",
    )
    mechanism = Enum(
        ["sidecar", "termination"],
        "sidecar",
        config=True,
        help="How a job changes GPUs: 'sidecar' (checkpoint at the next step, no work lost) or "
        "'termination' (kill, restart from the last periodic checkpoint: for comparisons).",
    )
    sidecar_python = Unicode(
        config=True,
        help="Python that runs sidecars and trainers (it needs TensorFlow for script jobs); "
        "default: the Python of this server.",
    )
    scheduler_url = Unicode(
        "",
        config=True,
        help="API root of a shared scheduler (e.g. http://127.0.0.1:9111/api/). Empty: embed "
        "the scheduler in this server.",
    )
    scheduler_token = Unicode(
        "",
        config=True,
        help="This user's token for the shared scheduler (default: $ELASTIC_GPU_TOKEN).",
    )
    admin_users = List(Unicode(), config=True, help="Users who see and steer every job.")
    freeze_gc = Bool(
        True,
        config=True,
        help="After start-up, move the server's long-lived objects out of the garbage "
        "collector's reach (gc.freeze): full collections of a loaded JupyterLab server otherwise "
        "pause every request for 100+ ms every few seconds, which sidecar heartbeats feel.",
    )
    launch_agent = Bool(
        True,
        config=True,
        help="With a shared scheduler, start the sidecars of this user's jobs from this server.",
    )

    @default("db_path")
    def _db_path(self) -> str:
        return os.path.join(jupyter_data_dir(), "elastic-gpu", "scheduler.sqlite")

    @default("checkpoint_root")
    def _checkpoint_root(self) -> str:
        return os.path.join(jupyter_data_dir(), "elastic-gpu", "jobs")

    @default("scheduler_token")
    def _scheduler_token(self) -> str:
        return os.environ.get("ELASTIC_GPU_TOKEN", "")

    @validate("policy")
    def _check_policy(self, proposal: Any) -> str:
        if proposal["value"] not in POLICIES:
            known = ", ".join(sorted(POLICIES))
            raise ValueError(f"unknown policy {proposal['value']!r}: choose one of {known}")
        return proposal["value"]

    def initialize_settings(self) -> None:
        self._holder = _ReadyBackend(self._start_backend)
        self.owner = getpass.getuser()
        self.settings.update(
            elastic_gpu_backend=self._holder,
            elastic_gpu_owner=self.owner,
            elastic_gpu_admin_users=list(self.admin_users),
        )
        self._service: SchedulerService | None = None
        self._store: Store | None = None
        self._agent_task: asyncio.Task | None = None

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers("/"))  # ExtensionApp prefixes base_url itself

    def api_url(self) -> str:
        """This server's API root as a local process reaches it."""
        return url_path_join(self.serverapp.connection_url, API_PREFIX) + "/"

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        await self._holder.ensure_started()

    async def _start_backend(self) -> None:
        launcher = LocalLauncher(self.sidecar_python or None)
        if self.scheduler_url:
            if not self.scheduler_token:
                self.log.error(
                    "ElasticGPUApp.scheduler_url is set but no token: set "
                    "c.ElasticGPUApp.scheduler_token or $ELASTIC_GPU_TOKEN"
                )
            backend = RemoteBackend(self.scheduler_url, self.scheduler_token)
            self._holder.set(backend)
            if self.launch_agent:
                agent = LaunchAgent(backend, launcher, Principal(self.owner))
                self._agent_task = asyncio.create_task(agent.run())
            self.log.info("elastic-gpu: using the shared scheduler at %s", self.scheduler_url)
            return
        inventory, source = detect(self.simulated_gpus)
        self._store = await Store.open(self.db_path)
        api = self.api_url()
        config = ServiceConfig(
            policy=self.policy,
            policy_params=dict(self.policy_params),
            tick_s=self.tick_interval,
            heartbeat_s=self.heartbeat_interval,
            heartbeat_timeout_s=self.heartbeat_timeout,
            job_root=self.checkpoint_root,
            user_gpu_cap=self.user_gpu_cap,
            default_resize_cost_s=self.default_resize_cost,
            mechanism=self.mechanism,
            checkpoint_every_s=self.checkpoint_interval,
            simulated=source == "simulated",
        )
        self._service = SchedulerService(
            self._store,
            inventory,
            launcher,
            heartbeat_url=lambda job_id: f"{api}sidecar/{job_id}/heartbeat",
            config=config,
        )
        await self._service.start()
        self._holder.set(LocalBackend(self._service))
        if self.freeze_gc:
            gc.collect()
            gc.freeze()
        self.log.info(
            "elastic-gpu: embedded scheduler (%s, %d %s GPUs), database %s",
            self.policy,
            len(inventory.snapshot()),
            source,
            self.db_path,
        )

    async def stop_extension(self) -> None:
        """Stop deciding; sidecars and trainers keep running and are re-adopted on restart."""
        if self._agent_task:
            self._agent_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._agent_task
        if self._service:
            await self._service.stop()
        if self._store:
            await self._store.close()


main = launch_new_instance = ElasticGPUApp.launch_instance
