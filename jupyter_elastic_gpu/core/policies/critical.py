"""The critical path: which jobs cannot wait if the cluster is to finish its work early, and
how many GPUs each needs from now on.

Shortest-first orders (``adaptive``'s heSRPT weights, SRPT) serve mean completion time and
starve the longest job: it starts when the others are done and then runs alone, on as many GPUs
as it can use, at poor efficiency, long after the rest (the makespan). The remedy is the
classic one of project scheduling: compute the horizon, find the jobs without slack, and start
them now at the width that ends them with the rest.

**Horizon.** H is the earliest time the cluster could finish all it holds: every job at the
cheapest count (least GPU-time) that still ends it within H, all of it perfectly packed on the
GPUs. It is at least the total GPU-time over the GPUs and at least the longest job's best time;
a long job that needs more than its cheapest count to end within H costs extra GPU-time, which
pushes H out: H is the least fixed point, found by bisection over those few long jobs.

**Target.** Arrivals are not known in advance, so H from the jobs present is optimistic, and
the shorter jobs pay for every GPU set aside. The target is H x (1 + ``horizon_slack`` +
``queue_slack`` x min(1, q)), q being the GPUs the waiting jobs need at their minimum over the
cluster's: while the queue is deep the long jobs give way to shorter ones; as it drains, the
target tightens to H and they get the width that ends them with the rest.

**Critical.** A count is *cheap* when it costs at most ``critical_slack`` more GPU-time than
the job's cheapest count. A job is critical when no cheap count ends it within the target
(waiting would make it wider still: sub-linear speed-up), or when at its fastest cheap count its
time left comes within ``critical_slack`` x H of H (it must start now, unless running jobs free
its GPUs within its slack anyway). A job that can wait and catch up later by going wider at a
cheap count (near-linear speed-up) is not critical. A critical job gets, before any other, the
count with the least GPU-time that ends it within the target.

Whether the path stays the same while time passes (``adaptive``'s promise): ``critical_holds``.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..model import Job
from ..speed import Frontier


@dataclass(frozen=True)
class Reservation:
    """A critical job and the GPUs it needs now; ``slack_s`` is the target less its time left
    at that count (the least slack is served first)."""

    job: Job
    gpus: int
    slack_s: float


class _Options:
    """One job's counts worth holding (``SpeedModel.frontier``) scaled by its work left."""

    __slots__ = ("cheapest", "frontier", "job", "rem")

    def __init__(self, job: Job, frontier: Frontier, rem: float) -> None:
        self.job, self.frontier, self.rem = job, frontier, rem
        self.cheapest = self.rem * frontier.gpu_secs[frontier.best_from[0]]

    def seconds(self, i: int) -> float:
        return self.rem * self.frontier.secs[i]

    @property
    def fastest(self) -> float:
        return self.seconds(len(self.frontier.secs) - 1)

    def within(self, horizon: float) -> int | None:
        """Index of the cheapest count that ends the job within ``horizon`` (None: none)."""
        i = self.frontier.first_within(horizon / self.rem)
        return self.frontier.best_from[i] if i < len(self.frontier.secs) else None

    def gpu_time(self, horizon: float) -> float:
        """The least GPU-seconds that end the job within ``horizon`` (inf: none does)."""
        i = self.within(horizon)
        return math.inf if i is None else self.rem * self.frontier.gpu_secs[i]


def _options(job: Job, total: int, rem: float | None = None) -> _Options | None:
    """``job``'s options, with ``rem`` units of work left (default: what it has left)."""
    rem = job.remaining_work if rem is None else rem
    top = min(job.max_gpus, total)
    if rem <= 0 or top < job.min_gpus:
        return None
    frontier = job.speed.frontier(job.min_gpus, top)
    return _Options(job, frontier, rem) if frontier.counts else None


def _chosen(frontier: Frontier, seconds_per_work: float) -> int:
    """Index of the count a job gets to end within ``seconds_per_work`` per unit of work: the
    cheapest that does, or its fastest if none does (``_Options.within``). It never falls as
    ``seconds_per_work`` falls (``best_from`` never falls along the frontier)."""
    i = frontier.first_within(seconds_per_work)
    return frontier.best_from[i] if i < len(frontier.secs) else len(frontier.secs) - 1


def horizon(options: list[_Options], committed_gpu_s: float, total: int) -> float:
    """The earliest time (seconds from now) all the work could be done; see the module.

    The rule as written, over every job's options. ``critical_path`` gets the same number
    through ``_horizon``'s shortcuts; tests/core/test_critical_path.py checks the two agree."""
    work = committed_gpu_s + sum(o.cheapest for o in options)
    lo = max(work / total, max((o.fastest for o in options), default=0.0))
    return _fixed_point([o for o in options if o.gpu_time(lo) > o.cheapest], work, lo, total)


def _fixed_point(long: list[_Options], work: float, lo: float, total: int) -> float:
    """The horizon from its lower bound ``lo`` (``work``: GPU-seconds at the cheapest counts),
    given the ``long`` jobs: those that need more than their cheapest count to end by ``lo``.

    Exact: the extra GPU-time of the long jobs only changes where the horizon passes one of
    their counts' times, so the fixed point is found by walking those points in order.
    """
    if not long:
        return lo
    # Each long job's extra GPU-time at ``lo``, then where it changes: at each of its counts'
    # times beyond ``lo`` (one job's term at a time), walked in order from a heap holding each
    # job's next such time: the walk mostly ends at the first, so they are not all sorted.
    extra = [o.gpu_time(lo * (1 + 1e-12)) - o.cheapest for o in long]
    if (work + sum(extra)) / total <= lo:
        return lo  # (every count's time still to come is beyond ``lo``: the walk ends here)
    steps = []
    for k, o in enumerate(long):
        i = _last_beyond(o, lo)
        if i >= 0:
            steps.append((o.seconds(i), k, i))
    heapq.heapify(steps)
    at, total_extra = lo, sum(extra)
    while True:
        need = (work + total_extra) / total
        if not steps:  # every count is in: nothing changes past here
            return max(at, need)
        step = steps[0][0]
        if max(at, need) < step:
            return max(at, need)
        at = step
        # Every count whose time is ``at`` comes in (a hair of slack: ``at`` is the product
        # that computed it, not the comparison).
        while steps and steps[0][0] == at:
            _, k, i = steps[0]
            extra[k] = long[k].gpu_time(at * (1 + 1e-12)) - long[k].cheapest
            if i > 0:  # its next count's time, which is longer
                heapq.heapreplace(steps, (long[k].seconds(i - 1), k, i - 1))
            else:
                heapq.heappop(steps)
        total_extra = sum(extra)  # summed afresh: no drift from adding differences


def _last_beyond(o: _Options, seconds: float) -> int:
    """Index of the fastest count whose time exceeds ``seconds`` (-1: none does); times fall
    along the frontier, so every slower count's does too."""
    i = o.frontier.first_within(seconds / o.rem)  # to rounding: settled on the products
    while i < len(o.frontier.secs) and o.seconds(i) > seconds:
        i += 1
    while i > 0 and not o.seconds(i - 1) > seconds:
        i -= 1
    return i - 1


class _Jobs:
    """The jobs a path is planned over, each with its counts worth holding and what they cost
    per unit of work: only the work left moves as time passes, so this is worked out once per
    decision however many instants ``path_holds_until`` looks at.

    A job's time (or GPU-time) at a count is its work left times the count's seconds (or
    GPU-seconds) per unit of work, so each test of the rule at the cheapest, fastest or fastest
    cheap count is one product here, the very product ``_Options`` computes; only the few jobs
    those tests do not settle get their options worked out.
    """

    __slots__ = (
        "cheap",
        "cheapest",
        "dearer",
        "fastest",
        "frontiers",
        "held",
        "jobs",
        "least",
        "options",
        "waiting",
    )

    def __init__(self, jobs: list[Job], options: list[tuple]) -> None:
        self.jobs, self.options = jobs, options
        #: Per job: its frontier, and per unit of work (``SpeedModel.options``) the GPU-seconds
        #: of its cheapest count, the seconds of its cheapest, fastest and fastest cheap
        #: counts, and the most GPU-seconds any count costs over the least.
        columns = zip(*options) if options else ((),) * 6
        self.frontiers, self.least, self.cheapest, self.fastest, self.cheap, self.dearer = map(
            list, columns
        )
        self.held = sum([len(j.gpus) for j in jobs])  # GPUs they hold
        self.waiting = sum([j.min_gpus for j in jobs if not j.gpus])  # GPUs the queue needs

    @classmethod
    def of(
        cls,
        jobs: list[Job],
        total: int,
        critical_slack: float,
        options: list[tuple | None] | None = None,
    ) -> tuple[_Jobs, list[int] | None]:
        """The ``jobs`` that could be given GPUs at all (a count within ``total``), and their
        indices in ``jobs`` (None: all of them). ``options``: per job, ``SpeedModel.options``
        at its counts within ``total`` and ``critical_slack``, if already looked up (None: it
        cannot be given GPUs)."""
        if options is None:
            options = []
            for job in jobs:
                top = job.max_gpus if job.max_gpus < total else total
                fits = top >= job.min_gpus
                options.append(
                    job.speed.options(job.min_gpus, top, critical_slack) if fits else None
                )
        if None not in options:
            return cls(jobs, options), None
        keep = [i for i, found in enumerate(options) if found is not None]
        return cls([jobs[i] for i in keep], [options[i] for i in keep]), keep

    def having(self, keep: list[int]) -> _Jobs:
        """The jobs at indices ``keep`` (those with work left at some instant)."""
        return _Jobs([self.jobs[i] for i in keep], [self.options[i] for i in keep])


class _Freeing:
    """When GPUs come free if running jobs keep their grants to the end."""

    def __init__(self, jobs: _Jobs, rems: list[float], idle: int) -> None:
        ends = sorted(
            (job.speed.remaining_time(rem, len(job.gpus)), len(job.gpus))
            for job, rem in zip(jobs.jobs, rems)
            if job.gpus
        )
        self.idle = idle
        self.times = [end for end, _ in ends]
        self.free = list(itertools.accumulate((held for _, held in ends), initial=idle))[1:]

    def within(self, gpus: int) -> float:
        """Seconds until ``gpus`` GPUs are free (inf: never, with these grants)."""
        if self.idle >= gpus:
            return 0.0
        i = bisect.bisect_left(self.free, gpus)
        return self.times[i] if i < len(self.times) else math.inf


@dataclass
class CriticalPath:
    """The critical path at one instant, with what decided it (for ``holds_between``)."""

    earliest: float
    target: float
    reservations: list[Reservation]
    #: The jobs planned (those with work left) and the work each has left.
    jobs: _Jobs
    rems: list[float]
    idle: int
    #: The target over the horizon; two lower bounds of the horizon: the packed work, and the
    #: job whose time at its fastest count is the longest (its index in ``jobs``; -1: none).
    factor: float
    packed: float
    longest: int
    _freeing: _Freeing | None = None

    def freed(self, i: int) -> float:
        """Seconds until running jobs free the minimum of job ``i`` (0 for a running one)."""
        job = self.jobs.jobs[i]
        if job.gpus:
            return 0.0
        if self._freeing is None:
            self._freeing = _Freeing(self.jobs, self.rems, self.idle)
        return self._freeing.within(job.min_gpus)


def critical_path(
    jobs: Iterable[Job],
    committed_gpu_s: float,
    total: int,
    critical_slack: float,
    horizon_slack: float,
    queue_slack: float,
    committed_gpus: int = 0,
    rems: Iterable[float] | None = None,
    *,
    planned: _Jobs | None = None,
    options: list[tuple | None] | None = None,
) -> CriticalPath | None:
    """The critical path now: its ``target`` and ``reservations`` (least slack first); None
    when there is nothing to plan.

    ``jobs`` are those the policy may still give GPUs (with ``rems`` units of work left each,
    if given: a later instant); ``committed_gpu_s`` and ``committed_gpus`` the GPU-seconds and
    GPUs of jobs whose grants are kept whatever happens (mid-resize, about to finish).
    ``planned``: ``jobs`` as ``_Jobs.of`` sees them, if already worked out (``rems`` are then
    per planned job); ``options``: as ``_Jobs.of`` takes them, if already looked up.
    """
    if planned is None:
        planned, keep = _Jobs.of(list(jobs), total, critical_slack, options)
        if rems is not None and keep is not None:
            rems = list(rems)
            rems = [rems[i] for i in keep]
    rems = [j.remaining_work for j in planned.jobs] if rems is None else list(rems)
    if rems and not min(rems) > 0:  # a job without work left is not planned
        keep = [i for i, r in enumerate(rems) if r > 0]
        planned, rems = planned.having(keep), [rems[i] for i in keep]
    if not rems or total <= 0:
        return None
    earliest, packed, longest = _horizon(planned, rems, committed_gpu_s, total)
    if not math.isfinite(earliest) or earliest <= 0:
        return None
    factor = 1.0 + horizon_slack + queue_slack * min(1.0, planned.waiting / total)
    target = earliest * factor
    line = (1.0 - critical_slack) * earliest
    idle = total - committed_gpus - planned.held
    path = CriticalPath(earliest, target, [], planned, rems, idle, factor, packed, longest)
    within = target * (1 + 1e-9)
    # The jobs not settled without their options. Settled: its cheapest count ends it within
    # the target (so no count is cheaper: not costly) and at its fastest cheap count it does
    # not pass the line (not urgent): the very comparisons below, on the same products.
    unsettled = [
        i
        for i, rem, cheapest, cheap in zip(itertools.count(), rems, planned.cheapest, planned.cheap)
        if not cheapest <= within / rem or rem * cheap > line
    ]
    for i in unsettled:
        # ``_Options``' rule, on the per-unit columns: a job's time (GPU-time) at a count is
        # its work left times the count's seconds (GPU-seconds) per unit.
        f, job, rem = planned.frontiers[i], planned.jobs[i], rems[i]
        chosen = _chosen(f, within / rem)  # the cheapest that ends in time, or its fastest
        gpus, left = f.counts[chosen], rem * f.secs[chosen]
        # What "cheap" means: within critical_slack of the least GPU-time (a job that can
        # catch up later by going wider at that price can wait).
        costly = f.gpu_secs[chosen] > planned.least[i] * (1.0 + critical_slack)
        # Its time left at its fastest cheap count.
        free_left = rem * planned.cheap[i]
        # It must start now (or keep running), unless running jobs free its GPUs within its
        # slack anyway.
        urgent = free_left > line and (bool(job.gpus) or path.freed(i) > earliest - free_left)
        if costly or urgent:
            path.reservations.append(Reservation(job, gpus, target - left))
    path.reservations.sort(key=lambda r: (r.slack_s, r.job.submit_time, r.job.id))
    return path


def _horizon(
    planned: _Jobs, rems: list[float], committed_gpu_s: float, total: int
) -> tuple[float, float, int]:
    """``horizon`` of the planned jobs with ``rems`` left: the products ``_Options`` would
    compute, and options only for the jobs that may be long. With it, two of its lower bounds:
    the packed work (GPU-seconds over GPUs) and the index of the job whose fastest time is the
    longest (-1: none)."""
    work = committed_gpu_s + sum([rem * least for rem, least in zip(rems, planned.least)])
    times = [rem * secs for rem, secs in zip(rems, planned.fastest)]
    fastest = max(times, default=0.0)
    lo = max(work / total, fastest)
    longest = times.index(fastest) if times else -1
    # A job may be long only if its cheapest count does not end it by ``lo`` (otherwise its
    # least GPU-time to end by ``lo`` is that count's: ``_Options.gpu_time``).
    maybe = [
        i
        for i, rem, cheapest in zip(itertools.count(), rems, planned.cheapest)
        if not cheapest <= lo / rem
    ]
    # Settled without their options: their extra GPU-time at ``lo`` is at most their work
    # left times their dearest count's premium, and if the packed work stays below ``lo``
    # with twice that (room for rounding, with the margin on ``lo``), the walk ends at
    # ``lo``. (Numbers too small to round as usual take the walk.)
    if maybe and lo > 1e-250 and lo / max(rems) > 1e-290:
        most = sum([rems[i] * planned.dearer[i] for i in maybe])
        if (work + 2 * most) / total < lo * (1 - 1e-6):
            maybe = []
    long = []
    for i in maybe:
        # ``_Options.gpu_time(lo) > _Options.cheapest``, on the per-unit columns.
        f, rem = planned.frontiers[i], rems[i]
        k = f.first_within(lo / rem)
        if k == len(f.secs) or rem * f.gpu_secs[f.best_from[k]] > rem * planned.least[i]:
            long.append(_Options(planned.jobs[i], f, rem))
    return _fixed_point(long, work, lo, total), work / total, longest


__all__ = [
    "CriticalPath",
    "Reservation",
    "critical_path",
    "horizon",
]
