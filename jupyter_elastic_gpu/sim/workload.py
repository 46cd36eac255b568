"""What the simulator replays: job specs with their true speed, read from a trace."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .traces.goodput import GoodputBatching


#: How a trace's jobs get their batch size: ``fixed``, each its row's; ``goodput``, chosen at
#: each (re)start from the gradient statistics (``traces.goodput``; Pollux traces only).
BATCH_POLICIES = ("fixed", "goodput")


class TraceError(ValueError):
    """Bad input in a workload file; the message names the file, row and column."""

    def __init__(self, path: str, message: str, row: int | None = None, column: str | None = None):
        self.path, self.row, self.column, self.detail = path, row, column, message
        where = str(path)
        if row is not None:
            where += f", row {row}"
        if column is not None:
            where += f", column '{column}'"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class JobSpec:
    """One job of a workload.

    ``profile`` maps GPU counts to throughput (work units per second): the simulator's truth,
    and the prior the policies start from. ``placement_speed``, where a trace has measurements
    per placement, gives the true throughput for GPUs spread over nodes (a tuple of GPUs per
    node, e.g. (4, 2)); without it the profile's value for the total count is used.
    ``batching``, where the job's batch is chosen by goodput (``traces.goodput``), chooses the
    batch at each (re)start: work is then progress, and the speed depends on how far it got.

    Where the cluster's GPUs are of several kinds, ``kind_speed`` and ``kind_batching`` are
    the same per kind (``placement_speed``/``batching`` are then its first kind's), and
    ``kind_prior`` its speed on one GPU of each kind: what a short profile of the job on each
    kind tells a policy before it has run there (Sia profiles every job so).

    ``restart_s``, where the trace says what a (re)start of this job's application takes (Sia's
    per-application restart times: an ImageNet job's 250 s, a CIFAR-10 job's 50 s), is the pause
    of its first start and of every change of its GPUs, and the resize cost its policy is told;
    None: the run's (``SimConfig.start_cost_s``, the mechanism's pause).
    """

    job_id: str
    submit_time: float
    work: float
    profile: Mapping[int, float]
    min_gpus: int = 1
    max_gpus: int = 1
    requested_gpus: int = 1
    user: str = "default"
    profile_name: str = ""
    placement_speed: Callable[[tuple[int, ...]], float] | None = field(
        default=None, compare=False, repr=False
    )
    batching: GoodputBatching | None = field(default=None, compare=False, repr=False)
    kind_speed: Mapping[str, Callable[[tuple[int, ...]], float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    kind_batching: Mapping[str, GoodputBatching] = field(
        default_factory=dict, compare=False, repr=False
    )
    kind_prior: Mapping[str, float] = field(default_factory=dict, compare=False)
    restart_s: float | None = None

    def __post_init__(self) -> None:
        r = self.restart_s
        if r is not None and not (math.isfinite(r) and r >= 0):
            raise ValueError(f"job {self.job_id}: a restart must take 0 or more seconds, got {r}")

    def pace(self, kinds: Collection[str]) -> str | None:
        """The kind a grant of GPUs of ``kinds`` goes at: the slowest of them for this job
        (data parallel waits for its slowest replica); None where the job has one speed."""
        known = [k for k in kinds if k in self.kind_speed]
        if not known:
            return None
        return min(known, key=lambda k: (self.kind_prior.get(k, 0.0), k))

    def true_throughput(self, placement: tuple[int, ...], kind: str | None = None) -> float:
        """Throughput on GPUs spread as ``placement`` (GPUs per node, zeros ignored), of
        ``kind`` where speeds are per kind (None there: the fastest kind's, for bounds)."""
        placement = tuple(sorted((p for p in placement if p > 0), reverse=True))
        if not placement:
            return 0.0
        if self.kind_speed:
            if kind is None:
                return max(speed(placement) for speed in self.kind_speed.values())
            return self.kind_speed[kind](placement)
        if self.placement_speed is not None:
            return self.placement_speed(placement)
        return profile_throughput(self.profile, sum(placement))


def profile_throughput(profile: Mapping[int, float], gpus: int) -> float:
    """Throughput at ``gpus`` from a profile table, interpolating between listed counts."""
    if gpus in profile:
        return float(profile[gpus])
    counts = sorted(profile)
    if not counts or gpus <= 0:
        return 0.0
    if gpus < counts[0]:
        return float(profile[counts[0]]) * gpus / counts[0]
    if gpus > counts[-1]:
        return float(profile[counts[-1]])
    for lo, hi in itertools.pairwise(counts):
        if lo < gpus < hi:
            x0, x1 = profile[lo], profile[hi]
            return float(x0 + (x1 - x0) * (gpus - lo) / (hi - lo))
    raise AssertionError("unreachable")


@dataclass
class Workload:
    """A named list of job specs, sorted by submit time."""

    name: str
    jobs: list[JobSpec]

    def __post_init__(self) -> None:
        self.jobs.sort(key=lambda j: (j.submit_time, j.job_id))

    def __len__(self) -> int:
        return len(self.jobs)
