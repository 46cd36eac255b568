"""Starting sidecars: a job given GPUs gets its secret and its launch, by this scheduler's own
launcher or (shared and JupyterHub modes) by its owner's server, which asks for its launches
(``pending``) and for those it must end (``voided``).

A launch records the job's secret and launch in its record, keeps the secret in the service's
launch secrets until the sidecar's first heartbeat (``heartbeats.py``), and fails or requeues
the job through its lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.protocol import JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..models import ErrorInfo, EventKind, Heartbeat, LaunchRequest
from . import grants, releases
from .execution.launcher import BaseLauncher, PlaceGone
from .interactive import is_lease
from .jobs import JobRecord, new_secret
from .lifecycle import Lifecycle
from .principal import Principal
from .servers import UserServers
from .settings import SchedulerSettings
from .storage.atomic import atomically
from .storage.store import Store


class Launches:
    """The launches of the service's jobs, and the views of them a user's server reads.

    Given the job table, the launch secrets not handed out yet (job id -> secret, shared with
    the heartbeats), the store, lifecycle and launcher a launch goes through, the live
    settings a sidecar is started with, the heartbeat URL, the users' servers (a poll says
    one is there) and ``changed``, for watchers to see each launch."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        secrets: dict[str, str],
        store: Store,
        lifecycle: Lifecycle,
        launcher: BaseLauncher,
        settings: SchedulerSettings,
        heartbeat_url: Callable[[str], str],
        servers: UserServers,
        log: logging.Logger,
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.jobs, self.secrets, self.store, self.lifecycle = jobs, secrets, store, lifecycle
        self.launcher, self.settings, self.heartbeat_url = launcher, settings, heartbeat_url
        self.servers, self.log, self.changed = servers, log, changed

    def pending(self, who: Principal) -> list[LaunchRequest]:
        """Shared mode: launches of ``who``'s jobs that their own server must carry out. Asking
        is what tells the scheduler that the server is there to start them."""
        self.servers.polled(who.user, time.time())  # its jobs may be given GPUs again now
        out = []
        for job_id, secret in list(self.secrets.items()):
            job = self.jobs.get(job_id)
            if job and job.user == who.user and job.launch.get("via") == "agent":
                out.append(self.request(job, secret))
        return out

    def voided(self, who: Principal) -> list[str]:
        """Shared mode: ``who``'s jobs whose claim was voided lately, whose processes their
        server ends (listed for a while: ending what is already over changes nothing)."""
        since = time.time() - releases.ENDED_LISTED_S
        return [
            job.id
            for job in self.jobs.values()
            if job.user == who.user and job.voided_at is not None and job.voided_at >= since
        ]

    def request(self, job: JobRecord, secret: str) -> LaunchRequest:
        return LaunchRequest(
            job_id=job.id,
            job_dir=job.job_dir,
            spec=job.spec,
            gpus=list(job.desired.gpus),
            generation=job.desired.generation,
            simulated=bool(job.spec.simulated),
            heartbeat_url=self.heartbeat_url(job.id),
            heartbeat_interval=self.settings.heartbeat_interval,
            secret=secret,
            mechanism=P.Mechanism(self.settings.mechanism),
            checkpoint_interval=self.settings.checkpoint_interval,
        )

    async def start_ready(self, now: float) -> None:
        """Launch every job given GPUs that are free now, all at once: a launch can wait a
        minute on a node slow to start its sidecar (Ray), and the others must not wait behind
        it. Each launch ends in its own way (started, queued again, failed); a store error of
        one is raised once the others are over."""
        ready = [
            job
            for job in list(self.jobs.values())
            if job.state == JobState.STARTING
            and job.launched_at is None
            and not is_lease(job)
            # a lease's kernel starts itself (interactive.py); a job whose GPUs' previous
            # holder is still checkpointing is launched in a later round
            and grants.busy_elsewhere(job, self.jobs.values()).isdisjoint(job.desired.gpus)
        ]
        done = await asyncio.gather(
            *(self._start(job, now) for job in ready), return_exceptions=True
        )
        for error in done:
            if isinstance(error, BaseException):
                raise error

    async def _start(self, job: JobRecord, now: float) -> None:
        secret, digest = new_secret()
        async with atomically(self.store, job):  # recorded before a sidecar exists
            job.secret_hash = digest
            job.launched_at = job.last_heartbeat = now
            await self.lifecycle.save(job)
        self.secrets[job.id] = secret
        try:
            job.launch = await self.launcher.launch(self.request(job, secret))
        except PlaceGone as e:  # its GPUs went away meanwhile: not the job's fault
            self.secrets.pop(job.id, None)
            self.log.warning("elastic-gpu: job %s: not started: %s", job.id, e)
            why = Told(ReasonKind.REQUEUED, {"detail": f"{e} before its sidecar started"})
            await self.lifecycle.requeue(job, why, now, kind=EventKind.LOST)
        except Exception as e:  # the launch itself failed: the job cannot run as sent
            self.log.exception("elastic-gpu: job %s: launch failed", job.id)
            self.secrets.pop(job.id, None)
            error = ErrorInfo(
                type=type(e).__name__,
                message=str(e),
                hint="the sidecar could not be started; check LocalLauncher.python and the job dir",
            )
            await self.lifecycle.finish(job, JobState.FAILED, Heartbeat(error=error), now)
        if job.launch.get("via") != "agent":
            self.secrets.pop(job.id, None)
        await self.lifecycle.save(job)
        await self.changed()
