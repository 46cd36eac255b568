"""When each open job will start and end: the policy run forward on the current snapshot.

The live scheduler's snapshot (``scheduler/snapshot.py``) is played forward on a virtual
clock, with no arrivals, through the same ``core.schedule.decide`` (policy and per-user cap)
the scheduler calls: each job's speed model is taken as its true speed, its measured resize
cost as the pause of every start and resize, and its progress as where it stands. A decision
is made now, when a job finishes, and at every tick while someone waits or could grow (the
policy's aging and cool-downs depend on time). What the forward run says is an estimate: it
knows nothing of jobs still to come or of speeds not measured yet.

The work is bounded whatever the snapshot: at most ``max_decisions`` decisions within
``horizon_s`` simulated seconds. The first half of them are made at every finish, as the
scheduler would: the head of the queue, whose users wait soonest, is estimated exactly. If the
run needs more, the rest are spaced: two at least a gap apart that lets them cover twice what
is left of the jobs' lower bound of time (their GPU-time over every usable GPU), so GPUs a job
frees wait that long at most for the next decision, and ticks are never closer than the gap:
the far tail is estimated coarsely rather than not at all. A job the run leaves unstarted or
unfinished within those bounds (one that can never fit, or whose start lies past them) has no
estimate: None, never a guess.

A live caller bounds it further: ``max_jobs`` plays forward only the jobs that hold GPUs and
the first others in the queue's ``order`` (the rest have no estimate), and ``out_of_time``,
asked before each step, ends the run where it stands (the jobs it did not get to have none).
``limits`` says which bounds cut the run short. Pure: no I/O, and no clock but the one a
caller hands in as ``out_of_time``; the same snapshot and time give the same forecast.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..core.model import Job, Snapshot, trusted_job
from ..core.placement import groups, held_kind, mixed
from ..core.policies import Policy
from ..core.reasons import EstimateLimit
from ..core.schedule import decide_together

#: Seconds between two decisions of the forward run while someone waits (at least).
TICK_S = 60.0
#: The most decisions one forecast makes: each costs about one live decision.
MAX_DECISIONS = 400
#: How far ahead a forecast looks (simulated seconds).
HORIZON_S = 30 * 24 * 3600.0
_EPS = 1e-6  # seconds: a job this close to its end is done (times are ~1.7e9)


@dataclass(frozen=True)
class Estimate:
    """``start``: when a job that holds no GPUs now gets them (epoch seconds; None for a job
    that holds GPUs now, or when the run could not say); ``end``: when it finishes (None
    when the run could not say); ``kind``: where kinds are mixed, the kind of GPU it starts
    on (None otherwise)."""

    start: float | None
    end: float | None
    kind: str | None = None


@dataclass(frozen=True)
class Forecast:
    """Estimates by job id, made at ``at``; ``decisions`` the forward run made; ``complete``:
    every job finished within the bounds; ``limits``: the bounds that cut it short;
    ``skipped``: the jobs not played forward (``max_jobs``)."""

    at: float
    estimates: Mapping[str, Estimate]
    decisions: int = 0
    complete: bool = True
    limits: tuple[EstimateLimit, ...] = ()
    skipped: frozenset[str] = frozenset()


class _Run:
    """One job in the forward run: where it stands at the run's clock."""

    __slots__ = (
        "attained",
        "end",
        "gpus",
        "job",
        "last_change",
        "pause_until",
        "queued",
        "resizes",
        "seen",
        "speed",
        "start",
        "start_gpus",
        "work_done",
    )

    def __init__(self, job: Job, now: float) -> None:
        self.job = job
        self.work_done, self.gpus = job.work_done, job.gpus
        self.queued, self.attained, self.resizes = job.queued_s, job.attained_gpu_s, job.resizes
        self.last_change = job.last_change
        self.speed = job.speed.throughput(len(job.gpus))
        # A grant mid-change (a start or a resize) pauses from its change for one resize cost.
        since = job.last_change if job.last_change is not None else now
        self.pause_until = max(now, since + job.resize_cost) if job.pinned else now
        self.start: float | None = None
        self.start_gpus: tuple[str, ...] = ()
        self.end: float | None = None
        #: The job the last decision saw, while only its time waited has changed since.
        self.seen: Job | None = None

    def finish_time(self, t: float) -> float:
        if not self.gpus or self.speed <= 0:
            return math.inf
        left = max(self.job.total_work - self.work_done, 0.0)
        return max(t, self.pause_until) + left / self.speed

    def as_job(self, t: float) -> Job:
        """The job as the policy sees it at ``t`` (built by position without ``Job``'s checks:
        the snapshot's job passed them, and the run keeps the values it changes valid; a third
        of a forecast's time went to ``dataclasses.replace``).

        A job that waits changes only its time waited from one decision to the next: the job
        the last one saw gets it in place, rather than a new job for each of a long queue at
        every decision. That job is the run's own (never the snapshot's), and nothing keeps a
        job past the decision that read it."""
        if self.seen is not None:
            object.__setattr__(self.seen, "queued_s", self.queued)
            return self.seen
        j = self.job
        job = trusted_job(
            j.id,
            j.submit_time,
            j.total_work,
            j.min_gpus,
            j.max_gpus,
            j.requested_gpus,
            self.work_done,
            j.user,
            j.weight,
            j.speed,
            j.resize_cost,
            self.gpus,
            j.started or self.start is not None,
            self.attained,
            self.queued,
            self.resizes,
            self.last_change,
            bool(self.gpus) and t < self.pause_until,
        )
        if not self.gpus:
            self.seen = job
        return job

    def move(self, gpus: tuple[str, ...], t: float) -> None:
        """Carry out a new grant: a start or a resize pauses it for its resize cost."""
        if self.gpus:
            self.resizes += 1
        elif gpus and self.start is None and not self.job.gpus:
            self.start, self.start_gpus = t, gpus
        self.gpus, self.last_change, self.seen = gpus, t, None
        self.speed = self.job.speed.throughput(len(gpus))
        self.pause_until = t + self.job.resize_cost if gpus else t


def forecast(
    policy: Policy,
    snapshot: Snapshot,
    now: float,
    *,
    tick_s: float = TICK_S,
    max_decisions: int = MAX_DECISIONS,
    horizon_s: float = HORIZON_S,
    max_jobs: int | None = None,
    order: Sequence[str] = (),
    out_of_time: Callable[[], bool] = lambda: False,
) -> Forecast:
    """Play ``snapshot`` forward from ``now`` under ``policy``; an estimate for every job it
    plays (at most ``max_jobs``: those that hold GPUs, then the first of ``order``, the queue
    order, then the snapshot's) until ``out_of_time()``."""
    policy = played_forward(policy)
    snapshot, skipped = _bounded(snapshot, max_jobs, order)
    limits: list[EstimateLimit] = ["jobs"] if skipped else []
    runs = {job.id: _Run(job, now) for job in snapshot.jobs}
    if not runs:
        return Forecast(now, {}, limits=tuple(limits), skipped=skipped)
    # Decisions at every finish for the first half of the budget; then at least ``gap``
    # apart: room for a run twice as long as what is left of the jobs' lower bound (GPUs a
    # job frees wait for the next decision, as long as ``gap`` at most).
    gap, tick = 0.0, tick_s
    open_ = dict(runs)
    # The runs that hold GPUs: the only ones that progress or finish, so the only ones a
    # step looks at (most of a long queue just waits).
    busy = {job_id: r for job_id, r in runs.items() if r.gpus}
    group = groups(snapshot.gpus)  # a job runs on one node, of one kind where kinds mix
    t = last = now
    _decide(policy, snapshot, open_, busy, t, group)
    decisions, pending = 1, False  # pending: a job finished since the last decision
    usable = max(len(snapshot.usable_gpus), 1)
    while open_ and decisions < max_decisions:
        if out_of_time():
            limits.append("time")
            break
        if not gap and decisions >= max_decisions // 2:
            gap = 2 * _span(r.as_job(t) for r in open_.values()) / usable
            gap /= max(max_decisions - decisions, 1)
            tick = max(tick_s, gap)
        due = min((r.finish_time(t) for r in busy.values()), default=math.inf)
        if pending:
            due = min(due, last + gap)
        if not _quiet(policy, open_, busy):
            due = min(due, last + tick)
        if due == math.inf or due - now > horizon_s:
            if due != math.inf:
                limits.append("horizon")
            break
        if not pending and not busy:
            break  # nothing runs: nothing will change any more
        due = max(due, t)
        _advance(open_, busy, t, due)
        t = due
        pending = _take_finished(open_, busy, t) or pending
        if open_ and (t >= last + gap or not pending) and (pending or t >= last + tick):
            _decide(policy, snapshot, open_, busy, t, group)
            decisions, last, pending = decisions + 1, t, False
    if open_ and decisions >= max_decisions:
        limits.append("decisions")
    kind_of = {g.id: g.kind for g in snapshot.gpus} if mixed(snapshot.gpus) else None
    estimates = {
        job_id: Estimate(r.start, r.end, kind_of and held_kind(r.start_gpus, kind_of))
        for job_id, r in runs.items()
    }
    complete = not open_ and not skipped
    return Forecast(now, estimates, decisions, complete, tuple(limits), skipped)


def played_forward(policy: Policy) -> Policy:
    """The policy a forward run plays for ``policy``: itself, or where it chooses between modes
    by playing forward itself (``adaptive`` with ``lookahead``), the mode it follows now."""
    played = getattr(policy, "played_forward", None)
    return played() if played is not None else policy


def _bounded(
    snapshot: Snapshot, max_jobs: int | None, order: Sequence[str]
) -> tuple[Snapshot, frozenset[str]]:
    """``snapshot`` with at most ``max_jobs`` jobs (every one that holds GPUs, then the first
    of ``order``, then the snapshot's own order), and the ids of those left out."""
    if max_jobs is None or len(snapshot.jobs) <= max_jobs:
        return snapshot, frozenset()
    by_id = {job.id: job for job in snapshot.jobs}
    kept = {job.id for job in snapshot.jobs if job.gpus}
    for job_id in (*order, *by_id):
        if len(kept) >= max_jobs:
            break
        if job_id in by_id:
            kept.add(job_id)
    jobs = tuple(job for job in snapshot.jobs if job.id in kept)
    return replace(snapshot, jobs=jobs), frozenset(by_id) - kept


def _span(jobs: Iterable[Job]) -> float:
    """The GPU-seconds the jobs still need at their minimum (over the usable GPUs: a lower
    bound of how long they take)."""
    total = 0.0
    for job in jobs:
        r = job.remaining_time(job.min_gpus)
        total += job.min_gpus * r if math.isfinite(r) else 0.0
    return total


def _take_finished(open_: dict[str, _Run], busy: dict[str, _Run], t: float) -> bool:
    """Take out the jobs done by ``t`` (their GPUs are free for the next decision); True if
    any."""
    done = [job_id for job_id, r in busy.items() if r.finish_time(t) <= t + _EPS]
    for job_id in done:
        r = open_.pop(job_id)
        del busy[job_id]
        r.end, r.gpus, r.speed = t, (), 0.0
    return bool(done)


def _advance(open_: dict[str, _Run], busy: dict[str, _Run], t: float, until: float) -> None:
    dt = until - t
    for r in open_.values():
        if not r.gpus:
            r.queued += dt
    for r in busy.values():
        r.attained += dt * len(r.gpus)
        productive = until - max(t, r.pause_until)
        if productive > 0:
            r.work_done = min(r.job.total_work, r.work_done + productive * r.speed)


def _quiet(policy: Policy, open_: dict[str, _Run], busy: dict[str, _Run]) -> bool:
    """Nobody waits and nobody could grow: no tick can change anything."""
    if len(busy) < len(open_):
        return False
    return not policy.elastic or all(len(r.gpus) >= r.job.max_gpus for r in busy.values())


def _decide(
    policy: Policy,
    snapshot: Snapshot,
    open_: dict[str, _Run],
    busy: dict[str, _Run],
    t: float,
    group: Mapping[str, str],
) -> None:
    """One decision at ``t`` on the open jobs as they stand, carried out: a waiting job given
    GPUs it cannot start on (not together, ``group``) gets none and the others are decided
    again without it, as the live scheduler does (``decide_together``)."""
    jobs = tuple([r.as_job(t) for r in open_.values()])
    decision = decide_together(policy, replace(snapshot, jobs=jobs), t, group).decision
    for job_id, gpus in decision.allocations.items():
        r = open_[job_id]
        if gpus == r.gpus or set(gpus) == set(r.gpus):  # (most jobs keep waiting)
            continue
        r.move(tuple(gpus), t)
        if r.gpus:
            busy[job_id] = r
        else:
            busy.pop(job_id, None)


__all__ = [
    "HORIZON_S",
    "MAX_DECISIONS",
    "TICK_S",
    "Estimate",
    "Forecast",
    "forecast",
    "played_forward",
]
