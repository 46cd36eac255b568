"""``adaptive`` where the GPUs are of several kinds (``core/policies/adaptive_kinds.py``): each
job's count and kind chosen together, the fast kind to the jobs that gain most from it, moves
between kinds only where they pay, and idle fast GPUs never left to a job on a slow kind."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.core.kinds import relative_speeds
from jupyter_elastic_gpu.core.model import Gpu, Job, Snapshot
from jupyter_elastic_gpu.core.placement import MOVE_GAIN, place
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.core.policies.adaptive_kinds import prices
from jupyter_elastic_gpu.core.speed import SpeedModel


def cluster(fast: int, slow: int) -> tuple[Gpu, ...]:
    """``fast`` A100s on one node and ``slow`` T4s on another."""
    return (
        *(Gpu(f"a{i}", "n0", kind="A100") for i in range(fast)),
        *(Gpu(f"t{i}", "n1", kind="T4") for i in range(slow)),
    )


def job(job_id, work=1e5, lo=1, hi=2, gpus=(), **kw) -> Job:
    """A job with linear speed-up up to ``hi`` GPUs (speeds on its own scale)."""
    speed = SpeedModel({g: float(g) for g in range(1, hi + 1)})
    return Job(job_id, 0.0, work, lo, hi, gpus=gpus, started=bool(gpus), speed=speed, **kw)


def kinds_of(decision, gpus) -> dict[str, set[str]]:
    kind = {g.id: g.kind for g in gpus}
    return {j: {kind[g] for g in ids} for j, ids in decision.allocations.items() if ids}


def test_prices_are_what_each_kind_is_worth_to_the_jobs_at_hand():
    speeds = [{"A100": 6.0, "T4": 1.0}, {"A100": 2.0, "T4": 1.0}]
    p = prices(speeds, ["A100", "T4"])
    # each job's speeds over their geometric mean, averaged geometrically over the jobs
    assert p["A100"] / p["T4"] == pytest.approx((6.0 * 2.0) ** 0.5)
    assert prices([], ["A100", "T4"]) == {"A100": 1.0, "T4": 1.0}


def test_the_fast_kind_goes_to_the_job_that_gains_most_even_behind_in_the_order():
    # "short" comes first in the order (less work) but gains little from an A100; "long"
    # gains six times. The two A100s go to "long", the T4s to "short".
    gpus = cluster(2, 2)
    jobs = (job("short", work=1e4), job("long", work=1e5))
    value = {"short": {"A100": 1.2, "T4": 1.0}, "long": {"A100": 6.0, "T4": 1.0}}
    decision = make_policy("adaptive").decide(Snapshot(gpus, jobs, kind_speed=value), 0.0)
    assert kinds_of(decision, gpus) == {"short": {"T4"}, "long": {"A100"}}
    assert decision.order[0] == "short"


def test_a_count_is_chosen_on_the_kind_that_holds_it():
    # Blind to kinds, 3 GPUs would do; there are 2 of each kind, and one job on two kinds goes
    # at the slower one's pace: it gets 2, on one kind.
    gpus = cluster(2, 2)
    decision = make_policy("adaptive").decide(
        Snapshot(gpus, (job("j", hi=3),), kind_speed={"j": {"A100": 3.0, "T4": 1.0}}), 0.0
    )
    assert kinds_of(decision, gpus) == {"j": {"A100"}}
    assert len(decision.allocations["j"]) == 2


def test_a_running_job_never_moves_to_a_kind_that_gains_it_too_little():
    gpus = cluster(2, 2)
    held = job("j", gpus=("t0", "t1"), resize_cost=30.0)
    slight = {"j": {"A100": MOVE_GAIN * 0.9, "T4": 1.0}}
    decision = make_policy("adaptive").decide(Snapshot(gpus, (held,), kind_speed=slight), 1e4)
    assert decision.allocations["j"] == ("t0", "t1")
    enough = {"j": {"A100": MOVE_GAIN * 1.1, "T4": 1.0}}
    decision = make_policy("adaptive").decide(Snapshot(gpus, (held,), kind_speed=enough), 1e4)
    assert decision.allocations["j"] == ("a0", "a1")


def test_idle_fast_gpus_take_a_job_off_the_slow_kind_even_in_its_cooldown():
    # Alone on the cluster, a job's prices are its own speeds: the hand-out is indifferent
    # between kinds, and it was resized a moment ago. The A100s are idle: it moves there.
    gpus = cluster(2, 2)
    held = job("j", gpus=("t0", "t1"), resize_cost=30.0, last_change=100.0, resizes=1)
    value = {"j": {"A100": 6.0, "T4": 1.0}}
    decision = make_policy("adaptive").decide(Snapshot(gpus, (held,), kind_speed=value), 101.0)
    assert decision.allocations["j"] == ("a0", "a1")


def test_a_job_whose_kind_is_taken_by_one_that_gains_more_is_suspended_not_moved_down():
    # "gainer" (waiting, far ahead in the order) wants the A100s that "holder" runs on; the
    # T4s are taken. "holder" is not moved to a slower kind: it gives its A100s up and waits.
    gpus = cluster(2, 2)
    jobs = (
        job("holder", work=1e7, gpus=("a0", "a1"), resize_cost=1.0),
        job("gainer", work=1e3),
        job("t-user", work=1e7, gpus=("t0", "t1"), resize_cost=1.0),
    )
    value = {
        "holder": {"A100": 2.0, "T4": 1.0},
        "gainer": {"A100": 10.0, "T4": 1.0},
        "t-user": {"A100": 1.0, "T4": 1.0},
    }
    decision = make_policy("adaptive", protect_critical=False).decide(
        Snapshot(gpus, jobs, kind_speed=value), 1e4
    )
    assert kinds_of(decision, gpus)["gainer"] == {"A100"}
    assert "T4" not in kinds_of(decision, gpus).get("holder", set())


def test_placement_moves_a_job_to_the_kind_chosen_for_it_and_nothing_else():
    gpus = cluster(2, 2)
    current = {"j": ("t0", "t1"), "k": ("a0",)}
    placed = place(gpus, current, {"j": 2, "k": 1}, chosen={"j": "T4", "k": "A100"})
    assert placed == {"j": ("t0", "t1"), "k": ("a0",)}
    moved = place(gpus, {"j": ("t0",)}, {"j": 1}, chosen={"j": "A100"})
    assert moved == {"j": ("a0",)}


def test_a_prior_beats_per_gpu_speeds_compared_at_different_counts():
    # Measured on 8 A100s (scaling lost) and 1 T4: per GPU the A100 looks only twice as fast;
    # the profile on one GPU of each says five times. The profile is taken.
    measured = {"A100": {8: 1600.0}, "T4": {1: 100.0}}
    speeds = relative_speeds(("A100", "T4"), measured, prior={"A100": 5.0, "T4": 1.0})
    assert max(speeds.values()) / min(speeds.values()) == pytest.approx(5.0)
    assert speeds["A100"] > speeds["T4"]


def test_a_job_waiting_with_enough_gpus_free_but_not_of_one_kind_is_told_so():
    gpus = cluster(1, 1)
    wide = job("wide", lo=2, hi=2)
    decision = make_policy("adaptive").decide(
        Snapshot(gpus, (wide,), kind_speed={"wide": {"A100": 2.0, "T4": 1.0}}), 0.0
    )
    assert decision.allocations["wide"] == ()
    reason = decision.reasons["wide"]
    assert reason.kind == "spread"
    assert str(reason) == (
        "queued: needs 2 GPUs of one kind on one server: 2 free, at most 1 together (1 A100, 1 T4)"
    )
