"""Release deadlines: no holder keeps GPUs against the scheduler.

A sidecar, a trainer and a kernel's provisioner are the user's own processes, and a heartbeat
needs only the job's secret: a holder that keeps reporting its old grant, or a trainer hung in
a checkpoint, would keep GPUs for as long as it liked. So every release the scheduler asks for
(a resize that gives GPUs up, a suspension, a cancel, an interactive lease taken back) has a
deadline. The clock starts once the ask can reach the holder (its new grant is not held back
for GPUs another job still leaves) and is written in the job's record and its events; it stops
when the holder confirms. Past it the claim is void: the job's secret is revoked (its
heartbeats are refused), the launcher ends every process of the launch it owns (in shared mode,
the owner's server does: ``GET launches`` lists it under ``ended``), and the job fails (or, for
a cancel, ends cancelled) with a reason that says so. Its GPUs are then busy only while the
inventory shows processes on them, as for any process the scheduler did not start.

Level-triggered like the rest of the service: each round looks at what each job owes now,
so a lost message or a restarted scheduler changes nothing but the clock (a restart gives
every holder a whole grace period again: it could not confirm while the scheduler was down).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from elastic_gpu_sidecar.protocol import GrantAction, JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told, plural
from ..models import ErrorInfo, EventKind, Heartbeat
from . import grants
from .execution.launcher import BaseLauncher
from .interactive import is_lease
from .jobs import JobRecord
from .lifecycle import Lifecycle
from .settings import SchedulerSettings
from .storage.atomic import atomically
from .storage.store import Store

#: The shortest grace period derived for a job (a slow machine's restart fits in it).
GRACE_FLOOR_S = 30.0
#: Measured resize costs a derived grace period allows (a resize is one: stop, restart).
GRACE_COSTS = 4
#: Heartbeats a derived grace period allows for the confirmation to arrive.
GRACE_BEATS = 3
#: Seconds a voided job stays listed for its owner's server to end its processes.
ENDED_LISTED_S = 600.0
#: The error type of a job whose claim was voided (its reason and ``GET jobs/ID`` say it).
RELEASE_TIMEOUT = "ReleaseTimeout"


def owed(job: JobRecord) -> list[str]:
    """GPUs ``job``'s holder may still be on that its desired grant does not give it: what it
    reported, and every grant published since its last confirmation."""
    if not job.state.active or job.launched_at is None:
        return []
    keep = set(job.desired.gpus) if job.desired.action == GrantAction.RUN else set()
    may_hold = set(job.reported.gpus).union(*job.granted.values())
    return sorted(may_hold - keep)


def owes(job: JobRecord) -> bool:
    """Whether ``job``'s holder was asked for something it has not confirmed yet: to give up
    GPUs, or (stopping) to stop at all."""
    if not job.state.active or job.launched_at is None:
        return False
    return job.state == JobState.STOPPING or bool(owed(job))


def asked_for(job: JobRecord) -> str:
    """What the holder was asked, for events and reasons."""
    if job.state == JobState.STOPPING:
        if is_lease(job):
            return "give its lease back"
        return "stop (cancel)" if job.desired.action == GrantAction.CANCEL else "stop (suspend)"
    return f"resize to {plural(len(job.desired.gpus), 'GPU')}"


class ReleaseDeadlines:
    """The deadlines of the service's jobs.

    Given the job table, the launch secrets not handed out yet (a voided launch is not listed
    any more), the store and lifecycle it writes through, the launcher (it ends a voided
    launch's processes), the live settings a grace period is made of (``release_grace``...),
    the log and ``changed`` / ``poke``: watchers see a new version / the policy decides again."""

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        secrets: dict[str, str],
        store: Store,
        lifecycle: Lifecycle,
        launcher: BaseLauncher,
        settings: SchedulerSettings,
        log: logging.Logger,
        changed: Callable[[], Awaitable[None]],
        poke: Callable[[], None],
    ) -> None:
        self.jobs, self.secrets, self.store, self.lifecycle = jobs, secrets, store, lifecycle
        self.launcher, self.settings, self.log = launcher, settings, log
        self.changed, self.poke = changed, poke

    def grace_s(self, job: JobRecord) -> float:
        """Seconds ``job``'s holder has to confirm a release: the setting, or (0) one periodic
        checkpoint interval (a trainer whose next step is further away could not keep its
        periodic checkpoints either), a few of its measured resize costs and a few heartbeats,
        and never less than ``GRACE_FLOOR_S``."""
        s = self.settings
        if s.release_grace > 0:
            return s.release_grace
        cost = job.resize_cost_s if job.resize_cost_s is not None else s.default_resize_cost
        derived = s.checkpoint_interval + GRACE_COSTS * cost + GRACE_BEATS * s.heartbeat_interval
        return max(GRACE_FLOOR_S, derived)

    def restarted(self, now: float) -> None:
        """After a restart: every clock runs a whole grace period from now."""
        for job in self.jobs.values():
            if job.release_due is not None:
                job.release_due = max(job.release_due, now + self.grace_s(job))

    async def step(self, now: float) -> None:
        """Start the clocks of new asks, stop those confirmed, void those past due."""
        for job in list(self.jobs.values()):
            due = job.release_due
            if not owes(job) or not self._reaches_holder(job):
                if due is not None:  # confirmed (or held back again): nothing owed now
                    async with atomically(self.store, job):
                        job.release_due = None
                        await self.lifecycle.save(job)
                continue
            if due is None:
                await self._start_clock(job, now)
            elif now >= due:
                await self.void(job, now)

    def _reaches_holder(self, job: JobRecord) -> bool:
        """Whether the holder is told what it is asked: a grant whose GPUs another job still
        leaves is held back (``grants.published``), and its holder is not late meanwhile."""
        desired = job.desired
        if desired.action != GrantAction.RUN or job.state == JobState.STOPPING:
            return True
        busy = grants.busy_elsewhere(job, self.jobs.values())
        return busy.isdisjoint(desired.gpus)

    async def _start_clock(self, job: JobRecord, now: float) -> None:
        grace = self.grace_s(job)
        gpus = owed(job)
        what = asked_for(job) + (f", giving back GPU(s) {','.join(gpus)}" if gpus else "")
        async with atomically(self.store, job):
            job.release_due = now + grace
            await self.lifecycle.save(job)
            await self.store.add_event(
                job.id,
                EventKind.DEADLINE,
                f"asked to {what}: due within {grace:.0f} s, or its claim is void and its "
                "processes are ended",
                {"gpus": gpus, "grace_s": round(grace, 1), "due": round(job.release_due, 3)},
            )

    async def void(
        self, job: JobRecord, now: float, by: str | None = None, what: str | None = None
    ) -> None:
        """End ``job``'s claim now: secret revoked, its processes ended by their launcher, the
        job failed (cancelled, when it was being cancelled). ``by``: who forced it (else its
        deadline passed), instead of asking it ``what`` (default: what it was asked)."""
        gpus = owed(job) or job.held_gpus
        what = what or asked_for(job)
        cancelling = (  # a grant not given back failed, whoever asked for it
            job.state == JobState.STOPPING
            and job.desired.action == GrantAction.CANCEL
            and not is_lease(job)
        )
        if by is None:
            late = now - (job.release_due or now)
            grace = self.grace_s(job)
            why = f"did not {what} within {grace:.0f} s of being asked" + (
                f" ({late:.0f} s past due)" if late >= 1 else ""
            )
        else:
            why = f"was ended at once by {by} instead of being asked to {what}"
        held = f" (GPU(s) {','.join(gpus)})" if gpus else ""
        ended = await self._end_processes(job)
        error = ErrorInfo(
            type=RELEASE_TIMEOUT,
            message=f"its {'kernel' if is_lease(job) else 'sidecar'} {why}{held}; its claim "
            f"is void{ended}",
            hint="a trainer hung in a checkpoint or a step looks the same: see trainer.log and "
            "sidecar.log in the job dir; if its checkpoints take longer, raise "
            "c.SchedulerService.release_grace",
        )
        self.secrets.pop(job.id, None)  # a launch not carried out yet is not listed any more
        async with atomically(self.store, job):
            job.secret_hash = ""  # its heartbeats are refused from now on
            job.release_due, job.voided_at = None, now
            state = JobState.CANCELLED if cancelling else JobState.FAILED
            said = Told(ReasonKind.CANCELLED, {"detail": error.message}) if cancelling else None
            await self.lifecycle.finish(job, state, Heartbeat(error=error), now, said)
        self.log.warning("elastic-gpu: job %s: %s", job.id, error.message)
        await self.changed()
        self.poke()

    async def _end_processes(self, job: JobRecord) -> str:
        """Have the launcher end the launch's processes; how that went, for the reason."""
        if is_lease(job):
            return "; its GPUs count as busy only while the kernel's processes show on them"
        if not job.launch:
            return ""
        try:
            ended = await self.launcher.end(job.launch)
        except Exception as e:  # the launcher's own fault: the claim is void all the same
            self.log.warning("elastic-gpu: job %s: its processes not ended: %s", job.id, e)
            ended = False
        if ended:
            return "; its processes were ended"
        if job.launch.get("via") == "agent":
            return "; its owner's server is told to end its processes"
        return "; its GPUs count as busy only while its processes show on them"
