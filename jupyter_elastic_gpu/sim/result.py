"""What a simulation run leaves (``SimResult``): every job's start and finish, the GPUs in use
over time, per user too, and the decisions made; with the figures a comparison reports."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field


@dataclass
class SimResult:
    policy: str
    mechanism: str
    jobs: list[dict]
    timeline: list[tuple[float, int]]
    total_gpus: int
    resizes: int
    lost_gpu_s: float
    #: Decisions made; ``skipped``: ticks that took the last decision, which held.
    decisions: int
    skipped: int = 0
    #: Decisions made, by why they were asked for (``sim.engine.ON_EVENT`` ...).
    decided_on: dict[str, int] = field(default_factory=dict)
    #: The most GPUs each user's jobs held at once (after any decision).
    user_peak_gpus: dict[str, int] = field(default_factory=dict)
    #: (time, {user: GPUs held}) at every change: each user's share over time.
    user_timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    def user_shares(self, buckets: int = 10) -> dict:
        """Each user's mean share of the GPUs in ``buckets`` equal slices of the run:
        {"times": [slice start, s], "users": {user: [fraction of all GPUs, ...]}}."""
        start = min(j["submit_s"] for j in self.jobs)
        end = max(j["finish_s"] for j in self.jobs)
        users = sorted({j["user"] for j in self.jobs})
        width = (end - start) / buckets if end > start else 1.0
        acc = {u: [0.0] * buckets for u in users}
        points = [*self.user_timeline, (end, {})]
        for (t0, held), (t1, _) in itertools.pairwise(points):
            for b in range(buckets):
                lo, hi = start + b * width, start + (b + 1) * width
                overlap = min(t1, hi) - max(t0, lo)
                if overlap > 0:
                    for u, n in held.items():
                        acc[u][b] += overlap * n
        scale = width * self.total_gpus
        return {
            "times": [start + b * width for b in range(buckets)],
            "users": {u: [x / scale for x in acc[u]] for u in users},
        }

    def users(self) -> dict[str, dict]:
        """Per user: GPU-seconds held (pauses included) and the most GPUs held at once."""
        held: dict[str, float] = {}
        for j in self.jobs:
            held[j["user"]] = held.get(j["user"], 0.0) + j["gpu_s"]
        return {
            user: {"gpu_s": held[user], "peak_gpus": self.user_peak_gpus.get(user, 0)}
            for user in sorted(held)
        }

    @property
    def makespan_s(self) -> float:
        return max(j["finish_s"] for j in self.jobs) - min(j["submit_s"] for j in self.jobs)

    def summary(self) -> dict:
        jcts = sorted(j["jct_s"] for j in self.jobs)
        busy = sum(
            (t1 - t0) * used for (t0, used), (t1, _) in zip(self.timeline, self.timeline[1:])
        )
        span = self.makespan_s
        return {
            "mechanism": self.mechanism,
            "makespan_s": span,
            "mean_jct_s": sum(jcts) / len(jcts),
            "median_jct_s": _quantile(jcts, 0.5),
            "p95_jct_s": _quantile(jcts, 0.95),
            "utilization": busy / (self.total_gpus * span) if span > 0 else 0.0,
            "resizes": self.resizes,
            "lost_gpu_s": self.lost_gpu_s,
            "decisions": self.decisions,
            "skipped_decisions": self.skipped,
            "users": self.users(),
            "user_shares": self.user_shares(),
            "jobs": self.jobs,
        }


def _quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default method)."""
    pos = (len(values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


__all__ = ["SimResult"]
