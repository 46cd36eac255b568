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
"""

from __future__ import annotations

import bisect
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


def horizon(options: list[_Options], committed_gpu_s: float, total: int) -> float:
    """The earliest time (seconds from now) all the work could be done; see the module.

    Exact: the extra GPU-time of the long jobs only changes where the horizon passes one of
    their counts' times, so the fixed point is found by walking those points in order.
    """
    work = committed_gpu_s + sum(o.cheapest for o in options)
    lo = max(work / total, max((o.fastest for o in options), default=0.0))
    long = [o for o in options if o.gpu_time(lo) > o.cheapest]
    if not long:
        return lo
    # Each long job's extra GPU-time at ``lo``, then where it changes: at each of its counts'
    # times beyond ``lo`` (one job's term at a time).
    extra = [o.gpu_time(lo * (1 + 1e-12)) - o.cheapest for o in long]
    steps = sorted(
        (r, k)
        for k, o in enumerate(long)
        for i in range(len(o.frontier.secs))
        if (r := o.seconds(i)) > lo
    )
    at, total_extra, n = lo, sum(extra), 0
    while True:
        need = (work + total_extra) / total
        if n == len(steps):  # every count is in: nothing changes past here
            return max(at, need)
        step = steps[n][0]
        if max(at, need) < step:
            return max(at, need)
        at = step
        # Every count whose time is ``at`` comes in (a hair of slack: ``at`` is the product
        # that computed it, not the comparison).
        while n < len(steps) and steps[n][0] == at:
            k = steps[n][1]
            extra[k] = long[k].gpu_time(at * (1 + 1e-12)) - long[k].cheapest
            n += 1
        total_extra = sum(extra)  # summed afresh: no drift from adding differences


class _Freeing:
    """When GPUs come free if running jobs keep their leases to the end."""

    def __init__(self, options: list[_Options], idle: int) -> None:
        ends = sorted(
            (o.job.speed.remaining_time(o.rem, len(o.job.gpus)), len(o.job.gpus))
            for o in options
            if o.job.gpus
        )
        self.idle = idle
        self.times = [end for end, _ in ends]
        self.free = list(itertools.accumulate((held for _, held in ends), initial=idle))[1:]

    def within(self, gpus: int) -> float:
        """Seconds until ``gpus`` GPUs are free (inf: never, with these leases)."""
        if self.idle >= gpus:
            return 0.0
        i = bisect.bisect_left(self.free, gpus)
        return self.times[i] if i < len(self.times) else math.inf


@dataclass
class CriticalPath:
    """The critical path at one instant, with what decided it (for ``holds_between``)."""

    earliest: float
    target: float
    options: list[_Options]
    reservations: list[Reservation]
    #: Per option: its fastest cheap index, and the time running jobs need to free its
    #: minimum (queued jobs only).
    fastest_cheap: list[int]
    freed: list[float]


def critical_path(
    jobs: Iterable[Job],
    committed_gpu_s: float,
    total: int,
    critical_slack: float,
    horizon_slack: float,
    queue_slack: float,
    committed_gpus: int = 0,
    rems: Iterable[float] | None = None,
) -> CriticalPath | None:
    """The critical path now: its ``target`` and ``reservations`` (least slack first); None
    when there is nothing to plan.

    ``jobs`` are those the policy may still give GPUs (with ``rems`` units of work left each,
    if given: a later instant); ``committed_gpu_s`` and ``committed_gpus`` the GPU-seconds and
    GPUs of jobs whose leases are kept whatever happens (mid-resize, about to finish).
    """
    if rems is None:
        options = [o for job in jobs if (o := _options(job, total)) is not None]
    else:
        options = [o for job, r in zip(jobs, rems) if (o := _options(job, total, r)) is not None]
    if not options or total <= 0:
        return None
    earliest = horizon(options, committed_gpu_s, total)
    if not math.isfinite(earliest) or earliest <= 0:
        return None
    waiting = sum(o.job.min_gpus for o in options if not o.job.gpus)
    target = earliest * (1.0 + horizon_slack + queue_slack * min(1.0, waiting / total))
    line = (1.0 - critical_slack) * earliest
    idle = total - committed_gpus - sum(len(o.job.gpus) for o in options)
    path = CriticalPath(earliest, target, options, [], [], [])
    freeing = _Freeing(options, idle)
    for o in options:
        f = o.frontier
        chosen = o.within(target * (1 + 1e-9))
        if chosen is None:
            chosen = len(f.counts) - 1  # cannot end in time: its fastest
        gpus, left = f.counts[chosen], o.seconds(chosen)
        # What "cheap" means: within critical_slack of the least GPU-time (a job that can
        # catch up later by going wider at that price can wait).
        costly = f.gpu_secs[chosen] > f.gpu_secs[f.best_from[0]] * (1.0 + critical_slack)
        # Its time left at its fastest cheap count.
        fastest_cheap = f.fastest_cheap(critical_slack)
        free_left = o.seconds(fastest_cheap)
        # It must start now (or keep running), unless running jobs free its GPUs within its
        # slack anyway.
        freed = 0.0 if o.job.gpus else freeing.within(o.job.min_gpus)
        urgent = free_left > line and (bool(o.job.gpus) or freed > earliest - free_left)
        if costly or urgent:
            path.reservations.append(Reservation(o.job, gpus, target - left))
        path.fastest_cheap.append(fastest_cheap)
        path.freed.append(freed)
    path.reservations.sort(key=lambda r: (r.slack_s, r.job.submit_time, r.job.id))
    return path


def _apart(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether every value in interval ``a`` compares to every value in ``b`` the same way."""
    return a[0] > b[1] or a[1] <= b[0]


def holds_between(
    now: tuple[list[Job], float, int],
    later: tuple[list[Job], float, int],
    total: int,
    critical_slack: float,
    horizon_slack: float,
    queue_slack: float,
) -> bool:
    """Whether the critical path stays what it is from one instant to a later one while
    nothing happens but running jobs progressing (steadily: ``later`` holds the same jobs with
    more work done, and committed GPU-seconds no more than ``now``'s).

    Everything the path compares moves one way between the two: each job's time left falls
    (running) or stays (waiting); the horizon and the target fall, as all the work does (the
    least fixed point of shrinking terms). So each comparison holds all along if it holds
    between the extremes of the two sides over the interval, whatever the order they move in.
    """
    args = (total, critical_slack, horizon_slack, queue_slack)
    a = critical_path(now[0], now[1], *args, now[2])
    b = critical_path(later[0], later[1], *args, later[2])
    return _same_path(a, b, critical_slack)


def _same_path(a: CriticalPath | None, b: CriticalPath | None, critical_slack: float) -> bool:
    """``holds_between`` on the paths at the two instants."""
    if a is None or b is None:
        return a is None and b is None
    if [o.job.id for o in a.options] != [o.job.id for o in b.options]:
        return False  # a job ran out of work on the way: that is an event anyway
    if [(r.job.id, r.gpus) for r in a.reservations] != [(r.job.id, r.gpus) for r in b.reservations]:
        return False
    horizon_span = (b.earliest, a.earliest)
    line = ((1 - critical_slack) * b.earliest, (1 - critical_slack) * a.earliest)
    for i, (oa, ob) in enumerate(zip(a.options, b.options)):
        f = oa.frontier
        if f is not ob.frontier:
            return False
        rem = (ob.rem, oa.rem)
        # The count the target calls for: the same at both extremes of target / time left.
        lo, hi = b.target * (1 + 1e-9) / rem[1], a.target * (1 + 1e-9) / rem[0]
        if f.first_within(lo) != f.first_within(hi):
            return False
        left = (rem[0] * f.secs[a.fastest_cheap[i]], rem[1] * f.secs[a.fastest_cheap[i]])
        if not _apart(left, line):
            return False
        if left[1] > line[0] and not oa.job.gpus:  # urgent at some point: when freed matters
            freed = (b.freed[i], a.freed[i])
            spare = (horizon_span[0] - left[1], horizon_span[1] - left[0])
            if not _apart(freed, spare):
                return False
    return True


def _left_after(job: Job, seconds: float) -> float:
    """Work ``job`` has left ``seconds`` on, had it run at its modelled speed on its lease all
    along (a job mid-resize too: more progress than real only widens the bounds)."""
    if not job.gpus or seconds <= 0:
        return job.remaining_work
    return max(job.remaining_work - seconds * job.speed.throughput(len(job.gpus)), 0.0)


def path_holds_until(
    jobs: list[Job],
    kept: list[Job],
    total: int,
    critical_slack: float,
    horizon_slack: float,
    queue_slack: float,
    now: float,
    until: float,
    tries: int = 4,
    start: CriticalPath | None = None,
) -> float:
    """How long, up to ``until``, the critical path of ``jobs`` (``kept``: the leases kept
    whatever happens) stays what it is while time passes: ``until`` itself, or a shorter span
    (halved up to ``tries`` times) that ``holds_between`` can vouch for, or ``now``.

    Spans end before the first running job could finish (a completion is an event anyway).
    ``start``: the path now, if already worked out (``critical_path``).
    """
    running = [j.remaining_time(len(j.gpus)) for j in (*jobs, *kept) if j.gpus]
    end = min(until, now + min(running, default=math.inf))
    if end <= now:
        return now
    if not running:
        return until  # nothing progresses: nothing the path reads moves
    args = (total, critical_slack, horizon_slack, queue_slack)
    gpus = sum(len(j.gpus) for j in kept)

    def committed(seconds: float) -> float:
        return sum(
            len(j.gpus) * j.speed.remaining_time(_left_after(j, seconds), len(j.gpus)) for j in kept
        )

    if start is None:
        start = critical_path(jobs, committed(0.0), *args, gpus)
    span = (end - now) * (1 - 1e-9)
    for _ in range(tries + 1):
        rems = [_left_after(j, span) for j in jobs]
        if _same_path(
            start, critical_path(jobs, committed(span), *args, gpus, rems), critical_slack
        ):
            return now + span
        span /= 2
    return now


__all__ = [
    "CriticalPath",
    "Reservation",
    "critical_path",
    "holds_between",
    "horizon",
    "path_holds_until",
]
