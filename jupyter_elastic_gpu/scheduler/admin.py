"""What people do to the live scheduler besides submitting and cancelling: suspend a job and
resume it (its owner or an admin), change a job's priority and drain a GPU (admins).

Each action checks who may do it, validates what it was sent before anything changes, writes
its change and an event that says who did what in one transaction, and has the scheduler
decide again at once. None of them is a new mechanism: a suspension is the grant action the
sidecar already knows (checkpoint at the next step, then stop) plus a hold that keeps the job
away from the policy (``snapshot.build``); a drained GPU is one the policy may not use, so jobs
on it move off through the usual resize; a priority is the weight a submission sets. The hold
is in the job's record and the drained GPUs in the store's settings: both survive a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from elastic_gpu_sidecar.protocol import GrantAction, JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..errors import Conflict, Forbidden, NotFound
from ..models import DrainChange, EventKind, PriorityChange, parse
from . import releases
from .jobs import JobRecord
from .lifecycle import Lifecycle
from .principal import Principal
from .snapshot import held_reason
from .storage.atomic import atomically
from .storage.store import Store

#: The store setting that lists the drained GPUs' ids.
DRAINED_GPUS = "drained_gpus"
#: How a caller becomes an admin, in each deployment (said by every refusal).
HOW_TO_BE_ADMIN = (
    "ask for admin rights: c.ElasticGPUApp.admin_users on a Jupyter server, a token from "
    "`jupyter elastic-gpu scheduler add-user NAME --admin` on the shared scheduler, or the "
    "scope custom:elastic-gpu:admin on JupyterHub"
)


def require_admin(who: Principal, what: str) -> None:
    """Forbidden, saying what is needed, unless ``who`` is an admin."""
    if not who.admin:
        raise Forbidden(f"{what} is for admins, and {who.user} is not one: {HOW_TO_BE_ADMIN}")


class AdminActions:
    """The actions over the service's jobs and GPUs; ``drained`` is read by its snapshots.

    Given the job table, ``get`` (the job a caller may change, or NotFound / Forbidden), the
    store and lifecycle it writes through, the GPUs (only a known one is drained), ``void``
    (a forced drain ends the claims on the GPU: ``ReleaseDeadlines.void``), the log and
    ``changed`` / ``poke``: watchers see a new version / the policy decides again."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        get: Callable[..., JobRecord],
        store: Store,
        lifecycle: Lifecycle,
        gpu_infos: Callable[[], list[Any]],
        void: Callable[..., Awaitable[None]],
        log: logging.Logger,
        changed: Callable[[], Awaitable[None]],
        poke: Callable[[], None],
    ) -> None:
        self.jobs, self.get, self.store, self.lifecycle = jobs, get, store, lifecycle
        self.gpu_infos, self.void, self.log = gpu_infos, void, log
        self.changed, self.poke = changed, poke
        #: Ids of the GPUs drained for maintenance (the store's ``DRAINED_GPUS``).
        self.drained: set[str] = set()

    async def load(self) -> None:
        """The drained GPUs as the store keeps them (a value that is not a list of ids is
        said in the log and ignored: no GPU is drained by accident)."""
        value = (await self.store.settings()).get(DRAINED_GPUS, [])
        if isinstance(value, list) and all(isinstance(g, str) for g in value):
            self.drained = set(value)
        else:
            self.log.warning(
                "elastic-gpu: setting %r is not a list of GPU ids (%r): no GPU drained",
                DRAINED_GPUS,
                value,
            )

    # -- jobs --------------------------------------------------------------------------------
    async def suspend(self, who: Principal, job_id: str) -> JobRecord:
        """Checkpoint at the next step and stop, then wait, held, until resumed. Suspending
        a held job again changes nothing (the first hold, and who may lift it, stay)."""
        job = self.get(who, job_id, change=True)
        if job.final:
            raise Conflict(f"job {job_id} is {job.state}: there is nothing to suspend")
        if job.state == JobState.STOPPING and job.desired.action == GrantAction.CANCEL:
            raise Conflict(f"job {job_id} is being cancelled: it cannot be suspended")
        if job.held:
            return job
        now = time.time()
        async with atomically(self.store, job):
            job.held_by = who.user
            job.tell(held_reason(job))
            if job.state in (JobState.STARTING, JobState.RUNNING, JobState.RESIZING):
                # The move any suspension makes: the grant's STOP (or, before a sidecar
                # exists, straight back to the queue). The reason just set says whose.
                await self.lifecycle.change(job, [], now)
                job.tell(held_reason(job))
            await self.lifecycle.save(job)
            await self.store.add_event(
                job.id,
                EventKind.HOLD,
                f"{who.user} suspended {job.name}: no GPUs until it is resumed",
                {"by": who.user},
            )
        await self._changed()
        return job

    async def resume(self, who: Principal, job_id: str) -> JobRecord:
        """Lift the hold: the job waits in the queue again and resumes from its checkpoint.
        A job that is not held is returned unchanged."""
        job = self.get(who, job_id, change=True)
        if not job.held:
            return job
        if job.held_by != job.user:
            require_admin(who, f"resuming job {job_id}, which {job.held_by} (an admin) suspended,")
        async with atomically(self.store, job):
            held_by, job.held_by = job.held_by, None
            if job.state == JobState.QUEUED:
                job.tell(Told(ReasonKind.UNHELD, {"by": who.user}))
            await self.lifecycle.save(job)
            await self.store.add_event(
                job.id,
                EventKind.RELEASE,
                f"{who.user} resumed {job.name} (suspended by {held_by})",
                {"by": who.user},
            )
        await self._changed()
        return job

    async def set_priority(self, who: Principal, job_id: str, body: Any) -> JobRecord:
        """A new priority for an open job (the bounds a submission has); decided again at once."""
        require_admin(who, "changing a job's priority")
        change: PriorityChange = parse(PriorityChange, body, "priority change")
        job = self.get(who, job_id, change=True)
        if job.final:
            raise Conflict(f"job {job_id} is {job.state}: its priority no longer matters")
        before = job.spec.priority
        if change.priority == before:
            return job
        async with atomically(self.store, job):
            job.spec = job.spec.model_copy(update={"priority": change.priority})
            await self.lifecycle.save(job)
            await self.store.add_event(
                job.id,
                EventKind.PRIORITY,
                f"{who.user} changed the priority of {job.name} from {before:g} to "
                f"{change.priority:g}",
                {"by": who.user, "from": before, "to": change.priority},
            )
        await self._changed()
        return job

    # -- GPUs --------------------------------------------------------------------------------
    async def drain(self, who: Principal, gpu_id: str, body: Any) -> str:
        """Drain a GPU (no job gets it; jobs on it move off) or put it back; its id."""
        require_admin(who, "draining a GPU")
        change: DrainChange = parse(DrainChange, body, "drain")
        known = [g.id for g in self.gpu_infos()]
        if gpu_id not in known:
            raise NotFound(f"no GPU {gpu_id!r}: this server's GPUs are {', '.join(known)}")
        if (gpu_id in self.drained) == change.drained:
            return gpu_id
        drained = self.drained | {gpu_id} if change.drained else self.drained - {gpu_id}
        message = (
            f"{who.user} drained GPU {gpu_id} for maintenance: no job gets it, jobs on it move off"
            if change.drained
            else f"{who.user} put GPU {gpu_id} back in service"
        )
        async with self.store.transaction():
            await self.store.set_setting(DRAINED_GPUS, sorted(drained), by=who.user)
            await self.store.add_event(
                None,
                EventKind.DRAIN,
                message,
                {"by": who.user, "gpu": gpu_id, "drained": change.drained},
            )
        self.drained = drained  # only once written: a failed write drains nothing
        if change.drained and change.force:  # the jobs on it end now instead of moving off
            now = time.time()
            for job in list(self.jobs.values()):
                on_it = gpu_id in job.held_gpus or gpu_id in releases.owed(job)
                if job.state.active and job.launched_at is not None and on_it:
                    await self.void(job, now, by=who.user, what=f"move off GPU {gpu_id}")
        await self._changed()
        return gpu_id

    async def _changed(self) -> None:
        """Watchers see the change now, and the policy decides again at once."""
        await self.changed()
        self.poke()
