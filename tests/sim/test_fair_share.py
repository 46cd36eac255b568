"""Fair share in the simulator: the live scheduler's rules, through ``core.schedule``, with the
trace's user column; deterministic runs of the cases the feature promises."""

from __future__ import annotations

import itertools
import json

import pytest

from jupyter_elastic_gpu.cli import main
from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.sim.engine import SimConfig, SimResult, simulate
from jupyter_elastic_gpu.sim.traces.native import write_native
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload

HOUR = 3600.0
TICK = 60.0


def elastic(job_id, user, submit, hours, hi=8):
    """A job of ``hours`` at one GPU with a sub-linear speed-up, elastic from 1 to ``hi``."""
    profile = {g: 100.0 * g**0.9 for g in range(1, hi + 1)}
    return JobSpec(
        job_id,
        submit,
        100.0 * hours * HOUR,
        profile,
        min_gpus=1,
        max_gpus=hi,
        requested_gpus=1,
        user=user,
    )


def saturating(users: dict[str, int], hours: float = 12.0) -> Workload:
    """Each user submits ``n`` long elastic jobs at the start: together far more than 8 GPUs
    can serve, for hours."""
    jobs = [
        elastic(f"{user}{i}", user, float(i), hours) for user, n in users.items() for i in range(n)
    ]
    return Workload("saturating", jobs)


def run(wl: Workload, policy: str = "adaptive", **config) -> SimResult:
    params = config.pop("params", {})
    cfg = SimConfig(1, config.pop("gpus", 8), tick_s=TICK, **config)
    return simulate(wl, make_policy(policy, **params), sidecar(6.0), cfg)


def both_busy(result: SimResult) -> tuple[list[tuple[float, dict[str, int]]], float]:
    """The points of the per-user timeline (GPUs each user holds from then on) while every
    user still has unfinished jobs, and when that ends."""
    last: dict[str, float] = {}
    for j in result.jobs:
        last[j["user"]] = max(last.get(j["user"], 0.0), j["finish_s"])
    until = min(last.values())
    return [(t, held) for t, held in result.user_timeline if t < until], until


def held_seconds(points, until: float) -> dict[str, float]:
    """GPU-seconds per user from the first point to ``until``."""
    out: dict[str, float] = {}
    for (t0, held), (t1, _) in itertools.pairwise([*points, (until, {})]):
        for u, n in held.items():
            out[u] = out.get(u, 0.0) + n * (t1 - t0)
    return out


def test_two_saturating_users_with_equal_weights_converge_to_within_one_gpu():
    wl = saturating({"alice": 6, "bob": 2})
    fair = run(wl, fair_share=True, fair_share_half_life=HOUR)
    points, until = both_busy(fair)
    assert until > 6 * HOUR  # hours of contention, not minutes
    for _, held in points:
        assert abs(held.get("alice", 0) - held.get("bob", 0)) <= 1, held
    # Without fair share, alice's six jobs take more than bob's two.
    points, until = both_busy(run(wl))
    gpu_s = held_seconds(points, until)
    assert gpu_s["alice"] > 1.2 * gpu_s["bob"]


def test_weights_two_to_one_give_about_two_to_one():
    wl = saturating({"alice": 4, "bob": 4})
    result = run(wl, gpus=9, fair_share=True, user_weights={"alice": 2.0})
    gpu_s = held_seconds(*both_busy(result))
    assert gpu_s["alice"] / gpu_s["bob"] == pytest.approx(2.0, rel=0.1)
    shares = result.user_shares(4)["users"]
    assert shares["alice"][0] == pytest.approx(6 / 9, abs=1 / 9)
    assert shares["bob"][0] == pytest.approx(3 / 9, abs=1 / 9)


@pytest.mark.parametrize("rounds", [False, True])
def test_an_idle_share_is_reclaimed_within_one_scheduling_period(rounds):
    # alice has the 8 GPUs to herself (bob is idle: his share is lent to her); bob submits
    # between two ticks and holds his share before the next tick has passed.
    submit = 2 * HOUR + 17.0
    wl = Workload(
        "reclaim",
        [
            elastic("a1", "alice", 0.0, 20),
            elastic("a2", "alice", 1.0, 20),
            elastic("b1", "bob", submit, 40),
        ],
    )
    result = run(wl, fair_share=True, rounds=rounds)
    before = [held for t, held in result.user_timeline if t < submit]
    assert before[-1] == {"alice": 8}
    got = next(t for t, held in result.user_timeline if held.get("bob", 0) >= 4)
    assert submit <= got <= submit + TICK
    assert next(h for t, h in result.user_timeline if t == got)["alice"] == 4
    assert result.resizes >= 1  # by shrinking alice's elastic jobs
    # Without fair share, by order alone, bob's long job waits behind alice's shorter
    # remaining work for hours.
    plain = run(wl, rounds=rounds, params={"protect_critical": False})
    got = next(t for t, held in plain.user_timeline if held.get("bob", 0) >= 4)
    assert got > submit + HOUR


def test_simulate_prints_the_share_table_and_writes_shares_to_json_and_the_plot(tmp_path, capsys):
    wl = saturating({"alice": 3, "bob": 3}, hours=2)
    jobs, profiles = tmp_path / "jobs.csv", tmp_path / "profiles.csv"
    write_native(wl, jobs, profiles)
    js, png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "simulate",
            "--jobs",
            str(jobs),
            "--profiles",
            str(profiles),
            "--nodes",
            "1",
            "--gpus-per-node",
            "9",
            "--policy",
            "adaptive,static",
            "--fair-share",
            "--fair-share-half-life",
            "3600",
            "--user-weights",
            "alice=2",
            "--json",
            str(js),
            "--plot",
            str(png),
            "--no-progress",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "fair share (usage half-life 1 hour)" in out
    table = out[out.index("share of the GPUs") :].splitlines()
    alice = next(line.split() for line in table if line.startswith("adaptive") and "alice" in line)
    assert alice[2] == "67%"  # her weight's share
    doc = json.loads(js.read_text())
    assert doc["cluster"]["fair_share"] is True
    assert doc["cluster"]["user_weights"] == {"alice": 2.0}
    shares = doc["policies"]["adaptive"]["user_shares"]
    assert set(shares["users"]) == {"alice", "bob"}
    assert shares["users"]["alice"][0] == pytest.approx(6 / 9, abs=1 / 9)
    assert png.stat().st_size > 0


@pytest.mark.parametrize("weights", ["alice", "alice=x", "=2", "alice=0", "alice=-1"])
def test_bad_user_weights_end_with_one_line(weights, tmp_path, capsys):
    wl = saturating({"alice": 1, "bob": 1}, hours=1)
    jobs, profiles = tmp_path / "jobs.csv", tmp_path / "profiles.csv"
    write_native(wl, jobs, profiles)
    argv = ["simulate", "--jobs", str(jobs), "--profiles", str(profiles), "--no-progress"]
    assert main([*argv, "--fair-share", "--user-weights", weights]) == 2
    err = capsys.readouterr().err.strip()
    assert "weight" in err and len(err.splitlines()) == 1
