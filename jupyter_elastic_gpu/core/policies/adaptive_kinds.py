"""The hand-out of an ``adaptive`` decision where the GPUs are of several kinds: each job's
count and kind chosen together.

Blind to kinds, the hand-out would weigh every GPU alike and leave placement to fit the counts
to kinds afterwards: a job promised 8 GPUs that lands on the slow kind goes at a quarter of the
pace the count was chosen for, and which job gets the fast kind depends on who happens to be
placed first. Here each kind is a pool of its own, and a move takes a job to a count *on one
kind* (data parallel across kinds goes at the slower kind's pace: one kind per job).

What a GPU of a kind is worth to a job is its speed there (``core.kinds``) over the kind's
*price*: what that kind is worth to the jobs at hand on average (each job's speeds on the kinds,
over their geometric mean, averaged geometrically over the jobs). So the greedy hand-out, best
value gained per GPU first, gives the fast kind to the jobs that gain more than the others from
it (comparative advantage: a job 6x as fast on an A100 as on a T4 takes the A100 before one
only 2x as fast, which goes to the T4s or RTXs at less loss), and a job's place in the order
still decides who goes first. A running job leaves its kind as it leaves its count: the move is
charged the resize penalty; to a faster kind only where it is at least ``MOVE_GAIN`` times as
fast (a restart, and a speed known only from a prior is an estimate), never to a slower one
(it shrinks or is suspended on its own kind instead). Prices say what a kind is worth to the
others; GPUs nobody took cost nothing, so after the hand-out a job moves to idle GPUs of a kind
``MOVE_GAIN`` times as fast for it (a job alone on the cluster sees prices equal to its own
speeds, and would otherwise stay on the slow kind).

What it gained over the hand-out blind to kinds, and the variants that did not help:
docs/benchmarks.md, "Sia's mixed cluster".

Pure: the decision's plans and the free GPUs of each kind in, the counts (on the plans) and each
job's kind out.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import Job, Snapshot
from ..placement import MOVE_GAIN, describe_kinds, groups, held_kind
from ..reasons import Apart

if TYPE_CHECKING:
    from .adaptive import _Plan

_EPS = 1e-12


class _Choice:
    """One job's values on each kind it may take (``vals[kind][g]``), and where it stands."""

    __slots__ = ("allowed", "held_kind", "kind", "plan", "speeds", "vals")

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan
        self.kind: str | None = None
        self.held_kind: str | None = None
        self.allowed: list[str] = []
        self.vals: dict[str, list[float]] = {}
        self.speeds: Mapping[str, float] = {}


def free_by_kind(snapshot: Snapshot, kept: Sequence[Job]) -> dict[str, int]:
    """Usable GPUs of each kind that the ``kept`` jobs (whose grants stand) do not hold."""
    taken = {g for job in kept for g in job.gpus}
    out: dict[str, int] = {}
    for gpu in snapshot.usable_gpus:
        out[gpu.kind] = out.get(gpu.kind, 0) + (gpu.id not in taken)
    return out


def prices(speeds: Sequence[Mapping[str, float]], kinds: Sequence[str]) -> dict[str, float]:
    """Each kind's price: the geometric mean over the jobs of their speed there over their
    geometric mean over ``kinds`` (1.0 for every kind where no job says anything)."""
    logs = {k: 0.0 for k in kinds}
    n = 0
    for rel in speeds:
        if not rel or any(rel.get(k, 0.0) <= 0 for k in kinds):
            continue
        mean = sum(math.log(rel[k]) for k in kinds) / len(kinds)
        for k in kinds:
            logs[k] += math.log(rel[k]) - mean
        n += 1
    return {k: math.exp(v / n) if n else 1.0 for k, v in logs.items()}


def hand_out(
    plans: list[_Plan],
    snapshot: Snapshot,
    free: dict[str, int],
    margin: float,
    weights: Sequence[float],
) -> dict[str, str]:
    """Hand out ``free`` GPUs of each kind (updated) to ``plans`` (in the order; ``weights``
    theirs), best value gained per GPU first; sets each plan's ``count`` and returns each
    job's kind (jobs with no GPUs left out). A plan that starts with a count (a reservation on
    the critical path) is given a kind first, and keeps what fits of its count there."""
    kind_of = {g.id: g.kind for g in snapshot.gpus}
    kinds = sorted(free)
    rel = [_speeds(p, snapshot, kinds) for p in plans]
    price = prices(rel, kinds)
    choices = []
    for plan, speeds, weight in zip(plans, rel, weights, strict=True):
        plan.weight = weight
        choices.append(_prepare(plan, speeds, price, margin, kind_of))
    # Reservations (counts set before the hand-out) first, in the order: their kind now.
    for c in choices:
        if c.plan.count:
            _reserve(c, free)
    heap: list[tuple[float, int, str, int, int]] = []
    for i, c in enumerate(choices):
        move = _best_move(c, free)
        if move:
            heap.append((-move[0], i, move[1], move[2], c.plan.count))
    heapq.heapify(heap)
    while heap and any(free.values()):
        _, i, kind, target, at = heapq.heappop(heap)
        c = choices[i]
        plan = c.plan
        if at != plan.count or (c.kind not in (None, kind)) or target - at > free[kind]:
            move = _best_move(c, free)
            if move:
                heapq.heappush(heap, (-move[0], i, move[1], move[2], plan.count))
            continue
        free[kind] -= target - at
        plan.count, c.kind = target, kind
        move = _best_move(c, free)
        if move:
            heapq.heappush(heap, (-move[0], i, move[1], move[2], target))
    _upgrade(choices, free)
    return {c.plan.job.id: c.kind for c in choices if c.plan.count and c.kind is not None}


def _speeds(plan: _Plan, snapshot: Snapshot, kinds: Sequence[str]) -> dict[str, float]:
    """The job's speed on each kind (``Snapshot.kind_speed``); alike where nothing is known."""
    known = snapshot.kind_speed.get(plan.job.id) or {}
    return {k: known.get(k, 0.0) or 1.0 for k in kinds} if known else dict.fromkeys(kinds, 1.0)


def _prepare(
    plan: _Plan,
    speeds: Mapping[str, float],
    price: Mapping[str, float],
    margin: float,
    kind_of: Mapping[str, str],
) -> _Choice:
    """The job's values on each kind it may take: its weighted speed-up (as the hand-out blind
    to kinds works it out) times its speed there over the kind's price, less the resize penalty
    at every kind and count but the ones it holds."""
    c = _Choice(plan)
    c.speeds = speeds
    x_min = plan.x_lo
    scale = plan.weight * plan.job.min_gpus / x_min if x_min > 0 else 0.0
    held = len(plan.job.gpus)
    c.held_kind = here = held_kind(plan.job.gpus, kind_of) if held else None
    if here not in speeds:
        here = None  # (none of its kind is usable now: it moves wherever it goes)
    mean = math.exp(sum(math.log(v) for v in speeds.values()) / len(speeds))
    worth = {k: speeds[k] / mean / price[k] for k in speeds}
    penalty = plan.penalty(margin) * (worth[here] if here else 1.0)
    curve = plan.reach()
    if here is None:
        c.allowed = list(speeds)
    elif plan.frozen:
        c.allowed = [here]
    else:
        c.allowed = [k for k in speeds if k == here or speeds[k] >= MOVE_GAIN * speeds[here]]
    for k in c.allowed:
        vals = [scale * worth[k] * x - penalty for x in curve]
        if k == here and held < len(vals):
            vals[held] += penalty
        c.vals[k] = vals
    return c


def _reserve(c: _Choice, free: dict[str, int]) -> None:
    """A reservation's kind: of those with room for its count, the one where that count is
    worth most to it (priced as in the hand-out, less the penalty for leaving the kind it
    holds); else the roomiest with room for its minimum, its count cut to what is free there;
    else none (its reservation dropped: the hand-out weighs it like any other)."""
    plan = c.plan
    need, lo = plan.count, plan.job.min_gpus
    fits = [k for k in c.allowed if free[k] >= need and need < len(c.vals[k])]
    if fits:
        kind = max(fits, key=lambda k: (c.vals[k][need], k == c.held_kind, k))
    else:
        room = [k for k in c.allowed if free[k] >= lo]
        if not room:
            plan.count, plan.critical = 0, False
            return
        kind = max(room, key=lambda k: (free[k], k))
        plan.count = min(need, free[kind], len(c.vals[kind]) - 1)
    c.kind = kind
    free[kind] -= plan.count
    plan.start = plan.count


def _best_move(c: _Choice, free: Mapping[str, int]) -> tuple[float, str, int] | None:
    """The best (value gained per GPU, kind, count) above the job's count: on its kind once it
    has GPUs, on any kind it may take before."""
    plan = c.plan
    a, lo = plan.count, plan.job.min_gpus
    kinds = [c.kind] if a and c.kind is not None else c.allowed
    best: tuple[float, str, int] | None = None
    bar = _EPS
    for k in kinds:
        vals = c.vals[k]
        top = min(a + free[k], len(vals) - 1)
        first = a + 1 if a >= lo else lo
        here = vals[a] if a < len(vals) else vals[-1]
        for g in range(first, top + 1):
            ratio = (vals[g] - here) / (g - a)
            if ratio > bar:
                best, bar = (ratio, k, g), ratio + _EPS
    return best


def apart(
    snapshot: Snapshot, allocations: Mapping[str, Sequence[str]]
) -> Callable[[Job], Apart | None]:
    """Why a job the hand-out gave nothing waits where as many GPUs as it needs stay free: not
    that many are of one kind on one server (None for a job this does not hold for)."""
    taken = {g for ids in allocations.values() for g in ids}
    idle = [g for g in snapshot.usable_gpus if g.id not in taken]
    group = groups(snapshot.gpus)
    widest = max(Counter(group[g.id] for g in idle).values(), default=0)
    kinds = describe_kinds(g.kind for g in idle)

    def why(job: Job) -> Apart | None:
        if not widest < job.min_gpus <= len(idle):
            return None
        return Apart(job.min_gpus, len(idle), widest, kinds, job.started)

    return why


def _upgrade(choices: list[_Choice], free: dict[str, int]) -> None:
    """GPUs left over after the hand-out cost nobody anything: a job moves to a kind with room
    for its whole count where it goes ``MOVE_GAIN`` times as fast (those that gain most from
    it first), whatever the prices said, and even in its cooldown (idle fast GPUs are worth
    the restart)."""
    placed = [c for c in choices if c.plan.count and c.kind is not None]
    placed.sort(key=lambda c: -max(c.speeds.values()) / c.speeds[c.kind])
    for c in placed:
        n, here = c.plan.count, c.kind
        room = [
            k
            for k in c.speeds
            if k != here and free[k] >= n and c.speeds[k] >= MOVE_GAIN * c.speeds[here]
        ]
        if room:
            kind = max(room, key=lambda k: (c.speeds[k], k))
            free[here] += n
            free[kind] -= n
            c.kind = kind


__all__ = ["apart", "free_by_kind", "hand_out", "prices"]
