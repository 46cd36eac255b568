"""The critical path's part of an ``adaptive`` decision: the jobs on it
(``core.policies.critical``) get the GPUs they need before the hand-out weighs anyone, and the
decision learns how long those reservations keep fitting (for its ``Decision.holds_until``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .adaptive_params import AdaptiveParams
from .critical import CriticalPath, critical_path

if TYPE_CHECKING:
    from .adaptive import _Plan


def reserve(
    params: AdaptiveParams, plans: list[_Plan], committed: tuple[float, int], total: int, free: int
) -> tuple[int, bool, CriticalPath | None, float]:
    """Give the jobs on the critical path (``critical``) the GPUs they need, before any
    other; returns the GPUs left, whether every reservation fitted (if not, which did
    depends on their order), the path, and in how many seconds enough running jobs could
    come to end within the slack (below) to change what fits."""
    p = params
    path = critical_path(
        [plan.job for plan in plans],
        committed[0],
        total,
        p.critical_slack,
        p.horizon_slack,
        p.queue_slack,
        committed[1],
        [plan.rem for plan in plans],
        options=[plan.options for plan in plans],
    )
    reservations = path.reservations if path else []
    if not reservations:
        return free, True, path, math.inf
    reserved = {r.job.id for r in reservations}
    by_id = {plan.job.id: plan for plan in plans if plan.job.id in reserved}
    # A reservation never suspends a running job that ends within critical_slack of the
    # horizon anyway: starting the critical job that much later costs the makespan no
    # more than the slack allows, where suspending the short job would cost it the whole
    # critical job's run (a 5-minute job stopped for one of days).
    soon = p.critical_slack * path.earliest
    kept_for: dict[str, int] = {}
    # The horizon only falls while nothing but progress happens, so a running job ends
    # within the slack no sooner than at its time left less today's slack.
    coming: list[tuple[float, int]] = []  # (in how many seconds, GPUs it would keep)
    for plan in [plan for plan in plans if plan.job.gpus]:
        job = plan.job
        left = plan.left
        if left <= soon:
            kept_for[job.id] = job.min_gpus
        else:
            coming.append((left - soon, job.min_gpus))
    kept = sum(kept_for.values())
    fitted = True
    room = math.inf  # the fewest GPUs to spare of any reservation
    for r in reservations:
        plan = by_id[r.job.id]
        need, held = r.gpus, len(r.job.gpus)
        if plan.frozen and held:
            need = min(need, held)  # resized moments ago: it may shrink, not grow
        own = kept_for.get(r.job.id, 0)
        spare = free - (kept - own) - need
        if spare >= 0:
            plan.count, plan.critical = need, True
            free -= need
            kept -= own
            room = min(room, spare)
        else:
            fitted = False
    # Every reservation still fits until the GPUs kept for jobs about to end grow past the
    # room to spare (a job kept ahead of its own reservation takes none of that room:
    # counting it is on the safe side).
    changes_in = math.inf
    for seconds, gpus in sorted(coming):
        room -= gpus
        if room < 0:
            changes_in = seconds
            break
    return free, fitted, path, changes_in


__all__ = ["reserve"]
