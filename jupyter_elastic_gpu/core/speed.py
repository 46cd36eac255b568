"""Speed model: how fast a job goes at each GPU count.

Work is counted in the job's own units (samples, or steps at a fixed global batch). A job's
throughput is known exactly at the GPU counts it has run at (measured), and guessed elsewhere:
between two measured counts by linear interpolation, outside them from a prior (a profile
table, as the simulator has, scaled to agree with the nearest measurement), and with neither
from a sub-linear default curve. Linear interpolation keeps the model monotone wherever the
measured points are, and every lookup is a dict hit after the first.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping

#: Exponent of the default prior ``X(g) = X(1) * g**alpha`` used before anything is known:
#: data-parallel training scales sub-linearly, and guessing low only delays a grow.
DEFAULT_ALPHA = 0.8


def _interpolate(points: list[tuple[int, float]], g: int) -> float | None:
    """Linear interpolation inside the measured range; None outside it."""
    counts = [c for c, _ in points]
    i = bisect.bisect_left(counts, g)
    if i < len(counts) and counts[i] == g:
        return points[i][1]
    if i == 0 or i == len(counts):
        return None
    (g0, x0), (g1, x1) = points[i - 1], points[i]
    return x0 + (x1 - x0) * (g - g0) / (g1 - g0)


class Frontier:
    """Counts faster than every smaller one, with what they cost per unit of work.

    ``counts[i]`` GPUs take ``secs[i]`` seconds and ``gpu_secs[i]`` GPU-seconds per unit of
    work (``secs`` strictly decreasing); ``best_from[i]`` is the index of the least GPU-time
    among ``i..``: the cheapest count that is at least as fast as ``counts[i]``.
    """

    __slots__ = ("_cheap", "_per_work", "_rising", "best_from", "counts", "gpu_secs", "secs")

    def __init__(self, counts: tuple[int, ...], secs: tuple[float, ...]) -> None:
        self.counts, self.secs = counts, secs
        self._rising = tuple(-s for s in secs)  # for bisect, which wants increasing keys
        self.gpu_secs = tuple(g * s for g, s in zip(counts, secs))
        best: list[int] = [0] * len(counts)
        for i in range(len(counts) - 1, -1, -1):
            j = best[i + 1] if i + 1 < len(counts) else i
            # Equal costs (to rounding) go to the narrower count.
            best[i] = i if self.gpu_secs[i] <= self.gpu_secs[j] * (1 + 1e-9) else j
        self.best_from = tuple(best)
        self._cheap: dict[float, int] = {}
        self._per_work: dict[float, tuple[float, float, float, float, float]] = {}

    def fastest_cheap(self, premium: float) -> int:
        """Index of the fastest count whose GPU-time is at most ``1 + premium`` times the
        least; cached."""
        found = self._cheap.get(premium)
        if found is None:
            cheap = self.gpu_secs[self.best_from[0]] * (1.0 + premium)
            found = self._cheap[premium] = max(i for i, c in enumerate(self.gpu_secs) if c <= cheap)
        return found

    def per_work(self, premium: float) -> tuple[float, float, float, float, float]:
        """Per unit of work: the GPU-seconds of the cheapest count, the seconds of the
        cheapest, the fastest and the fastest cheap (``fastest_cheap``) counts, and the most
        GPU-seconds of any count over the least; cached."""
        found = self._per_work.get(premium)
        if found is None:
            cheapest = self.best_from[0]
            least = self.gpu_secs[cheapest]
            found = self._per_work[premium] = (
                least,
                self.secs[cheapest],
                self.secs[-1],
                self.secs[self.fastest_cheap(premium)],
                max(self.gpu_secs) - least,
            )
        return found

    @classmethod
    def of(cls, curve: list[float], lo: int, top: int) -> Frontier:
        counts: list[int] = []
        secs: list[float] = []
        for g in range(lo, top + 1):
            x = curve[g]
            if x > 0 and (not secs or 1.0 / x < secs[-1]):
                counts.append(g)
                secs.append(1.0 / x)
        return cls(tuple(counts), tuple(secs))

    def first_within(self, seconds_per_work: float) -> int:
        """Index of the slowest count that takes at most ``seconds_per_work`` (len: none)."""
        if seconds_per_work != seconds_per_work:  # NaN: no count is within it
            return len(self.secs)
        return bisect.bisect_left(self._rising, -seconds_per_work)


class SpeedModel:
    """Throughput (work units per second) per GPU count.

    ``measured`` are observed points; ``prior`` is a table of expected points (a profile);
    ``alpha`` shapes the default curve used where neither says anything. Instances are
    immutable after construction and cache their answers.
    """

    __slots__ = (
        "_cache",
        "_curve",
        "_exponents",
        "_frontiers",
        "_measured",
        "_options",
        "_prior",
        "_rates",
        "_speedups",
        "_summaries",
        "alpha",
    )

    def __init__(
        self,
        measured: Mapping[int, float] | None = None,
        prior: Mapping[int, float] | None = None,
        alpha: float = DEFAULT_ALPHA,
    ) -> None:
        self._measured = sorted((int(g), float(x)) for g, x in (measured or {}).items() if g > 0)
        self._prior = sorted((int(g), float(x)) for g, x in (prior or {}).items() if g > 0)
        self.alpha = alpha
        self._cache: dict[int, float] = {}
        self._curve: list[float] = [0.0]
        self._frontiers: dict[tuple[int, int], Frontier] = {}
        self._options: dict[tuple[int, int, float], tuple] = {}
        self._speedups: dict[tuple[int, int], float] = {}
        self._rates: dict[tuple[int, int], float] = {}
        self._exponents: dict[tuple[int, int], float | None] = {}
        self._summaries: dict[tuple[int, int, float | None], tuple] = {}

    def with_measurement(self, gpus: int, throughput: float) -> SpeedModel:
        """A new model that also knows ``throughput`` at ``gpus``."""
        measured = dict(self._measured)
        measured[gpus] = throughput
        return SpeedModel(measured, dict(self._prior), self.alpha)

    def throughput(self, gpus: int) -> float:
        if gpus <= 0:
            return 0.0
        cached = self._cache.get(gpus)
        if cached is None:
            cached = self._cache[gpus] = max(self._estimate(gpus), 0.0)
        return cached

    def curve(self, top: int) -> list[float]:
        """Throughput at 0, 1, ..., ``top`` GPUs (at least; do not modify): what a policy scans
        when it weighs every size a job could have, without a call per count."""
        curve = self._curve
        for g in range(len(curve), top + 1):
            curve.append(self.throughput(g))
        return curve

    def speedup(self, lo: int, g: int) -> float:
        """Speed at ``g`` GPUs in units of one GPU at ``lo`` GPUs, ``lo * X(g) / X(lo)`` (0 when
        nothing runs at ``lo``); cached."""
        key = (lo, g)
        found = self._speedups.get(key)
        if found is None:
            x_lo = self.throughput(lo)
            found = lo * self.throughput(g) / x_lo if x_lo > 0 else 0.0
            self._speedups[key] = found
        return found

    def best_rate(self, lo: int, top: int) -> float:
        """The most speed per GPU of any count in ``lo..top``, in units of the speed per GPU at
        ``lo`` (1 for a curve that scales sub-linearly; 0 when nothing runs at ``lo``); cached."""
        key = (lo, top)
        found = self._rates.get(key)
        if found is None:
            x_lo = self.throughput(lo)
            curve = self.curve(top)
            best = max((curve[g] / g for g in range(lo, top + 1)), default=0.0)
            found = self._rates[key] = lo * best / x_lo if x_lo > 0 else 0.0
        return found

    def exponent(self, lo: int, top: int) -> float | None:
        """p of the power law through the speed-ups at ``lo`` and ``top`` GPUs,
        ``(top / lo)^p = speedup(lo, top) / lo`` (None when nothing runs at ``top``); cached."""
        key = (lo, top)
        if key not in self._exponents:
            s = self.speedup(lo, top) / lo
            self._exponents[key] = math.log(s) / math.log(top / lo) if s > 0 else None
        return self._exponents[key]

    def frontier(self, lo: int, top: int) -> Frontier:
        """The counts in ``lo..top`` that are faster than every smaller one (the only ones
        worth holding), as a :class:`Frontier`; cached."""
        key = (lo, top)
        found = self._frontiers.get(key)
        if found is None:
            found = self._frontiers[key] = Frontier.of(self.curve(top), lo, top)
        return found

    def options(
        self, lo: int, top: int, premium: float
    ) -> tuple[Frontier, float, float, float, float, float] | None:
        """``frontier(lo, top)`` and its ``per_work(premium)`` in one lookup (None: no count
        in ``lo..top`` runs at all); cached: a policy asks for every job at every decision."""
        key = (lo, top, premium)
        found = self._options.get(key)
        if found is None:
            frontier = self.frontier(lo, top)
            if not frontier.counts:
                return None
            found = self._options[key] = (frontier, *frontier.per_work(premium))
        return found

    def summary(
        self, lo: int, top: int, premium: float | None
    ) -> tuple[float, float | None, float, tuple | None, tuple[float, ...]]:
        """What a policy reads of a job of ``lo..top`` GPUs at every decision, in one cached
        lookup: the throughput at ``lo``, ``exponent(lo, top)`` (None also when ``top <=
        lo``), ``best_rate(lo, top)``, ``options(lo, top, premium)`` (None also when
        ``premium`` is None or ``top < lo``) and the throughputs at 0 to ``top`` GPUs."""
        key = (lo, top, premium)
        found = self._summaries.get(key)
        if found is None:
            found = self._summaries[key] = (
                self.throughput(lo),
                self.exponent(lo, top) if top > lo else None,
                self.best_rate(lo, top),
                self.options(lo, top, premium) if premium is not None and top >= lo else None,
                tuple(self.curve(top)[: top + 1]),
            )
        return found

    def remaining_time(self, remaining_work: float, gpus: int) -> float:
        """Seconds to finish ``remaining_work`` at ``gpus`` GPUs (inf without GPUs)."""
        if remaining_work <= 0:
            return 0.0
        x = self.throughput(gpus)
        return remaining_work / x if x > 0 else float("inf")

    def _prior_at(self, gpus: int) -> float:
        if self._prior:
            inside = _interpolate(self._prior, gpus)
            if inside is not None:
                return inside
            # Outside the table: continue the curve from its nearest end.
            g0, x0 = self._prior[0] if gpus < self._prior[0][0] else self._prior[-1]
            return x0 * (gpus / g0) ** self.alpha
        return float(gpus) ** self.alpha

    def _estimate(self, gpus: int) -> float:
        if not self._measured:
            return self._prior_at(gpus)
        inside = _interpolate(self._measured, gpus)
        if inside is not None:
            return inside
        # Outside the measured range: the prior's shape, scaled to the nearest measurement.
        g0, x0 = self._measured[0] if gpus < self._measured[0][0] else self._measured[-1]
        base = self._prior_at(g0)
        return x0 * self._prior_at(gpus) / base if base > 0 else 0.0

    def __repr__(self) -> str:
        return f"SpeedModel(measured={dict(self._measured)}, prior={dict(self._prior)})"
