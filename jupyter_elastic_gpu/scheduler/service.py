"""The live scheduler: jobs in, desired grants out, level-triggered.

``SchedulerService`` keeps every job in memory and in SQLite. On every event (a submission, a
cancel, a heartbeat that changes something, a sidecar lost) and on a periodic tick it builds a
``core`` snapshot (``snapshot.py``), asks the policy for a decision and publishes each job's
desired grant. Sidecars heartbeat their progress and get the desired grant back
(``grants.py``); they converge on it whatever was lost on the way. Who may see what is in
``port/views.py``; where job files live in ``storage/jobdirs.py``. Its settings are
``settings.py``; a sidecar's heartbeat is absorbed by ``heartbeats.py``, and sidecars are
started (or listed for their owner's server) by ``launches.py``.

A restarted service rebuilds its state from the database and re-adopts sidecars that are still
alive from their next heartbeat; a sidecar silent past ``heartbeat_timeout`` (with its process
gone) is declared lost and its job queued again, to resume from its last checkpoint (``lost.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from elastic_gpu_sidecar.protocol import JobKind, JobState

from ..core.model import Snapshot
from ..core.placement import groups, mixed, widest_kind
from ..core.policies import Policy
from ..core.reasons import Told
from ..core.schedule import decide_together, queue_positions
from ..errors import BadRequest, Forbidden, NotFound, StorageUnavailable
from ..models import (
    CancelRequest,
    EventKind,
    GrantView,
    GroupWeightRequest,
    LaunchRequest,
    SubmitRequest,
    parse,
)
from . import grants, policies, releases, snapshot
from .admin import AdminActions
from .budgets import UserTally
from .estimates import Estimates
from .execution.inventory import external_processes, mig_slices
from .execution.launcher import BaseLauncher
from .heartbeats import SidecarHeartbeats
from .interactive import InteractiveLeases
from .jobs import JobRecord, names_for
from .launches import Launches
from .lifecycle import Lifecycle
from .lost import LostSidecars
from .principal import Principal
from .releases import ReleaseDeadlines
from .servers import WAITING_FOR_SERVER, UserServers
from .settings import SchedulerSettings
from .shares import ShareLedger, check_group
from .slice_pool import SlicePool, on_slice
from .storage import jobdirs
from .storage.atomic import atomically
from .storage.dbfile import FaultLog
from .storage.retention import Retention
from .storage.store import Store
from .waits import wait_at_most


class SchedulerService(SchedulerSettings):
    """Decides and publishes grants; every setting is ``c.SchedulerService.<name>``
    (``settings.py``)."""

    def __init__(
        self,
        store: Store,
        inventory: Any,
        launcher: BaseLauncher,
        heartbeat_url: Callable[[str], str],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.store, self.inventory, self.launcher = store, inventory, launcher
        self.heartbeat_url = heartbeat_url
        self.decider: Policy = policies.make(self.policy, self.policy_params)
        self.jobs: dict[str, JobRecord] = {}
        self.version = 0
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._last_account = time.time()
        self._secrets: dict[str, str] = {}  # job id -> secret for a launch not yet handed out
        self._gpu_cache: list[Any] = []
        self._gpu_cache_t = 0.0
        self.faults = FaultLog(self.log)  # the loop's storage faults, said once each
        # Its helpers, each given only the parts it uses (``settings=self``: the settings read
        # live, as a config or a test may set them after construction).
        self.lifecycle = Lifecycle(store, self.poke, reads_job_dirs=launcher.starts_processes)
        self.servers = UserServers(  # whose jobs wait for their own server
            starts_processes=launcher.starts_processes, settings=self, poke=self.poke
        )
        self.estimates = Estimates(  # the queue's estimated starts and ends
            jobs=self.jobs,
            settings=self,
            decider=self.decider,
            current_version=lambda: self.version,
            gpu_infos=self.gpu_infos,
            external=self.external,
            drained=lambda: self.admin.drained,
            snapshot=self.core_snapshot,
            log=self.log,
            changed=self._changed_now,
        )
        self.tally = UserTally(self.jobs, self)  # each user's open jobs and stored bytes
        self.shares = ShareLedger(
            store, self.fair_share_half_life, self.group_weights, enabled=self.fair_share
        )
        self.retention = Retention(  # finished jobs expire (job_retention_days)
            jobs=self.jobs,
            get=self.get,
            store=store,
            lifecycle=self.lifecycle,
            settings=self,
            removes_dirs=launcher.starts_processes,
            log=self.log,
            changed=self._changed_now,
        )
        self.interactive = InteractiveLeases(  # kernels' leases
            jobs=self.jobs,
            store=store,
            lifecycle=self.lifecycle,
            launcher=launcher,
            settings=self,
            gpu_infos=self.gpu_infos,
            submit=self.submit,
            snapshot=self.core_snapshot,
            decider=self.decider,
            heartbeat_url=heartbeat_url,
            simulated=self.simulated,
            changed=self._changed_now,
            poke=self.poke,
            parent=self,  # its settings are read from the service's config
        )
        self.slice_pool = SlicePool(  # MIG instances, for the leases and jobs that ask for one
            jobs=self.jobs,
            store=store,
            lifecycle=self.lifecycle,
            interactive=self.interactive,
            gpu_infos=self.gpu_infos,
            drained=lambda: self.admin.drained,
            waits_for_server=self.waits_for_server,
            changed=self._changed_now,
        )
        self.releases = ReleaseDeadlines(  # no holder keeps GPUs past a deadline
            jobs=self.jobs,
            secrets=self._secrets,
            store=store,
            lifecycle=self.lifecycle,
            launcher=launcher,
            settings=self,
            log=self.log,
            changed=self._changed_now,
            poke=self.poke,
        )
        self.admin = AdminActions(  # suspend/resume, priorities, drained GPUs
            jobs=self.jobs,
            get=self.get,
            store=store,
            lifecycle=self.lifecycle,
            gpu_infos=self.gpu_infos,
            void=self.releases.void,
            log=self.log,
            changed=self._changed_now,
            poke=self.poke,
        )
        self.losses = LostSidecars(  # sidecars silent or gone
            jobs=self.jobs,
            secrets=self._secrets,
            servers=self.servers,
            lifecycle=self.lifecycle,
            launcher=launcher,
            gpu_infos=self.gpu_infos,
            settings=self,
            changed=self._changed_now,
        )
        self.beats = SidecarHeartbeats(  # the sidecar protocol
            jobs=self.jobs,
            secrets=self._secrets,
            store=store,
            lifecycle=self.lifecycle,
            gpu_infos=self.gpu_infos,
            lease_beat=self.interactive.heartbeat,
            changed=self._changed_now,
            poke=self.poke,
        )
        self.launches = Launches(  # sidecars started, launches listed for servers
            jobs=self.jobs,
            secrets=self._secrets,
            store=store,
            lifecycle=self.lifecycle,
            launcher=launcher,
            settings=self,
            heartbeat_url=heartbeat_url,
            servers=self.servers,
            log=self.log,
            changed=self._changed_now,
        )

    @property
    def simulated(self) -> bool:
        """Whether this server's GPUs are simulated (logical CPU devices)."""
        return getattr(self.inventory, "source", "simulated") == "simulated"

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        now = time.time()
        await self.admin.load()
        loaded = await self.store.load_records(JobRecord.from_dict, self.log)  # bad: aside
        for job in loaded:
            if job.state.active:
                # Give a sidecar that survived our restart one timeout to heartbeat again.
                job.last_heartbeat = now
            self.jobs[job.id] = job
        self.servers.restarted((job.user for job in loaded), now)
        active = sum(1 for j in self.jobs.values() if j.state.active)
        self.releases.restarted(now)
        if self.jobs:
            await self.store.add_event(
                None,
                EventKind.RESTART,
                f"scheduler started with {len(self.jobs)} jobs known, "
                f"{active} to re-adopt from their heartbeats",
            )
        self._last_account = now
        await self.shares.load(self.jobs.values(), now)
        await self._refresh_gpus(now)  # the first inventory, off the event loop (Ray: seconds)
        self._task = asyncio.create_task(self._loop(), name="elastic-gpu-scheduler")

    async def stop(self) -> None:
        """Stop deciding. Sidecars keep running: a restarted service re-adopts them."""
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.shares.save(time.time())
        except StorageUnavailable as e:  # usage since the last save is lost, nothing else
            self.log.warning("elastic-gpu: fair-share usage not saved: %s", e)

    def poke(self) -> None:
        """Something changed: decide again soon."""
        self._wake.set()

    async def _loop(self) -> None:
        last_decision = 0.0
        while True:
            woken = self._wake.is_set()
            self._wake.clear()
            now = time.time()
            decide = woken or now - last_decision >= self.tick_interval
            try:
                await self.step(now, decide)
                self.faults.answered()
            except StorageUnavailable as e:  # nothing was changed: the next round retries
                self.faults.failed(e)
                last_decision = 0.0
                await asyncio.sleep(1.0)
                continue
            except Exception:  # one bad round must not stop the scheduler
                self.log.exception("elastic-gpu: scheduler step failed")
            if decide:
                last_decision = now
            await wait_at_most(self._wake.wait(), 1.0)
            await asyncio.sleep(0.05)  # let events that arrive together share one decision

    async def step(self, now: float | None = None, decide: bool = True) -> None:
        """One round: account time, find lost sidecars, decide, start what may start."""
        now = time.time() if now is None else now
        await self._refresh_gpus(now)
        snapshot.account(self.jobs.values(), max(now - self._last_account, 0.0))
        self._last_account = now
        self.shares.account(self.jobs.values(), now)
        await self.shares.save_if_due(now)
        await self.losses.step(now)  # sidecars lost: requeued or ended
        await self.interactive.step(now)  # leases: silent kernels, idle reclaim
        if self.servers.step(self.jobs.values(), now):  # a server came or went: its user's
            decide = True  # jobs change
        if decide:
            await self._decide(now)
            await self.slice_pool.step(now)  # MIG instances: not the policy's
        await self.releases.step(now)  # after the decision: its asks start their clocks now
        await self._launch_ready(now)
        await self.retention.step(now)

    # -- users' requests ----------------------------------------------------------------------
    async def submit(self, who: Principal, req: SubmitRequest) -> JobRecord:
        if req.inputs and not self.launcher.starts_processes:
            # The shared scheduler opens no job file: dropping the variables would start a
            # job that fails far from the cause. The user's own server writes them.
            raise BadRequest(
                "the shared scheduler takes no passed variables (inputs): submit through your "
                "own Jupyter server, which writes them into the job's directory, or save them "
                "to a file the script reads"
            )
        infos = self.gpu_infos()
        whole = [g for g in infos if g.mig is None]  # a GPU in MIG mode serves its instances
        spec, notes, elastic = req.fit_to(
            len(whole),
            self.user_gpu_cap,
            widest_kind(whole),
            len(infos) - len(whole),
            Counter(s.profile for s in mig_slices(infos)),
        )
        if spec.simulated is None:
            spec = spec.model_copy(update={"simulated": self.simulated})
        size = self.tally.check(who.user, spec)  # 429 / 507 past the user's budgets
        job_id = "j-" + uuid.uuid4().hex[:10]
        synthetic = spec.kind == JobKind.SYNTHETIC
        job = JobRecord(
            id=job_id,
            user=who.user,
            name=req.name or (f"synthetic-{job_id[2:6]}" if synthetic else job_id),
            spec=spec,
            job_dir=str(jobdirs.job_root(self.job_root, who.user) / job_id),
            notes=notes,
            elastic=elastic,
            groups=sorted(set(who.groups)),
        )
        if synthetic:
            job.total_work = spec.synthetic.work
        if req.inputs:
            jobdirs.write_inputs(job.job_dir, req.inputs)
        async with self.store.transaction():  # the job and its first event, or neither
            await self.lifecycle.save(job)
            await self.store.add_event(
                job_id,
                EventKind.SUBMITTED,
                f"{who.user} submitted {job.name}: {job.min_gpus}-{job.max_gpus} GPUs"
                + "".join(f"; {n}" for n in notes),
            )
        self.jobs[job_id] = job  # only now can a decision see it: 'submitted' comes first
        self.tally.add(job, size)
        self.shares.note_groups(who.user, who.groups)
        await self._changed_now()
        self.poke()
        return job

    async def cancel(self, who: Principal, job_id: str, body: object = None) -> JobRecord:
        """Checkpoint, then stop; ``{"force": true}`` (its owner or an admin) ends its
        processes at once instead, as a missed release deadline would."""
        force = parse(CancelRequest, body or {}, "cancel").force
        job = self.get(who, job_id, change=True)
        if job.final:
            return job
        now = time.time()
        await self.lifecycle.cancel(job, who.user, now)
        if force and releases.owes(job):
            await self.releases.void(job, now, by=who.user)
        await self._changed_now()
        self.poke()
        return job

    def get(self, who: Principal, job_id: str, change: bool = False) -> JobRecord:
        """The job ``who`` may see (``change``: may change), or NotFound / Forbidden."""
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        if not who.may_see(job):
            raise Forbidden(
                f"job {job_id} belongs to {job.user}: you can see its size and state in the queue only"
            )
        if change and not who.may_change(job):
            raise Forbidden(
                f"job {job_id} belongs to {job.user}: only they or an admin may change it"
            )
        return job

    def logs(self, who: Principal, job_id: str, tail: int) -> dict[str, str]:
        job = self.get(who, job_id)  # a shared scheduler opens no job file (jobdirs.job_logs)
        return jobdirs.job_logs(job, tail, reads_job_dirs=self.launcher.starts_processes)

    async def wait_updates(self, since: int, timeout: float) -> int:
        """Return as soon as the state version passes ``since`` (or at the timeout)."""
        async with self._changed:
            await wait_at_most(self._changed.wait_for(lambda: self.version > since), timeout)
            return self.version

    def pending_launches(self, who: Principal) -> list[LaunchRequest]:
        return self.launches.pending(who)  # launches.py

    def voided_launches(self, who: Principal) -> list[str]:
        return self.launches.voided(who)

    def holders(self) -> dict[str, str]:
        return grants.holders(self.jobs.values())

    def external(self) -> dict[str, list[Any]]:
        """Processes on each GPU that the scheduler did not start (they make it busy)."""
        return external_processes(
            self.gpu_infos(), grants.our_pids(self.jobs.values()), self.holders()
        )

    # -- the sidecar protocol ---------------------------------------------------------------
    async def heartbeat(self, job_id: str, secret: str, body: object) -> GrantView:
        return await self.beats.receive(job_id, secret, body)  # heartbeats.py

    # -- decisions --------------------------------------------------------------------------
    async def _decide(self, now: float) -> None:
        changed: set[str] = set()
        async with atomically(self.store) as undo:  # on no half-done change; written whole
            # (jobs on MIG instances are the slice pool's: ``slice_pool.py``)
            open_jobs = [j for j in self.jobs.values() if not j.final and not on_slice(j)]
            if not open_jobs:
                return
            snap = self.core_snapshot()
            infos = self.gpu_infos()
            node = groups(infos)  # (of one kind where kinds are mixed)
            kind = {g.id: g.kind for g in infos} if mixed(infos) else None
            # a queued job given GPUs that are not together waits (``decide_together``)
            final, apart, decision = decide_together(self.decider, snap, now, node)
            for job in open_jobs:
                wanted = list(apart.get(job.id) or final.allocations.get(job.id, ()))
                target = (
                    []
                    if job.id in apart
                    else grants.on_one_node(wanted, job.desired.gpus, node, job.min_gpus)
                )
                why = WAITING_FOR_SERVER if self.waits_for_server(job) else None
                why = why or self.interactive.reason(job)
                if why is None and wanted and not target and job.state == JobState.QUEUED:
                    why = grants.spread(wanted, node, kind, job)  # not together: it waits
                why = why or final.reasons.get(job.id) or Told(job.reason_kind, job.reason_figures)
                name_of = names_for(self.jobs, job.user)
                starts = job.state == JobState.QUEUED and bool(target)
                moves = job.state in (JobState.STARTING, JobState.RUNNING, JobState.RESIZING)
                if starts or (moves and set(target) != set(job.desired.gpus)):
                    undo.keep(job)
                    job.tell(why, name_of)  # the event of the move tells the policy's why
                    await (self.lifecycle.start if starts else self.lifecycle.change)(
                        job, target, now
                    )
                    changed.add(job.id)
                shown = snapshot.shown_reason(job, why)
                if shown is not None and job.says_other(shown, name_of):
                    undo.keep(job)
                    job.tell(shown, name_of)
                    changed.add(job.id)
            queued = {j.id for j in open_jobs if j.state == JobState.QUEUED}
            positions = queue_positions(decision, among=queued)
            ranks = {job_id: i for i, job_id in enumerate(decision.order, 1)}
            for job in open_jobs:
                place = (positions.get(job.id), ranks.get(job.id))
                if (job.position, job.rank) != place:
                    undo.keep(job)
                    job.position, job.rank = place
                    changed.add(job.id)
            for job in open_jobs:
                if job.id in changed:
                    await self.lifecycle.save(job)
        if changed:
            await self._changed_now()

    def core_snapshot(self) -> Snapshot:
        """The open jobs and the GPUs as the policy sees them (without the queued jobs that
        wait for their owner's server, held jobs and drained GPUs), under the per-user cap and
        fair share."""
        return self.shares.for_decision(
            snapshot.build(
                [j for j in self.jobs.values() if not self.waits_for_server(j)],
                self.gpu_infos(),
                self.external(),
                self.default_resize_cost,
                self.user_gpu_cap,
                drained=self.admin.drained,
            )
        )

    # -- fair share (admin) -------------------------------------------------------------------
    def share_report(self, who: Principal) -> dict[str, Any]:
        """``GET admin/shares``: every user's share against usage (admins and readers of all)."""
        if not (who.admin or who.reads_all):
            raise Forbidden("the fair-share report is for admins and readers of every job only")
        self.shares.account(self.jobs.values(), time.time())
        return self.shares.report(self.decider, self.core_snapshot())

    async def set_group_weight(self, who: Principal, group: str, body: object) -> dict[str, Any]:
        """``PUT admin/groups/{group}/weight`` (admins only): persisted, decided on at once."""
        if not who.admin:
            raise Forbidden(
                "only an admin may set a group's fair-share weight (JupyterHub scope "
                "custom:elastic-gpu:admin)"
            )
        check_group(group)
        weight = parse(GroupWeightRequest, body, "group weight").weight
        await self.shares.set_group_weight(group, weight, who.user)
        self.poke()
        return self.share_report(who)

    # -- users' servers (shared and JupyterHub modes) ------------------------------------------
    def waits_for_server(self, job: JobRecord) -> bool:
        """Whether ``job`` is queued while nobody is there to start it (``servers.py``)."""
        return self.servers.waits(job)

    # -- starting sidecars ----------------------------------------------------------------
    async def _launch_ready(self, now: float) -> None:
        await self.launches.start_ready(now)  # launches.py

    # -- bookkeeping ------------------------------------------------------------------------
    def gpu_infos(self) -> list[Any]:
        """The last inventory snapshot (refreshed off the event loop by ``step``: NVML can
        block for seconds on a sick GPU)."""
        if not self._gpu_cache_t:  # asked before ``start``
            self._gpu_cache, self._gpu_cache_t = self.inventory.snapshot(), time.time()
        return self._gpu_cache

    async def _refresh_gpus(self, now: float) -> None:
        if now - self._gpu_cache_t > 2.0:
            self._gpu_cache = await asyncio.to_thread(self.inventory.snapshot)
            self._gpu_cache_t = now

    async def _changed_now(self) -> None:
        async with self._changed:
            self.version += 1
            self._changed.notify_all()
