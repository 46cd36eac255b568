"""How a change of a running job's GPUs is carried out, and what it costs.

A mechanism is a separate axis from the policy: ``sidecar`` checkpoints at the next step and
restarts on the new GPUs (a short pause, no work lost); ``termination`` kills the trainer and
restarts it from its last periodic checkpoint (a full restart, and the work since that
checkpoint is lost), as termination-based elastic schedulers do.

The paper's ``termination`` baseline is the adaptive policy making the decisions it makes with
the sidecar, carried out by termination. ``termination-aware`` is a stronger baseline we add:
the adaptive policy told what termination really costs, so that it resizes less.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Mechanism:
    name: str
    #: Seconds without progress for one change of grant (suspend + resume counts once).
    pause_s: float
    #: Whether a change loses the work done since the last periodic checkpoint.
    loses_work: bool = False
    #: Seconds between periodic checkpoints (what ``loses_work`` loses at most).
    checkpoint_interval: float = 600.0
    #: The resize cost the policy is told, if not what this mechanism really costs.
    priced_at_s: float | None = None

    def __post_init__(self) -> None:
        # A NaN or negative cost would not fail: it would run, for hours, to a meaningless end.
        for what, value in (("a change's pause", self.pause_s), ("its price", self.priced_at_s)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{self.name}: {what} must be 0 or more seconds, got {value}")
        interval = self.checkpoint_interval
        if not (math.isfinite(interval) and interval > 0):
            raise ValueError(
                f"{self.name}: the checkpoint interval must be a positive number of seconds, "
                f"got {interval}"
            )

    def expected_cost_s(self) -> float:
        """What one change really costs on average: the pause plus, where work is lost, half a
        checkpoint interval."""
        return self.pause_s + (self.checkpoint_interval / 2 if self.loses_work else 0.0)

    def policy_cost_s(self, pause_s: float | None = None) -> float:
        """The resize cost the policy decides with; ``pause_s``: a job's own pause per change,
        where it has one (``JobSpec.restart_s``), instead of this mechanism's."""
        if self.priced_at_s is not None:
            return self.priced_at_s
        return self.expected_cost_s() + (0.0 if pause_s is None else pause_s - self.pause_s)


def sidecar(pause_s: float = 6.0) -> Mechanism:
    return Mechanism("sidecar", pause_s)


def termination(
    pause_s: float = 60.0, checkpoint_interval: float = 600.0, priced_at_s: float | None = None
) -> Mechanism:
    """Kill and restart from the last periodic checkpoint; ``priced_at_s`` is the cost the policy
    is told (None: the true expected cost, i.e. the ``termination-aware`` variant)."""
    name = "termination" if priced_at_s is not None else "termination-aware"
    return Mechanism(name, pause_s, True, checkpoint_interval, priced_at_s)


#: Names a user can ask for in ``simulate --policy``: a policy, and the mechanism it runs with.
PRESETS: dict[str, tuple[str, str]] = {
    "termination": ("adaptive", "termination"),
    "termination-aware": ("adaptive", "termination-aware"),
}
MECHANISMS = ("sidecar", "termination", "termination-aware")
