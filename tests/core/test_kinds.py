"""A job's speed per kind of GPU (``core/kinds.py``) and placement by value: where kinds are
mixed, the fast GPUs go to the job that gains most from them."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.core.kinds import fleet_ratios, gain, relative_speeds
from jupyter_elastic_gpu.core.model import Gpu
from jupyter_elastic_gpu.core.placement import place

KINDS = ("A100", "T4")


def test_what_a_job_measured_on_each_kind_comes_first():
    measured = {"A100": {1: 300.0, 2: 580.0}, "T4": {1: 100.0, 2: 200.0}}
    speeds = relative_speeds(KINDS, measured, prior={"A100": 1.0, "T4": 1.0})
    assert speeds["T4"] == 1.0  # (either kind may be the scale's: only the ratio counts)
    assert speeds["A100"] == pytest.approx((3.0 * 2.9) ** 0.5)  # geometric mean at 1 and 2


def test_a_kind_it_never_ran_on_comes_from_its_prior_then_the_fleet():
    ran_on_t4 = {"T4": {2: 200.0}}
    by_prior = relative_speeds(KINDS, ran_on_t4, prior={"A100": 4.0, "T4": 2.0})
    assert by_prior["A100"] / by_prior["T4"] == pytest.approx(2.0)
    by_fleet = relative_speeds(KINDS, ran_on_t4, fleet={"A100": 3.0, "T4": 1.0})
    assert by_fleet["A100"] / by_fleet["T4"] == pytest.approx(3.0)
    assert relative_speeds(KINDS, ran_on_t4) == {"T4": 1.0, "A100": 1.0}  # nothing known
    assert relative_speeds(KINDS, {}, prior={"A100": 5.0}) == {"A100": 5.0, "T4": 1.0}


def test_counts_measured_on_neither_kind_alike_compare_per_gpu():
    speeds = relative_speeds(KINDS, {"A100": {4: 800.0}, "T4": {1: 100.0}})
    assert speeds["A100"] / speeds["T4"] == pytest.approx(2.0)


def test_the_fleet_ratio_is_the_geometric_mean_over_jobs_that_ran_on_both():
    jobs = [
        {"A100": {1: 400.0}, "T4": {1: 100.0}},  # 4x
        {"A100": {2: 200.0}, "T4": {2: 200.0}},  # 1x
        {"T4": {1: 50.0}},  # ran on one kind: says nothing of the ratio
        {"V100": {1: 10.0}},  # linked to nothing
    ]
    ratios = fleet_ratios(jobs)
    assert ratios["T4"] == 1.0  # the kind most jobs ran on
    assert ratios["A100"] == pytest.approx(2.0)
    assert "V100" not in ratios
    assert fleet_ratios([]) == {}


def test_gain_is_the_fastest_kind_over_the_slowest():
    assert gain({"A100": 3.0, "T4": 1.5}) == 2.0
    assert gain({}) == 1.0


MIXED = tuple(
    [Gpu(f"a{i}", "box", kind="A100") for i in range(2)]
    + [Gpu(f"t{i}", "box", kind="T4") for i in range(2)]
)


def test_the_job_that_gains_most_gets_the_fast_kind_whatever_the_order():
    counts = {"small-gain": 2, "big-gain": 2}
    value = {"small-gain": {"A100": 1.1, "T4": 1.0}, "big-gain": {"A100": 4.0, "T4": 1.0}}
    placed = place(MIXED, {}, counts, order=["small-gain", "big-gain"], value=value)
    assert placed == {"big-gain": ("a0", "a1"), "small-gain": ("t0", "t1")}


def test_without_speeds_a_job_goes_where_it_fits_tightest_and_with_them_to_its_fast_kind():
    wide = (*MIXED, Gpu("a2", "box", kind="A100"), Gpu("a3", "box", kind="A100"))
    assert place(wide, {}, {"j": 2}) == {"j": ("t0", "t1")}  # the T4s fit a pair exactly
    value = {"j": {"A100": 2.0, "T4": 1.0}}
    assert place(wide, {}, {"j": 2}, value=value) == {"j": ("a0", "a1")}


def test_a_running_job_moves_to_a_kind_only_where_it_gains_enough_and_all_of_it_fits():
    from jupyter_elastic_gpu.core.placement import MOVE_GAIN

    fast = {"j": {"A100": 4.0, "T4": 1.0}, "k": {"A100": 1.0, "T4": 1.0}}
    # the A100s are free: it moves there whole (a restart it gains from)
    assert place(MIXED, {"j": ("t0",)}, {"j": 2}, value=fast) == {"j": ("a0", "a1")}
    # a gain below MOVE_GAIN does not pay for the restart: it grows where it is
    slight = {"j": {"A100": MOVE_GAIN * 0.9, "T4": 1.0}}
    assert place(MIXED, {"j": ("t0",)}, {"j": 2}, value=slight) == {"j": ("t0", "t1")}
    # one A100 free only: no room for its whole count there, so it stays on its kind
    held = {"j": ("t0",), "k": ("a0",)}
    assert place(MIXED, held, {"j": 2, "k": 1}, value=fast) == {"j": ("t0", "t1"), "k": ("a0",)}
    # nothing known of it: it stays
    assert place(MIXED, {"j": ("t0",)}, {"j": 2}, value={}) == {"j": ("t0", "t1")}


def test_speeds_change_nothing_where_the_gpus_are_of_one_kind():
    same = tuple(Gpu(f"g{i}", "box", kind="A100") for i in range(4))
    value = {"x": {"A100": 1.0}, "y": {"A100": 9.0}}
    assert place(same, {}, {"x": 2, "y": 2}, ["x", "y"], value) == place(
        same, {}, {"x": 2, "y": 2}, ["x", "y"]
    )


def test_a_waiting_job_given_gpus_it_cannot_start_on_gets_none_and_the_others_decide_again():
    from jupyter_elastic_gpu.core.model import Job, Snapshot
    from jupyter_elastic_gpu.core.placement import groups
    from jupyter_elastic_gpu.core.policies import make_policy
    from jupyter_elastic_gpu.core.schedule import decide_together, together
    from jupyter_elastic_gpu.core.speed import SpeedModel

    gpus = MIXED
    group = groups(gpus)
    assert together(("a0", "a1"), group, 2) and not together(("a0", "t0"), group, 2)
    # a0 and t0 are held: one GPU of each kind is free
    holders = [
        Job(f"h{g}", 0.0, 1e9, 1, 1, gpus=(g,), started=True, speed=SpeedModel({1: 1.0}))
        for g in ("a0", "t0")
    ]
    wide = Job("wide", 1.0, 10.0, 2, 2, speed=SpeedModel({1: 1.0, 2: 2.0}))
    narrow = Job("narrow", 2.0, 1e6, 1, 1, speed=SpeedModel({1: 1.0}))
    snap = Snapshot(gpus, (*holders, wide, narrow))
    out = decide_together(make_policy("adaptive"), snap, 10.0, group)
    assert set(out.apart) == {"wide"} and len(out.apart["wide"]) == 2
    assert not out.decision.allocations.get("wide")
    assert len(out.decision.allocations["narrow"]) == 1  # on one of the GPUs wide could not use
    assert "wide" in out.ranked.order
