"""``static``: what the Kubernetes default scheduler gives a training job.

Each job gets the GPU count it requested, in submission order; a job that does not fit waits
while later, smaller jobs that fit start (backfill). A running job is never resized or
preempted. This is the baseline the SC'20 paper compares against.
"""

from __future__ import annotations

from typing import ClassVar

from ..model import Decision, Snapshot
from .base import fixed_size_decision


class StaticPolicy:
    name: ClassVar[str] = "static"
    elastic: ClassVar[bool] = False
    preemptive: ClassVar[bool] = False

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        order = sorted(snapshot.jobs, key=lambda j: (j.submit_time, j.id))
        size = {j.id: j.requested_gpus for j in snapshot.jobs}
        return fixed_size_decision(snapshot, order, size, why_ahead="earlier", keep_running=True)
