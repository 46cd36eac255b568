"""Until when an ``adaptive`` decision holds (``Decision.holds_until``).

Nine decisions in ten change nothing: every job keeps its grant and nobody starts. Such a
*steady* decision stays the same while time passes until one of its time-dependent inputs could
change its outcome; ``holds_until`` is the earliest such time (a decision that changes anything
promises nothing: ``now``). The inputs that move with time:

* **frozen jobs** (``frozen_holds_until``): a cooldown ends at ``last_change + cooldown_s`` (it
  matters only to a job below its top: it keeps a job from growing, not from shrinking); a
  job comes about to finish when its remaining time at its grant falls to ``finish_guard``
  resize costs, and is locked from then on (it leaves the hand-out, which moves the weights).
* **the resize penalty** of a running job grows as its remaining time shrinks. It is charged on
  every count but the job's own, so measured from no GPUs it only raises what the job's count is
  worth: every move of the hand-out that ends at that count gains more, every move from it to a
  larger count gains less, no other move changes. Each job reaches its count sooner and stops
  there, and no GPU is freed for a waiting job: it needs no bound.
* **the order** (``order_holds_until``): a running job's key falls linearly with its remaining
  work, a waiting job's with aging, as 1 / (1 + waited / ``aging_s``); the order sets the
  weights, (m - position)^p. It cannot change before two neighbours in it meet.

Neighbours meet often, and their weights rarely matter. ``hand_out_holds_for`` certifies that
the hand-out ends at the current grants whatever order its moves come in, within limits. A move
takes a job from one count to the count with the best value gained per GPU, its *ratio*; the
best move of all goes first. If the moves that take each running job from no GPUs to its count
end there with every GPU in reach (so what is free when they come does not matter), every one of
them has a higher ratio than any move past a job's count (a running job's growth, a waiting
job's start), and no move with a positive ratio fits in the GPUs left at the end, then whatever
their order the moves to the current counts all come first, all fit, and nothing else does. The
penalty only makes this more certain. Ratios scale with weights, so each job may move in the
order as far as its weight keeps its side of the gap between the lowest ratio on the way and the
highest past it, and the decision holds until enough keys could cross a job's key to push it
further. A steady decision the certificate does not cover (a job kept from growing only because
the GPUs it wants are not free, say) holds while the order does.

``SimConfig.check_holds`` verifies every promise against the decision actually made. Times and
ratios keep a hair of slack (``REL``): a driver accumulates progress tick by tick, so what a
later decision sees differs from the straight lines here by rounding. Pure: the decision's
working values and the time in, a time out.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..model import Job, Snapshot

if TYPE_CHECKING:
    from .adaptive import AdaptivePolicy

#: Relative slack on every value that a driver accumulates over time (work done, time waited)
#: and on every ratio compared: far above rounding, far below anything a decision tells apart.
REL = 1e-9


class Plan(Protocol):
    """What the policy worked out for one job (``adaptive._Plan``)."""

    job: Job
    key: float  # priority key: smaller goes first
    frozen: str  # why it keeps its GPUs, or ""
    count: int  # GPUs it gets
    left: float  # seconds it needs to finish on its grant (running jobs)
    weight: float  # its weight in the hand-out (open plans)
    start: int  # its GPUs when the hand-out begins: 0, or its reservation (critical path)
    first: tuple[float, int] | None  # its first move in the hand-out (from ``start``)


def holds_until(
    policy: AdaptivePolicy,
    snapshot: Snapshot,
    now: float,
    plans: Sequence[Plan],
    open_plans: Sequence[Plan],
    exponent: float,
    free: int,
    allocations: Mapping[str, tuple[str, ...]],
) -> float:
    """The earliest time any time-dependent input of the decision could change its outcome;
    ``now`` if the decision changes anything. ``plans``: every job, in the policy's order;
    ``open_plans``: those in the hand-out, in order, weighted (m - i)^``exponent``; ``free``:
    GPUs the hand-out left."""
    if not steady(snapshot, allocations):
        return now
    until = frozen_holds_until(policy, now, plans, len(snapshot.usable_gpus))
    if until <= now:
        return now
    courses = [_course(policy, plan) for plan in open_plans]
    order = order_holds_until(now, courses)
    if order < until:  # the order moves first, but it may not matter
        certain = now + hand_out_holds_for(policy, open_plans, courses, exponent, free, until - now)
        until = max(order, min(until, certain))
    return until if until > now else now


def steady(snapshot: Snapshot, allocations: Mapping[str, tuple[str, ...]]) -> bool:
    """Every job keeps exactly its grant; a waiting job gets nothing."""
    return all(allocations.get(job.id, ()) == job.gpus for job in snapshot.jobs)


# -- frozen jobs --------------------------------------------------------------------------
def frozen_holds_until(
    policy: AdaptivePolicy, now: float, plans: Sequence[Plan], total: int
) -> float:
    """Until when no running job comes about to finish or out of a cooldown that keeps it from
    growing (a job at its top, its maximum or the ``total`` GPUs, has no growing to do)."""
    p = policy.params
    until = math.inf
    for plan in plans:
        job = plan.job
        if not job.running or job.pinned:
            continue  # waiting jobs are never frozen; mid-resize ones stay so
        cost, held = job.resize_cost, len(job.gpus)
        if cost > 0:
            guard = p.finish_guard * cost
            left = plan.left  # falls by one second per second (inf: no speed)
            if left <= guard:
                continue  # about to finish already: locked, and stays so
            if left < math.inf:
                slack = REL * (job.total_work / job.speed.throughput(held) + abs(now))
                until = min(until, now + (left - guard) - slack)
        if job.last_change is not None and held < min(job.max_gpus, total):
            end = job.last_change + policy.cooldown_s(job)
            if now < end:
                until = min(until, end - REL * abs(end))
    return until


# -- the hand-out -------------------------------------------------------------------------
def hand_out_holds_for(
    policy: AdaptivePolicy,
    open_plans: Sequence[Plan],
    courses: Sequence[_KeyCourse | None],
    exponent: float,
    free: int,
    horizon: float,
) -> float:
    """Seconds, up to ``horizon``, for which the hand-out is certain to end at the current
    grants however the order moves (0: not even now), as the module says."""
    ratios = _ratios(policy, open_plans, free)
    if ratios is None:
        return 0.0
    lows, highs = ratios
    weights = [plan.weight for plan in open_plans]
    lowest = min((w * a for w, a in zip(weights, lows) if a is not None), default=math.inf)
    highest = max((w * b for w, b in zip(weights, highs)), default=-math.inf)
    if highest <= 0:
        return horizon  # no move past anyone's count pays, whatever the weights
    if not lowest > highest * (1 + 4 * REL):
        return 0.0
    if exponent == 0 or lowest == math.inf:
        return horizon  # every weight is 1 whatever the order, or nobody runs
    theta = math.sqrt(lowest * highest)  # each side keeps to its side of this
    m = len(open_plans)
    # Keys fall with time: a job can pass another before the horizon only if its key then is
    # below the other's now (slack included). Counting those first spares most meetings.
    high_now = [_key_at(c, 0.0, +1) for c in courses]
    low_end = [_key_at(c, horizon, -1) for c in courses]
    lows_end, highs_now = sorted(low_end), sorted(high_now)
    seconds = horizon
    for i, (low, high) in enumerate(zip(lows, highs)):
        if low is not None:  # must stay where (m - position)^p * low > theta
            need = _last_position(m, exponent, low, theta * (1 + REL)) - i + 1  # passing it
            if i + need < m and bisect_right(lows_end, high_now[i]) - (i + 1) >= need:
                behind = [
                    _meeting(courses[i], courses[j])
                    for j in range(i + 1, m)
                    if low_end[j] <= high_now[i]
                ]
                seconds = min(seconds, _kth_smallest(behind, need))
        if high > 0:  # must stay where (m - position)^p * high < theta
            need = i - _first_position(m, exponent, high, theta * (1 - REL)) + 1  # it passes
            if need <= i and i - bisect_left(highs_now, low_end[i]) >= need:
                ahead = [
                    _meeting(courses[j], courses[i]) for j in range(i) if high_now[j] >= low_end[i]
                ]
                seconds = min(seconds, _kth_smallest(ahead, need))
    return seconds


def _ratios(
    policy: AdaptivePolicy, open_plans: Sequence[Plan], free: int
) -> tuple[list[float | None], list[float]] | None:
    """Per open plan, per unit of weight: the lowest ratio on its way to its count (None for a
    waiting job) and the highest past it (-inf: none); None if the certificate cannot hold: a
    running job's moves do not end at its count, or a move fits in the ``free`` GPUs left."""
    reach = free + sum(plan.count for plan in open_plans)  # the GPUs of the hand-out
    started = sum(plan.start for plan in open_plans)  # reserved before it (critical path)
    lows: list[float | None] = []
    highs: list[float] = []
    for plan in open_plans:
        if free and policy._best_move(plan, plan.count, free):
            return None  # it would take GPUs that are left
        if plan.count:
            # The most it can reach: the hand-out's GPUs less the others' reservations.
            low = _lowest_on_the_way(policy, plan, reach - (started - plan.start))
            if low is None or not low > REL * plan.weight:
                return None
            lows.append(low / plan.weight)
            past = policy._best_move(plan, plan.count, reach - plan.count)
        else:
            lows.append(None)
            past = plan.first
        highs.append(past[0] / plan.weight if past else -math.inf)
    return lows, highs


def _lowest_on_the_way(policy: AdaptivePolicy, plan: Plan, reach: int) -> float | None:
    """The lowest ratio of the moves that take the job from no GPUs to its count with ``reach``
    GPUs in reach, the hand-out's first one included (None: they do not end at its count; no
    first move from no GPUs)."""
    if plan.start == plan.count:
        return math.inf  # reserved at its count: no way to go
    move = plan.first
    if move is None or move[1] > plan.count:
        return None
    lowest = move[0]
    while move[1] < plan.count:
        at = move[1]
        move = policy._best_move(plan, at, reach - at)
        if move is None or move[1] > plan.count:
            return None
        lowest = min(lowest, move[0])
    return lowest


def _last_position(m: int, p: float, low: float, theta: float) -> int:
    """The last position i (0-based, of m) with (m - i)^p * low > theta (-1: none)."""
    if low > theta:
        return m - 1
    i = m - 1 - math.floor((theta / low) ** (1 / p))  # below m - 1: no overflow
    i = min(max(i, -1), m - 1)
    while i >= 0 and not (m - i) ** p * low > theta:
        i -= 1
    while i + 1 < m and (m - i - 1) ** p * low > theta:
        i += 1
    return i


def _first_position(m: int, p: float, high: float, theta: float) -> int:
    """The first position i (0-based, of m) with (m - i)^p * high < theta (m: none)."""
    if m**p * high < theta:
        return 0
    i = m + 1 - math.ceil((theta / high) ** (1 / p))  # at most m: no overflow
    i = min(max(i, 0), m)
    while i < m and not (m - i) ** p * high < theta:
        i += 1
    while i > 0 and (m - i + 1) ** p * high < theta:
        i -= 1
    return i


def _kth_smallest(values: list[float], k: int) -> float:
    """The k-th smallest of ``values`` (k >= 1); inf if there are fewer."""
    if k <= 0:
        return 0.0
    if k > len(values):
        return math.inf
    return heapq.nsmallest(k, values)[-1]


# -- the order ----------------------------------------------------------------------------
#: A priority key as time passes, (a, b, c, d, slack): (a + b*t) / (c + d*t) at t seconds from
#: now (c > 0, d >= 0), give or take ``slack``: a straight line for a running job, a hyperbola
#: for a waiting one; None for an infinite key (which stays infinite, behind every finite one).
_KeyCourse = tuple[float, float, float, float, float]


def _course(policy: AdaptivePolicy, plan: Plan) -> _KeyCourse | None:
    job, key = plan.job, plan.key
    if math.isinf(key):
        return None
    if job.running:
        # Proportional to the remaining work, which falls at the grant's speed (mid-resize:
        # not at all).
        left = job.remaining_work
        if left <= 0:
            return (key, 0.0, 1.0, 0.0, 0.0)
        speed = 0.0 if job.pinned else job.speed.throughput(len(job.gpus))
        return (key, -key * speed / left, 1.0, 0.0, REL * key * job.total_work / left)
    # Aging: key = k / (1 + waited / aging_s) = k * aging_s / (aging_s + waited).
    base = max(policy.params.aging_s, 1e-12) + job.queued_s
    return (key * base, 0.0, base, 1.0, REL * key)


def order_holds_until(now: float, courses: Sequence[_KeyCourse | None]) -> float:
    """Until when no two neighbours in the order (the open plans' key ``courses``) can meet: the
    order is made of its neighbours, so it cannot change before one pair does."""
    return now + min(map(_meeting, courses, courses[1:]), default=math.inf)


def _key_at(course: _KeyCourse | None, t: float, side: int) -> float:
    """The key ``t`` seconds from now (may be inf), plus (``side`` +1) or minus (-1) its slack."""
    if course is None:
        return math.inf
    a, b, c, d, slack = course
    if t == math.inf:
        key = b / d if d else (a if b == 0 else math.copysign(math.inf, b))
    else:
        key = (a + b * t) / (c + d * t)
    return key + side * slack


def _meeting(first: _KeyCourse | None, second: _KeyCourse | None) -> float:
    """Seconds from now until ``second`` (behind ``first`` in the order) could come within
    their slack of ``first``: 0 if it is already, inf if never."""
    if first is None or second is None:
        return math.inf  # an infinite key: nothing crosses it
    a1, b1, c1, d1, slack1 = first
    a2, b2, c2, d2, slack2 = second
    if (a1, b1, c1, d1) == (a2, b2, c2, d2):
        return math.inf  # equal keys on equal courses keep their tie-break
    gap = slack1 + slack2
    # second(t) - first(t) - gap, times both (positive) denominators: A t^2 + B t + C.
    qa = b2 * d1 - b1 * d2 - gap * d1 * d2
    qb = a2 * d1 + b2 * c1 - a1 * d2 - b1 * c2 - gap * (c1 * d2 + d1 * c2)
    qc = a2 * c1 - a1 * c2 - gap * c1 * c2
    if not qc > 0:  # already within the slack (or not a number)
        return 0.0
    if qa == 0:
        return -qc / qb if qb < 0 else math.inf
    disc = qb * qb - 4 * qa * qc
    if disc < 0:
        return math.inf
    q = -(qb + math.copysign(math.sqrt(disc), qb)) / 2
    roots = [r for r in (q / qa, qc / q if q else math.inf) if r > 0]
    return min(roots, default=math.inf)


__all__ = [
    "REL",
    "frozen_holds_until",
    "hand_out_holds_for",
    "holds_until",
    "order_holds_until",
    "steady",
]
