"""Batch sizes chosen by goodput, from a Pollux application's measured gradient statistics.

A job run with ``--batch-policy goodput`` may train at any global batch between its
application's smallest and largest measured batch. Its work is counted in **progress**: steps
of the smallest batch, the unit of the traces (``Application.progress_at``). One step at batch
B in epoch e yields ``efficiency(B, e)`` of progress (Pollux's statistical efficiency), so

    steps at B to go from progress p0 to p1  =  S_B(p1) - S_B(p0),
    S_B(p) = sum over the epochs below p of their progress / efficiency(B, epoch),

piecewise linear in p, and a run at batch B on a placement advances S_B linearly at that
placement's measured steps per second.

A batch change needs a restart here (the batch is the user's code; our sidecar restarts the
trainer to change it), so the batch is chosen only when the GPUs change, and then kept until
they change again. At each (re)start the choice is the batch that finishes the job soonest on
the new GPUs if nothing changes again: the smallest ``(S_B(end) - S_B(p)) / steps per second``.
Pollux instead re-chooses continuously, which it can do without a restart.

The engine advances a job linearly; a run segment's progress is not linear in time (efficiency
changes with the epoch), so a segment reports its **average** rate over the job's remaining
work (exact completion time) and, when it ends, its exact progress (``Segment.progress_after``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..workload import TraceError

if TYPE_CHECKING:
    from .pollux import Application

#: Batches tried between the smallest and the largest measured, besides the measured ones:
#: geometric steps (sc20-like with 12, 48 or 96 instead: mean JCT and makespan within 1.5%).
GRID_POINTS = 24


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of a job at one batch on one placement, from where the job was when it began
    (``_start_steps``: in steps at this batch)."""

    batch: int
    speed: float  # average progress per second over the rest of the job at this batch
    _steps_per_s: float
    _start_steps: float
    _curve: _Curve

    def progress_after(self, seconds: float) -> float:
        """Progress after ``seconds`` of training in this segment (pauses excluded)."""
        return self._curve.progress(self._start_steps + max(seconds, 0.0) * self._steps_per_s)


class _Curve:
    """S_B(p) for one batch B: the steps at B that reach each epoch's end, and the inverse."""

    def __init__(self, bounds: np.ndarray, efficiency: np.ndarray) -> None:
        self.bounds = bounds  # progress at each epoch's start and at the last one's end
        self.efficiency = efficiency  # per epoch, at B
        self.steps = np.concatenate(([0.0], np.cumsum(np.diff(bounds) / efficiency)))

    def steps_at(self, p: float) -> float:
        e = _segment(self.bounds, p)
        return float(self.steps[e] + (p - self.bounds[e]) / self.efficiency[e])

    def progress(self, steps: float) -> float:
        e = _segment(self.steps, steps)
        p = self.bounds[e] + (steps - self.steps[e]) * self.efficiency[e]
        return float(min(p, self.bounds[-1]))


def _segment(edges: np.ndarray, x: float) -> int:
    """The piece of a piecewise-linear function (``edges``: its ends, ascending) that ``x``
    falls in; the first or the last one beyond them."""
    return min(max(int(np.searchsorted(edges, x, side="right")) - 1, 0), len(edges) - 2)


class GoodputBatching:
    """One job's batch choice: the batch that finishes it soonest on the GPUs it is given."""

    def __init__(self, app: Application) -> None:
        self.app = app
        lo, hi = app.init_batch_size, app.max_batch_size
        grid = {round(lo * (hi / lo) ** (i / (GRID_POINTS - 1))) for i in range(GRID_POINTS)}
        self.batches = sorted(grid | set(app.batch_sizes))
        bounds = np.array([app.progress_at(e) for e in range(app.epochs + 1)])
        self._bounds = bounds
        self._rate_tables: dict[tuple[int, int], np.ndarray] = {}
        self.work = float(bounds[-1])
        self._curves = {
            b: _Curve(bounds, np.array([app.efficiency(b, e) for e in range(app.epochs)]))
            for b in self.batches
        }
        self._efficiency = np.array([c.efficiency for c in self._curves.values()])  # batch, epoch

    def max_gpus(self) -> int:
        """Most GPUs any batch can use (each GPU at least the smallest measured per-GPU batch)."""
        return self.app.max_replicas(self.batches[-1])

    def start(self, placement: tuple[int, ...], progress: float) -> Segment | None:
        """The segment that finishes soonest from ``progress`` on ``placement`` (GPUs per
        node); None where no batch runs on so many GPUs within the measurements."""
        best: tuple[float, Segment] | None = None
        for b in self.batches:
            rate = self._rate(placement, b)
            if rate <= 0:
                continue
            curve = self._curves[b]
            at = curve.steps_at(progress)
            seconds = (curve.steps[-1] - at) / rate
            if best is None or seconds < best[0]:
                speed = (self.work - progress) / seconds if seconds > 0 else rate
                best = (seconds, Segment(b, speed, rate, at, curve))
        return None if best is None else best[1]

    def epoch(self, progress: float) -> int:
        """The epoch ``progress`` is in (the last one at the end)."""
        return _segment(self._bounds, progress)

    def goodput(self, progress: float, per_node: int, top: int) -> dict[int, float]:
        """{GPUs: progress per second now, at the batch that makes the most of it}, GPUs packed
        onto nodes of ``per_node``, for 1..``top``: what the policy is told the job is worth at
        each count. It moves as training goes on (the gradient noise grows, and with it what a
        larger batch yields), and the policy decides again at every change, so it is the rate
        of the epoch the job is in. Counts no batch can use are left out."""
        rates = self._rates(per_node, top)
        epoch = self.epoch(progress)
        best = (rates * self._efficiency[:, epoch]).max(axis=1)
        return {g: x for g, x in enumerate(best.tolist(), start=1) if x > 0}

    def average(self, progress: float, per_node: int, top: int) -> dict[int, float]:
        """{GPUs: average progress per second over the rest of the job, at the batch that
        finishes it soonest}, as ``goodput``: the job's profile, for its lower bounds."""
        rates = self._rates(per_node, top)
        left = np.array([c.steps[-1] - c.steps_at(progress) for c in self._curves.values()])
        with np.errstate(divide="ignore", invalid="ignore"):
            seconds = np.where(rates > 0, left / rates, np.inf).min(axis=1)
        work = self.work - progress
        return {
            g: (work / t if t > 0 else float(rates[g - 1].max()))
            for g, t in enumerate(seconds.tolist(), start=1)
            if t < np.inf
        }

    def _rates(self, per_node: int, top: int) -> np.ndarray:
        """Steps per second at each (GPUs packed, batch); 0 where the batch cannot run so."""
        from .pollux import compact  # (pollux imports this module)

        key = (per_node, top)
        found = self._rate_tables.get(key)
        if found is None:
            found = np.zeros((top, len(self.batches)))
            for g in range(1, top + 1):
                for i, b in enumerate(self.batches):
                    found[g - 1, i] = self._rate(compact(g, per_node), b)
            self._rate_tables[key] = found
        return found

    def _rate(self, placement: tuple[int, ...], batch: int) -> float:
        """Steps per second at ``batch`` on ``placement``; 0 where it cannot run so (fewer
        samples per GPU than measured, or a placement beyond the measurements)."""
        if self.app.max_replicas(batch) < sum(placement):
            return 0.0
        try:
            return self.app.steps_per_second(placement, batch)
        except TraceError:
            return 0.0

    def speed(self, placement: tuple[int, ...]) -> float:
        """Average progress per second of the whole job on ``placement`` (the job's profile
        and the lower bounds): the best batch from the start."""
        segment = self.start(placement, 0.0)
        return 0.0 if segment is None else segment.speed
