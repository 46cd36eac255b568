"""Starting sidecars: a job given GPUs gets its secret and its launch, by this scheduler's own
launcher or (shared and JupyterHub modes) by its owner's server, which asks for its launches
(``pending``) and for those it must end (``voided``).

It keeps the service: a launch records the job's secret and launch in the job table, hands the
secret to ``_secrets`` until the sidecar's first heartbeat, and fails or requeues the job through
its lifecycle.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.protocol import JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..models import ErrorInfo, EventKind, Heartbeat, LaunchRequest
from . import leases, releases
from .execution.launcher import PlaceGone
from .interactive import is_lease
from .jobs import JobRecord, new_secret
from .principal import Principal
from .storage.atomic import atomically

if TYPE_CHECKING:
    from .service import SchedulerService


class Launches:
    """The launches of ``SchedulerService``'s jobs, and the views of them a user's server reads."""

    def __init__(self, service: SchedulerService) -> None:
        self.s = service

    def pending(self, who: Principal) -> list[LaunchRequest]:
        """Shared mode: launches of ``who``'s jobs that their own server must carry out. Asking
        is what tells the scheduler that the server is there to start them."""
        s = self.s
        s._servers_seen[who.user] = time.time()
        if who.user in s._server_less:
            s.poke()  # its jobs may be given GPUs again now
        out = []
        for job_id, secret in list(s._secrets.items()):
            job = s.jobs.get(job_id)
            if job and job.user == who.user and job.launch.get("via") == "agent":
                out.append(self.request(job, secret))
        return out

    def voided(self, who: Principal) -> list[str]:
        """Shared mode: ``who``'s jobs whose claim was voided lately, whose processes their
        server ends (listed for a while: ending what is already over changes nothing)."""
        s = self.s
        since = time.time() - releases.ENDED_LISTED_S
        return [
            job.id
            for job in s.jobs.values()
            if job.user == who.user and job.voided_at is not None and job.voided_at >= since
        ]

    def request(self, job: JobRecord, secret: str) -> LaunchRequest:
        s = self.s
        return LaunchRequest(
            job_id=job.id,
            job_dir=job.job_dir,
            spec=job.spec,
            gpus=list(job.desired.gpus),
            generation=job.desired.generation,
            simulated=bool(job.spec.simulated),
            heartbeat_url=s.heartbeat_url(job.id),
            heartbeat_interval=s.heartbeat_interval,
            secret=secret,
            mechanism=P.Mechanism(s.mechanism),
            checkpoint_interval=s.checkpoint_interval,
        )

    async def start_ready(self, now: float) -> None:
        s = self.s
        for job in list(s.jobs.values()):
            if job.state != JobState.STARTING or job.launched_at is not None or is_lease(job):
                continue  # a lease's kernel starts itself (interactive.py)
            if not leases.busy_elsewhere(job, s.jobs.values()).isdisjoint(job.desired.gpus):
                continue  # the previous holder is still checkpointing: next round
            secret, digest = new_secret()
            async with atomically(s.store, job):  # recorded before a sidecar exists
                job.secret_hash = digest
                job.launched_at = job.last_heartbeat = now
                await s.lifecycle.save(job)
            s._secrets[job.id] = secret
            try:
                job.launch = await s.launcher.launch(self.request(job, secret))
            except PlaceGone as e:  # its GPUs went away meanwhile: not the job's fault
                s._secrets.pop(job.id, None)
                s.log.warning("elastic-gpu: job %s: not started: %s", job.id, e)
                why = Told(ReasonKind.REQUEUED, {"detail": f"{e} before its sidecar started"})
                await s.lifecycle.requeue(job, why, now, kind=EventKind.LOST)
            except Exception as e:  # the launch itself failed: the job cannot run as sent
                s.log.exception("elastic-gpu: job %s: launch failed", job.id)
                s._secrets.pop(job.id, None)
                error = ErrorInfo(
                    type=type(e).__name__,
                    message=str(e),
                    hint="the sidecar could not be started; check LocalLauncher.python and "
                    "the job dir",
                )
                await s.lifecycle.finish(job, JobState.FAILED, Heartbeat(error=error), now)
            if job.launch.get("via") != "agent":
                s._secrets.pop(job.id, None)
            await s.lifecycle.save(job)
            await s._changed_now()
