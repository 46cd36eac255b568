"""Can one policy have both metrics? ``adaptive``'s two modes, and choosing between them by
rolling each forward (model-predictive control), on the sweep's workloads.

``adaptive`` serves the critical path first by default (``protect_critical``: the better
makespan) or goes by its order and weights alone (the better mean JCT). Issue 37 asks of a
default policy, on every workload, a mean JCT within 3% of the better of the two modes and a
makespan within 2% of the better. This script tries the obvious way to get both: at each
decision where the job set changed (an arrival, a completion) and the two modes decide
differently, play the present jobs forward (``sim.forecast``: the policy itself on a virtual
clock, no arrivals) under each candidate plan, and take the mode whose plan the outcome
favours. Candidates and rules (``--variants``, ``name:rule:value``):

* ``defer:F:E``: the order alone now, for F of the time the critical-path run needs, then the
  critical path; taken when its makespan is within E (of the span from the first submission)
  of the critical path's from now.
* ``full:-:E``: the order alone throughout against the critical path throughout, the same rule.
* ``weigh:F:W``: like ``defer`` (F = 0: like ``full``), taken when the mean JCT it saves, as a
  share, is more than W times the makespan it adds, as a share.
* ``lookahead:-:W``: the product's own, ``adaptive`` with ``lookahead`` and
  ``makespan_weight`` W (``core.policies.lookahead``: the mode with the smaller makespan^W x
  mean JCT, chosen at every change of the jobs).

It prints, per variant, on how many workloads each criterion is met, with the two modes
alone for reference. docs/policies.md has the figures; of the rules, only ``lookahead`` is in the
product, as a setting (off by default).

    python benchmarks/mode_choice.py [--seeds 6] [--first-seed 1] [--variants ...]
"""

from __future__ import annotations

import math
import os
import statistics
from concurrent.futures import ProcessPoolExecutor
from typing import ClassVar

from _common import command_line, whole
from sweep import CONFIG, GPUS, KINDS, workload
from tqdm import tqdm

from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.model import Decision, Snapshot
from jupyter_elastic_gpu.core.policies.adaptive import AdaptivePolicy
from jupyter_elastic_gpu.core.policies.lookahead import outcome
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.bounds import lower_bounds
from jupyter_elastic_gpu.sim.engine import simulate

#: The variants run by default (see the module's docstring).
VARIANTS = (
    "defer:0.1:0.01,defer:0.1:0,full:-:0.01,weigh:0:1.5,weigh:0:3,weigh:0.2:1.5,lookahead:-:2"
)
#: Decisions each forward run may make (the live forecast's budget is 400).
ROLLOUT_DECISIONS = 120


class _Switch:
    """``first`` before ``at``, ``then`` from it on: a candidate plan to play forward."""

    name: ClassVar[str] = "adaptive"
    elastic: ClassVar[bool] = True
    preemptive: ClassVar[bool] = True

    def __init__(self, first: AdaptivePolicy, then: AdaptivePolicy, at: float) -> None:
        self.first, self.then, self.at = first, then, at

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        return (self.first if now < self.at else self.then).decide(snapshot, now)


def _outcome(policy, snapshot: Snapshot, now: float) -> tuple[float, float]:
    """(makespan end, mean JCT) of the present jobs played forward under ``policy`` (infinite
    when a job is left without an end)."""
    return outcome(policy, snapshot, now, ROLLOUT_DECISIONS) or (math.inf, math.inf)


class ModeChoice:
    """``adaptive`` with its mode chosen by playing candidate plans forward, at each decision
    where the set of jobs changed."""

    name: ClassVar[str] = "adaptive"
    elastic: ClassVar[bool] = True
    preemptive: ClassVar[bool] = True

    def __init__(self, rule: str, share: float, value: float) -> None:
        self.critical = AdaptivePolicy(protect_critical=True)
        self.order = AdaptivePolicy(protect_critical=False)
        self.rule, self.share, self.value = rule, share, value
        self._jobs: frozenset[str] = frozenset()
        self._by_order = False
        self.rollouts = 0

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        jobs = frozenset(j.id for j in snapshot.jobs)
        if jobs != self._jobs:
            self._jobs, self._by_order = jobs, self._choose(snapshot, now)
        return (self.order if self._by_order else self.critical).decide(snapshot, now)

    def _choose(self, snapshot: Snapshot, now: float) -> bool:
        by_order = self.order.decide(snapshot, now).allocations
        if dict(by_order) == dict(self.critical.decide(snapshot, now).allocations):
            return False
        self.rollouts += 1
        end_c, jct_c = _outcome(self.critical, snapshot, now)
        if not math.isfinite(end_c):
            return True
        if self.rule == "full" or self.share <= 0:
            candidate = self.order
        else:
            candidate = _Switch(self.order, self.critical, now + self.share * (end_c - now))
        end_o, jct_o = _outcome(candidate, snapshot, now)
        span = max(end_c - min(j.submit_time for j in snapshot.jobs), 1e-9)
        if self.rule == "weigh":
            return (jct_c - jct_o) / max(jct_c, 1e-9) > self.value * (end_o - end_c) / span
        return end_o <= end_c + self.value * span


def run_one(task: tuple) -> tuple[str, str, int, float, float, int]:
    variant, kind, seed = task
    wl = workload(kind, seed)
    if variant in ("critical path", "order alone"):
        policy = AdaptivePolicy(protect_critical=variant == "critical path")
    elif variant.startswith("lookahead:"):
        policy = AdaptivePolicy(lookahead=True, makespan_weight=float(variant.split(":")[2]))
    else:
        rule, share, value = variant.split(":")
        policy = ModeChoice(rule, 0.0 if share == "-" else float(share), float(value))
    s = simulate(wl, policy, sidecar(6.0), CONFIG).summary()
    chooser = getattr(policy, "chooser", None)
    choices = chooser.choices if chooser else getattr(policy, "rollouts", 0)
    return variant, kind, seed, s["makespan_s"], s["mean_jct_s"], choices


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=whole(), default=6, help="seeds per kind (default 6)")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--variants", default=VARIANTS, help=f"default {VARIANTS}")
    ap.add_argument("--workers", type=whole(), default=os.cpu_count() or 1)
    args = ap.parse_args()
    variants = ["critical path", "order alone"]
    for v in args.variants.split(","):
        parts = v.split(":")
        if len(parts) != 3 or parts[0] not in ("defer", "full", "weigh", "lookahead"):
            ap.error(f"variant {v!r}: expected defer|full|weigh|lookahead:SHARE:VALUE")
        try:
            float(parts[2])
            if parts[1] != "-":
                float(parts[1])
        except ValueError:
            ap.error(f"variant {v!r}: SHARE and VALUE must be numbers (SHARE may be '-')")
        variants.append(v)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [(v, k, s) for v in variants for k in KINDS for s in seeds]
    print(f"$ {command_line()}\n")
    out: dict = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for v, k, s, makespan, jct, rollouts in tqdm(
            pool.map(run_one, tasks, chunksize=1), total=len(tasks), unit="run", leave=False
        ):
            out[(v, k, s)] = (makespan, jct, rollouts)
    workloads = [(k, s) for k in KINDS for s in seeds]
    print(
        f"{len(workloads)} workloads ({', '.join(KINDS)}; seeds {seeds.start}-{seeds.stop - 1}), "
        f"{GPUS} GPUs ({CONFIG.nodes} x {CONFIG.gpus_per_node}), sidecar 6 s\n"
        "per variant: on how many workloads its makespan is within 2% of the better mode's and "
        "its mean JCT within 3%; median makespan / lower bound and mean JCT / lower bound\n"
    )
    bounds = {
        (k, s): lower_bounds(workload(k, s), GPUS, CONFIG.gpus_per_node, CONFIG.start_cost_s)
        for k, s in workloads
    }
    for v in variants:
        made = len(workloads)
        mk_ok = jct_ok = both = rollouts = 0
        mk_lb, jct_lb = [], []
        for k, s in workloads:
            makespan, jct, n = out[(v, k, s)]
            best_mk = min(out[(m, k, s)][0] for m in ("critical path", "order alone"))
            best_jct = min(out[(m, k, s)][1] for m in ("critical path", "order alone"))
            a, b = makespan <= 1.02 * best_mk, jct <= 1.03 * best_jct
            mk_ok, jct_ok, both = mk_ok + a, jct_ok + b, both + (a and b)
            rollouts += n
            mk_lb.append(makespan / bounds[(k, s)]["makespan_s"])
            jct_lb.append(jct / bounds[(k, s)]["mean_jct_s"])
        print(
            f"{v:15s} makespan {mk_ok:2d}/{made}, mean JCT {jct_ok:2d}/{made}, both {both:2d}/"
            f"{made}; medians {statistics.median(mk_lb):.3f} / {statistics.median(jct_lb):.3f}"
            + (f"; {rollouts:,} choices played forward" if rollouts else "")
        )


if __name__ == "__main__":
    main()
