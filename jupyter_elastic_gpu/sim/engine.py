"""Discrete-event simulation of one cluster under one policy and one mechanism.

The clock jumps from event to event: an arrival, a completion, the end of a resize pause, a
periodic tick. At each event (or only at ticks, with ``rounds=True``, the way the Pollux
simulator works) the engine builds the same ``core`` snapshot the live scheduler builds, asks
``core.schedule.decide`` for the policy's decision under the same rules (the per-user GPU cap),
and carries out the changes through the mechanism:

* ``sidecar``: a pause of ``pause_s`` with no progress; no work is lost;
* ``termination``: a pause of ``pause_s`` and the work since the last periodic checkpoint is
  lost (checkpoints every ``checkpoint_interval`` of a run segment).

Between events every job advances linearly at the true speed of its placement. Policies see a
speed model made of what the job has measured so far with the trace's profile as the prior.

Most ticks change nothing. A policy may say until when its decision holds
(``Decision.holds_until``); at a tick before that, with nothing but time passed since the
decision (no arrival, completion, end of a pause or new measurement), the engine takes the held
decision instead of asking again. It still visits every tick and advances every job as it
would, so the run is the tick-by-tick replay's (``skip_held=False``), with fewer decisions
made; ``check_holds`` asks at every tick all the same and raises where a promise was broken.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..core.fairshare import decayed
from ..core.mechanism import Mechanism
from ..core.model import Decision, Snapshot
from ..core.placement import nodes_spanned
from ..core.policies import Policy
from ..core.schedule import decide
from .bounds import lower_bounds
from .config import SimConfig
from .result import SimResult
from .simjob import SimJob, snapshot
from .traces.csvutil import paused_gc
from .workload import Workload

_DONE_EPS = 1e-9
#: A measured speed this far off the model's estimate triggers a new decision.
MATERIAL_CHANGE = 0.05


#: Why the engine asked the policy (``SimResult.decided_on``): what changed since the last
#: decision, or why the decision it held could not be taken again.
ON_EVENT = "an arrival or a completion"
ON_SURPRISE = "a pause ended on a speed off its model"
AFTER_PAUSE = "a tick after a pause's end (a new measurement)"
AFTER_CHANGE = "the first tick after a change of grants"
NO_PROMISE = "a tick, no promise"
PROMISE_ENDED = "a tick, its promise ended"
EVERY_TICK = "a tick (every tick decided)"


class SimulationStalled(RuntimeError):
    """The policy and mechanism make no progress (e.g. resizes that lose work, forever)."""


class BrokenPromise(AssertionError):
    """A policy decided otherwise before the time until which it said its decision holds."""


class Simulation:
    """One run: a workload through a policy and a mechanism on a cluster."""

    def __init__(
        self,
        workload: Workload,
        policy: Policy,
        mechanism: Mechanism,
        config: SimConfig | None = None,
        on_finish: Callable[[int], None] | None = None,
    ) -> None:
        if not workload.jobs:
            raise ValueError(f"workload {workload.name!r} has no jobs")
        self.config = config or SimConfig()
        self.gpus = self.config.gpus()
        self.kind_of = {g.id: g.kind for g in self.gpus}
        total = len(self.gpus)
        cap = self.config.user_gpu_cap
        for spec in workload.jobs:
            if spec.min_gpus > total:
                raise ValueError(
                    f"job {spec.job_id} needs at least {spec.min_gpus} GPUs; "
                    f"the simulated cluster has {total}"
                )
            if cap and spec.min_gpus > cap:
                raise ValueError(
                    f"job {spec.job_id} needs at least {spec.min_gpus} GPUs; "
                    f"the per-user cap is {cap}"
                )
        self.workload, self.policy, self.mechanism = workload, policy, mechanism
        self.on_finish = on_finish
        self.now = 0.0
        self.jobs = [SimJob(spec) for spec in workload.jobs]
        #: The resize cost the policy is told of each job whose restarts take a time of
        #: their own (``JobSpec.restart_s``); the others are told the mechanism's.
        self.own_costs = {
            spec.job_id: mechanism.policy_cost_s(spec.restart_s)
            for spec in workload.jobs
            if spec.restart_s is not None
        }
        self.by_id: dict[str, SimJob] = {}  # the active jobs by id (and some finished ones)
        self.active: list[SimJob] = []
        self.timeline: list[tuple[float, int]] = [(0.0, 0)]
        self.decisions = 0
        self.skipped = 0
        self.decided_on: dict[str, int] = {}
        self.changed = False  # the last decision changed a grant
        # The last decision (its ``holds_until`` says until when it holds).
        self.promise: Decision | None = None
        # Only time has passed since the last decision, up to ``watch`` (a pause's end).
        self.clean = False
        self.watch = -math.inf
        self.quiet: bool | None = None  # ``_quiet()``, until anything but time changes
        #: When the next running job completes and the next pause ends, as the last decision
        #: left them (``_advance`` says the same as time passes).
        self.soon: tuple[float, float] = (math.inf, math.inf)
        self.user_peak: dict[str, int] = {}
        self.user_timeline: list[tuple[float, dict[str, int]]] = []
        self.usage: dict[str, float] = {}  # decayed GPU-seconds per user (fair share)

    # -- time -----------------------------------------------------------------------------
    def _advance(self, until: float) -> tuple[list[SimJob], tuple[float, float]]:
        """Every job's progress up to ``until``: the running jobs done by then, in order, and
        when the next running job completes and the next pause ends (``soon``) from then on,
        unless a decision changes something."""
        now = self.now
        dt = until - now
        if dt > 0 and self.config.fair_share:
            held: dict[str, int] = dict.fromkeys(self.usage, 0)
            for job in self.active:
                held[job.spec.user] = held.get(job.spec.user, 0) + len(job.gpus)
            h = self.config.fair_share_half_life
            self.usage = {u: decayed(self.usage.get(u, 0.0), n, dt, h) for u, n in held.items()}
        done = []
        completion = pause_end = math.inf
        # The hottest loop of a run: ``finish_time`` and ``remaining`` are spelled out.
        for job in self.active:
            gpus = job.gpus
            if not gpus:
                if dt > 0 and job.finish is None:
                    job.queued_s += dt
                continue
            pause = job.pause_until
            if until < pause < pause_end:
                pause_end = pause
            if job.finish is not None:
                continue
            speed = job.speed
            work = job.spec.work
            if dt > 0:
                job.attained_gpu_s += dt * len(gpus)
                productive = until - (now if now > pause else pause)
                if productive > 0:
                    job.work_done = min(work, job.work_done + productive * speed)
            if speed > 0:
                left = work - job.work_done
                end = (until if until >= pause else pause) + (0.0 if left < 0.0 else left) / speed
                if end <= until + _DONE_EPS:
                    done.append(job)
                elif end < completion:
                    completion = end
        if dt > 0:
            self.now = until
        return done, (completion, pause_end)

    def _complete(self, job: SimJob) -> None:
        job.finish = self.now
        job.work_done = job.spec.work
        if self.on_finish:
            self.on_finish(1)

    # -- the mechanism --------------------------------------------------------------------
    def _apply(self, job: SimJob, new: tuple[str, ...]) -> None:
        old = job.gpus
        if new == old or set(new) == set(old):
            return
        now, mech = self.now, self.mechanism
        if old:
            job.resizes += 1
            if job.segment is not None:  # its exact progress: efficiency changes by epoch
                ran = now - job.pause_until
                job.work_done = min(job.spec.work, job.segment.progress_after(ran))
                job.segment = None
            if mech.loses_work and job.speed > 0:
                ran = now - job.pause_until  # progress on this grant began when its pause ended
                if ran > 0:
                    since_ckpt = math.fmod(ran, mech.checkpoint_interval)
                    lost = min(since_ckpt * job.speed, job.work_done)
                    job.work_done -= lost
                    job.lost_gpu_s += since_ckpt * len(old)
        job.gpus = tuple(new)
        job.last_change = now
        if not new:
            job.speed = 0.0
            return
        placement = nodes_spanned(new, self.gpus)
        spec = job.spec
        job.kind = spec.pace({self.kind_of[g] for g in new}) if spec.kind_speed else None
        batching = spec.batching if job.kind is None else spec.kind_batching.get(job.kind)
        if batching is None:
            job.speed = spec.true_throughput(placement, job.kind)
        else:
            job.segment = batching.start(placement, job.work_done)
            job.speed = 0.0 if job.segment is None else job.segment.speed
            if job.segment is not None and job.batches[-1:] != [job.segment.batch]:
                job.batches.append(job.segment.batch)
        if spec.restart_s is not None:
            pause = spec.restart_s
        else:
            pause = self.config.start_cost_s if not job.started else mech.pause_s
        if job.started:
            job.lost_gpu_s += pause * len(new)
        job.started = True
        if job.start is None:
            job.start = now
        job.pause_until = now + pause

    # -- decisions ------------------------------------------------------------------------
    def _quiet(self) -> bool:
        """True when no policy could change anything: nobody waits, nobody could grow, and
        (where kinds are mixed) no GPU is free that a job could move to."""
        if self.quiet is None:
            elastic = self.policy.elastic
            self.quiet = all(
                j.finish is None and j.gpus and not (elastic and len(j.gpus) < j.spec.max_gpus)
                for j in self.active
            ) and not (self.config.mixed and sum(len(j.gpus) for j in self.active) < len(self.gpus))
        return self.quiet

    def _surprised(self) -> bool:
        """A pause just ended on a job whose measured speed is materially off its model (the
        live scheduler re-decides on such a progress report, not on every heartbeat)."""
        for j in self.active:
            if j.gpus and j.pause_until == self.now and j.speed > 0:
                expected = j.speed_model().throughput(len(j.gpus))
                if abs(j.speed - expected) > MATERIAL_CHANGE * expected:
                    return True
        return False

    def _snapshot(self) -> Snapshot:
        cost = self.mechanism.policy_cost_s()
        return snapshot(
            self.active, self.gpus, cost, self.now, self.config, self.usage, self.own_costs
        )

    def _holds(self, t: float) -> bool:
        """The last decision holds at ``t``: its policy said so, and only time has passed."""
        return self.clean and t < self.watch and t < self._promise_until()

    def _promise_until(self) -> float:
        """Until when the last decision holds (``Decision.holds_until``, which a policy may work
        out only when read: after an event, the engine never reads it)."""
        until = None if self.promise is None else self.promise.holds_until
        return -math.inf if until is None else until

    def _why_now(self, t: float) -> str:
        """Why the last decision cannot be taken again at the tick ``t`` (``_holds`` is False)."""
        if not self.clean:
            return ON_EVENT  # (decisions in rounds: it waited for the tick)
        if self.changed:
            return AFTER_CHANGE  # a decision that changes grants promises nothing
        if t >= self.watch:
            return AFTER_PAUSE
        if self.promise is None or self.promise.holds_until is None:
            return NO_PROMISE
        return PROMISE_ENDED

    def _decide(self, why: str, check: bool = False) -> None:
        """Decide now (``why``: ``ON_EVENT`` ...) and carry it out; with ``check``, the last
        decision held: verify that this one is the same (``SimConfig.check_holds``) and keep
        the promise it came with."""
        # Finished jobs give their GPUs back before anyone else is placed.
        active = []
        for job in self.active:
            if job.finish is None:
                active.append(job)
            elif job.gpus:
                job.gpus, job.speed = (), 0.0
        self.active = active
        self.clean, self.quiet = False, None
        if not active:
            self._record()
            self.soon = (math.inf, math.inf)
            return
        decision = decide(self.policy, self._snapshot(), self.now)
        self.decisions += 1
        self.decided_on[why] = self.decided_on.get(why, 0) + 1
        if check:
            self._check(decision)
        else:
            self.promise = decision
        by_id = self.by_id
        # Release first, then grow: the mechanism sees each job's own change only.
        changes = []
        for job_id, grant in decision.allocations.items():
            job = by_id[job_id]
            if grant != job.gpus:
                changes.append((job, tuple(grant)))
        changes.sort(key=lambda c: len(c[1]) - len(c[0].gpus))
        for job, new in changes:
            self._apply(job, new)
        if not check:
            self.changed = bool(changes)
        self._record()
        # What the next snapshot sees besides time: a pause's end, with its measurement; and
        # ``soon`` as the decision leaves it, in the same pass.
        self.clean, self.quiet = True, None
        now = self.now
        watch = completion = pause_end = math.inf
        for j in self.active:
            gpus = j.gpus
            if not gpus:
                continue
            pause = j.pause_until
            if (pause > now or j.measured.get(len(gpus)) != j.speed) and pause < watch:
                watch = pause
            if now < pause < pause_end:
                pause_end = pause
            if j.speed > 0:
                end = j.finish_time(now)
                if end < completion:
                    completion = end
        self.watch, self.soon = watch, (completion, pause_end)

    def _check(self, decision: Decision) -> None:
        held = self.promise
        assert held is not None
        if decision.allocations == held.allocations:
            return
        was = held.allocations
        changed = [
            f"{job_id}: {list(was.get(job_id, ()))} -> {list(gpus)}"
            for job_id, gpus in decision.allocations.items()
            if tuple(gpus) != tuple(was.get(job_id, ()))
        ]
        what = "; ".join(changed[:3]) if changed else "other jobs"
        raise BrokenPromise(
            f"{self.policy.name} said its decision holds until t={self._promise_until():.9g} s, "
            f"but at t={self.now:.9g} s, with only time passed, it decides otherwise ({what})"
        )

    def _record(self) -> None:
        used = 0
        held: dict[str, int] = {}
        for j in self.active:
            if j.gpus:
                used += len(j.gpus)
                held[j.spec.user] = held.get(j.spec.user, 0) + len(j.gpus)
        peak = self.user_peak
        for user, n in held.items():
            if n > peak.get(user, 0):
                peak[user] = n
        line = self.user_timeline
        if line and line[-1][0] == self.now:
            line[-1] = (self.now, held)
        elif not line or line[-1][1] != held:
            line.append((self.now, held))
        if self.timeline[-1][0] == self.now:
            self.timeline[-1] = (self.now, used)
        elif self.timeline[-1][1] != used:
            self.timeline.append((self.now, used))

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> SimResult:
        # A run makes millions of snapshots, plans and decisions, none in a reference cycle:
        # the collector's scans of them were a tenth of the time and never freed anything.
        with paused_gc():
            return self._run()

    def _run(self) -> SimResult:
        cfg = self.config
        arrivals = list(self.jobs)  # sorted by submit time (Workload sorts)
        next_arrival = 0
        self.now = arrivals[0].spec.submit_time
        self.timeline = [(self.now, 0)]
        next_tick = (math.floor(self.now / cfg.tick_s) + 1) * cfg.tick_s
        remaining = len(self.jobs)
        bound = lower_bounds(self.workload, len(self.gpus), cfg.node_size, cfg.start_cost_s)
        give_up = self.now + cfg.stall_factor * max(bound["makespan_s"], cfg.tick_s)

        soon = self.soon  # (nothing runs before the first arrival)
        while remaining:
            if self.now > give_up:
                raise SimulationStalled(
                    f"{self.policy.name} with the {self.mechanism.name} mechanism made no headway: "
                    f"{remaining} of {len(self.jobs)} jobs unfinished after "
                    f"{(self.now - arrivals[0].spec.submit_time) / 3600:,.0f} simulated hours, "
                    f"{cfg.stall_factor:g}x the lower bound of the makespan (its resizes keep "
                    "losing the work they gain)"
                )
            next_completion, next_pause_end = soon
            t_arrival = (
                arrivals[next_arrival].spec.submit_time
                if next_arrival < len(arrivals)
                else math.inf
            )
            if cfg.rounds:
                t = min(next_tick, next_completion)
            else:
                t = min(next_tick, next_completion, next_pause_end, t_arrival)
            if t == math.inf:
                raise RuntimeError("simulation stalled: jobs wait but nothing can run them")
            done, soon = self._advance(t)
            event = bool(done)
            for job in done:
                self._complete(job)
                remaining -= 1
            while next_arrival < len(arrivals) and arrivals[next_arrival].spec.submit_time <= t:
                job = arrivals[next_arrival]
                self.active.append(job)
                self.by_id[job.spec.job_id] = job
                next_arrival += 1
                event = True
            if event:
                self.clean, self.quiet = False, None
            tick = t >= next_tick
            if tick:
                next_tick += cfg.tick_s * max(1, math.floor((t - next_tick) / cfg.tick_s) + 1)
            if not cfg.rounds and (event or (t == next_pause_end and self._surprised())):
                self._decide(ON_EVENT if event else ON_SURPRISE)
            elif tick and not self._quiet():
                if not self._holds(t):
                    self._decide(self._why_now(t))
                elif cfg.check_holds:
                    self._decide(EVERY_TICK, check=True)
                elif cfg.skip_held:
                    self.skipped += 1
                    continue
                else:
                    self._decide(EVERY_TICK)
            else:
                continue
            soon = self.soon  # the decision may have changed any grant
        self._decide(ON_EVENT)
        return self._result()

    def _result(self) -> SimResult:
        jobs = []
        for j in self.jobs:
            assert j.finish is not None and j.start is not None
            jobs.append(
                {
                    "job_id": j.spec.job_id,
                    "user": j.spec.user,
                    "submit_s": j.spec.submit_time,
                    "start_s": j.start,
                    "finish_s": j.finish,
                    "jct_s": j.finish - j.spec.submit_time,
                    "resizes": j.resizes,
                    "lost_gpu_s": j.lost_gpu_s,
                    "gpu_s": j.attained_gpu_s,
                }
            )
            if j.spec.batching is not None:
                jobs[-1]["batches"] = j.batches  # each global batch it trained at, in order
        return SimResult(
            policy=self.policy.name,
            mechanism=self.mechanism.name,
            jobs=jobs,
            timeline=self.timeline,
            total_gpus=len(self.gpus),
            resizes=sum(j.resizes for j in self.jobs),
            lost_gpu_s=sum(j.lost_gpu_s for j in self.jobs),
            decisions=self.decisions,
            skipped=self.skipped,
            decided_on=dict(sorted(self.decided_on.items(), key=lambda kv: -kv[1])),
            user_peak_gpus=dict(sorted(self.user_peak.items())),
            user_timeline=self.user_timeline,
        )


def simulate(
    workload: Workload,
    policy: Policy,
    mechanism: Mechanism,
    config: SimConfig | None = None,
    on_finish: Callable[[int], None] | None = None,
) -> SimResult:
    return Simulation(workload, policy, mechanism, config, on_finish).run()


__all__ = [
    "BrokenPromise",
    "SimConfig",
    "SimResult",
    "Simulation",
    "SimulationStalled",
    "simulate",
]
