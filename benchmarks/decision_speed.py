"""How fast the adaptive policy decides, and how fast the simulator replays a large trace.

Targets (on a 2-core machine): one ``adaptive`` decision with 1,000 jobs on 256 GPUs under
50 ms (median); the queue forecast (the sidebar's estimated starts and ends,
``sim.forecast``) of 1,000 jobs on 64 GPUs under 200 ms; 10,000 Philly jobs through the
simulator on 256 GPUs under 60 s.

The simulator takes the last decision instead of deciding again at a tick while the policy said
it holds (``Decision.holds_until``). ``--check`` also runs the plain tick-by-tick replay, which
asks the policy at every tick, and says whether the two runs are the same.

    python benchmarks/decision_speed.py [--data DIR] [--repeat 20] [--philly-jobs N] [--check]
        [--adaptive protect_critical=false]
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import replace

from _common import adaptive_params, add_adaptive_option, command_line, trace_data, whole

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.data import philly_trace, pollux_traces
from jupyter_elastic_gpu.sim.engine import SimConfig, SimResult, simulate
from jupyter_elastic_gpu.sim.forecast import forecast
from jupyter_elastic_gpu.sim.traces.philly import read_philly
from jupyter_elastic_gpu.sim.traces.pollux import scaling_curves


def big_snapshot(jobs: int = 1000, gpus: int = 256, seed: int = 0) -> Snapshot:
    """A busy 32-node box: every GPU granted, most jobs waiting, measured speeds for runners."""
    rng = random.Random(seed)
    gpu_list = tuple(Gpu(f"n{i // 8}-g{i % 8}", f"n{i // 8}") for i in range(gpus))
    free = [g.id for g in gpu_list]
    out = []
    for i in range(jobs):
        lo = rng.choice([1, 1, 1, 2, 4])
        hi = lo * rng.choice([1, 2, 4])
        alpha = rng.uniform(0.5, 0.95)
        prior = {g: 100 * g**alpha for g in range(1, hi + 1)}
        held: tuple[str, ...] = ()
        n = rng.randint(lo, hi)
        if len(free) >= n and rng.random() < 0.5:
            held, free = tuple(free[:n]), free[n:]
        measured = {n: prior[n] * rng.uniform(0.8, 1.1)} if held else {}
        work = rng.lognormvariate(12, 1.5)
        out.append(
            Job(
                f"j{i}",
                rng.uniform(0, 3600),
                work,
                min_gpus=lo,
                max_gpus=hi,
                requested_gpus=lo,
                work_done=rng.random() * work * bool(held),
                speed=SpeedModel(measured, prior),
                resize_cost=6.0,
                gpus=held,
                started=bool(held),
                queued_s=rng.uniform(0, 3600),
                last_change=rng.uniform(0, 3000) if held else None,
            )
        )
    return Snapshot(gpu_list, tuple(out))


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data",
        help="use this folder's pollux/ and philly/ instead of the shipped traces "
        "(see benchmarks/README.md)",
    )
    ap.add_argument("--repeat", type=whole(), default=20)
    ap.add_argument("--philly-jobs", type=whole(), default=10_000)
    ap.add_argument(
        "--check",
        action="store_true",
        help="also run the tick-by-tick replay (every tick decided) and compare the two runs",
    )
    add_adaptive_option(ap)
    args = ap.parse_args()
    params = adaptive_params(ap, args.adaptive)
    print(f"$ {command_line()}\n")

    snap = big_snapshot()
    policy = make_policy("adaptive", **params)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        decision = policy.decide(snap, 3600.0)
        times.append(time.perf_counter() - t0)
    placed = sum(1 for v in decision.allocations.values() if v)
    med = statistics.median(times) * 1000
    print(
        f"adaptive decision, 1,000 jobs on 256 GPUs ({placed} placed): median {med:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms over {args.repeat} runs  (target < 50 ms: "
        f"{'met' if med < 50 else 'NOT met'})"
    )

    queue = big_snapshot(gpus=64)
    times = []
    for _ in range(max(3, args.repeat // 4)):
        t0 = time.perf_counter()
        ahead = forecast(policy, queue, 3600.0)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times) * 1000
    told = sum(1 for e in ahead.estimates.values() if e.end is not None)
    print(
        f"queue forecast with adaptive, 1,000 jobs on 64 GPUs "
        f"({sum(1 for j in queue.jobs if not j.gpus)} queued): median {med:.0f} ms over "
        f"{len(times)} runs, {ahead.decisions} decisions, {told:,} jobs with an estimated end  "
        f"(target < 200 ms: {'met' if med < 200 else 'NOT met'})"
    )

    folder = trace_data(args.data)
    t0 = time.perf_counter()
    wl = read_philly(
        philly_trace(folder),
        limit=args.philly_jobs,
        max_gpus_per_job=64,
        app_profiles=scaling_curves(str(pollux_traces(folder)), 8, 64),
    )
    read_s = time.perf_counter() - t0
    cfg = SimConfig(nodes=32, gpus_per_node=8)
    t0, cpu0 = time.perf_counter(), time.process_time()
    result = simulate(wl, policy, sidecar(6.0), cfg)
    sim_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    print(
        f"simulate {len(wl):,} Philly jobs on 256 GPUs with adaptive: {sim_s:.1f} s "
        f"({cpu_s:.1f} s of CPU: more wall time means others shared the machine; "
        f"{result.decisions:,} decisions made, {result.skipped:,} held and skipped; "
        f"{result.resizes:,} resizes; reading the trace {read_s:.1f} s)  "
        f"(target < 60 s: {'met' if sim_s < 60 else 'NOT met'})"
    )
    print(
        "  decisions made at: " + "; ".join(f"{why} {n:,}" for why, n in result.decided_on.items())
    )
    if args.check:
        t0 = time.perf_counter()
        every = simulate(wl, policy, sidecar(6.0), replace(cfg, skip_held=False))
        every_s = time.perf_counter() - t0
        print(
            f"the tick-by-tick replay: {every_s:.1f} s ({every.decisions:,} decisions), "
            f"{every_s / sim_s:.1f}x the time; the two runs are "
            f"{'the same' if same_run(result, every) else 'DIFFERENT'}"
        )


def same_run(a: SimResult, b: SimResult) -> bool:
    """Every job's start, finish and resizes, and the GPUs in use over time, are the same."""
    return (a.jobs, a.timeline, a.user_timeline) == (b.jobs, b.timeline, b.user_timeline)


if __name__ == "__main__":
    main()
