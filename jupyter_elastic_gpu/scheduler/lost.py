"""Sidecars lost: a launched job whose sidecar fell silent or whose process is gone.

A sidecar silent past ``heartbeat_timeout`` with its process gone (or whose GPUs all left the
inventory with it: a lost node) is declared lost and its job queued again, to resume from its
last checkpoint (``Lifecycle.lost``). A sidecar that ended but whose last heartbeat did not
arrive ends its job as its final report says; a launch still listed for a user's server that
went away waits for that server again. Kernels' leases have their own rule
(``interactive.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from elastic_gpu_sidecar.protocol import JobState, SidecarState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..models import EventKind
from . import snapshot
from .execution.inventory import device_ids
from .execution.launcher import BaseLauncher
from .interactive import is_lease
from .jobs import JobRecord
from .lifecycle import Lifecycle
from .servers import WAITING_FOR_SERVER, UserServers
from .settings import SchedulerSettings
from .storage import jobdirs


class LostSidecars:
    """Each round of the service (``step``) finds the lost sidecars of its jobs.

    Given the job table, the launch secrets not handed out yet (a launch still listed), the
    users' servers (whose server is gone), the lifecycle a job is requeued or ended through,
    the launcher (whether a launch's processes are alive, whether job dirs are this side's to
    read), the GPUs, the live settings (``heartbeat_timeout``) and ``changed``, for watchers
    to see each change."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        secrets: dict[str, str],
        servers: UserServers,
        lifecycle: Lifecycle,
        launcher: BaseLauncher,
        gpu_infos: Callable[[], list[Any]],
        settings: SchedulerSettings,
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.jobs, self.secrets, self.servers, self.lifecycle = jobs, secrets, servers, lifecycle
        self.launcher, self.gpu_infos, self.settings = launcher, gpu_infos, settings
        self.changed = changed

    async def step(self, now: float) -> None:
        timeout = self.settings.heartbeat_timeout
        known = device_ids(self.gpu_infos())
        for job in list(self.jobs.values()):
            if not job.state.active or job.launched_at is None or is_lease(job):
                continue
            if job.id in self.secrets and job.user in self.servers.absent:
                # Its launch is still listed for a server that went away: not a lost sidecar
                # (none started), a job that waits for that server again.
                self.secrets.pop(job.id, None)
                await self.lifecycle.requeue(job, WAITING_FOR_SERVER, now, kind=EventKind.SUSPENDED)
                await self.changed()
                continue
            silent = now - (job.last_heartbeat or job.launched_at)
            alive = self.launcher.alive(job.launch) if job.launch else None
            # a sidecar whose GPUs all left the inventory with it (a lost node) is lost now
            vanished = bool(job.desired.gpus) and known.isdisjoint(job.desired.gpus)
            if alive is False and (silent > min(5.0, timeout) or vanished):
                final = (
                    jobdirs.final_report(job.job_dir) if self.launcher.starts_processes else None
                )
                if final is not None and final.state == SidecarState.SUSPENDED:
                    await self.lifecycle.requeue(
                        job,
                        snapshot.held_reason(job, stopping=False)
                        if job.held
                        else Told(ReasonKind.SUSPENDED),
                        now,
                        kind=EventKind.SUSPENDED,
                    )
                    await self.changed()
                    continue
                if final is not None:  # the sidecar ended but its last heartbeat did not arrive
                    await self.lifecycle.finish(job, JobState(final.state.value), final, now)
                    await self.changed()
                    continue
            elif silent <= timeout or alive:
                continue
            await self.lifecycle.lost(job, now, silent)
            await self.changed()
