"""Properties every policy must keep, on random snapshots, plus adaptive's own promises."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.policies import (
    POLICIES,
    AdaptiveParams,
    AdaptivePolicy,
    UnknownPolicy,
    make_policy,
)

ALL = sorted(POLICIES)


@st.composite
def snapshots(draw) -> Snapshot:
    nodes = draw(st.integers(1, 3))
    per_node = draw(st.integers(1, 4))
    gpus = [Gpu(f"n{n}-g{i}", f"n{n}") for n in range(nodes) for i in range(per_node)]
    # Some GPUs are busy with processes we do not manage.
    gpus = [Gpu(g.id, g.node, healthy=draw(st.booleans()) or draw(st.booleans())) for g in gpus]
    total = len(gpus)
    # Grants come from every GPU: a GPU can turn busy under the job that holds it.
    free = [g.id for g in gpus]
    jobs = []
    for i in range(draw(st.integers(0, 7))):
        lo = draw(st.integers(1, total))
        hi = draw(st.integers(lo, total + 2))
        req = draw(st.integers(lo, hi))
        work = draw(st.floats(1, 1e5))
        done = draw(st.floats(0, 1)) * work
        alpha = draw(st.floats(0.3, 1.0))
        measured = {g: 10.0 * g**alpha for g in range(1, hi + 1) if draw(st.booleans())}
        held: tuple[str, ...] = ()
        n = draw(st.integers(0, hi))
        if n >= lo and n <= len(free) and draw(st.booleans()):
            held, free = tuple(free[:n]), free[n:]
        jobs.append(
            Job(
                id=f"j{i}",
                submit_time=draw(st.floats(0, 1000)),
                total_work=work,
                work_done=done,
                min_gpus=lo,
                max_gpus=hi,
                requested_gpus=req,
                user=draw(st.sampled_from(["ann", "bob"])),
                speed=SpeedModel(measured, {1: 10.0, hi: 10.0 * hi**alpha}),
                resize_cost=draw(st.sampled_from([0.0, 6.0, 60.0])),
                gpus=held,
                started=bool(held),
                attained_gpu_s=draw(st.floats(0, 1e5)),
                queued_s=draw(st.floats(0, 1e4)),
                resizes=draw(st.integers(0, 30)),
                last_change=draw(st.one_of(st.none(), st.floats(0, 2000))),
                pinned=bool(held) and draw(st.integers(0, 5)) == 0,
            )
        )
    return Snapshot(tuple(gpus), tuple(jobs))


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=snapshots())
def test_allocation_is_feasible(name, snap):
    decision = make_policy(name).decide(snap, now=2000.0)
    healthy = {g.id for g in snap.gpus if g.healthy}
    assert set(decision.allocations) == {j.id for j in snap.jobs}
    assert set(decision.reasons) == {j.id for j in snap.jobs}
    handed = [g for ids in decision.allocations.values() for g in ids]
    assert len(handed) == len(set(handed)), "a GPU went to two jobs"
    assert set(handed) <= healthy, "a busy or missing GPU was handed out"
    for job in snap.jobs:
        n = len(decision.allocations[job.id])
        if n:
            assert n >= job.min_gpus or (job.pinned and n == len(job.gpus))
            assert n <= max(job.max_gpus, len(job.gpus))
        if job.pinned and set(job.gpus) <= healthy:
            assert set(decision.allocations[job.id]) == set(job.gpus), "a pinned job was moved"


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=60, deadline=None)
@given(snap=snapshots())
def test_same_snapshot_same_decision(name, snap):
    a = make_policy(name).decide(snap, now=2000.0)
    b = make_policy(name).decide(snap, now=2000.0)
    assert dict(a.allocations) == dict(b.allocations)
    assert dict(a.reasons) == dict(b.reasons)


@settings(max_examples=150, deadline=None)
@given(snap=snapshots())
def test_static_never_resizes_or_preempts(snap):
    decision = make_policy("static").decide(snap, now=2000.0)
    healthy = {g.id for g in snap.gpus if g.healthy}
    for job in snap.jobs:
        if job.gpus and set(job.gpus) <= healthy:
            assert set(decision.allocations[job.id]) == set(job.gpus)
        elif decision.allocations[job.id]:
            # A job whose grant turned busy moves at its size, or restarts at the requested one.
            sizes = {job.requested_gpus, len(job.gpus) or job.requested_gpus}
            assert len(decision.allocations[job.id]) in sizes


@settings(max_examples=150, deadline=None)
@given(snap=snapshots())
def test_non_elastic_policies_run_jobs_at_their_requested_size(snap):
    for name in ("tiresias", "srtf", "elas"):
        decision = make_policy(name).decide(snap, now=2000.0)
        for job in snap.jobs:
            n = len(decision.allocations[job.id])
            assert n in (0, job.requested_gpus) or (job.pinned and n == len(job.gpus))


def _gpus(n, per_node=8):
    return tuple(Gpu(f"n{i // per_node}-g{i % per_node}", f"n{i // per_node}") for i in range(n))


def linear(x1=10.0, top=8):
    return SpeedModel({g: x1 * g for g in range(1, top + 1)})


def test_adaptive_lone_job_gets_its_maximum():
    snap = Snapshot(_gpus(8), (Job("a", 0, 1000, min_gpus=1, max_gpus=4, speed=linear()),))
    d = AdaptivePolicy().decide(snap, 0)
    assert len(d.allocations["a"]) == 4
    assert str(d.reasons["a"]) == "running on 4 GPUs (its maximum)"


def test_adaptive_does_not_resize_when_the_gain_is_below_the_cost():
    # 'a' runs on 2 of 4 GPUs with 100 s of work left at 2 GPUs; growing to 4 would save 50 s.
    a = dict(id="a", submit_time=0, total_work=2000, min_gpus=1, max_gpus=4, speed=linear())
    a["gpus"] = ("n0-g0", "n0-g1")
    snap_costly = Snapshot(_gpus(4), (Job(**a, resize_cost=40.0),))
    snap_cheap = Snapshot(_gpus(4), (Job(**a, resize_cost=1.0),))
    policy = AdaptivePolicy()
    assert len(policy.decide(snap_costly, 1000).allocations["a"]) == 2
    assert len(policy.decide(snap_cheap, 1000).allocations["a"]) == 4


def test_adaptive_never_resizes_a_job_about_to_finish():
    job = Job(
        "a",
        0,
        1000,
        work_done=990,
        min_gpus=1,
        max_gpus=4,
        speed=linear(),
        resize_cost=6.0,
        gpus=("n0-g0",),
    )
    d = AdaptivePolicy().decide(Snapshot(_gpus(4), (job,)), 500)
    assert d.allocations["a"] == ("n0-g0",)
    assert "about to finish" in str(d.reasons["a"])


def test_adaptive_short_arrival_takes_gpus_from_long_elastic_job():
    long_job = Job(
        "long",
        0,
        1e6,
        min_gpus=1,
        max_gpus=8,
        speed=linear(),
        resize_cost=6.0,
        gpus=tuple(g.id for g in _gpus(8)),
        started=True,
        last_change=0,
    )
    short = Job("short", 900, 1000, min_gpus=2, max_gpus=8, speed=linear())
    # Linear speed-up, order alone: shortest first takes everything, the long job is suspended
    # (SRPT).
    order_only = AdaptivePolicy(protect_critical=False)
    d = order_only.decide(Snapshot(_gpus(8), (long_job, short)), 1000)
    assert len(d.allocations["short"]) == 8 and d.allocations["long"] == ()
    assert str(d.reasons["long"]).startswith("suspended")
    # The long job is the critical path (all the work ends with it): it keeps, on GPUs it
    # had, what ends it within the horizon, and the short job starts on the rest.
    critical = AdaptivePolicy(protect_critical=True)
    d = critical.decide(Snapshot(_gpus(8), (long_job, short)), 1000)
    assert len(d.allocations["short"]) >= 2
    assert 1 <= len(d.allocations["long"]) < 8
    assert set(d.allocations["long"]) <= set(long_job.gpus)
    assert "critical path" in str(d.reasons["long"])
    # Sub-linear speed-up: the GPUs are shared, the long job shrinks on the GPUs it had.
    sub = SpeedModel({g: 10.0 * g**0.5 for g in range(1, 9)})
    long_job = replace(long_job, speed=sub)
    short = replace(short, speed=sub)
    d = order_only.decide(Snapshot(_gpus(8), (long_job, short)), 1000)
    assert len(d.allocations["short"]) >= 2
    assert 1 <= len(d.allocations["long"]) < 8
    assert set(d.allocations["long"]) <= set(long_job.gpus)


def test_adaptive_queues_with_a_reason_when_nothing_fits():
    running = Job(
        "r", 0, 1e5, min_gpus=4, max_gpus=4, speed=linear(), gpus=tuple(g.id for g in _gpus(4))
    )
    waiting = Job("w", 10, 2e5, min_gpus=4, max_gpus=4, speed=linear())
    d = AdaptivePolicy().decide(Snapshot(_gpus(4), (running, waiting)), 100)
    assert d.allocations["w"] == ()
    assert str(d.reasons["w"]).startswith("queued: needs 4 GPUs, 0 free")
    assert str(d.reasons["w"]).endswith("; GPUs held by r (shorter)")


def test_aging_lets_a_long_waiting_job_in():
    gpus = _gpus(4)
    short_running = Job(
        "s", 0, 4000, min_gpus=4, max_gpus=4, speed=linear(), gpus=tuple(g.id for g in gpus)
    )
    long_waiting = Job("l", 0, 40000, min_gpus=4, max_gpus=4, speed=linear(), queued_s=0)
    policy = AdaptivePolicy(aging_s=3600, protect_critical=False)  # the order alone
    assert policy.decide(Snapshot(gpus, (short_running, long_waiting)), 10).allocations["l"] == ()
    aged = Job("l", 0, 40000, min_gpus=4, max_gpus=4, speed=linear(), queued_s=100 * 3600)
    assert policy.decide(Snapshot(gpus, (short_running, aged)), 10).allocations["l"] != ()


@st.composite
def long_queues(draw) -> Snapshot:
    """A few GPUs and more jobs waiting for them than running, with minimums up to three and
    speed curves that gain per GPU in places (super-linear), where ``snapshots`` has none."""
    gpus = [Gpu(f"n{n}-g{i}", f"n{n}") for n in range(2) for i in range(draw(st.integers(2, 4)))]
    free = [g.id for g in gpus]
    jobs = []
    for i in range(draw(st.integers(4, 16))):
        lo = draw(st.integers(1, 3))
        hi = draw(st.integers(lo, len(gpus) + 1))
        # Each GPU more gains 0.2x to 1.6x what it would with a linear speed-up.
        speeds = [10.0]
        for g in range(2, hi + 1):
            speeds.append(speeds[-1] * (1 + draw(st.floats(0.2, 1.6)) / (g - 1)))
        n = draw(st.integers(lo, hi))
        runs = n <= len(free) and draw(st.integers(0, 3)) == 0
        held, free = (tuple(free[:n]), free[n:]) if runs else ((), free)
        work = draw(st.floats(100, 1e5))
        done = draw(st.floats(0, 0.9)) * work if runs else 0.0
        prior = dict(enumerate(speeds, start=1))
        job = Job(f"j{i}", draw(st.floats(0, 1000)), work, lo, hi, None, done)
        jobs.append(
            replace(
                job,
                speed=SpeedModel({}, prior),
                resize_cost=draw(st.sampled_from([0.0, 6.0, 60.0])),
                gpus=held,
                started=runs,
                queued_s=draw(st.floats(0, 1e4)),
                last_change=0.0 if runs else None,
            )
        )
    return Snapshot(tuple(gpus), tuple(jobs))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=st.one_of(snapshots(), long_queues()), critical=st.booleans())
def test_adaptive_hands_out_the_same_when_waiting_jobs_join_late(snap, critical):
    """A waiting job joins the hand-out only when its first move could come next; the decision
    and its promise are those of a hand-out that every job joins at once (which the bound on a
    first move, made infinite, gives)."""
    policy = AdaptivePolicy(protect_critical=critical)
    late = policy.decide(snap, now=2000.0)
    summary = SpeedModel.summary

    def unbounded(speed, *args):
        x, fit, _, options, curve = summary(speed, *args)
        return x, fit, math.inf, options, curve

    with mock.patch.object(SpeedModel, "summary", unbounded):
        at_once = policy.decide(snap, now=2000.0)
    assert late.allocations == at_once.allocations
    assert late.holds_until == at_once.holds_until


def test_adaptive_lets_a_waiting_job_that_gains_per_gpu_go_before_one_ahead_of_it():
    """On 2 GPUs, ``short`` is first in the order and ``wide`` second, but ``wide`` runs 2.4x
    as fast on 2 GPUs as on 1: its move to 2 gains more per GPU than ``short``'s to 1, so it
    takes both GPUs first. (A hand-out that let a waiting job join only when its weight alone
    could come next would have started ``short`` first, and given each one GPU.)"""

    def waiting(job_id, work, lo, hi, speed):
        return Job(job_id, 0.0, work, lo, hi, speed=SpeedModel({}, speed))

    jobs = [
        waiting("short", 1_000.0, 1, 2, {1: 10.0, 2: 16.0}),
        waiting("wide", 2_000.0, 1, 2, {1: 10.0, 2: 24.0}),
        # Jobs after them in the order, whose minimum no GPU count here reaches.
        *(waiting(f"big-{i}", 10_000.0, 3, 3, {3: 30.0}) for i in range(8)),
    ]
    snap = Snapshot((Gpu("g0"), Gpu("g1")), tuple(jobs))
    decision = AdaptivePolicy(protect_critical=False).decide(snap, now=0.0)
    assert decision.order[:2] == ("short", "wide")
    assert len(decision.allocations["wide"]) == 2 and decision.allocations["short"] == ()


def test_adaptive_weighs_only_the_waiting_jobs_whose_turn_could_come():
    """2 GPUs, 40 waiting jobs that scale sub-linearly: the first two in the order start, and
    the others' values are worked out only when the decision's promise is read (its
    certificate weighs every job's first move)."""
    speed = {1: 10.0, 2: 16.0}
    jobs = [Job(f"j{i}", 0.0, 1_000.0 + i, 1, 2, speed=SpeedModel({}, speed)) for i in range(40)]
    weighed = []
    prepare = AdaptivePolicy._prepare

    def counted(plan, *args):
        weighed.append(plan.job.id)
        return prepare(plan, *args)

    with mock.patch.object(AdaptivePolicy, "_prepare", staticmethod(counted)):
        decision = AdaptivePolicy().decide(Snapshot((Gpu("g0"), Gpu("g1")), tuple(jobs)), 0.0)
        assert [j for j, gpus in decision.allocations.items() if gpus] == ["j0", "j1"]
        assert weighed == ["j0", "j1"]
        assert decision.holds_until is not None
        assert sorted(weighed) == sorted(j.id for j in jobs)


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(UnknownPolicy, match="known: adaptive"):
        make_policy("fifo")


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"protect_critical": "false"}, "protect_critical must be true or false, got 'false'"),
        ({"lookahead": 1}, "lookahead must be true or false, got 1"),
        ({"aging_s": float("nan")}, "aging_s must be a finite number, got nan"),
        ({"makespan_weight": float("inf")}, "makespan_weight must be a finite number"),
        ({"queue_slack": "2"}, "queue_slack must be a finite number, got '2'"),
        ({"cooldown": True}, "cooldown must be a finite number, got True"),
        ({"resize_budget": 2.5}, "resize_budget must be a whole number, got 2.5"),
    ],
)
def test_adaptive_settings_of_the_wrong_kind_are_refused(given, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        AdaptiveParams(**given)
    AdaptiveParams(aging_s=600, makespan_weight=1)  # a whole number where a float is asked: fine


def test_invalid_job_is_refused():
    with pytest.raises(ValueError, match=r"max_gpus .* below min_gpus"):
        Job("x", 0, 10, min_gpus=3, max_gpus=2)
    with pytest.raises(ValueError, match="must not be negative"):
        Job("x", 0, -1)


def test_adaptive_reasons_read_as_a_mapping():
    gpus = tuple(Gpu(f"g{i}") for i in range(2))
    jobs = (
        Job("short", 0.0, 100.0, speed=SpeedModel(prior={1: 1.0})),
        Job("long", 0.0, 1000.0, speed=SpeedModel(prior={1: 1.0}), gpus=("g0",), started=True),
        Job("wide", 0.0, 500.0, min_gpus=2, max_gpus=2, speed=SpeedModel(prior={2: 2.0})),
    )
    decision = AdaptivePolicy().decide(Snapshot(gpus, jobs), 0.0)
    reasons = decision.reasons
    assert list(reasons) == list(decision.order) and len(reasons) == 3
    assert reasons == dict(reasons) and dict(reasons) == reasons
    assert str(reasons.get("wide", "")).startswith("queued") and "nope" not in reasons
