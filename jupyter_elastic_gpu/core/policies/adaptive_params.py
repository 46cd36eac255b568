"""The tunables of ``adaptive`` (``AdaptiveParams``), checked once when made: a driver takes
them from a setting or a command line, and a value out of range fails there, before any work.
docs/policies.md has what each one trades."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class AdaptiveParams:
    """Tunables of the adaptive policy; every one is a unit-free factor or a time, with a reason."""

    #: A job that has waited ``aging_s`` seconds counts as half its size when ordering.
    aging_s: float = 3600.0
    #: A waiting job must be this fraction smaller than a running one to suspend it.
    stickiness: float = 0.2
    #: A resize must gain (1 + resize_margin) times what it costs.
    resize_margin: float = 1.0
    #: A job with less than ``finish_guard`` resize costs of work left is never resized.
    finish_guard: float = 4.0
    #: After a resize, a job is left alone for ``cooldown`` resize costs ...
    cooldown: float = 10.0
    #: ... and that wait doubles after every ``resize_budget`` resizes of the job, which limits
    #: how often one job is resized without ever freezing it at a bad size.
    resize_budget: int = 10
    #: The wait after a change is at least this long, however cheap a resize is measured to be.
    min_cooldown_s: float = 10.0
    #: A job whose time left comes within ``critical_slack`` of the horizon (the earliest the
    #: cluster could finish all its work) must start now, unless it could catch up later at
    #: most ``critical_slack`` more GPU-time (``core.policies.critical``) ...
    critical_slack: float = 0.1
    #: ... and critical jobs get the GPUs that end them within (1 + horizon_slack) x horizon,
    horizon_slack: float = 0.3
    #: plus up to ``queue_slack`` x horizon more while the queue is deep (what the waiting
    #: jobs need at their minimum, over the cluster's GPUs): shorter jobs go first meanwhile.
    queue_slack: float = 1.0
    #: Serve the critical path first (False: the order and weights alone, which serve mean JCT
    #: and start the longest job last; docs/policies.md has both sides' figures).
    protect_critical: bool = True
    #: Choose between the two modes (the critical path first or the order alone) by playing
    #: the open jobs forward under each whenever they change, and follow the one with the
    #: smaller makespan^``makespan_weight`` x mean JCT (``core.policies.lookahead``; this then
    #: overrides ``protect_critical``). Off by default: two forward runs per change of the
    #: jobs, about what the sidebar's forecast costs, where a decision costs milliseconds.
    lookahead: bool = False
    #: How much the makespan counts against the mean JCT when ``lookahead`` chooses.
    makespan_weight: float = 2.0

    def __post_init__(self) -> None:
        # Of the type of its default: a setting written "false" (a string) or NaN is refused,
        # not taken as true or as a number no comparison below would catch.
        for f in fields(self):
            value, kind = getattr(self, f.name), type(f.default)
            if kind is bool:
                if not isinstance(value, bool):
                    raise ValueError(f"{f.name} must be true or false, got {value!r}")
            elif (
                isinstance(value, bool)
                or not isinstance(value, int if kind is int else (int, float))
                or not math.isfinite(value)
            ):
                what = "a whole number" if kind is int else "a finite number"
                raise ValueError(f"{f.name} must be {what}, got {value!r}")
        for name in (
            "aging_s",
            "resize_margin",
            "finish_guard",
            "cooldown",
            "min_cooldown_s",
            "horizon_slack",
            "queue_slack",
            "makespan_weight",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if not 0 <= self.stickiness < 1:
            raise ValueError("stickiness must lie in [0, 1)")
        if not 0 <= self.critical_slack <= 1:
            raise ValueError("critical_slack must lie in [0, 1]")
        if self.resize_budget < 1:
            raise ValueError("resize_budget must be at least 1")


__all__ = ["AdaptiveParams"]
