"""``adaptive`` with ``lookahead``: which of its two modes to follow, chosen by playing the open
jobs forward under each (model-predictive control).

The critical path first (``protect_critical``) buys makespan with mean JCT; the order alone the
reverse. Where the set of open jobs changes (an arrival, a completion), both modes are played
forward from the snapshot (``sim.forecast``: the policy itself on a virtual clock, no
arrivals), and the one with the smaller makespan^w x mean JCT over the present jobs is followed
until the set changes again (w: ``makespan_weight``). A forward run that does not end every job
within its bounds says nothing: the critical path is followed then. Past ``ROLLOUT_JOBS`` open
jobs no choice is made and the mode followed stays.

Why a choice per set of jobs and not per decision: between two changes of the set only time
passes, which the forward runs have already played; and a decision held by its promise
(``Decision.holds_until``) stays the decision of the mode that made it. The policy object keeps
its last few choices by set of jobs (each job's id, submission and work): a decision made again
without the jobs that cannot start together (``core.schedule.decide_together``) has a set of
its own and must not undo the choice of the whole one. docs/policies.md has the figures, and
what it costs.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..model import Decision, Snapshot
from .base import Policy

if TYPE_CHECKING:
    from .adaptive import AdaptivePolicy

#: Decisions each forward run may make: the far tail of a long queue is played coarsely (the
#: forecast spaces the second half of its decisions), which the choice can afford.
ROLLOUT_DECISIONS = 150
#: With more open jobs than this, no choice is made (the mode followed stays): two forward runs
#: of 200 jobs on 64 GPUs take about 0.16 s of the decision that makes them, and a live
#: scheduler decides on its event loop.
ROLLOUT_JOBS = 200
#: Choices remembered (by set of jobs).
REMEMBERED = 4


class Lookahead:
    """The choice between ``critical`` (the critical path first) and ``order`` (the order alone),
    both plain ``adaptive`` policies, by ``makespan_weight``."""

    def __init__(
        self, critical: AdaptivePolicy, order: AdaptivePolicy, makespan_weight: float
    ) -> None:
        self.critical, self.order, self.weight = critical, order, makespan_weight
        self._chosen: OrderedDict[frozenset[tuple[str, float, float]], AdaptivePolicy] = (
            OrderedDict()
        )
        #: Choices made by playing forward, and the forward runs they made (two each, one where
        #: the first says nothing): what the choosing has cost.
        self.choices = self.rollouts = 0

    def current(self) -> AdaptivePolicy:
        """The mode followed since the last choice (the critical path before any)."""
        return next(reversed(self._chosen.values()), self.critical)

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        # (ids alone could match another run's jobs where one policy plays several workloads)
        key = frozenset((job.id, job.submit_time, job.total_work) for job in snapshot.jobs)
        mode = self._chosen.get(key)
        if mode is None:
            affordable = len(snapshot.jobs) <= ROLLOUT_JOBS
            mode = self._choose(snapshot, now) if affordable else self.current()
            self._chosen[key] = mode
            if len(self._chosen) > REMEMBERED:
                self._chosen.popitem(last=False)
        else:
            self._chosen.move_to_end(key)
        return mode.decide(snapshot, now)

    def _choose(self, snapshot: Snapshot, now: float) -> AdaptivePolicy:
        if not snapshot.jobs:
            return self.critical
        self.choices += 1
        critical = self._outcome(self.critical, snapshot, now)
        order = None if critical is None else self._outcome(self.order, snapshot, now)
        if critical is None or order is None:
            return self.critical
        return self.order if order < critical else self.critical

    def _outcome(self, mode: AdaptivePolicy, snapshot: Snapshot, now: float) -> float | None:
        """w x log(makespan from now) + log(mean JCT) of the present jobs under ``mode``; None
        when the forward run leaves some job without an end."""
        self.rollouts += 1
        played = outcome(mode, snapshot, now, ROLLOUT_DECISIONS)
        if played is None:
            return None
        last, mean = played
        span = last - now
        if span <= 0 or mean <= 0:
            return None
        return self.weight * math.log(span) + math.log(mean)


def outcome(
    policy: Policy, snapshot: Snapshot, now: float, decisions: int
) -> tuple[float, float] | None:
    """(the last end, the mean JCT) of the present jobs played forward under ``policy`` from
    ``now`` (``sim.forecast``, at most ``decisions``); None when some job is left without an
    end, or there are no jobs."""
    # The forward run is the simulator's (pure, no I/O); imported here because it plays
    # ``core`` policies itself.
    from ...sim.forecast import forecast

    if not snapshot.jobs:
        return None
    ahead = forecast(policy, snapshot, now, max_decisions=decisions)
    last, jct = now, 0.0
    for job in snapshot.jobs:
        guess = ahead.estimates.get(job.id)
        if guess is None or guess.end is None:
            return None
        last = max(last, guess.end)
        jct += guess.end - job.submit_time
    return last, jct / len(snapshot.jobs)


__all__ = ["REMEMBERED", "ROLLOUT_DECISIONS", "ROLLOUT_JOBS", "Lookahead", "outcome"]
