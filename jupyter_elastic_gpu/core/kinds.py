"""A job's speed on each kind of GPU, relative to the other kinds: what placement by value weighs.

A job's speed model (``speed.py``) says how fast it goes at each GPU count; where the GPUs are
of several kinds it also goes faster on some kinds than on others, and by how much depends on
the job (a model bound by memory bandwidth gains more from an A100 over a T4 than one bound by
its input pipeline). What is known of it, best first:

* what the job measured on each kind (samples per second at a GPU count, as its progress
  records report them while it runs on that kind), compared at a count measured on both;
* for a kind it has not run on, its prior (a synthetic job's profile says it);
* else how much faster that kind was for the other jobs that ran on both (the fleet's ratio);
* else nothing: the kinds are taken as equally fast for it.

Speeds are relative (only their ratios matter), each job's on a scale of its own.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping

#: Per kind, a job's samples per second at each GPU count it ran on with that kind.
ByKind = Mapping[str, Mapping[int, float]]


def _ratio(a: Mapping[int, float], b: Mapping[int, float], common: bool = False) -> float | None:
    """How much faster ``a`` is than ``b``: the geometric mean of their ratios at the counts
    both measured, else (unless ``common``) of their per-GPU speeds at their fewest counts
    (which counts the scaling lost between those counts as the kind's); None without both."""
    both = [g for g in a if g in b and a[g] > 0 and b[g] > 0]
    if both:
        return math.exp(sum(math.log(a[g] / b[g]) for g in both) / len(both))
    if common:
        return None
    ga = min((g for g in a if a[g] > 0), default=None)
    gb = min((g for g in b if b[g] > 0), default=None)
    if ga is None or gb is None:
        return None
    return (a[ga] / ga) / (b[gb] / gb)


def fleet_ratios(jobs: Iterable[ByKind]) -> dict[str, float]:
    """Each kind's speed relative to the kind most jobs ran on (1.0), from every job that ran
    on both: the geometric mean of their ratios. Kinds no job links to that one are left out."""
    measured = [j for j in jobs if len(j) > 0]
    counts: dict[str, int] = {}
    for j in measured:
        for kind in j:
            counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return {}
    base = max(counts, key=lambda k: (counts[k], k))
    logs: dict[str, list[float]] = {}
    for j in measured:
        if base not in j:
            continue
        for kind, speeds in j.items():
            r = _ratio(speeds, j[base]) if kind != base else None
            if r is not None and r > 0:
                logs.setdefault(kind, []).append(math.log(r))
    return {base: 1.0} | {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}


def relative_speeds(
    kinds: Collection[str],
    measured: ByKind,
    prior: Mapping[str, float] | None = None,
    fleet: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The job's speed on each of ``kinds`` on one scale (see the module): its ``measured``
    speeds first, then its ``prior`` (speed factors by kind), then the ``fleet``'s ratios."""
    prior, fleet = prior or {}, fleet or {}
    ran = [k for k in kinds if any(x > 0 for x in measured.get(k, {}).values())]
    out: dict[str, float] = {}
    if ran:
        base = max(ran, key=lambda k: (len(measured[k]), k))
        out[base] = 1.0
        for kind in ran:
            if kind != base and (r := _ratio(measured[kind], measured[base], common=True)):
                out[kind] = r
    else:
        base = None
    for kind in kinds:
        if kind in out:
            continue
        out[kind] = (
            _guess(kind, base, out, prior)
            or (_ratio(measured[kind], measured[base]) if kind in ran and base else None)
            or _guess(kind, base, out, fleet)
            or 1.0
        )
    return out


def _guess(
    kind: str, base: str | None, known: Mapping[str, float], table: Mapping[str, float]
) -> float | None:
    """``kind``'s speed from a table of factors, on the scale of what is ``known`` (its
    ``base`` kind at 1.0; with nothing known, the table's own scale)."""
    if not table.get(kind):
        return None
    if base is None:
        return table[kind]
    if not table.get(base):
        return None
    return known[base] * table[kind] / table[base]


def gain(speeds: Mapping[str, float]) -> float:
    """How much the job gains from its fastest kind over its slowest (1.0: none)."""
    values = [v for v in speeds.values() if v > 0]
    return max(values) / min(values) if values else 1.0
