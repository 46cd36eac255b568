"""Synthetic lab workloads: Poisson arrivals, heavy-tailed durations, a few users, elastic jobs.

Real traces rarely match a given box (Philly's clusters are far larger than one GPU server),
so benchmarks also need workloads sized for the machine at hand, with knobs to turn one
property at a time. Every draw comes from its own stream, seeded from ``seed`` and the
stream's name, and only ``random.Random.random()`` is used (its output is stable across Python
versions), so a seed gives the same workload everywhere, and changing one knob (say the GPU
mix) leaves the other properties (arrivals, durations, users) of each job as they were.

Load: the mean number of busy GPUs the workload asks for, with every job at its requested
count, is about ``jobs * E[duration] * E[requested GPUs] / window_s``. The defaults give about
7.5 (50 x 1980 s x 2.2 / 8 h): a busy 8-GPU box that queues at peaks.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import NormalDist

from .profiles import SYNTHETIC_FAMILIES, synthetic_profile
from .traces.native import write_native
from .workload import JobSpec, Workload, profile_throughput

__all__ = [
    "DEFAULT_DURATION",
    "DEFAULT_GPU_MIX",
    "DEFAULT_PROFILE_MIX",
    "generate_and_write",
    "generate_workload",
]

#: Requested GPU count -> weight (normalised): mostly small jobs, as on a shared lab box.
DEFAULT_GPU_MIX: Mapping[int, float] = {1: 0.5, 2: 0.25, 4: 0.2, 8: 0.05}
#: Synthetic profile family -> weight.
DEFAULT_PROFILE_MIX: Mapping[str, float] = {"linear-ish": 0.3, "moderate": 0.4, "poor": 0.3}
#: Run time of a job alone at its requested count: lognormal, median 20 min, sigma 1
#: (mean 33 min, 1 in 100 jobs over 3.4 h).
DEFAULT_DURATION: tuple = ("lognormal", 1200.0, 1.0)

_NORMAL = NormalDist()


class _Stream:
    """Uniform draws in (0, 1) from a named sub-stream of ``seed``."""

    def __init__(self, seed: int, name: str):
        # A str seed is hashed with SHA-512 by random.seed (version 2): stable everywhere.
        self._rng = random.Random(f"jupyter-elastic-gpu/{seed}/{name}")

    def uniform(self) -> float:
        return min(max(self._rng.random(), 1e-12), 1.0 - 1e-12)

    def choice(self, values: Sequence, cumulative: Sequence[float]):
        return values[bisect.bisect_right(cumulative, self.uniform() * cumulative[-1])]


def _weights(mix: Mapping, what: str) -> tuple[list, list[float]]:
    values = list(mix)
    weights = [float(mix[v]) for v in values]
    if not values or any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"{what}: weights must be non-negative with a positive sum, got {mix!r}")
    return values, list(itertools.accumulate(weights))


def _duration_sampler(spec: Sequence):
    """A function u -> seconds for ``spec`` (see :func:`generate_workload`)."""
    if not spec:
        raise ValueError("duration: expected e.g. ('lognormal', median_s, sigma)")
    kind, *args = spec
    try:
        args = [float(a) for a in args]
    except (TypeError, ValueError):
        raise ValueError(f"duration: parameters must be numbers, got {spec!r}") from None
    if kind == "lognormal" and len(args) == 2 and args[0] > 0 and args[1] >= 0:
        median, sigma = args
        return lambda u: median * math.exp(sigma * _NORMAL.inv_cdf(u))
    if kind == "exponential" and len(args) == 1 and args[0] > 0:
        (mean,) = args
        return lambda u: -mean * math.log1p(-u)
    if kind == "uniform" and len(args) == 2 and 0 <= args[0] <= args[1]:
        lo, hi = args
        return lambda u: lo + (hi - lo) * u
    if kind == "fixed" and len(args) == 1 and args[0] >= 0:
        (seconds,) = args
        return lambda u: seconds
    raise ValueError(
        f"duration: expected ('lognormal', median_s > 0, sigma >= 0), ('exponential', mean_s > 0),"
        f" ('uniform', lo_s, hi_s) or ('fixed', seconds); got {spec!r}"
    )


def _user_names(users: int | Sequence[str]) -> list[str]:
    if isinstance(users, int):
        if users < 1:
            raise ValueError(f"users must be at least 1, got {users}")
        width = len(str(users))
        return [f"user{i:0{width}d}" for i in range(1, users + 1)]
    names = [str(u) for u in users]
    if not names or len(set(names)) != len(names) or not all(names):
        raise ValueError(f"users: expected distinct non-empty names, got {users!r}")
    return names


def generate_workload(
    seed: int = 0,
    *,
    jobs: int = 50,
    window_s: float = 8 * 3600.0,
    duration: Sequence = DEFAULT_DURATION,
    min_duration_s: float = 60.0,
    max_duration_s: float = 7 * 24 * 3600.0,
    gpu_mix: Mapping[int, float] | None = None,
    users: int | Sequence[str] = 6,
    user_skew: float = 1.0,
    max_gpus: int = 8,
    profiles: Sequence[str] | Mapping[str, float] = DEFAULT_PROFILE_MIX,
    elastic_fraction: float = 1.0,
    base_throughput: float = 100.0,
    name: str | None = None,
) -> Workload:
    """A synthetic lab workload, identical for identical arguments.

    * ``jobs`` arrive as a Poisson process over ``[0, window_s)`` (conditioned on the count:
      sorted uniform times), rounded to whole seconds.
    * ``duration``: run time alone at the requested count, ``('lognormal', median_s, sigma)``,
      ``('exponential', mean_s)``, ``('uniform', lo_s, hi_s)`` or ``('fixed', s)``; clipped to
      ``[min_duration_s, max_duration_s]`` and rounded to whole seconds.
    * ``gpu_mix``: requested GPU count -> weight; every count must be <= ``max_gpus``. The
      default, :data:`DEFAULT_GPU_MIX`, loses its counts above ``max_gpus`` instead.
    * ``users``: a count (``user1``...) or names; user k submits with weight ``1 / k**user_skew``
      (0: all alike; 1: Zipf, a few heavy users as in most labs).
    * ``profiles``: synthetic families (:data:`~.profiles.SYNTHETIC_FAMILIES`), a list (equal
      weights) or name -> weight; each family's profile lists 1..``max_gpus`` GPUs at
      ``base_throughput`` work units per second on one GPU.
    * Elastic bounds: min 1, max min(2 x requested, ``max_gpus``) for a fraction
      ``elastic_fraction`` of the jobs; the others are rigid (min = max = requested).

    Work = duration x throughput(requested), so a job alone at its requested count runs for its
    drawn duration.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if not (math.isfinite(window_s) and window_s >= 0):
        raise ValueError(f"window_s must be a non-negative number, got {window_s}")
    if max_gpus < 1:
        raise ValueError(f"max_gpus must be at least 1, got {max_gpus}")
    if not 0 <= min_duration_s <= max_duration_s:
        raise ValueError("need 0 <= min_duration_s <= max_duration_s")
    if not 0.0 <= elastic_fraction <= 1.0:
        raise ValueError(f"elastic_fraction must lie in [0, 1], got {elastic_fraction}")
    if user_skew < 0:
        raise ValueError(f"user_skew must not be negative, got {user_skew}")
    sample_duration = _duration_sampler(duration)
    if gpu_mix is None:
        gpu_mix = {g: w for g, w in DEFAULT_GPU_MIX.items() if g <= max_gpus}
    counts, count_cum = _weights(gpu_mix, "gpu_mix")
    bad = [g for g in counts if not isinstance(g, int) or not 1 <= g <= max_gpus]
    if bad:
        raise ValueError(f"gpu_mix: GPU counts must be whole numbers in 1..{max_gpus}, got {bad}")
    if not isinstance(profiles, Mapping):
        profiles = dict.fromkeys(profiles, 1.0)
    families, family_cum = _weights(profiles, "profiles")
    unknown = [f for f in families if f not in SYNTHETIC_FAMILIES]
    if unknown:
        raise ValueError(
            f"profiles: unknown families {unknown} (known: {', '.join(SYNTHETIC_FAMILIES)})"
        )
    names = _user_names(users)
    _, user_cum = _weights({u: 1.0 / (k**user_skew) for k, u in enumerate(names, 1)}, "users")
    tables = {f: synthetic_profile(f, max_gpus, base_throughput) for f in families}

    arrivals = _Stream(seed, "arrival")
    times = sorted(round(arrivals.uniform() * window_s) for _ in range(jobs))
    durations, gpus, owners = (
        _Stream(seed, "duration"),
        _Stream(seed, "gpus"),
        _Stream(seed, "user"),
    )
    kinds, elastic = _Stream(seed, "profile"), _Stream(seed, "elastic")
    width = max(4, len(str(jobs - 1)))
    specs = []
    for i, submit in enumerate(times):
        seconds = sample_duration(durations.uniform())
        seconds = float(round(min(max(seconds, min_duration_s), max_duration_s)))
        requested = gpus.choice(counts, count_cum)
        user = owners.choice(names, user_cum)
        family = kinds.choice(families, family_cum)
        is_elastic = elastic.uniform() < elastic_fraction
        profile = tables[family]
        specs.append(
            JobSpec(
                job_id=f"job-{i:0{width}d}",
                submit_time=float(submit),
                work=seconds * profile_throughput(profile, requested),
                profile=profile,
                min_gpus=1 if is_elastic else requested,
                max_gpus=min(2 * requested, max_gpus) if is_elastic else requested,
                requested_gpus=requested,
                user=user,
                profile_name=family,
            )
        )
    return Workload(name or f"synthetic-seed{seed}", specs)


def generate_and_write(out_dir: str | Path, seed: int = 0, **knobs) -> tuple[Path, Path]:
    """Generate a workload (``knobs`` as for :func:`generate_workload`) and write it natively.

    Creates ``out_dir`` if needed; returns the paths of ``jobs.csv`` and ``profiles.csv`` in it.
    """
    workload = generate_workload(seed, **knobs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs_path, profiles_path = out / "jobs.csv", out / "profiles.csv"
    write_native(workload, jobs_path, profiles_path)
    return jobs_path, profiles_path
