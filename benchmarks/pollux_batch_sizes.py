"""Pollux with and without its batch-size tuning (the artifact's own simulator), beside our
``adaptive`` with and without goodput batch sizes, in the same settings.

Pollux (Qiao et al., OSDI 2021) chooses every job's batch size as well as its GPUs, at any
time. Ours keeps the batch in the user's code unless a job opts in (``--batch-policy
goodput``), and then changes it only when the job restarts on new GPUs. So "ahead of Pollux" is
measured twice here, on the artifact's simulator itself: Pollux as published (``tuned``) beside
our ``adaptive`` with batch sizes chosen by goodput, and Pollux with every job at its workload's
batch size (``fixed``; what that changes is in ``_pollux_run.py``) beside ours with the same. Settings are the artifact's: 60 s rounds, 30 s per (re)allocation, nodes
of 4 GPUs. Pollux's genetic search is not seeded, so each run differs a little: ``--runs``.

Needs the artifact and a Python with its requirements (its pins are for Python 3.8; on 3.11
these versions build and run it); about 6 minutes per run of sc20-like and 40 of workload-6 on
one core:

    git clone -b osdi21-artifact https://github.com/petuum/adaptdl pollux-artifact
    python3 -m venv pollux-env
    pollux-env/bin/pip install "numpy<1.24" "pandas<2" "scipy<1.12" pymoo==0.4.2.1
    python benchmarks/pollux_batch_sizes.py --artifact pollux-artifact/simulator \
        --python pollux-env/bin/python [--runs 1] [--workloads sc20like-16gpu-24jobs,workload-6]
"""

from __future__ import annotations

import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _artifacts import artifact_run, collect
from _common import command_line, trace_data, whole

from jupyter_elastic_gpu.core.mechanism import Mechanism
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.data import pollux_traces, pollux_workload
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.traces.pollux import read_pollux

#: Nodes of 4 GPUs per workload, as ``fidelity.py`` runs them.
NODES = {"sc20like-16gpu-24jobs": 4, "workload-6": 16}
RUNNER = Path(__file__).with_name("_pollux_run.py")


def pollux_run(python: str, artifact: Path, csv: Path, nodes: int, mode: str) -> dict:
    """One run of the artifact's simulator (``_pollux_run.py``) in its own interpreter."""
    args = [str(artifact), str(csv), str(nodes), mode]
    return artifact_run(python, RUNNER, args, f"{mode}, {csv.name}")


def ours(name: str, folder: Path, batch_policy: str) -> dict:
    """Our ``adaptive`` in our simulator, in the artifact's settings (as ``fidelity.py``), each
    job at its row's batch size (``fixed``) or at batches chosen by goodput (``goodput``)."""
    nodes = NODES[name]
    wl = read_pollux(
        str(pollux_workload(name, folder)),
        str(pollux_traces(folder)),
        4,
        nodes * 4,
        batch_policy=batch_policy,
    )
    cfg = SimConfig(nodes=nodes, gpus_per_node=4, tick_s=60, rounds=True, start_cost_s=30)
    result = simulate(wl, make_policy("adaptive"), Mechanism("restart", 30.0), cfg)
    s = result.summary()
    return {
        "mean_jct_s": s["mean_jct_s"],
        "makespan_s": s["makespan_s"],
        "restarts_per_job": result.resizes / len(wl.jobs),
    }


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,.0f}" if round(lo) == round(hi) else f"{lo:,.0f}-{hi:,.0f}"


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", required=True, help="the artifact's simulator/ folder")
    ap.add_argument("--python", required=True, help="an interpreter with the artifact's needs")
    ap.add_argument("--runs", type=whole(), default=1, help="runs per workload and mode")
    ap.add_argument("--workloads", default=",".join(NODES), help=f"of {', '.join(NODES)}")
    ap.add_argument("--workers", type=whole(), default=2, help="artifact runs at once")
    ap.add_argument("--data", help="use this folder's pollux/ instead of the shipped traces")
    args = ap.parse_args()
    artifact = Path(args.artifact)
    if not (artifact / "simulator.py").is_file():
        ap.error(f"{artifact} has no simulator.py: pass the artifact's simulator/ folder")
    names = args.workloads.split(",")
    unknown = sorted(set(names) - set(NODES))
    if unknown:
        ap.error(f"unknown workload {', '.join(unknown)}; known: {', '.join(NODES)}")
    folder = trace_data(args.data)
    print(f"$ {command_line()}\n")
    tasks = [(n, mode) for n in names for mode in ("tuned", "fixed") for _ in range(args.runs)]
    with ThreadPoolExecutor(args.workers) as pool:
        futures = {
            pool.submit(
                pollux_run,
                args.python,
                artifact,
                pollux_workload(n, folder),
                NODES[n],
                mode,
            ): (n, mode)
            for n, mode in tasks
        }
        results = collect(futures)
    header = ["workload", "scheduler", "mean JCT s", "makespan s", "restarts/job"]
    header += ["JCT: ours /", "makespan: ours /"]
    rows = [header]
    for n in names:
        pollux = {}
        for mode, label in (
            ("tuned", "Pollux, batch sizes tuned"),
            ("fixed", "Pollux, batch sizes fixed"),
        ):
            runs = results[(n, mode)]
            pollux[mode] = {
                k: statistics.mean(r[k] for r in runs)
                for k in ("mean_jct_s", "makespan_s", "restarts_per_job")
            }
            rows.append(
                [
                    n,
                    f"{label} ({len(runs)} run{'s' * (len(runs) > 1)})",
                    _span([r["mean_jct_s"] for r in runs]),
                    _span([r["makespan_s"] for r in runs]),
                    f"{pollux[mode]['restarts_per_job']:.1f}",
                    "",
                    "",
                ]
            )
        # Each of ours beside the Pollux it is to beat: goodput beside Pollux as published.
        for batch_policy, mode in (("goodput", "tuned"), ("fixed", "fixed")):
            mine = ours(n, folder, batch_policy)
            rows.append(
                [
                    n,
                    f"adaptive, batch sizes {'by goodput' if mode == 'tuned' else 'fixed'} (ours)",
                    f"{mine['mean_jct_s']:,.0f}",
                    f"{mine['makespan_s']:,.0f}",
                    f"{mine['restarts_per_job']:.1f}",
                    f"{mine['mean_jct_s'] / pollux[mode]['mean_jct_s']:.2f}x",
                    f"{mine['makespan_s'] / pollux[mode]['makespan_s']:.2f}x",
                ]
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for k, r in enumerate(rows):
        print(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print(
        "\nratios: ours over the mean of the artifact's runs of the Pollux above it (goodput over"
        " tuned, fixed over fixed; below 1: ours is ahead). A restart is a change of a job's GPUs"
        " (Pollux's num_restarts; our resizes, a suspension included)."
    )


if __name__ == "__main__":
    main()
