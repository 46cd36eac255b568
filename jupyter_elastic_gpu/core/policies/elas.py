"""``elas``: E-LAS, least attained service weighted by epoch progress.

Sultana et al., "E-LAS: Design and Analysis of Completion-Time Agnostic Scheduling for
Distributed Deep Learning Cluster", ICPP 2020. Like Tiresias it needs no estimate of run time,
but it discounts a job's attained service by how far it has progressed through its epochs, so a
job close to its last epoch is not pushed back by the service it already received. Our reading:
score = attained GPU-seconds x (1 - fraction of the work done); like Tiresias the score is
discretised into priority queues (same thresholds) with FIFO inside a queue, which keeps jobs
of similar score from preempting each other at every tick; requested size, preemptive, not
elastic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ..model import Decision, Job, Snapshot
from .base import fixed_size_decision
from .tiresias import TiresiasPolicy


def elas_score(job: Job) -> float:
    done = job.work_done / job.total_work if job.total_work > 0 else 1.0
    return job.attained_gpu_s * (1.0 - min(done, 1.0))


class ElasPolicy:
    name: ClassVar[str] = "elas"
    elastic: ClassVar[bool] = False
    preemptive: ClassVar[bool] = True

    def __init__(self, thresholds_gpu_s: Sequence[float] = (16 * 3600.0,)) -> None:
        self.queues = TiresiasPolicy(thresholds_gpu_s)

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        order = sorted(
            snapshot.jobs,
            key=lambda j: (not j.pinned, self.queues.queue(elas_score(j)), j.submit_time, j.id),
        )
        size = {j.id: j.requested_gpus for j in snapshot.jobs}
        return fixed_size_decision(
            snapshot,
            order,
            size,
            why_ahead="less_weighted",
            keep_running=False,
        )
