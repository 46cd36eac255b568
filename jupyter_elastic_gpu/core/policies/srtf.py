"""``srtf``: shortest remaining time first, with an oracle for the remaining time.

Each job runs at its requested size; the jobs with the least remaining time at that size run
first and preempt longer ones. It knows each job's true remaining work (an oracle no real
scheduler has), so it marks how far ordering alone can go without elasticity.
"""

from __future__ import annotations

from typing import ClassVar

from ..model import Decision, Snapshot
from .base import fixed_size_decision


class SrtfPolicy:
    name: ClassVar[str] = "srtf"
    elastic: ClassVar[bool] = False
    preemptive: ClassVar[bool] = True

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        order = sorted(
            snapshot.jobs,
            key=lambda j: (not j.pinned, j.remaining_time(j.requested_gpus), j.submit_time, j.id),
        )
        size = {j.id: j.requested_gpus for j in snapshot.jobs}
        return fixed_size_decision(snapshot, order, size, why_ahead="less_left", keep_running=False)
