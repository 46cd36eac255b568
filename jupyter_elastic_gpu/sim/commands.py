"""`jupyter-elastic-gpu simulate` and `jupyter-elastic-gpu workload generate`."""

from __future__ import annotations

import argparse
import math
import os
import sys

from ..core.fairshare import DEFAULT_HALF_LIFE_S
from . import data
from .compare import Costs, compare, parse_run
from .engine import SimConfig
from .generate import DEFAULT_DURATION
from .output import output_file, plot_formats
from .workload import BATCH_POLICIES, Workload

DEFAULT_RUNS = "adaptive,static,termination"
#: Names of shipped data for --app-traces and --format philly --workload (a file or folder of
#: that name wins).
SHIPPED_APP_TRACES = "pollux"
SHIPPED_PHILLY = "philly"


def add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="replay a workload through several policies and compare them side by side",
        description="Replay a workload through scheduling policies on a simulated cluster and "
        "print makespan, JCT, utilisation and resizes per policy, with ratios against "
        "'static' and 'termination' and the lower bounds.",
    )
    src = p.add_argument_group("workload")
    src.add_argument("--format", choices=("native", "pollux", "philly"), default="native")
    src.add_argument("--jobs", help="native: jobs CSV (job_id,submit_time,user,profile,...)")
    src.add_argument("--profiles", help="native: profiles CSV (profile,gpus,throughput)")
    src.add_argument(
        "--workload",
        help="pollux: a workload CSV, or the name of a shipped one (workload-1 .. workload-8, "
        "sc20like-16gpu-24jobs); philly: the trace CSV, or 'philly' (the default) for the "
        "shipped Philly trace",
    )
    src.add_argument(
        "--app-traces",
        help="folder of measured application traces, one sub-folder per application, or "
        f"'{SHIPPED_APP_TRACES}' for the shipped Pollux measurements (the default for --format "
        "pollux; --format philly without it uses synthetic profiles)",
    )
    src.add_argument(
        "--batch-policy",
        choices=BATCH_POLICIES,
        default="fixed",
        help="pollux: 'fixed' runs every job at its row's batch size (default); 'goodput' lets "
        "each job train at any measured batch of its application, the batch chosen at each "
        "(re)start to finish soonest on its GPUs (from the traces' gradient statistics), and "
        "every policy decides on the jobs' goodput",
    )
    src.add_argument("--cluster", help="philly: keep one virtual cluster")
    src.add_argument("--start", help="philly: first submit time to take (e.g. 2017-10-03)")
    src.add_argument("--limit", type=int, help="philly: take this many jobs")
    src.add_argument(
        "--max-gpus-per-job", type=int, default=16, help="philly: elastic cap (default 16)"
    )
    src.add_argument("--seed", type=int, default=0, help="philly: application assignment seed")
    src.add_argument(
        "--name",
        help="the workload's name in the table and the plot's title (default: the name of "
        "its file)",
    )

    cl = p.add_argument_group("cluster and mechanisms")
    cl.add_argument("--nodes", type=int, default=4)
    cl.add_argument("--gpus-per-node", type=int, default=4)
    cl.add_argument(
        "--policy",
        default=DEFAULT_RUNS,
        help="comma-separated runs: adaptive, static, termination, tiresias, optimus, elas, "
        "srtf; POLICY@termination runs a policy with the termination mechanism "
        f"(default {DEFAULT_RUNS})",
    )
    cl.add_argument(
        "--adaptive",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter of the adaptive policy for every run of it (repeatable), e.g. "
        "protect_critical=false; as the live scheduler's SchedulerService.policy_params",
    )
    cl.add_argument("--tick", type=float, default=60.0, help="seconds between periodic decisions")
    cl.add_argument(
        "--rounds",
        action="store_true",
        help="decide only at ticks, like the Pollux simulator (default: at every event too)",
    )
    cl.add_argument("--sidecar-cost", type=float, default=6.0, help="seconds per sidecar resize")
    cl.add_argument(
        "--termination-cost", type=float, default=60.0, help="seconds per termination restart"
    )
    cl.add_argument(
        "--checkpoint-interval",
        type=float,
        default=600.0,
        help="seconds between periodic checkpoints (work since the last one is lost on a "
        "termination)",
    )
    cl.add_argument("--start-cost", type=float, default=0.0, help="seconds a job takes to start")
    cl.add_argument(
        "--user-gpu-cap",
        type=int,
        default=0,
        metavar="N",
        help="most GPUs one user's jobs may hold at a time, as the live scheduler's "
        "user_gpu_cap (default 0: no cap). Users come from the native trace's user column; "
        "Philly jobs belong to their virtual cluster; Pollux traces have no users, so all their "
        "jobs are one user ('default') and a cap bounds them together",
    )
    cl.add_argument(
        "--fair-share",
        action="store_true",
        help="share the GPUs between users by weight and decayed usage, as the live "
        "scheduler's fair_share (users as for --user-gpu-cap); the report adds each user's "
        "share over time",
    )
    cl.add_argument(
        "--fair-share-half-life",
        type=float,
        default=DEFAULT_HALF_LIFE_S,
        metavar="SECONDS",
        help=f"seconds after which past usage counts half (default {DEFAULT_HALF_LIFE_S:g}: "
        "7 days)",
    )
    cl.add_argument(
        "--user-weights",
        metavar="USER=W,...",
        help="fair-share weights per user, e.g. alice=2,bob=1 (users not named: 1)",
    )

    out = p.add_argument_group("output")
    out.add_argument("--json", metavar="OUT", help="write the results as JSON")
    out.add_argument(
        "--plot",
        metavar="OUT.png",
        help="draw the comparison: JCT distributions, each run against the lower bounds, and "
        "the GPUs allocated over time (PNG, SVG or PDF by the suffix)",
    )
    out.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars (they are drawn only where stderr is a terminal)",
    )
    p.set_defaults(func=run_simulate)


def add_workload(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="make workloads for the simulator")
    wsub = p.add_subparsers(dest="workload_command", required=True, metavar="COMMAND")
    g = wsub.add_parser(
        "generate",
        help="write a synthetic native workload (jobs.csv + profiles.csv)",
        description="Generate a reproducible lab workload: Poisson arrivals, log-normal "
        "durations, a mix of GPU requests and users, synthetic speed profiles.",
    )
    g.add_argument("--out", required=True, help="folder to write jobs.csv and profiles.csv into")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--jobs", type=int, default=50, help="number of jobs (default 50)")
    g.add_argument("--window", type=float, default=8 * 3600, help="arrival window, seconds")
    g.add_argument(
        "--median-duration",
        type=float,
        default=DEFAULT_DURATION[1],
        help="median run time alone at the requested count, seconds (log-normal; default "
        f"{DEFAULT_DURATION[1]:g})",
    )
    g.add_argument(
        "--sigma",
        type=float,
        default=DEFAULT_DURATION[2],
        help=f"log-normal sigma of durations (default {DEFAULT_DURATION[2]:g})",
    )
    g.add_argument(
        "--gpu-mix",
        help="requested GPUs and their shares (default 1:0.5,2:0.25,4:0.2,8:0.05, without "
        "counts above --max-gpus)",
    )
    g.add_argument("--users", type=int, default=6)
    g.add_argument("--max-gpus", type=int, default=8, help="largest GPU count a job may use")
    g.set_defaults(func=run_generate)


def _need(args: argparse.Namespace, *names: str) -> None:
    missing = [n for n in names if getattr(args, n.replace("-", "_")) is None]
    if missing:
        raise ValueError(f"--format {args.format} needs " + " and ".join(f"--{n}" for n in missing))


def _app_traces(text: str) -> str:
    """A folder of application traces, or the shipped Pollux measurements by name."""
    if text == SHIPPED_APP_TRACES and not os.path.exists(text):
        return str(data.pollux_traces())
    return text


def _pollux_workload(text: str) -> str:
    """A workload file, or the shipped Pollux workload of that name."""
    if os.path.exists(text):
        return text
    try:
        return str(data.pollux_workload(text))
    except FileNotFoundError:
        shipped = ", ".join(data.pollux_workload_names())
        raise ValueError(
            f"--workload {text}: no such file, nor a shipped workload (shipped: {shipped})"
        ) from None


def load_workload(args: argparse.Namespace) -> Workload:
    """The workload the arguments name (errors name the file, row and column)."""
    total = args.nodes * args.gpus_per_node
    if args.batch_policy != "fixed" and args.format != "pollux":
        raise ValueError(
            f"--batch-policy {args.batch_policy} needs --format pollux: only the Pollux "
            "application traces measure the gradient statistics a batch is chosen by"
        )
    if args.format == "native":
        from .traces.native import read_native

        _need(args, "jobs", "profiles")
        return read_native(args.jobs, args.profiles)
    if args.format == "pollux":
        from .traces.pollux import read_pollux

        if args.workload is None:
            shipped = ", ".join(data.pollux_workload_names())
            raise ValueError(
                f"--format pollux needs --workload: a workload CSV or a shipped one ({shipped})"
            )
        return read_pollux(
            _pollux_workload(args.workload),
            _app_traces(args.app_traces) if args.app_traces else str(data.pollux_traces()),
            args.gpus_per_node,
            max_gpus=total,
            batch_policy=args.batch_policy,
        )
    from .traces.philly import read_philly

    profiles = None
    if args.app_traces:
        from .traces.pollux import scaling_curves

        profiles = scaling_curves(
            _app_traces(args.app_traces), args.gpus_per_node, args.max_gpus_per_job
        )
    workload = args.workload
    if workload is None or (workload == SHIPPED_PHILLY and not os.path.exists(workload)):
        workload = str(data.philly_trace())
    return read_philly(
        workload,
        cluster=args.cluster,
        start=args.start,
        limit=args.limit,
        max_gpus_per_job=min(args.max_gpus_per_job, total),
        app_profiles=profiles,
        seed=args.seed,
    )


def run_simulate(args: argparse.Namespace) -> int:
    from .report import format_table, plot, write_json

    config = SimConfig(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        tick_s=args.tick,
        rounds=args.rounds,
        start_cost_s=args.start_cost,
        user_gpu_cap=args.user_gpu_cap,
        fair_share=args.fair_share,
        fair_share_half_life=args.fair_share_half_life,
        user_weights=parse_weights(args.user_weights) if args.user_weights else {},
    )
    costs = Costs(args.sidecar_cost, args.termination_cost, args.checkpoint_interval)
    runs = [r.strip() for r in args.policy.split(",") if r.strip()]
    for run in runs:
        parse_run(run)  # a typo fails before a large trace is read
    params = parse_adaptive(args.adaptive)
    # Where the results go is checked first: a typo there must not cost the whole run.
    if args.json:
        output_file(args.json, "--json")
    if args.plot:
        output_file(args.plot, "--plot", plot_formats())
    workload = load_workload(args)
    if args.name:
        workload.name = args.name
    comp = compare(
        workload,
        runs,
        config,
        costs,
        progress=not args.no_progress,
        policy_params={"adaptive": params},
    )
    print(format_table(comp))
    if args.json:
        write_json(comp, args.json)
        print(f"\nwrote {args.json}")
    if args.plot:
        plot(comp, args.plot)
        print(f"wrote {args.plot}")
    return 0


def parse_adaptive(items: list[str]) -> dict[str, object]:
    """['protect_critical=true', 'aging_s=600'] -> AdaptiveParams keyword arguments."""
    from ..core.policies import AdaptiveParams

    defaults = AdaptiveParams()
    params: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in AdaptiveParams.__dataclass_fields__:
            known = ", ".join(AdaptiveParams.__dataclass_fields__)
            raise ValueError(f"--adaptive {item!r}: expected NAME=VALUE, NAME one of {known}")
        kind = type(getattr(defaults, name))
        if kind is bool:
            if value.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"--adaptive {item!r}: {name} is true or false")
            params[name] = value.strip().lower() in ("true", "1", "yes")
            continue
        try:
            number = kind(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            what = "a whole number" if kind is int else "a finite number"
            raise ValueError(f"--adaptive {item!r}: {name} is {what}")
        params[name] = number
    try:
        AdaptiveParams(**params)  # a value out of range fails here, before any work
    except ValueError as e:
        raise ValueError(f"--adaptive: {e}") from None
    return params


def parse_weights(text: str) -> dict[str, float]:
    """'alice=2,bob=1' -> {'alice': 2.0, 'bob': 1.0}."""
    weights = {}
    for part in text.split(","):
        user, sep, w = part.partition("=")
        try:
            weights[user.strip()] = float(w)
        except ValueError:
            sep = ""
        if not sep or not user.strip():
            raise ValueError(
                f"--user-weights: expected USER=WEIGHT pairs such as alice=2,bob=1, got {part!r}"
            )
    return weights


def parse_mix(text: str) -> dict[int, float]:
    mix = {}
    for part in text.split(","):
        gpus, sep, share = part.partition(":")
        try:
            mix[int(gpus)] = float(share)
        except ValueError:
            raise ValueError(
                f"--gpu-mix: expected GPUS:SHARE pairs such as 1:0.5,2:0.5, got {part!r}"
            ) from None
        if not sep:
            raise ValueError(f"--gpu-mix: expected GPUS:SHARE, got {part!r}")
    return mix


def run_generate(args: argparse.Namespace) -> int:
    from .generate import generate_and_write

    jobs, profiles = generate_and_write(
        args.out,
        seed=args.seed,
        jobs=args.jobs,
        window_s=args.window,
        duration=("lognormal", args.median_duration, args.sigma),
        gpu_mix=parse_mix(args.gpu_mix) if args.gpu_mix else None,
        users=args.users,
        max_gpus=args.max_gpus,
    )
    print(f"wrote {jobs} and {profiles}")
    print(
        f"run it: jupyter-elastic-gpu simulate --jobs {jobs} --profiles {profiles}",
        file=sys.stderr,
    )
    return 0
