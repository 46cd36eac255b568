"""``optimus``: marginal-gain elastic allocation.

Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for Deep Learning Clusters",
EuroSys 2018. Every job first gets its minimum in arrival order; each remaining GPU then goes
to the job whose estimated remaining time drops the most with one more GPU,
R(g) - R(g + 1). It reallocates freely: the cost of a resize does not enter its decisions.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

from ..model import Decision, Snapshot
from ..placement import place
from ..reasons import Running
from .base import queued_reason, whole_grants_first


class OptimusPolicy:
    name: ClassVar[str] = "optimus"
    elastic: ClassVar[bool] = True
    preemptive: ClassVar[bool] = True

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        order = sorted(snapshot.jobs, key=lambda j: (not j.pinned, j.submit_time, j.id))
        free = len(snapshot.usable_gpus)
        counts: dict[str, int] = {}
        admitted = []
        admission = whole_grants_first(order, snapshot)
        for job in admission:
            need = len(job.gpus) if job.pinned else job.min_gpus
            counts[job.id] = need if need <= free else 0
            if counts[job.id]:
                free -= need
                admitted.append(job)

        def gain(job, g):
            return job.remaining_time(g) - job.remaining_time(g + 1)

        heap = [
            (-gain(j, counts[j.id]), i, j)
            for i, j in enumerate(admitted)
            if not j.pinned and counts[j.id] < j.max_gpus
        ]
        heapq.heapify(heap)
        while free > 0 and heap:
            neg, i, job = heapq.heappop(heap)
            if -neg <= 0:
                break
            counts[job.id] += 1
            free -= 1
            if counts[job.id] < job.max_gpus:
                heapq.heappush(heap, (-gain(job, counts[job.id]), i, job))
        allocations = place(
            snapshot.gpus,
            {j.id: j.gpus for j in snapshot.jobs},
            counts,
            [j.id for j in order],
            snapshot.kind_speed,
        )
        reasons = {
            j.id: (
                Running(counts[j.id])
                if counts[j.id]
                else queued_reason(j, j.min_gpus, free, admitted, "earlier")
            )
            for j in order
        }
        return Decision(allocations, reasons, tuple(j.id for j in admission))
