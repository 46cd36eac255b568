"""``tiresias``: discretised two-dimensional least-attained-service (2D-LAS).

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019. A job's
attained service is GPUs x time it has run; jobs sit in priority queues by attained service
(thresholds in GPU-seconds), FIFO inside a queue, and the highest queues run first at their
requested size. Preemptive, not elastic. The default single threshold of 16 GPU-hours matches
the configuration of the Pollux simulator (Qiao et al., OSDI 2021), so results compare.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import ClassVar

from ..model import Decision, Snapshot
from .base import fixed_size_decision


class TiresiasPolicy:
    name: ClassVar[str] = "tiresias"
    elastic: ClassVar[bool] = False
    preemptive: ClassVar[bool] = True

    def __init__(self, thresholds_gpu_s: Sequence[float] = (16 * 3600.0,)) -> None:
        self.thresholds = sorted(thresholds_gpu_s)

    def queue(self, attained_gpu_s: float) -> int:
        return bisect.bisect_right(self.thresholds, attained_gpu_s)

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        order = sorted(
            snapshot.jobs,
            key=lambda j: (not j.pinned, self.queue(j.attained_gpu_s), j.submit_time, j.id),
        )
        size = {j.id: j.requested_gpus for j in snapshot.jobs}
        return fixed_size_decision(
            snapshot, order, size, why_ahead="less_service", keep_running=False
        )
