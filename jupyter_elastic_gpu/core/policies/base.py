"""What every policy shares: the interface, and admission of fixed-size jobs in an order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Protocol

from ..model import Decision, Job, Snapshot
from ..placement import place
from ..reason_kinds import Ahead
from ..reasons import Reason, Running, Waiting


class Policy(Protocol):
    """A scheduling policy: a function of the snapshot and the time (``adaptive`` with
    ``lookahead`` also of the choices it made at earlier changes of the jobs:
    ``core.policies.lookahead``).

    ``elastic`` says whether it changes the GPU count of a running job; ``preemptive`` whether it
    may take all GPUs from a running job. Both are facts shown in reports, not switches.
    """

    name: ClassVar[str]
    elastic: ClassVar[bool]
    preemptive: ClassVar[bool]

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        """The allocation, a reason per job and the jobs' priority order (``Decision.order``).

        Drivers call ``core.schedule.decide(policy, snapshot, now)``, which adds the rules every
        policy shares (the per-user GPU cap), rather than this directly.
        """
        ...


#: Why the jobs that hold the GPUs come first: one cause for all of them ("earlier": submitted
#: earlier), or a function of the holder.
WhyAhead = Ahead | Callable[[Job], Ahead]


def queued_reason(
    job: Job, needed: int, free: int, ahead: Sequence[Job], why_ahead: WhyAhead
) -> Waiting:
    """What a user reads while waiting: what is needed, what is free, who holds the GPUs.

    ``ahead`` are the jobs that hold GPUs in this decision (the waiting job is not one of them).
    """
    why = why_ahead if callable(why_ahead) else (lambda _: why_ahead)
    holders = tuple((other.id, why(other)) for other in ahead if other.id != job.id)
    return Waiting(needed, free, holders, suspended=job.started)


def whole_grants_first(jobs: Iterable[Job], snapshot: Snapshot) -> list[Job]:
    """``jobs`` in the same order, except that those holding a GPU that turned busy come after
    the others: such a job restarts anyway, and its broken grant must not take the place of a
    whole one that is kept as is."""
    usable = {g.id for g in snapshot.usable_gpus}
    return sorted(jobs, key=lambda j: not usable.issuperset(j.gpus))


def fixed_size_decision(
    snapshot: Snapshot,
    order: Iterable[Job],
    size: dict[str, int],
    why_ahead: WhyAhead,
    keep_running: bool,
) -> Decision:
    """Admit jobs at a fixed size each, in ``order``, skipping those that do not fit (backfill).

    With ``keep_running`` a running job is never touched (non-preemptive): it is admitted first
    at its current grant. Otherwise a running job that does not fit in order is preempted.
    """
    total = len(snapshot.usable_gpus)
    ordered = whole_grants_first(order, snapshot)
    counts: dict[str, int] = {}
    free = total
    admitted: list[Job] = []
    if keep_running:
        for job in ordered:
            # A grant on GPUs that turned busy is kept at its size only while that many usable
            # GPUs remain (placement moves it off the busy ones); otherwise it waits in order.
            if (job.running or job.pinned) and len(job.gpus) <= free:
                counts[job.id] = len(job.gpus)
                free -= len(job.gpus)
                admitted.append(job)
    for job in ordered:
        if job.id in counts:
            continue
        want = len(job.gpus) if job.pinned else size[job.id]
        if want <= free:
            counts[job.id] = want
            free -= want
            admitted.append(job)
        else:
            counts[job.id] = 0
    allocations = place(
        snapshot.gpus,
        {j.id: j.gpus for j in snapshot.jobs},
        counts,
        [j.id for j in ordered],
        snapshot.kind_speed,
        {j.id: j.min_gpus for j in snapshot.jobs},
    )
    reasons: dict[str, Reason] = {}
    for job in ordered:
        n = len(allocations[job.id])
        if n:
            reasons[job.id] = Running(n)
        else:
            reasons[job.id] = queued_reason(job, size[job.id], free, admitted, why_ahead)
    return Decision(allocations, reasons, tuple(j.id for j in ordered))
