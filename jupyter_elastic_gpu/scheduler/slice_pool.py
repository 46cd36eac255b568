"""The MIG instances of the GPUs, handed out to the leases and jobs that ask for a profile.

The policy never sees these jobs (nor the GPUs in MIG mode: ``snapshot.build``); each round,
after its decision, ``core.slices.assign`` says who holds which instance, and this applies it:
a job given one starts on it (a lease's kernel, or a single-device job's sidecar); one that
waits says why and where it stands; one whose instance left the layout gives it back, a lease
by restarting its kernel without it (``InteractiveLeases.release``), a job by checkpointing and
queueing again (it resumes on another instance of its profile); so does one whose GPU an admin
drained.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

from elastic_gpu_sidecar.protocol import JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from ..core.slices import SliceAsk, assign
from . import snapshot
from .execution.inventory import mig_slices
from .interactive import InteractiveLeases, is_lease, kernel_holds
from .jobs import JobRecord, names_for
from .lifecycle import Lifecycle
from .storage.atomic import atomically
from .storage.store import Store


def on_slice(job: JobRecord) -> bool:
    """Whether ``job`` runs on a MIG instance (the pool's) rather than whole GPUs (the policy's)."""
    return job.spec.mig is not None


def holding(job: JobRecord) -> Told:
    """What a job that holds its instance says: a lease, that its kernel holds it."""
    if is_lease(job):
        return kernel_holds(job, 1)
    return Told(ReasonKind.RUNNING, {"gpus": 1, "profile": job.spec.mig})


class SlicePool:
    """Applies ``core.slices`` to the service's jobs each round (see the module)."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        store: Store,
        lifecycle: Lifecycle,
        interactive: InteractiveLeases,
        gpu_infos: Callable[[], list[Any]],
        drained: Callable[[], Collection[str]],
        waits_for_server: Callable[[JobRecord], bool],
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.jobs, self.store, self.lifecycle = jobs, store, lifecycle
        self.interactive, self.gpu_infos, self.drained = interactive, gpu_infos, drained
        self.waits_for_server, self.changed = waits_for_server, changed

    def _askers(self) -> list[JobRecord]:
        """The open jobs on slices the pool serves, first asked first (a job held by a person
        or waiting for its owner's server asks for nothing meanwhile)."""
        jobs = [
            j
            for j in self.jobs.values()
            if on_slice(j)
            and not j.final
            and not (j.state == JobState.QUEUED and (j.held or self.waits_for_server(j)))
        ]
        return sorted(jobs, key=lambda j: (j.submitted_at, j.id))

    async def step(self, now: float) -> None:
        askers = self._askers()
        if not askers:
            return
        asks = [SliceAsk(j.id, j.spec.mig or "", next(iter(j.held_gpus), None)) for j in askers]
        slices = mig_slices(self.gpu_infos())
        pool = assign(slices, asks, self.drained())
        gpu_of = {s.id: s.gpu for s in slices}
        changed = False
        for job in askers:
            if job.final:  # ended by a heartbeat served while this step awaited
                continue
            if job.id in pool.gone:
                what = "is gone (the GPU's MIG layout changed)"
                changed |= await self._move_off(job, pool.gone[job.id], what, now)
                continue
            if job.id in pool.drained:
                gpu = gpu_of.get(pool.drained[job.id], "?")
                what = f"is on GPU {gpu}, which an admin drained for maintenance"
                changed |= await self._move_off(job, pool.drained[job.id], what, now)
                continue
            why = pool.reasons.get(job.id)
            place = (why.figures().get("before", 0) + 1 if why else None), None
            async with atomically(self.store, job):
                touched = False
                if job.state == JobState.QUEUED and job.id in pool.grants:
                    job.tell(holding(job))
                    await self.lifecycle.start(job, [pool.grants[job.id]], now)
                    touched = True
                shown = (
                    snapshot.held_reason(job)
                    if job.held and job.state == JobState.QUEUED
                    else self.interactive.reason(job)
                    or snapshot.shown_reason(job, why or holding(job))
                )
                name_of = names_for(self.jobs, job.user)
                if shown is not None and job.says_other(shown, name_of):
                    job.tell(shown, name_of)
                    touched = True
                if (job.position, job.rank) != place:
                    job.position, job.rank = place
                    touched = True
                if touched:
                    await self.lifecycle.save(job)
                    changed = True
        if changed:
            await self.changed()

    async def _move_off(self, job: JobRecord, slice_id: str, what: str, now: float) -> bool:
        """``job`` may not keep its instance (it ``what``): it gives it back (once: a
        stopping job is already doing so)."""
        if job.state == JobState.STOPPING:
            return False
        detail = f"its {job.spec.mig} MIG slice {slice_id} {what}"
        if is_lease(job):
            await self.interactive.release(
                job, f"released: {detail}; ask for a slice again (%gpu_lease {job.spec.mig})", now
            )
            return True
        async with atomically(self.store, job):
            job.tell(Told(ReasonKind.REQUEUED, {"detail": f"{detail}; it resumes on another"}))
            await self.lifecycle.change(job, [], now)
            await self.lifecycle.save(job)
        return True
