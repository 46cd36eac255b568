"""Reasons carry the figures a decision was made on, and those figures agree with it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from test_policies import snapshots

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.policies import POLICIES, AdaptivePolicy, make_policy
from jupyter_elastic_gpu.core.reasons import (
    FINISHING,
    STARTED,
    AtMaximum,
    Kept,
    NoFaster,
    Resized,
    ResizeWouldNotPay,
    Start,
    Waiting,
    about,
)
from jupyter_elastic_gpu.core.schedule import decide, idle_reason

GPUS = tuple(Gpu(str(i)) for i in range(4))
#: 2.0 samples/s on 2 GPUs, 2.2 on 4: doubling the GPUs gains 10%.
SPEED = SpeedModel({1: 1.0, 2: 2.0, 4: 2.2})
COST = 6.0


def running(left: float, **kw) -> Job:
    """A job on 2 of up to 4 GPUs with ``left`` samples to go, started long ago."""
    base = dict(
        id="a",
        submit_time=0.0,
        total_work=1e4,
        work_done=1e4 - left,
        min_gpus=1,
        max_gpus=4,
        speed=SPEED,
        resize_cost=COST,
        gpus=("0", "1"),
        started=True,
        last_change=0.0,
    )
    return Job(**{**base, **kw})


def test_not_growing_onto_idle_gpus_carries_the_cost_and_the_gain_of_the_model():
    job = running(left=100.0)  # 50 s at 2 GPUs, 45.5 s at 4: saves 4.5 s
    policy = AdaptivePolicy()
    d = decide(policy, Snapshot(GPUS, (job,)), now=1000.0)
    assert len(d.allocations["a"]) == 2  # two GPUs stay idle
    why = d.reasons["a"]
    assert isinstance(why, ResizeWouldNotPay)
    r2, r4 = job.remaining_time(2), job.remaining_time(4)
    m = 1 + policy.params.resize_margin
    assert (why.gpus, why.top, why.to) == (2, 4, 4)
    assert why.cost_s == COST
    assert why.gain_s == pytest.approx(r2 - r4) == pytest.approx(100 / 2 - 100 / 2.2)
    assert why.need_s == pytest.approx(m * COST * r2 / (r2 + m * COST))
    assert why.gain_s < why.cost_s
    assert str(why) == "running on 2 of up to 4 GPUs: 4 would save ~5 s, a resize costs ~6 s"
    idle = idle_reason(Snapshot(GPUS, (job,)), d)
    assert idle is not None and idle.gpus == 2
    assert str(idle) == "2 GPUs idle: growing a to 4 would save ~5 s, a resize costs ~6 s"
    # Someone who may not see job a reads that it would not pay, not its figures.
    assert idle.text(lambda user: False) == "2 GPUs idle: growing a would not pay for its resize"


@pytest.mark.parametrize("left", [60.0, 150.0, 200.0, 230.0, 260.0, 300.0, 1000.0, 5000.0])
def test_the_figures_say_when_a_resize_pays(left):
    """Grown exactly when the saving reaches what the reason says a resize must save."""
    job = running(left=left)
    d = decide(AdaptivePolicy(), Snapshot(GPUS, (job,)), now=1000.0)
    r2, r4 = job.remaining_time(2), job.remaining_time(4)
    need = 2 * COST * r2 / (r2 + 2 * COST)
    grown = len(d.allocations["a"]) == 4
    assert grown == (r2 - r4 > need), (left, str(d.reasons["a"]))
    if not grown:
        why = d.reasons["a"]
        assert isinstance(why, ResizeWouldNotPay)
        assert why.gain_s == pytest.approx(r2 - r4) and why.need_s == pytest.approx(need)
        if why.gain_s >= why.cost_s:  # saves more than it costs: the text says by how much
            assert f"(must save {about(need)})" in str(why)


def test_a_resize_says_what_it_saves_or_costs_the_job():
    job = running(left=5000.0)  # 2500 s at 2 GPUs, 2273 s at 4
    d = decide(AdaptivePolicy(), Snapshot(GPUS, (job,)), now=1000.0)
    assert len(d.allocations["a"]) == 4
    grown = d.reasons["a"]
    assert grown == Resized(4, 4, 2, COST, job.remaining_time(2) - job.remaining_time(4))
    assert (
        str(grown)
        == "running on 4 of up to 4 GPUs: grown from 2, saves ~4 min, a resize costs ~6 s"
    )
    # A short job arrives: the long one gives up GPUs for it, and says what that costs it
    # (by the weights alone: on the critical path, a long job says that instead, as
    # tests/core/test_policies.py checks).
    wide = replace(job, gpus=tuple(g.id for g in GPUS), work_done=0.0)
    short = Job("s", 999.0, total_work=50.0, min_gpus=2, max_gpus=2, speed=SPEED)
    d = decide(AdaptivePolicy(protect_critical=False), Snapshot(GPUS, (wide, short)), now=1000.0)
    n = len(d.allocations["a"])
    assert n < 4 and d.allocations["s"]
    shrunk = d.reasons["a"]
    assert isinstance(shrunk, Resized) and (shrunk.gpus, shrunk.held) == (n, 4)
    assert shrunk.change_s == pytest.approx(wide.remaining_time(4) - wide.remaining_time(n))
    assert shrunk.for_job == "s" and shrunk.starts  # the room it makes, for whom
    assert str(shrunk).startswith(f"running on {n} of up to 4 GPUs: shrunk from 4 so that s can ")


def test_a_job_about_to_finish_says_how_long_it_has_left():
    job = running(left=30.0)  # 15 s at 2 GPUs: under four resizes of 6 s
    d = decide(AdaptivePolicy(), Snapshot(GPUS, (job,)), now=1000.0)
    why = d.reasons["a"]
    assert why == Kept(2, FINISHING, left_s=15.0, cost_s=COST)
    assert str(why) == (
        "running on 2 GPUs: kept as is because it is about to finish (~15 s left; a resize "
        "costs ~6 s)"
    )


def test_a_job_started_moments_ago_says_how_long_it_is_left_alone():
    policy = AdaptivePolicy()
    job = running(left=1e4, last_change=995.0)
    d = decide(policy, Snapshot(GPUS, (job,)), now=1000.0)
    why = d.reasons["a"]
    assert why == Kept(2, STARTED, hold_s=policy.cooldown_s(job), changed_at=995.0)
    assert why.hold_s == 60.0
    assert str(why).endswith("because it started moments ago (left alone ~1 min after a change)")
    assert "a is kept as is because it started moments ago" in str(
        idle_reason(Snapshot(GPUS, (job,)), d)
    )


def test_a_job_no_faster_on_more_gpus_says_so():
    flat = SpeedModel({1: 1.0, 2: 2.0, 3: 2.0, 4: 2.0})
    job = Job("a", 0.0, total_work=1e4, min_gpus=2, max_gpus=4, speed=flat)
    d = decide(AdaptivePolicy(), Snapshot(GPUS, (job,)), now=1000.0)
    assert d.reasons["a"] == NoFaster(2, 4)
    assert str(idle_reason(Snapshot(GPUS, (job,)), d)) == (
        "2 GPUs idle: a would go no faster on more"
    )


def test_idle_gpus_name_the_waiting_job_that_needs_more():
    full = running(left=1e4, max_gpus=2, id="full")
    wide = Job("wide", 5.0, total_work=1e3, min_gpus=3, max_gpus=4, speed=SPEED)
    snap = Snapshot(GPUS, (full, wide))
    for name in sorted(POLICIES):
        d = decide(make_policy(name), snap, now=1000.0)
        if d.allocations["wide"]:
            continue  # a preemptive policy that suspends the running job for it
        assert isinstance(d.reasons["wide"], Waiting), name
        assert str(idle_reason(snap, d)) == "2 GPUs idle: wide needs 3", name


def test_no_idle_reason_without_idle_gpus_nor_without_jobs():
    job = running(left=1e4, gpus=("0", "1", "2", "3"))
    d = decide(AdaptivePolicy(), Snapshot(GPUS, (job,)), now=1000.0)
    assert d.reasons["a"] == AtMaximum(4) and idle_reason(Snapshot(GPUS, (job,)), d) is None
    empty = Snapshot(GPUS, ())
    assert idle_reason(empty, decide(AdaptivePolicy(), empty, 0.0)) is None
    # A GPU busy with another process is not idle, it is unusable.
    small = running(left=1e4, max_gpus=2)
    busy = Snapshot((*GPUS[:3], Gpu("3", healthy=False)), (small,))
    assert idle_reason(busy, decide(AdaptivePolicy(), busy, 0.0)).gpus == 1


def test_idle_gpus_never_blame_a_job_at_its_maximum():
    """A job that holds all it may (a notebook's lease, a fixed-size job) is pinned or kept for
    some reason, but that reason is not why other GPUs stay idle."""
    for fixed in (
        replace(running(left=1e4, max_gpus=2), pinned=True),
        running(left=1e4, max_gpus=2, last_change=995.0),
    ):
        d = decide(AdaptivePolicy(), Snapshot(GPUS, (fixed,)), now=1000.0)
        assert len(d.allocations["a"]) == 2
        assert str(idle_reason(Snapshot(GPUS, (fixed,)), d)) == "2 GPUs idle: no job can use more"


def test_estimates_read_as_people_say_them():
    assert [about(s) for s in (0.2, 4.4, 12, 33, 59, 61, 150, 3000, 5400, 36000, 2e5)] == [
        "under 1 s",
        "~4 s",
        "~10 s",
        "~35 s",
        "~1 min",
        "~1 min",
        "~2 min",
        "~50 min",
        "~1.5 h",
        "~10 h",
        "~2.3 days",
    ]
    assert about(math.inf) == "never"
    assert str(Start(200.0, "j-12")) == "starts in ~3 min, when j-12 finishes"
    assert str(Start(20.0)) == "starts in under a minute"


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=snapshots())
def test_every_reason_is_a_short_line_whose_figures_agree_with_the_decision(name, snap):
    d = decide(make_policy(name), replace(snap, user_gpu_cap=0), now=2000.0)
    for job in snap.jobs:
        text = str(d.reasons[job.id])
        assert text and "\n" not in text and len(text) <= 120, text
        why = d.reasons[job.id]
        if isinstance(why, ResizeWouldNotPay):
            assert why.gain_s <= why.need_s * (1 + 1e-9), text
            assert 0 < why.gpus < why.to <= why.top
    idle = idle_reason(snap, d)
    taken = {g for grant in d.allocations.values() for g in grant}
    free = sum(1 for g in snap.usable_gpus if g.id not in taken)
    assert (idle.gpus if idle else 0) == (free if snap.jobs else 0)
    if idle:
        assert len(str(idle)) <= 200, str(idle)
