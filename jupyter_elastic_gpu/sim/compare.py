"""Run one workload through several policies side by side, the way every benchmark does.

A run name is a policy, optionally with the mechanism that carries out its changes:
``adaptive`` (sidecar), ``termination`` (= ``adaptive@termination``, the paper's baseline:
the sidecar's decisions carried out by termination), ``termination-aware`` (the adaptive
policy told termination's true cost), ``tiresias@termination`` ... Every run without ``@`` uses the sidecar mechanism, so that only
the named difference separates two rows of a table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tqdm import tqdm  # text bars: in a kernel too (ipywidgets is not a dependency)

from ..core.mechanism import MECHANISMS, PRESETS, Mechanism, sidecar, termination
from ..core.policies import POLICIES, make_policy
from .bounds import lower_bounds
from .engine import SimConfig, SimResult, SimulationStalled, simulate
from .workload import Workload


@dataclass(frozen=True)
class Costs:
    """Mechanism costs in seconds (``--sidecar-cost`` etc.)."""

    sidecar_s: float = 6.0
    termination_s: float = 60.0
    checkpoint_interval: float = 600.0

    def __post_init__(self) -> None:
        for name in MECHANISMS:  # a bad cost fails here, before any run
            self.mechanism(name)

    def mechanism(self, name: str) -> Mechanism:
        if name == "sidecar":
            return sidecar(self.sidecar_s)
        if name == "termination":  # decisions priced as with the sidecar: the paper's baseline
            return termination(self.termination_s, self.checkpoint_interval, self.sidecar_s)
        if name == "termination-aware":
            return termination(self.termination_s, self.checkpoint_interval)
        raise ValueError(f"unknown mechanism '{name}' (known: {', '.join(MECHANISMS)})")


def parse_run(name: str) -> tuple[str, str]:
    """'termination' -> ('adaptive', 'termination'); 'optimus@termination' -> (...)."""
    if name in PRESETS:
        return PRESETS[name]
    policy, _, mech = name.partition("@")
    if policy not in POLICIES:
        known = ", ".join([*sorted(POLICIES), *sorted(PRESETS)])
        raise ValueError(f"unknown policy '{policy}' (known: {known})")
    if mech and mech not in MECHANISMS:
        known = ", ".join(MECHANISMS)
        raise ValueError(f"unknown mechanism '{mech}' in '{name}' (known: {known})")
    return policy, mech or "sidecar"


@dataclass
class Comparison:
    workload: str
    jobs: int
    config: SimConfig
    costs: Costs
    results: dict[str, SimResult] = field(default_factory=dict)
    lower_bound: dict[str, float] = field(default_factory=dict)
    #: Runs that never finished, with the reason (shown instead of a row of figures).
    stalled: dict[str, str] = field(default_factory=dict)
    #: Jobs whose starts and restarts take a time of their own (``JobSpec.restart_s``).
    own_restarts: int = 0

    def summaries(self) -> dict[str, dict]:
        return {name: r.summary() for name, r in self.results.items()}

    def to_json(self) -> dict:
        return {
            "workload": self.workload,
            "jobs": self.jobs,
            "cluster": {
                "nodes": self.config.nodes,
                "gpus_per_node": self.config.gpus_per_node,
                "kinds": [list(k) for k in self.config.kinds],
                "user_gpu_cap": self.config.user_gpu_cap,
                "fair_share": self.config.fair_share,
                "fair_share_half_life": self.config.fair_share_half_life,
                "user_weights": dict(self.config.user_weights),
            },
            "costs": vars(self.costs),
            "policies": self.summaries(),
            "lower_bound": self.lower_bound,
            "did_not_finish": self.stalled,
        }


def compare(
    workload: Workload,
    runs: Sequence[str],
    config: SimConfig | None = None,
    costs: Costs | None = None,
    progress: bool = True,
    policy_params: Mapping[str, Mapping[str, object]] | None = None,
) -> Comparison:
    """Each run of ``runs`` on ``workload``; ``policy_params``: {policy: its parameters} for
    the runs of that policy (whatever their mechanism)."""
    config = config or SimConfig()
    costs = costs or Costs()
    plan = [(name, *parse_run(name)) for name in runs]  # fail before any work on a typo
    own = sum(j.restart_s is not None for j in workload.jobs)
    out = Comparison(workload.name, len(workload), config, costs, own_restarts=own)
    out.lower_bound = lower_bounds(
        workload, config.total_gpus, config.node_size, config.start_cost_s
    )
    for name, policy, mech in plan:
        with tqdm(
            total=len(workload),
            desc=f"{workload.name}: {name}",
            unit="job",
            # None: only where stderr is a terminal (a pipe or a log gets no carriage returns)
            disable=None if progress else True,
            leave=False,
        ) as bar:
            try:
                out.results[name] = simulate(
                    workload,
                    make_policy(policy, **(policy_params or {}).get(policy, {})),
                    costs.mechanism(mech),
                    config,
                    bar.update,
                )
            except SimulationStalled as e:
                out.stalled[name] = str(e)
    return out
