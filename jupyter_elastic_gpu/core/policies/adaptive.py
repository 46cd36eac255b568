"""``adaptive``: our elastic policy (inspired by the SC'20 paper; the algorithm is our own).

One decision (docs/policies.md has the reasoning and the citations):

1. **Order.** A job's priority key is the GPU-time it still needs at its minimum,
   R(min) x min, from its measured speed and progress, divided by its weight and by an aging
   factor 1 + waited / ``aging_s`` so that no job waits forever; running jobs get a small
   ``stickiness`` bonus so that two jobs of about the same size do not swap places. The job
   with the k-th largest key gets the weight k^p: the marginal form of heSRPT (Berg et al.,
   SIGMETRICS 2020), which minimises mean completion time for jobs with sub-linear speed-up;
   p is fitted to the jobs' own speed curves (p = 1, linear speed-up, is plain SRPT).
2. **Hand out GPUs.** Starting from nothing, GPUs go one move at a time to the job where they
   raise weight x speed-up the most per GPU. A waiting job's first move is its minimum
   (admission at the minimum); later moves grow it up to its maximum. So an incoming short job
   takes GPUs from a long elastic job, which shrinks or is suspended through a checkpoint,
   instead of queueing, and a long job waits only while its GPUs do more for shorter jobs.
3. **Only resize when it pays.** Leaving a running job's current size is charged its measured
   resize cost as the share of its remaining time it would lose, times ``1 + resize_margin``.
   Jobs mid-resize or about to finish keep their GPUs; a job resized moments ago may shrink for
   others but not grow (the pause between two resizes doubles every ``resize_budget``).

Placement (which GPUs) is shared with every policy: jobs keep their GPUs and stay on one node
when they fit (``core.placement``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import ClassVar

from ..model import Decision, Job, Snapshot
from ..placement import mixed, place
from ..reason_kinds import Ahead
from ..reasons import (
    FINISHING,
    IN_PROGRESS,
    RESIZED,
    STARTED,
    AtMaximum,
    Critical,
    Crowded,
    Elastic,
    Kept,
    NoFaster,
    Reason,
    Resized,
    ResizeWouldNotPay,
)
from .adaptive_kinds import apart as apart_reason
from .adaptive_kinds import free_by_kind
from .adaptive_kinds import hand_out as by_kind_hand_out
from .adaptive_params import AdaptiveParams
from .adaptive_reserve import reserve
from .base import queued_reason, whole_grants_first
from .critical_holds import path_holds_until
from .holds import holds_until
from .lookahead import Lookahead

_EPS = 1e-12
_LOCKED = (IN_PROGRESS, FINISHING)


@dataclass(slots=True)
class _Plan:
    """Per-job working values of one decision."""

    job: Job
    key: float
    frozen: str = ""  # why this job keeps its GPUs, or "" if it may change
    left: float = 0.0  # seconds it needs to finish on the GPUs it holds (running jobs), R(held)
    #: Its work left, then what it reads from its speed model once per decision at its top
    #: count (its maximum within the cluster; ``SpeedModel.summary``): its throughput at its
    #: minimum, its power-law fit (None: it cannot scale), its best speed per GPU
    #: (``best_rate``), its counts worth holding (for the critical path; None: off, or it
    #: fits nowhere) and its throughputs up to its top.
    rem: float = 0.0
    x_lo: float = 0.0
    fit: float | None = None
    rate: float = 0.0
    options: tuple | None = None
    curve: tuple[float, ...] = ()
    # What the decision works out.
    count: int = 0
    weight: float = 1.0
    #: V(g) for every count g the hand-out may give it (0 up to its top): its weighted
    #: speed-up, less the resize penalty at every count but the one it holds.
    values: Sequence[float] = ()
    critical: bool = False
    start: int = 0  # its GPUs when the hand-out begins (a reservation on the critical path)
    first: tuple[float, int] | None = None  # its first move in the hand-out: (ratio, count)

    def penalty(self, margin: float) -> float:
        """What leaving the count it holds costs, in value at its weight: its speed-up there
        times the share of its time left that a resize takes, times ``margin``."""
        job = self.job
        held, r = len(job.gpus), self.left
        if not held or job.resize_cost <= 0 or not 0 < r < math.inf:
            return 0.0
        return self.weight * job.speed.speedup(job.min_gpus, held) * job.resize_cost * margin / r

    def reach(self) -> tuple[float, ...]:
        """Its throughputs (``curve``) up to the counts it may have now: resized moments ago,
        it may shrink, not grow."""
        held = len(self.job.gpus)
        if self.frozen and held < len(self.curve) - 1:
            return self.curve[: held + 1]
        return self.curve


class _Reasons(Mapping[str, Reason]):
    """Each job's reason, worked out when first read: people read them, the simulator's
    thousands of decisions never do."""

    __slots__ = ("_apart", "_free", "_plans", "_policy", "_said")

    def __init__(
        self,
        policy: AdaptivePolicy,
        plans: list[_Plan],
        free: int,
        placed: tuple[Snapshot, Mapping[str, Sequence[str]]] | None = None,
    ) -> None:
        self._policy, self._plans, self._free = policy, plans, free
        # Where kinds are mixed, the snapshot and the allocations: a job may wait with GPUs
        # free that are not together (``adaptive_kinds.apart``).
        self._apart = placed
        self._said: dict[str, Reason] | None = None

    def _worked_out(self) -> dict[str, Reason]:
        if self._said is None:
            plans, why = self._plans, self._policy.reason
            ahead = [p for p in plans if p.count]
            apart = apart_reason(*self._apart) if self._apart else None
            self._said = {
                p.job.id: (not p.count and apart and apart(p.job)) or why(p, self._free, ahead)
                for p in plans
            }
        return self._said

    def __getitem__(self, job_id: str) -> Reason:
        return self._worked_out()[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._worked_out())

    def __len__(self) -> int:
        return len(self._plans)

    def __repr__(self) -> str:
        return repr(self._worked_out())


#: Place in the order: smallest key first, then the earliest submitted.
_rank = attrgetter("key", "job.submit_time", "job.id")
#: The same order where no two keys are equal, at a fraction of the cost (no tuple per job):
#: a forecast sorts a long queue at each of its hundreds of decisions.
_key = attrgetter("key")


class AdaptivePolicy:
    name: ClassVar[str] = "adaptive"
    elastic: ClassVar[bool] = True
    preemptive: ClassVar[bool] = True

    def __init__(self, params: AdaptiveParams | None = None, **overrides: float) -> None:
        base = params or AdaptiveParams()
        self.params = AdaptiveParams(**{**base.__dict__, **overrides}) if overrides else base
        #: With ``lookahead``: what chooses the mode (``core.policies.lookahead``).
        self.chooser: Lookahead | None = None
        if self.params.lookahead:
            plain = replace(self.params, lookahead=False)
            self.chooser = Lookahead(
                AdaptivePolicy(replace(plain, protect_critical=True)),
                AdaptivePolicy(replace(plain, protect_critical=False)),
                self.params.makespan_weight,
            )

    def played_forward(self) -> AdaptivePolicy:
        """The policy a forward run plays (``sim.forecast``): this one, or with ``lookahead`` the
        mode it follows now (a forward run that chose again at each of its own changes would
        cost a forward run per step), as a policy of its own: a live forward run decides in
        another thread."""
        if self.chooser is None:
            return self
        return AdaptivePolicy(self.chooser.current().params)

    # -- step 1 ---------------------------------------------------------------------------
    def priority_key(self, job: Job) -> float:
        """Smaller runs first: GPU-time left at the minimum, weighted and aged."""
        return self._plans((job,), 0.0, job.max_gpus)[0].key

    def _plans(self, jobs: Iterable[Job], now: float, total: int) -> list[_Plan]:
        """Each job's priority key, its time left on its grant, why it keeps its GPUs now
        ("": it may change), and what the rest of the decision reads from its speed model
        (``total``: the GPUs there are).

        The hottest loop of a decision: ``Job.remaining_time`` is spelled out, and the rest of
        the decision reads the time left on the grant from here (``_Plan.left``); the per-job
        lookups of the later steps are made here too, in the one pass over the jobs."""
        p = self.params
        aging = max(p.aging_s, _EPS)
        sticky = 1.0 - p.stickiness
        premium = p.critical_slack if p.protect_critical else None
        plans = []
        for job in jobs:
            left = job.total_work - job.work_done
            if left < 0.0:
                left = 0.0
            speed, lo = job.speed, job.min_gpus
            top = job.max_gpus if job.max_gpus < total else total
            x_lo, fit, rate, options, curve = speed.summary(lo, top, premium)
            if left <= 0:
                at_min = 0.0
            else:
                at_min = left / x_lo if x_lo > 0 else math.inf
            key = lo * at_min / job.weight / (1.0 + job.queued_s / aging)
            held = len(job.gpus)
            if not held:
                frozen = IN_PROGRESS if job.pinned else ""
                plans.append(_Plan(job, key, frozen, 0.0, left, x_lo, fit, rate, options, curve))
                continue
            key *= sticky
            if left <= 0:
                at_held = 0.0
            else:
                x = speed.throughput(held)
                at_held = left / x if x > 0 else math.inf
            cost = job.resize_cost
            if job.pinned:
                frozen = IN_PROGRESS
            elif cost > 0 and at_held <= p.finish_guard * cost:
                frozen = FINISHING
            elif job.last_change is not None and now - job.last_change < self.cooldown_s(job):
                frozen = RESIZED if job.resizes else STARTED
            else:
                frozen = ""
            plans.append(_Plan(job, key, frozen, at_held, left, x_lo, fit, rate, options, curve))
        return plans

    def cooldown_s(self, job: Job) -> float:
        """How long a job is left alone after a change of its grant."""
        p = self.params
        wait = max(p.cooldown * job.resize_cost, p.min_cooldown_s)
        doublings = job.resizes // p.resize_budget
        return wait * 2**doublings if doublings else wait

    # -- step 3 helpers -------------------------------------------------------------------
    @staticmethod
    def _exponent(plans: list[_Plan]) -> float:
        """p of a power-law fit S(g) = g^p averaged over the jobs that can scale."""
        fits = [plan.fit for plan in plans if plan.fit is not None]
        return min(max(sum(fits) / len(fits), 0.0), 1.0) if fits else 1.0

    @staticmethod
    def _prepare(plan: _Plan, margin: float, free: int) -> tuple[float, int] | None:
        """Work out the plan's values V(g) (``_Plan.values``) at its weight, and its first move
        in the hand-out, from its count with ``free`` GPUs to take from (``_Plan.first``)."""
        x_min = plan.x_lo
        scale = plan.weight * plan.job.min_gpus / x_min if x_min > 0 else 0.0  # V(g) = scale X(g)
        penalty = plan.penalty(margin)  # ... less this at every count but the one it holds
        held, curve = len(plan.job.gpus), plan.reach()
        plan.values = values = [scale * x - penalty for x in curve]
        if held < len(curve):
            values[held] = scale * curve[held]
        move = AdaptivePolicy._best_move(plan, plan.count, free)
        plan.start, plan.first = plan.count, move
        return move

    @staticmethod
    def _best_move(plan: _Plan, a: int, free: int) -> tuple[float, int] | None:
        """The allowed count above ``a`` with the best value gained per extra GPU (``free``
        GPUs to take from), from the plan's values V(g) (``_Plan.values``)."""
        values = plan.values
        top = a + free
        if top >= len(values):
            top = len(values) - 1
        lo = plan.job.min_gpus
        first = a + 1 if a >= lo else lo
        if first > top:
            return None
        here = values[a]
        best_ratio, best_g, bar = _EPS, 0, _EPS + _EPS
        for g in range(first, top + 1):
            ratio = (values[g] - here) / (g - a)
            if ratio > bar:
                best_ratio, best_g, bar = ratio, g, ratio + _EPS
        return (best_ratio, best_g) if best_g else None

    def _hand_out(
        self, open_plans: list[_Plan], exponent: float, margin: float, free: int
    ) -> tuple[int, list[_Plan]]:
        """Hand out ``free`` GPUs to ``open_plans`` (in the order), best value gained per GPU
        first, blind to kinds; sets each plan's ``count``. Returns the GPUs left and the
        waiting plans never weighed (``_Plan.first`` unset)."""
        m = len(open_plans)
        prepare, best_move = self._prepare, self._best_move
        begin = free  # the GPUs free when the hand-out begins
        heap: list[tuple[float, int, int, int]] = []  # (-ratio, order, target, count at push)
        # A job that waits (and is not reserved) joins the hand-out only when its first move
        # could come next: the weights fall along the order, and its first move gains at most
        # its weight times its best speed per GPU (``SpeedModel.best_rate``), so most of a long
        # queue never needs its weight or values worked out. The moves come out of the heap in
        # the same order as if every job had joined at once.
        waiting: list[int] = []
        for i, plan in enumerate(open_plans):
            if plan.count or plan.job.gpus:
                plan.weight = float(m - i) ** exponent
                move = prepare(plan, margin, free)
                if move:
                    heap.append((-move[0], i, move[1], plan.count))
            else:
                waiting.append(i)
        # The best speed per GPU of any waiting job from the k-th on (k = len: none).
        rates = [open_plans[i].rate for i in reversed(waiting)]
        best_rate = list(itertools.accumulate(rates, max, initial=0.0))[::-1]
        joined = 0
        heapq.heapify(heap)
        while free > 0:
            while joined < len(waiting):
                i = waiting[joined]
                plan = open_plans[i]
                plan.weight = float(m - i) ** exponent
                # The most it, or any waiting job after it, could gain with its first move.
                if heap and not plan.weight * best_rate[joined] * (1 + 1e-9) >= -heap[0][0]:
                    break
                joined += 1
                move = prepare(plan, margin, begin)
                if move:
                    heapq.heappush(heap, (-move[0], i, move[1], 0))
            if not heap:
                break
            _, i, target, at = heapq.heappop(heap)
            plan = open_plans[i]
            if at != plan.count or target - plan.count > free:
                move = best_move(plan, plan.count, free)
                if move:
                    heapq.heappush(heap, (-move[0], i, move[1], plan.count))
                continue
            free -= target - plan.count
            plan.count = target
            if target < len(plan.values) - 1:  # (at its top it has no move left)
                move = best_move(plan, target, free)
                if move:
                    heapq.heappush(heap, (-move[0], i, move[1], target))
        unjoined = [open_plans[i] for i in waiting[joined:]]
        return free, unjoined

    # -- the decision ---------------------------------------------------------------------
    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        if self.chooser is not None:
            return self.chooser.decide(snapshot, now)
        total = len(snapshot.usable_gpus)
        plans = self._plans(snapshot.jobs, now, total)
        plans.sort(key=_key)
        if len({p.key for p in plans}) < len(plans):  # equal keys: the tie-breaks decide
            plans.sort(key=_rank)

        # Jobs mid-resize or about to finish keep their GPUs whatever comes (whole grants
        # first: one on a GPU that turned busy is moved, if there is room, or competes).
        free = total
        locked = [p for p in plans if p.frozen in _LOCKED]
        kept = set()
        for job in whole_grants_first([p.job for p in locked], snapshot) if locked else ():
            if len(job.gpus) <= free:
                free -= len(job.gpus)
                kept.add(job.id)
        for plan in locked:
            if plan.job.id in kept:
                plan.count = len(plan.job.gpus)
            else:
                plan.frozen = ""  # its GPUs failed under it: it competes like the others
        open_plans = [p for p in plans if p.job.id not in kept] if kept else plans[:]

        kept_jobs = [p.job for p in locked if p.job.id in kept]
        fitted, path, changes_in = True, None, math.inf
        if self.params.protect_critical:
            committed = (
                sum(len(plan.job.gpus) * plan.left for plan in locked if plan.job.id in kept),
                sum(len(j.gpus) for j in kept_jobs),
            )
            free, fitted, path, changes_in = reserve(
                self.params, open_plans, committed, total, free
            )
        exponent = self._exponent(open_plans)
        m = len(open_plans)
        margin = 1.0 + self.params.resize_margin
        prepare = self._prepare
        begin = free  # the GPUs free when the hand-out begins
        chosen: dict[str, str] | None = None  # each job's kind, where kinds are mixed
        unjoined: list[_Plan] = []
        if snapshot.kind_speed and mixed(snapshot.gpus):
            # Kinds differ: each job's count and kind are chosen together (adaptive_kinds).
            by_kind = free_by_kind(snapshot, kept_jobs)
            weights = [float(m - i) ** exponent for i in range(m)]
            chosen = by_kind_hand_out(open_plans, snapshot, by_kind, margin, weights)
            free = sum(by_kind.values())
        else:
            free, unjoined = self._hand_out(open_plans, exponent, margin, free)

        order = tuple([p.job.id for p in plans])
        # Placement weighs only the jobs that hold or get GPUs; every other one waits.
        moving = [p for p in plans if p.count or p.job.gpus]
        allocations: dict[str, tuple[str, ...]] = dict.fromkeys(order, ())
        allocations.update(
            place(
                snapshot.gpus,
                {p.job.id: p.job.gpus for p in moving},
                {p.job.id: p.count for p in moving},
                order,
                snapshot.kind_speed,
                {p.job.id: p.job.min_gpus for p in moving},
                chosen,
            )
        )
        reasons = _Reasons(
            self, plans, free, (snapshot, allocations) if chosen is not None else None
        )

        def promise() -> float:  # worked out when read (the simulator asks for one in two)
            if chosen is not None:
                return now  # (the certificate below knows nothing of kinds)
            for i, plan in enumerate(open_plans):
                plan.weight = float(m - i) ** exponent
            for plan in unjoined:  # (the certificate weighs every job's first move)
                prepare(plan, margin, begin)
            until = holds_until(self, snapshot, now, plans, open_plans, exponent, free, allocations)
            if until > now and self.params.protect_critical:
                # The reservations the hand-out started from must stay as they are too.
                if not fitted:
                    return now
                p = self.params
                return path_holds_until(
                    [plan.job for plan in open_plans],
                    kept_jobs,
                    total,
                    p.critical_slack,
                    p.horizon_slack,
                    p.queue_slack,
                    now,
                    min(until, now + changes_in),
                    start=path,
                    first_end=min((plan.left for plan in plans if plan.job.gpus), default=None),
                )
            return until

        return Decision(allocations, reasons, order, promise)

    def reason(self, plan: _Plan, free: int, admitted: list[_Plan]) -> Reason:
        """Why ``plan``'s job gets what it gets, with the figures the decision weighed;
        ``free``: the GPUs the decision leaves idle, ``admitted``: the plans that get GPUs."""
        job, n = plan.job, plan.count
        if n == 0:
            return queued_reason(
                job, job.min_gpus, free, [p.job for p in admitted], _why_ahead(plan, admitted)
            )
        held = len(job.gpus)
        if plan.frozen and n == held:
            return self._kept(plan)
        if plan.critical and free == 0 and n < job.max_gpus:
            # Its reservation decided who got the GPUs (none is left over, and it is below
            # its maximum); with GPUs idle, or at its maximum, the reasons below say more.
            return Critical(n, job.max_gpus)
        if held and n != held:
            change = job.remaining_time(held) - job.remaining_time(n)
            if math.isfinite(change):
                # A shrink makes room for the first job that gains GPUs, one that starts first.
                gain = [p.job for p in admitted if p is not plan and p.count > len(p.job.gpus)]
                room = next((j for j in gain if not j.gpus), gain[0] if gain else None)
                return Resized(
                    n,
                    job.max_gpus,
                    held,
                    job.resize_cost,
                    change,
                    room.id if room and n < held else None,
                    bool(room and not room.gpus),
                )
        if n >= job.max_gpus:
            return AtMaximum(n)
        if free > 0:
            return self._not_grown(job, n, free)
        return Crowded(n, job.max_gpus)

    def _kept(self, plan: _Plan) -> Kept:
        job, n = plan.job, plan.count
        if plan.frozen == FINISHING:
            return Kept(n, FINISHING, left_s=job.remaining_time(n), cost_s=job.resize_cost)
        if plan.frozen in (RESIZED, STARTED):
            return Kept(n, plan.frozen, hold_s=self.cooldown_s(job), changed_at=job.last_change)
        return Kept(n, plan.frozen)

    def _not_grown(self, job: Job, n: int, free: int) -> Elastic:
        """Why a job below its maximum takes none of ``free`` idle GPUs: none of the sizes it
        could grow to is faster, or the fastest does not repay its resize.

        The hand-out grows a running job from ``n`` to ``g`` when what ``g`` adds,
        (X(g) / X(n) - 1) x R(n), exceeds the resize cost c times (1 + resize_margin) = m.
        In seconds of the job's time left, g saves s = R(n) - R(g), and the rule reads
        s x R(n) / R(g) > m c, that is s > m c R(n) / (R(n) + m c): the saving it needs."""
        reach = min(job.max_gpus, n + free)
        curve = job.speed.curve(reach)
        to = max(range(n + 1, reach + 1), key=lambda g: (curve[g], -g))
        cost, left = job.resize_cost, job.remaining_time(n)
        if curve[to] <= curve[n] or len(job.gpus) != n or cost <= 0 or not 0 < left < math.inf:
            # Growing costs nothing over what any size costs (no resize of a grant it holds,
            # or no price on one): a job that could go faster would have grown.
            return NoFaster(n, job.max_gpus)
        gain = left - job.remaining_time(to)
        m = 1.0 + self.params.resize_margin
        need = m * cost * left / (left + m * cost)
        return ResizeWouldNotPay(n, job.max_gpus, to, cost, gain, need)


def _why_ahead(waiting: _Plan, admitted: list[_Plan]) -> Callable[[Job], Ahead]:
    """Why each job that gets GPUs comes before ``waiting``: it is on the critical path, it
    has less GPU-time left, it has waited longer, it weighs more, or it already runs."""
    plans = {p.job.id: p for p in admitted}

    def why(job: Job) -> Ahead:
        p = plans[job.id]
        if p.critical:
            return "critical"
        mine, theirs = waiting.job, p.job
        if p.rem * theirs.min_gpus / max(p.x_lo, _EPS) < (
            waiting.rem * mine.min_gpus / max(waiting.x_lo, _EPS)
        ):
            return "shorter"
        if theirs.queued_s > mine.queued_s:
            return "waited"
        if theirs.weight > mine.weight:
            return "priority"
        return "running"

    return why
