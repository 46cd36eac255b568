"""How a change of a running job's GPUs is carried out, and what it costs.

A mechanism is a separate axis from the policy: ``sidecar`` checkpoints at the next step and
restarts on the new GPUs (a short pause, no work lost); ``termination`` kills the trainer and
restarts it from its last periodic checkpoint (a full restart, and the work since that
checkpoint is lost), as termination-based elastic schedulers do. The paper's ``termination``
baseline is the adaptive policy carried out by the termination mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mechanism:
    name: str
    #: Seconds without progress for one change of lease (suspend + resume counts once).
    pause_s: float
    #: Whether a change loses the work done since the last periodic checkpoint.
    loses_work: bool = False
    #: Seconds between periodic checkpoints (what ``loses_work`` loses at most).
    checkpoint_interval_s: float = 600.0

    def expected_cost_s(self) -> float:
        """What a policy should expect one change to cost: pause plus, on average, half an
        interval of lost work."""
        return self.pause_s + (self.checkpoint_interval_s / 2 if self.loses_work else 0.0)


def sidecar(pause_s: float = 6.0) -> Mechanism:
    return Mechanism("sidecar", pause_s)


def termination(pause_s: float = 60.0, checkpoint_interval_s: float = 600.0) -> Mechanism:
    return Mechanism(
        "termination", pause_s, loses_work=True, checkpoint_interval_s=checkpoint_interval_s
    )


#: Names a user can ask for in ``simulate --policy``: a policy, and the mechanism it runs with.
PRESETS: dict[str, tuple[str, str]] = {"termination": ("adaptive", "termination")}
