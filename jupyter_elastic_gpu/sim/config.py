"""The settings of one simulation run (``SimConfig``): the cluster, the clock, the live
scheduler's rules it applies, and how the engine takes held decisions; checked when made, so
that a bad value fails before a run, not in the middle of one."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.fairshare import DEFAULT_HALF_LIFE_S, FairShare
from ..core.model import Gpu


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 4
    gpus_per_node: int = 4
    #: Nodes of several kinds of GPU, ``(kind, nodes, GPUs per node)`` each (Sia's mixed
    #: cluster: ``(("aws", 6, 4), ("dgx-ext", 2, 8), ("rtx", 3, 8))``); when given, it is the
    #: cluster, and ``nodes`` and ``gpus_per_node`` are not used.
    kinds: tuple[tuple[str, int, int], ...] = ()
    #: Seconds between periodic decisions.
    tick_s: float = 60.0
    #: Decide only at ticks (arrivals and completions wait for the next one), as Pollux does.
    rounds: bool = False
    #: Seconds a job needs to start the first time (the same for every policy).
    start_cost_s: float = 0.0
    #: Give up when the run lasts this many times the lower bound of the makespan.
    stall_factor: float = 50.0
    #: The most GPUs one user's jobs may hold at a time (0: no cap), as the live scheduler's
    #: ``user_gpu_cap``; jobs belong to the workload's ``user``.
    user_gpu_cap: int = 0
    #: Share the GPUs between users by weight and decayed usage (``core.fairshare``), as the
    #: live scheduler's ``fair_share``.
    fair_share: bool = False
    #: Seconds after which past usage counts half, as the live ``fair_share_half_life``.
    fair_share_half_life: float = DEFAULT_HALF_LIFE_S
    #: {user: weight} (users not named: 1); the live scheduler takes them from groups.
    user_weights: Mapping[str, float] = field(default_factory=dict)
    #: Take the last decision instead of deciding at a tick while it holds
    #: (``Decision.holds_until``) and only time has passed: the same run as deciding at every
    #: tick (False), with fewer decisions made.
    skip_held: bool = True
    #: Decide at every tick all the same and raise ``BrokenPromise`` where a decision differs
    #: from the one its policy said holds: the check of a policy's ``holds_until``.
    check_holds: bool = False

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("the cluster needs at least one node with one GPU")
        for kind, nodes, per_node in self.kinds:
            if not kind or nodes < 1 or per_node < 1:
                raise ValueError(
                    f"each kind of node needs a name, one node or more and one GPU or more "
                    f"per node, got {(kind, nodes, per_node)!r}"
                )
        if len({kind for kind, _, _ in self.kinds}) < len(self.kinds):
            raise ValueError(f"a kind of GPU is named twice in {self.kinds!r}")
        if not (math.isfinite(self.tick_s) and self.tick_s > 0):
            raise ValueError(f"the tick must be a positive number of seconds, got {self.tick_s}")
        if not (math.isfinite(self.start_cost_s) and self.start_cost_s >= 0):
            raise ValueError(f"the start cost must be 0 or more seconds, got {self.start_cost_s}")
        if not (math.isfinite(self.stall_factor) and self.stall_factor > 0):
            raise ValueError(f"stall_factor must be a positive number, got {self.stall_factor}")
        cap = self.user_gpu_cap
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ValueError(f"the per-user GPU cap must be 0 (none) or more, got {cap!r}")
        # A bad half-life or weight fails here, not mid-run.
        FairShare(dict(self.user_weights), {}, self.fair_share_half_life)

    def fair_rules(self, usage: Mapping[str, float]) -> FairShare | None:
        """The fair-share rules of a snapshot with this usage (None: fair share off)."""
        if not self.fair_share:
            return None
        return FairShare(dict(self.user_weights), dict(usage), self.fair_share_half_life)

    def _nodes(self) -> list[tuple[str, int]]:
        """(kind, GPUs) per node, in order."""
        if not self.kinds:
            return [("", self.gpus_per_node)] * self.nodes
        return [(kind, per_node) for kind, nodes, per_node in self.kinds for _ in range(nodes)]

    @property
    def total_gpus(self) -> int:
        return sum(per_node for _, per_node in self._nodes())

    @property
    def node_size(self) -> int:
        """The most GPUs on one node."""
        return max(per_node for _, per_node in self._nodes())

    def per_node(self, kind: str | None = None) -> int:
        """GPUs per node of ``kind`` (None: the first kind's)."""
        for name, _, per_node in self.kinds:
            if kind is None or name == kind:
                return per_node
        return self.gpus_per_node

    @property
    def mixed(self) -> bool:
        """The GPUs are of more than one kind."""
        return len(self.kinds) > 1

    def layout(self) -> str:
        """``4 x 4 GPUs``, or ``6 x 4 aws, 2 x 8 dgx-ext, 3 x 8 rtx`` (nodes x GPUs kind)."""
        if not self.kinds:
            return f"{self.nodes} x {self.gpus_per_node} GPUs"
        return ", ".join(f"{nodes} x {per_node} {kind}" for kind, nodes, per_node in self.kinds)

    def gpus(self) -> tuple[Gpu, ...]:
        return tuple(
            Gpu(f"n{n}-g{i}", node=f"n{n}", kind=kind)
            for n, (kind, per_node) in enumerate(self._nodes())
            for i in range(per_node)
        )


__all__ = ["SimConfig"]
