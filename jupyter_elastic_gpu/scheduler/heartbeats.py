"""A sidecar's heartbeat: its secret checked, then its report absorbed into its job (progress,
the GPUs it is on, how it ended) and the lease it should hold answered.

It keeps the service, not a narrow part of it: a heartbeat reads and changes the job table, the
launch secrets, the lifecycle and the change version, all at once and in one transaction.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from elastic_gpu_sidecar.protocol import JobState, LeaseAction, SidecarState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..errors import Unauthorized
from ..models import EventKind, Heartbeat, LeaseView, parse
from . import leases, snapshot
from .interactive import is_lease
from .jobs import secret_matches
from .storage.atomic import atomically

if TYPE_CHECKING:
    from .service import SchedulerService


class SidecarHeartbeats:
    """``SchedulerService.heartbeat``: the sidecar protocol's one route."""

    def __init__(self, service: SchedulerService) -> None:
        self.s = service

    async def receive(self, job_id: str, secret: str, body: object) -> LeaseView:
        s = self.s
        job = s.jobs.get(job_id)
        if job is None or not job.secret_hash or not secret_matches(secret, job.secret_hash):
            raise Unauthorized(f"job {job_id}: unknown job or wrong secret")
        beat: Heartbeat = parse(Heartbeat, body, "heartbeat")  # nothing changed before this
        if is_lease(job):  # a kernel's provisioner, not a sidecar
            return await s.interactive.heartbeat(job, beat)
        now = time.time()
        job.last_heartbeat = now
        s._secrets.pop(job_id, None)  # the sidecar is up: nothing left to hand out
        if job.state == JobState.QUEUED:
            # A sidecar we had given up on: have it checkpoint and stop; the job starts again
            # through the scheduler like any queued job. What it did meanwhile is kept.
            await s.store.add_progress(job.id, beat.records())
            top = max(job.desired.generation, beat.generation or 0) + 1
            return LeaseView(generation=top, gpus=[], action=LeaseAction.STOP)
        fresh = beat.progress is not None and beat.progress != job.progress
        # All or nothing: when a write fails the job is left as it was (but alive), and the
        async with atomically(s.store, job):  # sidecar sends it again, backlog included
            await s.store.add_progress(job.id, beat.records())
            changed = leases.absorb(job, beat, fresh, {g.id for g in s.gpu_infos()})
            if beat.state in (SidecarState.DONE, SidecarState.FAILED, SidecarState.CANCELLED):
                await s.lifecycle.finish(job, JobState(beat.state.value), beat, now)
                changed = True
            elif beat.state == SidecarState.SUSPENDED and not job.final:
                await s.lifecycle.requeue(
                    job,
                    snapshot.held_reason(job, stopping=False)
                    if job.held
                    else Told(ReasonKind.SUSPENDED, {"for_others": True}),
                    now,
                    kind=EventKind.SUSPENDED,
                )
                changed = True
            elif (
                job.state in (JobState.STARTING, JobState.RESIZING)
                and beat.state == SidecarState.RUNNING
                and beat.generation == job.desired.generation
            ):
                await s.lifecycle.confirm_running(job, now)
                changed = True
            if changed:
                await s.lifecycle.save(job)
        if changed or fresh:  # watchers of /updates and the websocket see it now; and what
            await s._changed_now()  # the job shows is decided again with it
            s.poke()
        return leases.published(job, s.jobs.values())
