"""Synthetic speed-profile families: throughput vs GPU count from a simple cost model.

These curves are SYNTHETIC. They are not measurements of any model or machine; they exist so
that generated workloads and traces without measured profiles (Philly) have plausible,
documented scaling shapes. Use measured profiles (e.g. the Pollux tables) where they exist.

The model is synchronous data-parallel training at a fixed per-GPU batch. One step on ``g``
GPUs costs the per-GPU compute time plus a gradient all-reduce. Taking one GPU's compute time
as the unit:

    step(g) = 1 + c * 2 * (g - 1) / g + l * (g - 1)
    X(g)    = base_throughput * g / step(g)

* ``c`` (``comm``): a ring all-reduce moves 2(g-1)/g of the gradient through each GPU, so its
  bandwidth cost grows quickly from 2 GPUs and saturates at ``2c``;
* ``l`` (``latency``): per-replica latency and straggler cost (each extra replica adds one more
  ring hop and one more chance of waiting for the slowest GPU), which makes large jobs level off.

So X(1) = base_throughput, and with the parameters below every family is increasing in g.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SYNTHETIC_FAMILIES", "SyntheticFamily", "synthetic_profile"]


@dataclass(frozen=True)
class SyntheticFamily:
    """Parameters of one synthetic scaling curve (see the module docstring)."""

    name: str
    comm: float
    latency: float
    description: str

    def speedup(self, gpus: int) -> float:
        """X(g) / X(1)."""
        if gpus < 1:
            return 0.0
        step = 1.0 + self.comm * 2.0 * (gpus - 1) / gpus + self.latency * (gpus - 1)
        return gpus / step


#: The named families. Speedups at 2/4/8/16 GPUs (synthetic):
#: linear-ish 1.90/3.67/7.02/13.06, moderate 1.61/2.82/4.91/8.10, poor 1.14/1.70/2.58/3.66.
SYNTHETIC_FAMILIES: dict[str, SyntheticFamily] = {
    f.name: f
    for f in (
        SyntheticFamily(
            "linear-ish",
            comm=0.04,
            latency=0.01,
            description="compute-bound (large model per GPU, small gradients): scales well",
        ),
        SyntheticFamily(
            "moderate",
            comm=0.2,
            latency=0.04,
            description="typical CNN/RNN training: clear but diminishing returns past 4 GPUs",
        ),
        SyntheticFamily(
            "poor",
            comm=0.6,
            latency=0.15,
            description="communication-bound (large gradients or tiny steps): levels off early",
        ),
    )
}


def synthetic_profile(name: str, max_gpus: int, base_throughput: float = 1.0) -> dict[int, float]:
    """Throughput (work units per second) at every GPU count 1..max_gpus for family ``name``.

    Every count is listed, so lookups never depend on interpolation.
    """
    family = SYNTHETIC_FAMILIES.get(name)
    if family is None:
        known = ", ".join(SYNTHETIC_FAMILIES)
        raise ValueError(f"unknown synthetic profile family {name!r} (known: {known})")
    if max_gpus < 1:
        raise ValueError(f"max_gpus must be at least 1, got {max_gpus}")
    if not base_throughput > 0:
        raise ValueError(f"base_throughput must be positive, got {base_throughput}")
    return {g: base_throughput * family.speedup(g) for g in range(1, max_gpus + 1)}
