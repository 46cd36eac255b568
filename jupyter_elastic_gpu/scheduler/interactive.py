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
* reclaim: a kernel idle past the rule of ``core.idle`` is warned (its reason), then released
  (asked to restart without GPUs; its lease ends when it has). Idleness is judged by this
  server too where it runs the kernel (no code run through it), not only by what the
  provisioner reports; and while others wait, a lease is also released after
  ``hold_limit_contended`` or when its owner stays above their fair share. A provisioner that
  ignores the release loses the lease at its deadline (``releases.py``);
* bounded: one user's leases hold at most ``user_gpu_cap`` GPUs (by default half of a shared
  scheduler's), so no user's kernels take the whole box.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from elastic_gpu_sidecar.protocol import Grant, GrantAction, JobKind, JobState, SidecarState
from traitlets import Float, Int
from traitlets.config import LoggingConfigurable

from ..core.idle import IdleAction, IdleRule, lease_verdict
from ..core.model import Snapshot
from ..core.policies import Policy
from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told, plural
from ..core.schedule import entitlement
from ..errors import Conflict
from ..models import (
    ErrorInfo,
    EventKind,
    GrantView,
    Heartbeat,
    LeaseGrant,
    LeaseRequest,
    SubmitRequest,
    parse,
)
from . import grants
from .execution.inventory import device_ids, mig_slices
from .execution.launcher import BaseLauncher
from .jobs import JobRecord, new_secret
from .lifecycle import Lifecycle
from .port import views
from .principal import Principal
from .settings import SchedulerSettings
from .storage.atomic import atomically
from .storage.store import Store

#: What a lease whose kernel ended it says.
ENDINGS = {
    JobState.DONE: Told(ReasonKind.KERNEL_ENDED),
    JobState.FAILED: Told(ReasonKind.KERNEL_ENDED, {"died": True}),
    JobState.CANCELLED: Told(ReasonKind.KERNEL_ENDED, {"withdrawn": True}),
}
#: A GPU at least this busy (NVML utilisation 0..1) counts as used by its kernel.
BUSY_UTILIZATION = 0.05


def is_lease(job: JobRecord) -> bool:
    return job.kind == JobKind.INTERACTIVE


def kernel_holds(job: JobRecord, gpus: int) -> Told:
    """What a lease whose kernel holds ``gpus`` GPUs (or its MIG slice) says."""
    figures: dict[str, Any] = {"gpus": gpus}
    if job.spec.mig is not None:
        figures["profile"] = job.spec.mig
    return Told(ReasonKind.KERNEL, figures)


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

    hold_limit_contended = Float(
        14400.0,
        min=0.0,
        config=True,
        help="Seconds a lease may hold its GPUs, used or not, while other jobs wait for GPUs; "
        "then it is released like an idle one (warned idle_warning before). 0: no limit.",
    )
    user_gpu_cap = Int(
        -1,
        min=-1,
        config=True,
        help="Most GPUs one user's kernel leases may hold or wait for at once; a lease past it "
        "is refused (409). -1: none on a personal server, half of the GPUs (at least 1) on a "
        "shared scheduler or a JupyterHub service; 0: no cap.",
    )

    def __init__(
        self,
        *,
        jobs: dict[str, JobRecord],
        store: Store,
        lifecycle: Lifecycle,
        launcher: BaseLauncher,
        settings: SchedulerSettings,
        gpu_infos: Callable[[], list[Any]],
        submit: Callable[[Principal, SubmitRequest], Awaitable[JobRecord]],
        snapshot: Callable[[], Snapshot],
        decider: Policy,
        heartbeat_url: Callable[[str], str],
        simulated: bool,
        changed: Callable[[], Awaitable[None]],
        poke: Callable[[], None],
        **kwargs: Any,
    ) -> None:
        """Given the service's parts a lease touches: its job table, store and lifecycle (a
        lease is a job), its launcher (whether it starts processes, spans nodes), its live
        settings (heartbeats), the GPUs, ``submit`` (a lease is submitted like a job), the
        policy's ``snapshot`` and ``decider`` (fair shares for reclaim), the heartbeat URL,
        whether GPUs are simulated, and ``changed`` / ``poke``: watchers see a new version /
        the policy decides again."""
        super().__init__(**kwargs)
        self.jobs, self.store, self.lifecycle = jobs, store, lifecycle
        self.launcher, self.settings, self.gpu_infos = launcher, settings, gpu_infos
        self.submit, self.snapshot, self.decider = submit, snapshot, decider
        self.heartbeat_url, self.simulated = heartbeat_url, simulated
        self.changed, self.poke = changed, poke
        # job id -> the figures of the idle warning shown as its reason
        self.notices: dict[str, dict[str, Any]] = {}
        #: Seconds since code last ran in the kernel of a lease, as this server saw it (None:
        #: no kernel of this server holds it); set by a Jupyter server that runs kernels.
        self.kernel_idle: Callable[[JobRecord], float | None] | None = None
        self._over_since: dict[str, float] = {}  # user -> since when above their fair share

    @property
    def rule(self) -> IdleRule:
        return IdleRule(
            self.idle_timeout,
            self.idle_timeout_contended,
            self.idle_warning,
            self.hold_limit_contended,
        )

    def gpu_cap(self, mig: bool = False) -> int:
        """The cap on one user's lease GPUs in force (0: none); ``mig``: on their MIG slices,
        by the same rule over the slices."""
        if self.user_gpu_cap >= 0:
            return self.user_gpu_cap
        if self.launcher.starts_processes:  # a personal server: its one user
            return 0
        infos = self.gpu_infos()
        pool = len(mig_slices(infos)) if mig else len(infos)
        return max(1, (pool + 1) // 2)

    # -- users' requests ------------------------------------------------------------------
    async def open(self, who: Principal, body: object) -> LeaseGrant:
        """``POST leases``: a queued lease and the secret its provisioner heartbeats with."""
        request = parse(LeaseRequest, body, "lease")
        if request.mig is not None:
            self._check_slice_cap(who)
        cap = self.gpu_cap() if request.mig is None else 0
        if cap:
            held = sum(
                j.min_gpus
                for j in self.jobs.values()
                if is_lease(j) and j.user == who.user and not j.final and j.spec.mig is None
            )
            if held + request.size > cap:
                raise Conflict(
                    f"{who.user}'s kernels hold or wait for {plural(held, 'GPU')}: with "
                    f"{plural(request.size, 'more GPU')} they would pass the most one user's "
                    f"kernels may have, {cap} (c.InteractiveLeases.user_gpu_cap); shut down a "
                    "kernel with GPUs first, or train with %%elastic_train, which has no cap"
                )
        if self.launcher.spans_nodes:
            raise Conflict(
                "GPU leases for notebook kernels are not available on a scheduler over several "
                "servers yet (the lease could land on another machine than the kernel): use "
                "%%elastic_train jobs there, or a scheduler of this machine's own for kernels"
            )
        job = await self.submit(who, request.submit_request(self.simulated))
        secret, digest = new_secret()
        async with atomically(self.store, job):
            job.secret_hash = digest
            job.last_heartbeat = time.time()
            await self.lifecycle.save(job)
        return LeaseGrant(
            job=views.job_view(job),
            secret=secret,
            heartbeat_url=self.heartbeat_url(job.id),
            heartbeat_interval=self.settings.heartbeat_interval,
        )

    def _check_slice_cap(self, who: Principal) -> None:
        """One user's kernels hold or wait for at most ``user_gpu_cap`` MIG slices, by default
        half of them on a shared scheduler: the same rule as for GPUs, over the slices."""
        cap = self.gpu_cap(mig=True)
        held = sum(
            1
            for j in self.jobs.values()
            if is_lease(j) and j.user == who.user and not j.final and j.spec.mig is not None
        )
        if cap and held + 1 > cap:
            raise Conflict(
                f"{who.user}'s kernels hold or wait for {plural(held, 'MIG slice')}: one more "
                f"would pass the most one user's kernels may have, {cap} "
                "(c.InteractiveLeases.user_gpu_cap); shut down a kernel with a slice first"
            )

    def reason(self, job: JobRecord) -> Told | None:
        """What a running lease shows instead of the policy's reason (which sees it only as
        a job it may not resize): its idle warning, else what it holds."""
        if not is_lease(job) or job.state != JobState.RUNNING:
            return None
        notice = self.notices.get(job.id)
        if notice:
            return Told(ReasonKind.IDLE_WARNING, notice)
        return kernel_holds(job, len(job.held_gpus))

    # -- the provisioner's heartbeat -------------------------------------------------------
    async def heartbeat(self, job: JobRecord, beat: Heartbeat) -> GrantView:
        """What a validated heartbeat of ``job``'s provisioner changes, and the grant to
        answer: no GPUs yet (RUN, empty) while it waits, its GPUs once they are free, CANCEL
        (empty) once it is over or released."""
        now = time.time()
        job.last_heartbeat = now
        if job.final:
            return GrantView(generation=job.desired.generation, gpus=[], action=GrantAction.CANCEL)
        ended = beat.state in (SidecarState.DONE, SidecarState.FAILED, SidecarState.CANCELLED)
        if job.state == JobState.QUEUED and not ended:
            return GrantView(generation=job.desired.generation, gpus=[], action=GrantAction.RUN)
        changed = False
        async with atomically(self.store, job):
            grants.absorb(job, beat, False, device_ids(self.gpu_infos()))
            if ended:
                said = Told(job.reason_kind, job.reason_figures)
                stopping = job.state == JobState.STOPPING
                state = JobState(beat.state.value)  # done, failed (its kernel died), cancelled
                ending = ENDINGS.get(state)
                await self.lifecycle.finish(
                    job, state, beat, now, said if stopping or ending is None else ending
                )
                self.notices.pop(job.id, None)
                changed = True
            elif (
                job.state == JobState.STARTING
                and beat.state == SidecarState.RUNNING
                and beat.generation == job.desired.generation
            ):
                await self.lifecycle.confirm_running(job, now)
                job.tell(kernel_holds(job, len(job.desired.gpus)))
                changed = True
            answer = grants.published(job, self.jobs.values())
            if job.state == JobState.STARTING and answer.gpus and job.launched_at is None:
                job.launched_at = now  # the kernel may start on them from now on
                changed = True
            if changed:
                await self.lifecycle.save(job)
        if changed:
            await self.changed()
            self.poke()
        return answer

    # -- each round of the service ----------------------------------------------------------
    async def step(self, now: float) -> None:
        await self._find_lost(now)
        await self._reclaim(now)

    async def _find_lost(self, now: float) -> None:
        """A lease whose provisioner fell silent (its kernel's server is gone) ends: nothing
        is left to resume."""
        for job in list(self.jobs.values()):
            if not is_lease(job) or job.final:
                continue
            silent = now - (job.last_heartbeat or job.submitted_at)
            if silent <= self.settings.heartbeat_timeout:
                continue
            error = ErrorInfo(
                type="KernelLost",
                message=f"its kernel's provisioner stopped heartbeating {silent:.0f} s ago",
                hint="the kernel or its Jupyter server is gone; start the kernel again",
            )
            async with atomically(self.store, job):
                await self.lifecycle.finish(job, JobState.FAILED, Heartbeat(error=error), now)
            self.notices.pop(job.id, None)
            await self.changed()

    def _waiting(self, lease: JobRecord) -> int:
        """What waits for what ``lease`` holds: GPUs for whole GPUs, leases and jobs of its
        profile for a MIG slice."""
        return sum(
            j.min_gpus
            for j in self.jobs.values()
            if j.state == JobState.QUEUED and not j.held and j.spec.mig == lease.spec.mig
        )

    def _gpus_busy(self, job: JobRecord) -> bool:
        mine = set(job.desired.gpus)
        return any(
            g.id in mine and (getattr(g, "utilization", None) or 0.0) >= BUSY_UTILIZATION
            for g in self.gpu_infos()
        )

    def _idle_s(self, job: JobRecord) -> float | None:
        """How long ``job``'s kernel has run nothing: as this server saw it when it runs the
        kernel (a provisioner's word alone could keep GPUs for good), else as reported."""
        judged = self.kernel_idle(job) if self.kernel_idle is not None else None
        return judged if judged is not None else job.reported.idle_s

    def _shares(self, now: float) -> tuple[set[str], int]:
        """(users whose leases alone hold more than their fair share, how many other users
        wait below theirs); each user's time above it counts from ``_over_since``."""
        snap = self.snapshot()
        if snap.fair_share is None or not snap.jobs:
            self._over_since.clear()
            return set(), 0
        ent = entitlement(self.decider, snap, snap.fair_share)
        leased: dict[str, int] = {}
        for j in self.jobs.values():
            if is_lease(j) and j.state == JobState.RUNNING and j.spec.mig is None:
                leased[j.user] = leased.get(j.user, 0) + len(j.held_gpus)
        over = {u for u, n in leased.items() if n > ent.gpus.get(u, 0)}
        holding: dict[str, int] = {}
        for job in snap.jobs:
            holding[job.user] = holding.get(job.user, 0) + len(job.gpus)
        below = {
            job.user
            for job in snap.jobs
            if not job.gpus and holding.get(job.user, 0) < ent.gpus.get(job.user, 0)
        }
        for u in list(self._over_since):
            if u not in over:
                del self._over_since[u]
        for u in over:
            self._over_since.setdefault(u, now)
        return over, len(below)

    async def _reclaim(self, now: float) -> None:
        rule = self.rule
        leases_now = [j for j in self.jobs.values() if is_lease(j) and j.state == JobState.RUNNING]
        whole = [j for j in leases_now if j.spec.mig is None]
        # fair share is over whole GPUs: a MIG slice is reclaimed for idleness and hold time
        over, below = self._shares(now) if whole and self._waiting(whole[0]) else (set(), 0)
        for job in leases_now:
            if job.state != JobState.RUNNING:  # changed by a heartbeat served meanwhile
                continue
            waiting = self._waiting(job)
            verdict = lease_verdict(
                rule,
                self._idle_s(job),
                self._gpus_busy(job),
                waiting,
                now - (job.started_at or now),
                now - self._over_since[job.user]
                if job.user in over and job.spec.mig is None
                else None,
                below if job.spec.mig is None else 0,
            )
            if verdict.action == IdleAction.RELEASE:
                await self.release(job, verdict.reason, now)
                continue
            notice = None
            if verdict.action == IdleAction.WARN:
                figures = dict(detail=verdict.reason, release_in_s=verdict.release_in_s)
                notice = figures | (
                    {"idle_s": verdict.idle_s} if verdict.idle_s is not None else {}
                )
            if (notice or {}).get("detail") == self.notices.get(job.id, {}).get("detail"):
                continue
            if notice is None:
                self.notices.pop(job.id, None)
                said = kernel_holds(job, len(job.desired.gpus))
            else:
                self.notices[job.id] = notice
                said = Told(ReasonKind.IDLE_WARNING, notice)
            async with atomically(self.store, job):
                job.tell(said)
                await self.lifecycle.save(job)
            await self.changed()

    async def release(self, job: JobRecord, reason: str, now: float) -> None:
        """Ask the kernel to give its GPUs back (restart without them); the lease holds them
        until its provisioner says it has. A lease that ended, or gives them back already,
        since its caller looked (a heartbeat is served between two awaits) stays as it is."""
        if job.final or job.state == JobState.STOPPING:
            return
        async with atomically(self.store, job):
            job.desired = Grant(job.desired.generation + 1, [], GrantAction.CANCEL)
            job.state, job.last_change = JobState.STOPPING, now
            job.tell(Told(ReasonKind.RELEASED, {"detail": reason}))
            job.grant_change(now, [])
            await self.lifecycle.save(job)
            await self.store.add_event(job.id, EventKind.CANCEL, reason)
        self.notices.pop(job.id, None)
        await self.changed()
        self.poke()
