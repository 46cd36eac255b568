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

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..model import Job


@dataclass(frozen=True)
class Reservation:
    """A critical job and the GPUs it needs now; ``slack_s`` is the target less its time left
    at that count (the least slack is served first)."""

    job: Job
    gpus: int
    slack_s: float


@dataclass(frozen=True)
class _Options:
    job: Job
    #: (count, seconds left, GPU-seconds left) for each count faster than every smaller one.
    counts: tuple[tuple[int, float, float], ...]
    cheapest: float  # the least GPU-seconds over those counts

    def gpu_time(self, horizon: float) -> float:
        """The least GPU-seconds that end the job within ``horizon`` (inf: none does)."""
        return min((c for _, r, c in self.counts if r <= horizon), default=math.inf)

    def count_within(self, horizon: float) -> tuple[int, float] | None:
        """(count, seconds left) of the cheapest count ending the job within ``horizon``."""
        best = None
        for g, r, c in self.counts:
            if r <= horizon and (best is None or c < best[2]):
                best = (g, r, c)
        return (best[0], best[1]) if best else None


def _options(job: Job, total: int) -> _Options | None:
    rem = job.remaining_work
    top = min(job.max_gpus, total)
    if rem <= 0 or top < job.min_gpus:
        return None
    curve = job.speed.curve(top)
    counts: list[tuple[int, float, float]] = []
    for g in range(job.min_gpus, top + 1):
        if curve[g] > 0:
            r = rem / curve[g]
            if not counts or r < counts[-1][1]:
                counts.append((g, r, g * r))
    if not counts:
        return None
    return _Options(job, tuple(counts), min(c for _, _, c in counts))


def horizon(options: list[_Options], committed_gpu_s: float, total: int) -> float:
    """The earliest time (seconds from now) all the work could be done; see the module."""
    work = committed_gpu_s + sum(o.cheapest for o in options)
    lo = max(work / total, max((o.counts[-1][1] for o in options), default=0.0))
    long = [o for o in options if o.gpu_time(lo) > o.cheapest]
    if not long:
        return lo

    def short_of(h: float) -> bool:  # the work does not fit in h
        return work + sum(o.gpu_time(h) - o.cheapest for o in long) > total * h

    if not short_of(lo):
        return lo
    # At the slowest count each long job's cheapest, the fixed point holds (work / total <= lo).
    hi = max(r for o in long for _, r, c in o.counts if c == o.cheapest)
    hi = max(hi, lo)
    for _ in range(40):
        mid = (lo + hi) / 2
        if short_of(mid):
            lo = mid
        else:
            hi = mid
    return hi


def _freed_within(options: list[_Options], idle: int, gpus: int) -> float:
    """Seconds until ``gpus`` GPUs are free if running jobs keep their leases to the end."""
    if idle >= gpus:
        return 0.0
    ends = sorted(
        (o.job.remaining_time(len(o.job.gpus)), len(o.job.gpus)) for o in options if o.job.gpus
    )
    for end, held in ends:
        idle += held
        if idle >= gpus:
            return end
    return math.inf


def critical_path(
    jobs: Iterable[Job],
    committed_gpu_s: float,
    total: int,
    critical_slack: float,
    horizon_slack: float,
    queue_slack: float,
    committed_gpus: int = 0,
) -> tuple[float, list[Reservation]]:
    """(the target horizon, the critical jobs' reservations, least slack first).

    ``jobs`` are those the policy may still give GPUs; ``committed_gpu_s`` and
    ``committed_gpus`` the GPU-seconds and GPUs of jobs whose leases are kept whatever happens
    (mid-resize, about to finish).
    """
    options = [o for job in jobs if (o := _options(job, total)) is not None]
    if not options or total <= 0:
        return 0.0, []
    earliest = horizon(options, committed_gpu_s, total)
    if not math.isfinite(earliest) or earliest <= 0:
        return 0.0, []
    waiting = sum(o.job.min_gpus for o in options if not o.job.gpus)
    target = earliest * (1.0 + horizon_slack + queue_slack * min(1.0, waiting / total))
    line = (1.0 - critical_slack) * earliest
    idle = total - committed_gpus - sum(len(o.job.gpus) for o in options)
    out = []
    for o in options:
        chosen = o.count_within(target * (1 + 1e-9))
        if chosen is None:
            chosen = (o.counts[-1][0], o.counts[-1][1])  # cannot end in time: its fastest
        gpus, left = chosen
        # What "cheap" means: within critical_slack of the least GPU-time (a job that can
        # catch up later by going wider at that price can wait).
        cheap = o.cheapest * (1.0 + critical_slack)
        costly = o.gpu_time(target * (1 + 1e-9)) > cheap
        # Its time left at its fastest cheap count.
        free_left = min(r for _, r, c in o.counts if c <= cheap)
        # It must start now (or keep running), unless running jobs free its GPUs within its
        # slack anyway.
        urgent = free_left > line and (
            bool(o.job.gpus) or _freed_within(options, idle, o.job.min_gpus) > earliest - free_left
        )
        if costly or urgent:
            out.append(Reservation(o.job, gpus, target - left))
    out.sort(key=lambda r: (r.slack_s, r.job.submit_time, r.job.id))
    return target, out


__all__ = ["Reservation", "critical_path", "horizon"]
