"""Interactive GPU leases: a notebook kernel's GPUs, as a job of kind ``interactive``.

A lease is a job like any other for the policy (``min_gpus = max_gpus``: admitted like a
non-elastic job of that size, queued with its reason and estimated start, under the per-user
cap and fair share), with three differences kept here:

* nothing is launched: the kernel's provisioner (``kernels/provisioner.py``) plays the
  sidecar's part. It heartbeats with the lease's secret from the moment it asks, is told the
  GPUs once they are free, reports the kernel running on them, and ends the lease when its
  kernel shuts down or dies;
* it is never resized, suspended or checkpointed: once it holds GPUs the policy sees it pinned,
  and a provisioner silent past ``heartbeat_timeout`` ends it (nothing to resume);
* idle reclaim: a kernel idle past the rule of ``core.idle`` is warned (its reason), then
  released (asked to restart without GPUs; its lease ends when it has).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from elastic_gpu_sidecar.protocol import JobKind, JobState, Lease, LeaseAction, SidecarState
from traitlets import Float
from traitlets.config import LoggingConfigurable

from ..core.idle import IdleAction, IdleRule, idle_verdict
from ..core.reasons import plural
from ..errors import Conflict
from ..models import (
    ErrorInfo,
    EventKind,
    Heartbeat,
    LeaseGrant,
    LeaseRequest,
    LeaseView,
    parse,
)
from . import leases, views
from .atomic import atomically
from .jobs import JobRecord, new_secret
from .principal import Principal

if TYPE_CHECKING:
    from .service import SchedulerService

#: What a lease whose kernel ended it says.
ENDINGS = {
    JobState.DONE: "ended: its kernel shut down",
    JobState.FAILED: "ended: its kernel died",
    JobState.CANCELLED: "withdrawn by its kernel before it got GPUs",
}
#: A GPU at least this busy (NVML utilisation 0..1) counts as used by its kernel.
BUSY_UTILIZATION = 0.05


def is_lease(job: JobRecord) -> bool:
    return job.kind == JobKind.INTERACTIVE


class InteractiveLeases(LoggingConfigurable):
    """Leases of the service's kernels; settings are ``c.InteractiveLeases.<name>``."""

    idle_timeout = Float(
        3600.0,
        min=0.0,
        config=True,
        help="Seconds a kernel that holds GPUs may stay idle (no code run, its GPUs not busy "
        "where NVML reports it) before its lease is released and the kernel restarted without "
        "GPUs (its notebook keeps its outputs). 0: never.",
    )
    idle_timeout_contended = Float(
        900.0,
        min=0.0,
        config=True,
        help="The idle time allowed instead while other jobs wait for GPUs (0: idle_timeout "
        "applies then too).",
    )
    idle_warning = Float(
        300.0,
        min=0.0,
        config=True,
        help="Seconds before a release that the lease warns (its reason, in the sidebar and "
        "GET jobs/ID).",
    )

    def __init__(self, service: SchedulerService, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.service = service
        self.notices: dict[str, str] = {}  # job id -> idle warning shown as its reason

    @property
    def rule(self) -> IdleRule:
        return IdleRule(self.idle_timeout, self.idle_timeout_contended, self.idle_warning)

    # -- users' requests ------------------------------------------------------------------
    async def open(self, who: Principal, body: object) -> LeaseGrant:
        """``POST leases``: a queued lease and the secret its provisioner heartbeats with."""
        request = parse(LeaseRequest, body, "lease")
        s = self.service
        if s.launcher.spans_nodes:
            raise Conflict(
                "GPU leases for notebook kernels are not available on a scheduler over several "
                "servers yet (the lease could land on another machine than the kernel): use "
                "%%elastic_train jobs there, or a scheduler of this machine's own for kernels"
            )
        job = await s.submit(who, request.submit_request(s.simulated))
        secret, digest = new_secret()
        async with atomically(s.store, job):
            job.secret_hash = digest
            job.last_heartbeat = time.time()
            await s.lifecycle.save(job)
        return LeaseGrant(
            job=views.job_view(job),
            secret=secret,
            heartbeat_url=s.heartbeat_url(job.id),
            heartbeat_interval=s.heartbeat_interval,
        )

    def reason(self, job: JobRecord) -> str | None:
        """What a running lease shows instead of the policy's reason (which sees it only as
        a job it may not resize): its idle warning, else what it holds."""
        if not is_lease(job) or job.state != JobState.RUNNING:
            return None
        held = plural(len(job.held_gpus), "GPU")
        return self.notices.get(job.id) or f"holds {held} for its notebook kernel"

    # -- the provisioner's heartbeat -------------------------------------------------------
    async def heartbeat(self, job: JobRecord, beat: Heartbeat) -> LeaseView:
        """What a validated heartbeat of ``job``'s provisioner changes, and the lease to
        answer: no GPUs yet (RUN, empty) while it waits, its GPUs once they are free, CANCEL
        (empty) once it is over or released."""
        s, now = self.service, time.time()
        job.last_heartbeat = now
        if job.final:
            return LeaseView(generation=job.desired.generation, gpus=[], action=LeaseAction.CANCEL)
        ended = beat.state in (SidecarState.DONE, SidecarState.FAILED, SidecarState.CANCELLED)
        if job.state == JobState.QUEUED and not ended:
            return LeaseView(generation=job.desired.generation, gpus=[], action=LeaseAction.RUN)
        changed = False
        async with atomically(s.store, job):
            leases.absorb(job, beat, False, {g.id for g in s.gpu_infos()})
            if ended:
                said = job.reason if job.state == JobState.STOPPING else None
                state = JobState(beat.state.value)  # done, failed (its kernel died), cancelled
                await s.lifecycle.finish(job, state, beat, now)
                job.reason = said or ENDINGS.get(state, job.reason)
                self.notices.pop(job.id, None)
                changed = True
            elif (
                job.state == JobState.STARTING
                and beat.state == SidecarState.RUNNING
                and beat.generation == job.desired.generation
            ):
                await s.lifecycle.confirm_running(job, now)
                job.reason = f"kernel running on {len(job.desired.gpus)} GPU(s)"
                changed = True
            answer = leases.published(job, s.jobs.values())
            if job.state == JobState.STARTING and answer.gpus and job.launched_at is None:
                job.launched_at = now  # the kernel may start on them from now on
                changed = True
            if changed:
                await s.lifecycle.save(job)
        if changed:
            await s._changed_now()
            s.poke()
        return answer

    # -- each round of the service ----------------------------------------------------------
    async def step(self, now: float) -> None:
        await self._find_lost(now)
        await self._reclaim(now)

    async def _find_lost(self, now: float) -> None:
        """A lease whose provisioner fell silent (its kernel's server is gone) ends: nothing
        is left to resume."""
        s = self.service
        for job in list(s.jobs.values()):
            if not is_lease(job) or job.final:
                continue
            silent = now - (job.last_heartbeat or job.submitted_at)
            if silent <= s.heartbeat_timeout:
                continue
            error = ErrorInfo(
                type="KernelLost",
                message=f"its kernel's provisioner stopped heartbeating {silent:.0f} s ago",
                hint="the kernel or its Jupyter server is gone; start the kernel again",
            )
            async with atomically(s.store, job):
                await s.lifecycle.finish(job, JobState.FAILED, Heartbeat(error=error), now)
            self.notices.pop(job.id, None)
            await s._changed_now()

    def _waiting_gpus(self) -> int:
        return sum(
            j.min_gpus
            for j in self.service.jobs.values()
            if j.state == JobState.QUEUED and not j.held
        )

    def _gpus_busy(self, job: JobRecord) -> bool:
        mine = set(job.desired.gpus)
        return any(
            g.id in mine and (getattr(g, "utilization", None) or 0.0) >= BUSY_UTILIZATION
            for g in self.service.gpu_infos()
        )

    async def _reclaim(self, now: float) -> None:
        s, rule = self.service, self.rule
        waiting = self._waiting_gpus()
        for job in list(s.jobs.values()):
            if not is_lease(job) or job.state != JobState.RUNNING:
                continue
            verdict = idle_verdict(rule, job.reported.idle_s, self._gpus_busy(job), waiting)
            if verdict.action == IdleAction.RELEASE:
                await self._release(job, verdict.reason, now)
                continue
            notice = verdict.reason if verdict.action == IdleAction.WARN else None
            if notice == self.notices.get(job.id):
                continue
            if notice is None:
                self.notices.pop(job.id, None)
                text = f"kernel running on {len(job.desired.gpus)} GPU(s)"
            else:
                self.notices[job.id] = text = notice
            async with atomically(s.store, job):
                job.reason = text
                await s.lifecycle.save(job)
            await s._changed_now()

    async def _release(self, job: JobRecord, reason: str, now: float) -> None:
        """Ask the kernel to give its GPUs back (restart without them); the lease holds them
        until its provisioner says it has."""
        s = self.service
        async with atomically(s.store, job):
            job.desired = Lease(job.desired.generation + 1, [], LeaseAction.CANCEL)
            job.state, job.reason, job.last_change = JobState.STOPPING, reason, now
            job.history.append({"t": now, "gpus": [], "why": reason})
            await s.lifecycle.save(job)
            await s.store.add_event(job.id, EventKind.CANCEL, reason)
        self.notices.pop(job.id, None)
        await s._changed_now()
        s.poke()
