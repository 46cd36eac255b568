"""Fair share between users, measured in the simulator: off and on side by side.

Deterministic scenarios on one node of 8 GPUs (9 for 2:1 weights), the adaptive policy and the
sidecar mechanism (6 s per resize), decisions at every event and every 60 s:

* two saturating users with equal weights (6 long elastic jobs against 2): the GPUs each
  holds while both have work, and the largest gap between them at any moment;
* weights 2:1 (4 jobs each): the ratio of the GPU-hours they got;
* an idle share reclaimed: alice holds all 8 GPUs, bob submits between two ticks; seconds
  until bob holds his share (decisions at events, and at ticks only);
* a lab workload (``workload generate``: 6 users, Zipf-skewed submissions, on 8 GPUs): each
  user's GPU-hours and mean JCT, and the makespan;
* what fair share costs a decision: 1,000 jobs of 10 users on 256 GPUs, through
  ``core.schedule.decide``, fair share off and on.

    python benchmarks/fair_share.py [--repeat 10]
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from dataclasses import replace

from _common import command_line, whole
from decision_speed import big_snapshot

from jupyter_elastic_gpu.core.fairshare import FairShare
from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.core.schedule import decide
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.engine import SimConfig, SimResult, simulate
from jupyter_elastic_gpu.sim.generate import generate_workload
from jupyter_elastic_gpu.sim.report import _grid
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload

HOUR = 3600.0
TICK = 60.0


def elastic(job_id: str, user: str, submit: float, hours: float, hi: int = 8) -> JobSpec:
    profile = {g: 100.0 * g**0.9 for g in range(1, hi + 1)}
    return JobSpec(job_id, submit, 100.0 * hours * HOUR, profile, 1, hi, 1, user=user)


def saturating(users: dict[str, int], hours: float = 12.0) -> Workload:
    jobs = [elastic(f"{u}{i}", u, float(i), hours) for u, n in users.items() for i in range(n)]
    return Workload("saturating", jobs)


def run(wl: Workload, gpus: int = 8, **config) -> SimResult:
    cfg = SimConfig(1, gpus, tick_s=TICK, **config)
    return simulate(wl, make_policy("adaptive"), sidecar(6.0), cfg)


def contended(result: SimResult) -> tuple[dict[str, float], int]:
    """GPU-hours per user while every user has unfinished jobs, and the largest gap in GPUs
    held between two users at any moment of it."""
    last: dict[str, float] = {}
    for j in result.jobs:
        last[j["user"]] = max(last.get(j["user"], 0.0), j["finish_s"])
    until = min(last.values())
    points = [(t, h) for t, h in result.user_timeline if t < until] + [(until, {})]
    gpu_h: dict[str, float] = dict.fromkeys(last, 0.0)
    gap = 0
    for (t0, held), (t1, _) in itertools.pairwise(points):
        for u in last:
            gpu_h[u] += held.get(u, 0) * (t1 - t0) / HOUR
        gap = max(gap, max(held.get(u, 0) for u in last) - min(held.get(u, 0) for u in last))
    return gpu_h, gap


def reclaim_s(fair: bool, rounds: bool = False) -> float | None:
    """Seconds from bob's submission until he holds half the GPUs (None: never)."""
    submit = 2 * HOUR + 17.0
    wl = Workload(
        "reclaim",
        [
            elastic("a1", "alice", 0.0, 20),
            elastic("a2", "alice", 1.0, 20),
            elastic("b1", "bob", submit, 40),
        ],
    )
    result = run(wl, fair_share=fair, rounds=rounds)
    got = [t for t, held in result.user_timeline if held.get("bob", 0) >= 4]
    return got[0] - submit if got else None


def per_user_jct(result: SimResult) -> dict[str, float]:
    jcts: dict[str, list[float]] = {}
    for j in result.jobs:
        jcts.setdefault(j["user"], []).append(j["jct_s"])
    return {u: statistics.mean(v) for u, v in jcts.items()}


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=whole(), default=10, help="decisions timed per setting")
    args = ap.parse_args()
    print(f"$ {command_line()}\n")

    rows = [["scenario (8 GPUs, adaptive)", "fair share off", "fair share on"]]
    wl = saturating({"alice": 6, "bob": 2})
    (off, gap_off), (on, gap_on) = contended(run(wl)), contended(run(wl, fair_share=True))
    rows.append(
        [
            "equal weights, 6 jobs vs 2: GPU-h alice / bob",
            f"{off['alice']:.1f} / {off['bob']:.1f} ({off['alice'] / off['bob']:.2f}x)",
            f"{on['alice']:.1f} / {on['bob']:.1f} ({on['alice'] / on['bob']:.2f}x)",
        ]
    )
    rows.append(["  largest gap in GPUs held at one moment", str(gap_off), str(gap_on)])
    wl = saturating({"alice": 4, "bob": 4})
    off, _ = contended(run(wl, gpus=9))
    on, _ = contended(run(wl, gpus=9, fair_share=True, user_weights={"alice": 2.0}))
    rows.append(
        [
            "weights 2:1 on 9 GPUs: GPU-h alice / bob",
            f"{off['alice']:.1f} / {off['bob']:.1f} ({off['alice'] / off['bob']:.2f}x)",
            f"{on['alice']:.1f} / {on['bob']:.1f} ({on['alice'] / on['bob']:.2f}x)",
        ]
    )
    never = reclaim_s(False)
    rows.append(
        [
            "idle share reclaimed: s until bob holds 4 of 8",
            "never" if never is None else f"{never:.0f} s",
            f"{reclaim_s(True):.0f} s at events, {reclaim_s(True, True):.0f} s at {TICK:g} s ticks",
        ]
    )
    print(_grid(rows))

    lab = generate_workload(seed=3, jobs=60, window_s=4 * HOUR, users=6, max_gpus=8)
    results = {
        "off": run(lab),
        "on": run(lab, fair_share=True, fair_share_half_life=HOUR),
    }
    jobs_of: dict[str, int] = {}
    for spec in lab.jobs:
        jobs_of[spec.user] = jobs_of.get(spec.user, 0) + 1
    s = {k: r.summary() for k, r in results.items()}
    jct = {k: per_user_jct(r) for k, r in results.items()}
    gpu_h = {k: {u: v["gpu_s"] / HOUR for u, v in r.users().items()} for k, r in results.items()}
    rows = [
        [
            "lab workload, 60 jobs on 8 GPUs",
            "jobs",
            "GPU-h off",
            "GPU-h on",
            "mean JCT off",
            "mean JCT on",
            "on / off",
        ]
    ]
    for u in sorted(jobs_of, key=lambda u: (-jobs_of[u], u)):
        off, on = jct["off"][u], jct["on"][u]
        rows.append(
            [
                u,
                str(jobs_of[u]),
                f"{gpu_h['off'][u]:.1f}",
                f"{gpu_h['on'][u]:.1f}",
                f"{off / HOUR:.2f} h",
                f"{on / HOUR:.2f} h",
                f"{on / off:.2f}x",
            ]
        )
    for label, key in (("all jobs: mean JCT", "mean_jct_s"), ("makespan", "makespan_s")):
        off, on = s["off"][key], s["on"][key]
        rows.append(
            [label, "", "", "", f"{off / HOUR:.2f} h", f"{on / HOUR:.2f} h", f"{on / off:.2f}x"]
        )
    print()
    print(_grid(rows))
    print("  (users submit with Zipf-skewed rates; fair share with a 1-hour half-life)")

    rows = [
        [
            "same workload, policy",
            "mean JCT off",
            "on",
            "on / off",
            "makespan off",
            "on",
            "on / off",
        ]
    ]
    for name in ("adaptive", "static", "tiresias", "optimus"):
        got = {}
        for label, fair in (("off", False), ("on", True)):
            cfg = SimConfig(1, 8, tick_s=TICK, fair_share=fair, fair_share_half_life=HOUR)
            got[label] = simulate(lab, make_policy(name), sidecar(6.0), cfg).summary()
        cells = [name]
        for key in ("mean_jct_s", "makespan_s"):
            off, on = got["off"][key], got["on"][key]
            cells += [f"{off / HOUR:.2f} h", f"{on / HOUR:.2f} h", f"{on / off:.2f}x"]
        rows.append(cells)
    print()
    print(_grid(rows))

    # What fair share costs a decision.
    snap = big_snapshot()
    rng = random.Random(1)
    jobs = tuple(replace(j, user=f"u{rng.randrange(10)}") for j in snap.jobs)
    usage = {f"u{i}": rng.uniform(0, 1e6) for i in range(10)}
    weights = {f"u{i}": rng.choice([1.0, 2.0]) for i in range(10)}
    policy = make_policy("adaptive")
    timed = {}
    for label, fair in (("off", None), ("on", FairShare(weights, usage))):
        s_ = replace(snap, jobs=jobs, fair_share=fair)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            decide(policy, s_, 3600.0)
            times.append(time.perf_counter() - t0)
        timed[label] = statistics.median(times) * 1000
    print(
        f"\none decision, 1,000 jobs of 10 users on 256 GPUs (median of {args.repeat}): fair "
        f"share off {timed['off']:.1f} ms, on {timed['on']:.1f} ms "
        f"({timed['on'] / timed['off']:.2f}x)"
    )


if __name__ == "__main__":
    main()
