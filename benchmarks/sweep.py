"""Every policy on many generated workloads: how far each is from the lower bounds, and where
``adaptive`` is not the best.

The workloads are drawn, not chosen: five kinds of lab (``KINDS``), each with its job count,
arrival window and duration spread drawn from the seed, so no single load level decides the
outcome. One cluster of 16 GPUs (4 x 4), sidecar resizes of 6 s, 6 s to start a job, decisions
at events and every 60 s, as in ``paper_comparison.py``. Per policy it prints makespan / lower
bound and mean JCT / lower bound (median and worst over the workloads), then the workloads
where ``adaptive`` is more than 2% behind the best other policy on either metric.

    python benchmarks/sweep.py [--seeds 8] [--kinds steady,bursty,...] [--plot FILE] [--json FILE]

A scatter plot (``--plot``) shows every workload as a point per policy: mean JCT / bound
against makespan / bound, with each policy's median as a large marker.
"""

from __future__ import annotations

import os
import random
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from _common import (
    adaptive_params,
    add_adaptive_option,
    command_line,
    output_file,
    whole,
    write_json,
)
from tqdm import tqdm

from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.policies import POLICIES, make_policy
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.bounds import lower_bounds
from jupyter_elastic_gpu.sim.engine import SimConfig, SimulationStalled, simulate
from jupyter_elastic_gpu.sim.generate import generate_workload
from jupyter_elastic_gpu.sim.output import save_figure
from jupyter_elastic_gpu.sim.workload import Workload

CONFIG = SimConfig(nodes=4, gpus_per_node=4, tick_s=60, start_cost_s=6)
GPUS = CONFIG.nodes * CONFIG.gpus_per_node
#: "Within 2%" of the best other policy counts as best (ties in a simulation are not news).
TOLERANCE = 1.02


#: GPU requests: a quarter of the jobs on 4 or 8 GPUs, as in the paper's workloads.
PAPER_MIX = {1: 0.4, 2: 0.25, 4: 0.2, 8: 0.15}


@dataclass(frozen=True)
class Kind:
    """A kind of lab: ranges each workload's knobs are drawn from (uniformly, per seed)."""

    why: str
    jobs: tuple[int, int]
    window_h: tuple[float, float]
    median_s: tuple[float, float]  # of the log-normal run time alone at the requested count
    sigma: tuple[float, float]
    gpu_mix: dict[int, float]

    def knobs(self, rng: random.Random) -> dict:
        return dict(
            jobs=rng.randint(*self.jobs),
            window_s=rng.uniform(*self.window_h) * 3600,
            duration=("lognormal", rng.uniform(*self.median_s), rng.uniform(*self.sigma)),
            gpu_mix=self.gpu_mix,
        )


KINDS: dict[str, Kind] = {
    "steady": Kind(
        "paper-like: a steady stream that keeps the box busy, a quarter of the jobs large",
        (40, 80),
        (4, 8),
        (900, 1800),
        (0.8, 1.2),
        PAPER_MIX,
    ),
    "bursty": Kind(
        "most jobs at once (a deadline, a class): the queue is long, then drains",
        (30, 60),
        (0.25, 1.0),
        (900, 1800),
        (0.8, 1.2),
        PAPER_MIX,
    ),
    "light": Kind(
        "fewer jobs than the box could take: the queue is mostly empty",
        (15, 30),
        (6, 12),
        (900, 1800),
        (1.0, 1.0),
        {1: 0.5, 2: 0.25, 4: 0.2, 8: 0.05},
    ),
    "heavy-tailed": Kind(
        "durations spread over four orders of magnitude: a few jobs dominate the GPU time",
        (40, 80),
        (4, 8),
        (400, 900),
        (1.8, 2.2),
        PAPER_MIX,
    ),
    "philly-like": Kind(
        "mostly 1-GPU jobs, as in Microsoft's Philly trace, and a few large ones",
        (60, 120),
        (4, 8),
        (900, 1800),
        (1.0, 1.5),
        {1: 0.8, 2: 0.1, 4: 0.07, 8: 0.03},
    ),
}


def workload(kind: str, seed: int) -> Workload:
    """The workload of ``kind`` drawn from ``seed`` (the same everywhere)."""
    knobs = KINDS[kind].knobs(random.Random(f"sweep/{kind}/{seed}"))
    return generate_workload(seed, max_gpus=GPUS, name=f"{kind}-{seed}", **knobs)


def run_one(task: tuple) -> tuple[str, int, str, dict | None]:
    """(kind, seed, policy, adaptive's parameters) -> its makespan and mean JCT over their
    lower bounds."""
    kind, seed, policy, params = task
    wl = workload(kind, seed)
    bound = lower_bounds(wl, GPUS, CONFIG.gpus_per_node, CONFIG.start_cost_s)
    chosen = make_policy(policy, **(params if policy == "adaptive" else {}))
    try:
        s = simulate(wl, chosen, sidecar(6.0), CONFIG).summary()
    except SimulationStalled:
        return kind, seed, policy, None
    return (
        kind,
        seed,
        policy,
        {
            "makespan": s["makespan_s"] / bound["makespan_s"],
            "jct": s["mean_jct_s"] / bound["mean_jct_s"],
            "makespan_s": s["makespan_s"],
            "mean_jct_s": s["mean_jct_s"],
            "resizes": s["resizes"],
        },
    )


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
            )
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def report(results: dict, policies: list[str], ours: str = "adaptive") -> str:
    """The per-policy table and the workloads where ``ours`` is not best (within 2%)."""
    workloads = sorted({(k, s) for (k, s, _) in results})
    lines = []
    rows = [["policy", "makespan/LB median", "worst", "JCT/LB median", "worst", "not finished"]]
    for p in policies:
        ms = [results[(k, s, p)]["makespan"] for k, s in workloads if results.get((k, s, p))]
        js = [results[(k, s, p)]["jct"] for k, s in workloads if results.get((k, s, p))]
        missing = sum(1 for k, s in workloads if not results.get((k, s, p)))
        rows.append(
            [
                p,
                f"{statistics.median(ms):.3f}" if ms else "-",
                f"{max(ms):.3f}" if ms else "-",
                f"{statistics.median(js):.3f}" if js else "-",
                f"{max(js):.3f}" if js else "-",
                str(missing),
            ]
        )
    lines.append(_table(rows))
    if ours not in policies:
        return "\n".join(lines)
    others = [p for p in policies if p != ours]
    behind: dict[str, list[str]] = {"makespan": [], "jct": []}
    ratios: dict[str, list[float]] = {"makespan": [], "jct": []}
    for k, s in workloads:
        mine = results.get((k, s, ours))
        for metric in ("makespan", "jct"):
            best = min(
                (results[(k, s, p)][metric] for p in others if results.get((k, s, p))),
                default=None,
            )
            if best is None:
                continue
            r = mine[metric] / best if mine else float("inf")
            ratios[metric].append(r)
            if r > TOLERANCE:
                who = min(
                    (p for p in others if results.get((k, s, p))),
                    key=lambda p: results[(k, s, p)][metric],
                )
                behind[metric].append(f"{k}-{s} ({r:.3f}x {who})")
    n = len(workloads)
    for metric, word in (("makespan", "makespan"), ("jct", "mean JCT")):
        rs = ratios[metric]
        if not rs:  # no other policy finished a workload (or none was asked for)
            lines.append(f"\n{ours} {word}: no other policy to compare with")
            continue
        lines.append(
            f"\n{ours} {word} / best other policy: median {statistics.median(rs):.3f}x, "
            f"worst {max(rs):.3f}x; more than {TOLERANCE - 1:.0%} behind on "
            f"{len(behind[metric])} of {n} workloads"
            + (": " + ", ".join(behind[metric]) if behind[metric] else "")
        )
    return "\n".join(lines)


def scatter(results: dict, policies: list[str], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(7, 5))
    for i, p in enumerate(policies):
        pts = [v for (_, _, q), v in results.items() if q == p and v]
        if not pts:
            continue
        color = f"C{i}"
        xs, ys = [v["makespan"] for v in pts], [v["jct"] for v in pts]
        ax.scatter(xs, ys, s=10, alpha=0.35, color=color)
        ax.scatter(
            [statistics.median(xs)],
            [statistics.median(ys)],
            s=140,
            color=color,
            edgecolor="black",
            label=p,
            zorder=3,
        )
    ax.set_xlabel("makespan / lower bound")
    ax.set_ylabel("mean JCT / lower bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(plain)
    ax.set_title(f"{len({(k, s) for k, s, _ in results})} generated workloads, 16 GPUs (4 x 4)")
    ax.legend(title="median (large), each workload (small)", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=whole(), default=8, help="seeds per kind (default 8)")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    ap.add_argument("--policies", default=",".join(POLICIES), help="default: every policy")
    ap.add_argument("--workers", type=whole(), default=os.cpu_count() or 1)
    add_adaptive_option(ap)
    ap.add_argument("--plot", help="write the scatter plot (PNG) here")
    ap.add_argument("--json", help="write every figure as JSON here")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    policies = [p for p in args.policies.split(",") if p]
    for k in kinds:
        if k not in KINDS:
            ap.error(f"unknown kind {k!r} (known: {', '.join(KINDS)})")
    for p in policies:
        if p not in POLICIES:
            ap.error(f"unknown policy {p!r} (known: {', '.join(POLICIES)})")
    params = adaptive_params(ap, args.adaptive)
    output_file(ap, args.plot, "--plot", plot=True)
    output_file(ap, args.json, "--json")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [(k, s, p, params) for k in kinds for s in seeds for p in policies]
    print(f"$ {command_line()}\n")
    results: dict = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for kind, seed, policy, figures in tqdm(
            pool.map(run_one, tasks, chunksize=1), total=len(tasks), unit="run", leave=False
        ):
            results[(kind, seed, policy)] = figures
    print(
        f"{len(kinds) * len(seeds)} workloads ({', '.join(kinds)}; seeds {seeds.start}-"
        f"{seeds.stop - 1}), 16 GPUs (4 x 4), sidecar 6 s"
        + (f"; adaptive with {params}" if params else "")
        + "\n"
    )
    print(report(results, policies))
    if args.plot:
        scatter(results, policies, args.plot)
        print(f"\nwrote {args.plot}")
    if args.json:
        dump = [
            {"kind": k, "seed": s, "policy": p, **(v or {"did_not_finish": True})}
            for (k, s, p), v in sorted(results.items())
        ]
        write_json(args.json, dump)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
