"""Whether the critical path (``core.policies.critical``) stays what it is while time passes,
so that ``adaptive``'s promise (``Decision.holds_until``) covers its reservations too.

Between two instants where nothing happens but running jobs progressing, everything the path
compares moves one way, so a span holds if every comparison holds between its two ends
(``holds_between``); ``path_holds_until`` finds the longest such span it can vouch for.
"""

from __future__ import annotations

import itertools
import math

from ..model import Job
from ..speed import Frontier
from .critical import CriticalPath, _chosen, _Jobs, critical_path


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
    """``holds_between`` on the paths at the two instants.

    Per job it checks what decides its reservation, over the extremes of target / time left:
    for a reserved job the count it is given (the same at both ends: every count in between is
    then the same too), for another that no count it could be given is costly; and which side
    of the line its fastest cheap time is on (and, for a waiting job that may pass it, which
    side of its slack the freeing of its GPUs is on)."""
    if a is None or b is None:
        return a is None and b is None
    if a.jobs is not b.jobs:
        if [j.id for j in a.jobs.jobs] != [j.id for j in b.jobs.jobs]:
            return False  # a job ran out of work on the way: that is an event anyway
        if any(fa is not fb for fa, fb in zip(a.jobs.frontiers, b.jobs.frontiers)):
            return False
    if [(r.job.id, r.gpus) for r in a.reservations] != [(r.job.id, r.gpus) for r in b.reservations]:
        return False
    line = ((1 - critical_slack) * b.earliest, (1 - critical_slack) * a.earliest)
    lo_target, hi_target = b.target * (1 + 1e-9), a.target * (1 + 1e-9)
    planned = a.jobs
    floors = _floors(a, b)
    reserved = {r.job.id for r in a.reservations}
    # Settled without its options: its cheapest count at both extremes (every count in
    # between is then the cheapest too), and never past the line (no freeing to check): the
    # comparisons below, on the same numbers.
    unsettled = [
        i
        for i, ra, rb, cheapest, cheap in zip(
            itertools.count(), a.rems, b.rems, planned.cheapest, planned.cheap
        )
        if not (cheapest <= lo_target / ra and cheapest <= hi_target / rb and ra * cheap <= line[0])
    ]
    for i in unsettled:
        ra, rb, cheap = a.rems[i], b.rems[i], planned.cheap[i]
        # The count the target calls for, at both extremes of target / time left.
        lo, hi = lo_target / ra, hi_target / rb
        left = (rb * cheap, ra * cheap)
        f, job = planned.frontiers[i], planned.jobs[i]
        if ra != rb and not job.pinned:
            # A running job's time left falls with the horizon's terms: the least of target
            # / time left all along is at least the least of term / time left (a ratio of
            # straight lines: at one end) times the factor, a hair less for rounding.
            floor = max(min(tb / rb, ta / ra) for tb, ta in floors) * a.factor * (1 - 1e-9)
            if lo < floor <= hi:
                lo = floor
        if job.id in reserved:
            if _chosen(f, lo) != _chosen(f, hi):
                return False
        elif _costly_within(f, lo, hi, critical_slack):
            return False
        if not _apart(left, line):
            return False
        if left[1] > line[0] and not job.gpus:  # urgent at some point: when freed
            freed = (b.freed(i), a.freed(i))
            spare = (b.earliest - left[1], a.earliest - left[0])
            if not _apart(freed, spare):
                return False
    return True


def _costly_within(frontier: Frontier, lo: float, hi: float, critical_slack: float) -> bool:
    """Whether any count a job is given for ``lo`` to ``hi`` seconds per unit of work
    (``_chosen``) is costly (``critical_path``'s test)."""
    cheap = frontier.gpu_secs[frontier.best_from[0]] * (1.0 + critical_slack)
    last = len(frontier.secs) - 1
    first, last_k = sorted((frontier.first_within(hi), frontier.first_within(lo)))
    for k in range(first, last_k + 1):
        if frontier.gpu_secs[frontier.best_from[k] if k <= last else last] > cheap:
            return True
    return False


def _floors(a: CriticalPath, b: CriticalPath) -> list[tuple[float, float]]:
    """Lower bounds of the horizon between instants ``a`` and ``b`` (its terms at ``b``, at
    ``a``) that fall in a straight line while running jobs progress steadily: the packed work,
    and the time at its fastest count of the job that was the longest at either instant. The
    horizon is at least each all along (work of a job that is paused only keeps them higher)."""
    floors = [(b.packed, a.packed)]
    fastest, longest = a.jobs.fastest, {a.longest, b.longest} - {-1}
    floors += [(b.rems[j] * fastest[j], a.rems[j] * fastest[j]) for j in sorted(longest)]
    return floors


def _left_after(job: Job, seconds: float) -> float:
    """Work ``job`` has left ``seconds`` on, had it run at its modelled speed on its grant all
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
    tries: int = 8,
    start: CriticalPath | None = None,
    first_end: float | None = None,
) -> float:
    """How long, up to ``until``, the critical path of ``jobs`` (``kept``: the grants kept
    whatever happens) stays what it is while time passes: ``until`` itself, or a shorter span
    (halved up to ``tries`` times) that ``holds_between`` can vouch for, or ``now``. A promise
    of ``now`` has every tick decide again until the path changes, so a span down to 1/256 of
    the longest is worth its tries (``benchmarks/decision_speed.py``: 4 tries made a tenth
    more decisions on the 10,000-job replay).

    Spans end before the first running job could finish (a completion is an event anyway).
    ``start``: the path now, if already worked out (``critical_path`` of these ``jobs``);
    ``first_end``: likewise the least ``remaining_time`` on its grant of the running jobs.
    """
    running = [j for j in (*jobs, *kept) if j.gpus]
    if first_end is None:
        first_end = min((j.remaining_time(len(j.gpus)) for j in running), default=math.inf)
    end = min(until, now + first_end)
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
    if start is None:
        planned, _ = _Jobs.of(jobs, total, critical_slack)
        rems = [j.remaining_work for j in planned.jobs]
    else:
        planned, rems = start.jobs, start.rems
    # Only running jobs progress (``_left_after``); a waiting job's work left stays.
    progress = [
        (i, rems[i], j.speed.throughput(len(j.gpus))) for i, j in enumerate(planned.jobs) if j.gpus
    ]
    span = (end - now) * (1 - 1e-9)
    for _ in range(tries + 1):
        later = list(rems)
        for i, rem, speed in progress:
            later[i] = max(rem - span * speed, 0.0)
        path = critical_path((), committed(span), *args, gpus, later, planned=planned)
        if _same_path(start, path, critical_slack):
            return now + span
        span /= 2
    return now


__all__ = ["holds_between", "path_holds_until"]
