"""A sidecar's heartbeat: its secret checked, then its report absorbed into its job (progress,
the GPUs it is on, how it ended) and the grant it should hold answered.

A heartbeat reads and changes the job table, the launch secrets and the job's record (through
its lifecycle, in one transaction), then tells watchers and the policy.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from elastic_gpu_sidecar.protocol import GrantAction, JobState, SidecarState

from ..core.placement import mixed
from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..errors import Unauthorized
from ..models import EventKind, GrantView, Heartbeat, parse
from . import grants, snapshot
from .execution.inventory import device_ids
from .interactive import is_lease
from .jobs import JobRecord, secret_matches
from .lifecycle import Lifecycle
from .storage.atomic import atomically
from .storage.store import Store


class SidecarHeartbeats:
    """``SchedulerService.heartbeat``: the sidecar protocol's one route.

    Given the job table, the launch secrets not handed out yet (a heartbeat means its sidecar
    has its own), the store and lifecycle it writes through, the GPUs (what a sidecar reports
    on them is checked against them), ``lease_beat`` (a kernel's provisioner heartbeats the
    same route: ``InteractiveLeases.heartbeat``) and ``changed`` / ``poke``: watchers see a
    new version / the policy decides again."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        secrets: dict[str, str],
        store: Store,
        lifecycle: Lifecycle,
        gpu_infos: Callable[[], list[Any]],
        lease_beat: Callable[[JobRecord, Heartbeat], Awaitable[GrantView]],
        changed: Callable[[], Awaitable[None]],
        poke: Callable[[], None],
    ) -> None:
        self.jobs, self.secrets, self.store, self.lifecycle = jobs, secrets, store, lifecycle
        self.gpu_infos, self.lease_beat = gpu_infos, lease_beat
        self.changed, self.poke = changed, poke

    async def receive(self, job_id: str, secret: str, body: object) -> GrantView:
        job = self.jobs.get(job_id)
        if job is None or not job.secret_hash or not secret_matches(secret, job.secret_hash):
            raise Unauthorized(f"job {job_id}: unknown job or wrong secret")
        beat: Heartbeat = parse(Heartbeat, body, "heartbeat")  # nothing changed before this
        if is_lease(job):  # a kernel's provisioner, not a sidecar
            return await self.lease_beat(job, beat)
        now = time.time()
        job.last_heartbeat = now
        self.secrets.pop(job_id, None)  # the sidecar is up: nothing left to hand out
        if job.state == JobState.QUEUED:
            # A sidecar we had given up on: have it checkpoint and stop; the job starts again
            # through the scheduler like any queued job. What it did meanwhile is kept.
            await self.store.add_progress(job.id, beat.records())
            top = max(job.desired.generation, beat.generation or 0) + 1
            return GrantView(generation=top, gpus=[], action=GrantAction.STOP)
        fresh = beat.progress is not None and beat.progress != job.progress
        # All or nothing: when a write fails the job is left as it was (but alive), and the
        async with atomically(self.store, job):  # sidecar sends it again, backlog included
            await self.store.add_progress(job.id, beat.records())
            infos = self.gpu_infos()
            kind_of = {g.id: g.kind for g in infos} if mixed(infos) else None
            changed = grants.absorb(job, beat, fresh, device_ids(infos), kind_of)
            if beat.state in (SidecarState.DONE, SidecarState.FAILED, SidecarState.CANCELLED):
                await self.lifecycle.finish(job, JobState(beat.state.value), beat, now)
                changed = True
            elif beat.state == SidecarState.SUSPENDED and not job.final:
                await self.lifecycle.requeue(
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
                await self.lifecycle.confirm_running(job, now)
                changed = True
            if changed:
                await self.lifecycle.save(job)
        if changed or fresh:  # watchers of /updates and the websocket see it now; and what
            await self.changed()  # the job shows is decided again with it
            self.poke()
        return grants.published(job, self.jobs.values())
