"""Adaptive vs static vs termination, live, beside what the simulator predicts for the same run.

Sixteen synthetic jobs (seeded: arrivals over the first part of the run, varied sizes and
speed-up curves up to 8 GPUs) go through the real service on 8 simulated GPUs: one real
Jupyter server subprocess per policy run (``--ElasticGPUApp.policy``, ``.mechanism``), real
launcher, real sidecars and synthetic trainers, each job submitted over the API at its arrival
time. The runs are one after another, on equal terms. Makespan and mean JCT come from the API
(``submitted_at``, ``finished_at``).

The simulator then replays the same jobs with the same tick, twice: once with only the resize
pause the sidecars report themselves (``resize_cost_s``), and once with the overheads the live
runs measured end to end from the API's events and progress records: the start latency (the
decision to admit a job until its first training step, plus the time from its last step until
the scheduler marks it done, both of which hold GPUs without progress), and the pause of a
resize (the decision until the first step on the new grant) for the sidecar and for
termination. The second is the prediction printed beside each live figure.

Synthetic jobs are time-compressed: the profiles are samples/s of a modelled job in real time,
and each job runs ``--time-scale`` times faster.

    python benchmarks/live_comparison.py [--scale 1] [--seed 7] [--json OUT] [--dry-run]
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _common import command_line, output_file, positive, whole, write_json
from _servers import JupyterServer

from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.compare import Costs, compare
from jupyter_elastic_gpu.sim.engine import SimConfig
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload, profile_throughput

POLICIES = ("adaptive", "static", "termination")
GPUS = 8
TARGET = 0.15  # live within 15% of the simulator's prediction
#: A grant change slower than this waited for something else than its own restart.
SLOW_CHANGE_S = 2.0


@dataclass(frozen=True)
class LiveJob:
    """One job of the comparison; ``profile`` in samples/s of the modelled (real-time) job."""

    name: str
    arrival_s: float  # wall seconds after the first submission
    work: int  # samples
    profile: dict[int, float]
    min_gpus: int
    max_gpus: int
    requested: int
    batch: int

    def submit_body(self, time_scale: float) -> dict:
        return {
            "name": self.name,
            "kind": "synthetic",
            "min_gpus": self.min_gpus,
            "max_gpus": self.max_gpus,
            "requested_gpus": self.requested,
            "synthetic": {
                "work": self.work,
                "throughput": {str(g): x for g, x in self.profile.items()},
                "time_scale": time_scale,
                "batch": self.batch,
            },
        }


def build_jobs(seed: int, n: int, scale: float, time_scale: float) -> list[LiveJob]:
    """Deterministic jobs: a mix of sizes (1-8 GPUs requested, elastic around it), sub-linear
    speed-ups of varied efficiency, log-normal lengths, arrivals over the first ~minute."""
    rng = random.Random(seed)
    window = 60.0 * scale  # wall seconds over which the jobs arrive
    arrivals = sorted([0.0] + [rng.uniform(0, window) for _ in range(n - 1)])
    jobs = []
    for i, arrival in enumerate(arrivals):
        requested = rng.choice((1, 1, 2, 2, 4, 4, 8))
        min_gpus = max(1, requested // 2)
        max_gpus = min(GPUS, requested * 2)
        x1 = round(rng.uniform(60, 160), 1)  # samples/s on one GPU, real time
        alpha = rng.uniform(0.55, 0.95)  # speed-up exponent: 8 GPUs give 8**alpha
        profile = {g: round(x1 * g**alpha, 1) for g in (1, 2, 4, 8)}
        alone_s = min(max(rng.lognormvariate(math.log(22.0), 0.6), 6.0), 80.0) * scale
        speed = profile_throughput(profile, requested) * time_scale  # wall samples/s
        batch = max(1, round(x1 * time_scale * 0.05))  # ~50 ms steps on one GPU
        jobs.append(
            LiveJob(
                name=f"job-{i:02d}",
                arrival_s=round(arrival, 2),
                work=int(alone_s * speed),
                profile=profile,
                min_gpus=min_gpus,
                max_gpus=max_gpus,
                requested=requested,
                batch=batch,
            )
        )
    return jobs


# -- live ---------------------------------------------------------------------------------------


@dataclass
class LiveRun:
    policy: str
    jobs: list[dict]  # the API's job documents at the end
    events: dict[str, list[dict]]
    progress: dict[str, list[dict]]
    wall_s: float
    #: Grant changes that took longer than SLOW_CHANGE_S, for people (set by ``overheads``).
    slow_changes: list[str] = field(default_factory=list)

    @property
    def t0(self) -> float:
        return min(j["submitted_at"] for j in self.jobs)

    def summary(self) -> dict:
        jcts = [j["finished_at"] - j["submitted_at"] for j in self.jobs]
        # Changes of a running job's grant, counted as the simulator counts them: a grow, a
        # shrink or a suspend (a resume is the second half of a suspend).
        changes = sum(
            1 for evs in self.events.values() for e in evs if e["kind"] in ("resize", "suspend")
        )
        return {
            "makespan_s": max(j["finished_at"] for j in self.jobs) - self.t0,
            "mean_jct_s": statistics.fmean(jcts),
            "resizes": changes,
        }

    def overheads(self) -> dict[str, list[float]]:
        """Seconds without progress, measured end to end, by kind:

        * ``start``: an admission decision until the job's first step on that grant;
        * ``finish``: the job's last progress record until the scheduler marked it done;
        * ``change``: a resize or a resume decision until the first step on the new grant;
        * ``reported``: the resize pause the sidecars report (``resize_cost_s``).
        """
        out: dict[str, list[float]] = {"start": [], "finish": [], "change": [], "reported": []}
        self.slow_changes.clear()
        for job in self.jobs:
            events, records = self.events[job["id"]], self.progress[job["id"]]
            first_step = {}
            for r in records:
                first_step.setdefault(r["generation"], r["t"])
            for e in events:
                data = e.get("data") or {}
                gen = data.get("generation")
                if gen not in first_step:
                    continue
                if e["kind"] == "admitted":
                    out["start"].append(first_step[gen] - e["t"])
                elif e["kind"] in ("resize", "resumed"):
                    out["change"].append(first_step[gen] - e["t"])
                    if first_step[gen] - e["t"] > SLOW_CHANGE_S:
                        self.slow_changes.append(
                            f"{job['name']} {e['kind']} at {e['t'] - self.t0:.1f} s: "
                            f"{first_step[gen] - e['t']:.1f} s to its first step"
                        )
            if records and job["finished_at"]:
                out["finish"].append(job["finished_at"] - records[-1]["t"])
            if job["resize_cost_s"] is not None:
                out["reported"].append(job["resize_cost_s"])
        return out


def server_config(policy: str, args: argparse.Namespace) -> dict:
    mechanism = "termination" if policy == "termination" else "sidecar"
    return {
        "simulated_gpus": GPUS,
        "SchedulerService.policy": "adaptive" if policy == "termination" else policy,
        "SchedulerService.mechanism": mechanism,
        "SchedulerService.tick_interval": args.tick,
        "SchedulerService.heartbeat_interval": args.heartbeat,
        "SchedulerService.heartbeat_timeout": 15.0,
        "SchedulerService.default_resize_cost": args.assumed_pause,
        "SchedulerService.checkpoint_interval": args.checkpoint_interval,
    }


def run_live(policy: str, jobs: list[LiveJob], args: argparse.Namespace, root: Path) -> LiveRun:
    server = JupyterServer(
        root / policy,
        config=server_config(policy, args),
        env={"ELASTIC_GPU_PROGRESS_INTERVAL": f"{args.heartbeat:g}"},
    )
    server.start()
    try:
        started = time.monotonic()
        ids = []
        for job in jobs:
            time.sleep(max(0.0, started + job.arrival_s - time.monotonic()))
            code, doc = server.call("POST", "jobs", job.submit_body(args.time_scale))
            if code != 201:
                raise SystemExit(f"{policy}: submitting {job.name} answered {code}: {doc}")
            ids.append(doc["id"])
        deadline = started + args.timeout
        last_line = 0.0
        while True:
            docs = [j for j in server.get("jobs")["jobs"] if j["id"] in ids]
            done = [j for j in docs if j["state"] in ("done", "failed", "cancelled")]
            if len(done) == len(ids):
                break
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"{policy}: {len(ids) - len(done)} jobs unfinished after {args.timeout:.0f} s"
                )
            if time.monotonic() - last_line > 30:
                print(
                    f"  {policy}: {time.monotonic() - started:5.0f} s, {len(done)}/{len(ids)} done",
                    flush=True,
                )
                last_line = time.monotonic()
            time.sleep(1.0)
        failed = [j["name"] for j in done if j["state"] != "done"]
        if failed:
            raise SystemExit(f"{policy}: jobs did not finish well: {failed}")
        events = {i: server.get(f"jobs/{i}/events")["events"] for i in ids}
        progress = {i: server.get(f"jobs/{i}/progress")["progress"] for i in ids}
        return LiveRun(policy, docs, events, progress, time.monotonic() - started)
    finally:
        server.stop()


# -- simulator ----------------------------------------------------------------------------------


def simulate(jobs: list[LiveJob], args, start_s: float, sidecar_s: float, termination_s: float):
    """The simulator's figures for the same jobs, in the same (wall) seconds."""
    specs = [
        JobSpec(
            job_id=j.name,
            submit_time=j.arrival_s,
            work=float(j.work),
            profile={g: x * args.time_scale for g, x in j.profile.items()},
            min_gpus=j.min_gpus,
            max_gpus=j.max_gpus,
            requested_gpus=j.requested,
        )
        for j in jobs
    ]
    config = SimConfig(nodes=1, gpus_per_node=GPUS, tick_s=args.tick, start_cost_s=start_s)
    costs = Costs(
        sidecar_s=sidecar_s,
        termination_s=termination_s,
        checkpoint_interval=args.checkpoint_interval,
    )
    comp = compare(Workload("live", specs), list(POLICIES), config, costs, progress=False)
    if comp.stalled:
        raise SystemExit(f"the simulator did not finish: {comp.stalled}")
    return {
        name: {
            "makespan_s": r.makespan_s,
            "mean_jct_s": r.summary()["mean_jct_s"],
            "resizes": r.resizes,
        }
        for name, r in comp.results.items()
    }


# -- report -------------------------------------------------------------------------------------


def mean(values: list[float], default: float) -> float:
    return statistics.fmean(values) if values else default


def describe(values: list[float]) -> str:
    if not values:
        return "none measured"
    return (
        f"mean {statistics.fmean(values):.2f} s, median {statistics.median(values):.2f} s, "
        f"max {max(values):.2f} s, n={len(values)}"
    )


def print_jobs(jobs: list[LiveJob], time_scale: float) -> None:
    print(f"{len(jobs)} jobs (work in samples; speeds in samples/s before x{time_scale:g}):")
    print(f"{'job':<8}{'arrives':>8}{'GPUs min/req/max':>18}{'speed 1/2/4/8 GPUs':>26}")
    for j in jobs:
        speeds = "/".join(f"{j.profile[g]:g}" for g in (1, 2, 4, 8))
        alone = j.work / (profile_throughput(j.profile, j.requested) * time_scale)
        print(
            f"{j.name:<8}{j.arrival_s:>7.1f}s{f'{j.min_gpus}/{j.requested}/{j.max_gpus}':>18}"
            f"{speeds:>26}   {alone:5.1f} s alone at its request"
        )
    print()


def rel(live: float, sim: float) -> float:
    return (live - sim) / sim


def print_comparison(live: dict, naive: dict, predicted: dict) -> list[str]:
    """The side-by-side table; returns the figures off the prediction by more than TARGET."""
    off = []
    header = (
        f"{'policy':<12}{'':>10}{'live':>9}{'sim':>9}{'diff':>8}{'sim, naive':>12}"
        f"{'resizes live/sim':>18}"
    )
    print(header)
    print("-" * len(header))
    for policy in POLICIES:
        for i, (key, label) in enumerate((("makespan_s", "makespan"), ("mean_jct_s", "mean JCT"))):
            lv, pv, nv = live[policy][key], predicted[policy][key], naive[policy][key]
            d = rel(lv, pv)
            if abs(d) > TARGET:
                off.append(f"{policy} {label}")
            resizes = f"{live[policy]['resizes']}/{predicted[policy]['resizes']}" if i == 0 else ""
            print(
                f"{policy if i == 0 else '':<12}{label:>10}{lv:>8.1f}s{pv:>8.1f}s{d:>+8.0%}"
                f"{nv:>11.1f}s{resizes:>18}"
            )
    print()
    header = f"{'ratio':<24}{'':>10}{'live':>8}{'sim':>8}{'diff':>8}"
    print(header)
    print("-" * len(header))
    for base in ("static", "termination"):
        for key, label in (("makespan_s", "makespan"), ("mean_jct_s", "mean JCT")):
            lr = live["adaptive"][key] / live[base][key]
            sr = predicted["adaptive"][key] / predicted[base][key]
            print(f"{'adaptive / ' + base:<24}{label:>10}{lr:>8.2f}{sr:>8.2f}{rel(lr, sr):>+8.0%}")
    print()
    return off


def main() -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=whole(), default=16)
    ap.add_argument(
        "--scale",
        type=positive,
        default=1.0,
        help="job lengths and arrival window x this (0.3: quick)",
    )
    ap.add_argument(
        "--time-scale", type=positive, default=30.0, help="synthetic jobs run F x faster"
    )
    ap.add_argument("--tick", type=positive, default=5.0, help="seconds between periodic decisions")
    ap.add_argument(
        "--heartbeat", type=positive, default=0.5, help="heartbeat and progress interval"
    )
    ap.add_argument(
        "--checkpoint-interval", type=positive, default=10.0, help="periodic checkpoints (seconds)"
    )
    ap.add_argument(
        "--assumed-pause",
        type=positive,
        default=1.0,
        help="resize cost the scheduler assumes until a job has measured its own",
    )
    ap.add_argument("--timeout", type=positive, default=900.0, help="seconds per live run at most")
    ap.add_argument("--dry-run", action="store_true", help="print the jobs and the sim only")
    ap.add_argument("--json", help="write the measurements and predictions here")
    ap.add_argument("--keep", action="store_true", help="keep the servers' folders")
    args = ap.parse_args()
    output_file(ap, args.json, "--json")
    print(f"$ {command_line()}\n")

    jobs = build_jobs(args.seed, args.jobs, args.scale, args.time_scale)
    print_jobs(jobs, args.time_scale)
    if args.dry_run:
        naive = simulate(jobs, args, 0.0, args.assumed_pause, args.assumed_pause)
        for policy, figures in naive.items():
            print(
                f"sim {policy:<12} makespan {figures['makespan_s']:6.1f} s, mean JCT "
                f"{figures['mean_jct_s']:6.1f} s, {figures['resizes']} resizes"
            )
        return 0

    root = Path(tempfile.mkdtemp(prefix="elastic-gpu-live-"))
    runs: dict[str, LiveRun] = {}
    try:
        for policy in POLICIES:
            print(f"live run: {policy} ...", flush=True)
            runs[policy] = run_live(policy, jobs, args, root)
            s = runs[policy].summary()
            print(
                f"  {policy}: makespan {s['makespan_s']:.1f} s, mean JCT {s['mean_jct_s']:.1f} s, "
                f"{s['resizes']} resizes ({runs[policy].wall_s:.0f} s)",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    measured = {p: r.overheads() for p, r in runs.items()}
    sidecar = measured["adaptive"]
    termination = measured["termination"]
    starts = [x for m in measured.values() for x in m["start"]]
    finishes = [x for m in measured.values() for x in m["finish"]]
    start_s = mean(starts, 0.0) + mean(finishes, 0.0)
    sidecar_s = mean(sidecar["change"], args.assumed_pause)
    termination_s = mean(termination["change"], sidecar_s)
    reported = mean(sidecar["reported"], args.assumed_pause)
    reported_t = mean(termination["reported"], reported)

    print("\nmeasured live (seconds without progress):")
    print(f"  start, admission to first step:     {describe(starts)}")
    print(f"  finish, last step to marked done:   {describe(finishes)}")
    print(f"  sidecar resize/resume, decision to first step:     {describe(sidecar['change'])}")
    print(f"  termination resize/resume, decision to first step: {describe(termination['change'])}")
    print(
        f"  resize pause the sidecars report (resize_cost_s, mean): sidecar {reported:.2f} s, "
        f"termination {reported_t:.2f} s"
    )
    slow = [line for r in runs.values() for line in r.slow_changes]
    if slow:
        print(
            f"  grant changes slower than {SLOW_CHANGE_S:g} s (waiting for GPUs, not restarting):"
        )
        for line in slow:
            print(f"    {line}")
    print(
        f"\nsimulator: 1 x {GPUS} GPUs, decisions at every event and every {args.tick:g} s, "
        f"termination loses the work since the last checkpoint (every "
        f"{args.checkpoint_interval:g} s)"
    )
    print(
        f"  sim, naive: start 0 s, sidecar {reported:.2f} s, termination {reported_t:.2f} s "
        "(what the sidecars report)"
    )
    print(
        f"  sim: start {start_s:.2f} s (start + finish above), sidecar {sidecar_s:.2f} s, "
        f"termination {termination_s:.2f} s (measured end to end)\n"
    )
    naive = simulate(jobs, args, 0.0, reported, reported_t)
    predicted = simulate(jobs, args, start_s, sidecar_s, termination_s)
    live = {p: r.summary() for p, r in runs.items()}
    off = print_comparison(live, naive, predicted)
    print(
        f"live vs sim: {'all within' if not off else 'NOT all within'} {TARGET:.0%}"
        + (f" (off: {', '.join(off)})" if off else "")
    )
    if args.json:
        write_json(
            args.json,
            {
                "command": command_line(),
                "jobs": [asdict(j) for j in jobs],
                "live": live,
                "sim": predicted,
                "sim_naive": naive,
                "overheads": measured,
                "costs": {
                    "start_s": start_s,
                    "sidecar_s": sidecar_s,
                    "termination_s": termination_s,
                },
            },
        )
    return 0 if not off else 1


if __name__ == "__main__":
    sys.exit(main())
