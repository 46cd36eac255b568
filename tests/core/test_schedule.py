"""``core.schedule``: the per-user GPU cap around every policy, and the queue order."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_policies import snapshots

from jupyter_elastic_gpu.core import Decision, Gpu, Job, Snapshot, SpeedModel, decide
from jupyter_elastic_gpu.core.policies import POLICIES, make_policy
from jupyter_elastic_gpu.core.schedule import queue_positions

ALL = sorted(POLICIES)
NOW = 2000.0
CAPPED = "may hold at most"


@st.composite
def capped_snapshots(draw) -> Snapshot:
    """The policy tests' random snapshots, shared by three users, under a random cap."""
    snap = draw(snapshots())
    jobs = tuple(replace(j, user=draw(st.sampled_from(["ann", "bob", "cy"]))) for j in snap.jobs)
    cap = draw(st.integers(1, len(snap.gpus) + 1))
    return replace(snap, jobs=jobs, user_gpu_cap=cap)


def held_by_user(snap: Snapshot, decision: Decision) -> dict[str, int]:
    held: dict[str, int] = {}
    for job in snap.jobs:
        held[job.user] = held.get(job.user, 0) + len(decision.allocations[job.id])
    return held


def pinned_kept(job: Job, decision: Decision) -> bool:
    n = len(decision.allocations[job.id])
    return job.pinned and n > 0 and n == len(job.gpus)


def check_under_caps(snap: Snapshot, decision: Decision) -> None:
    """What any decision under per-user caps must be: every job answered, no GPU given twice
    or unusable, sizes within each job's range, grants mid-change untouched, and no user above
    the cap except by grants mid-change (which nothing may cut)."""
    cap = snap.user_gpu_cap
    healthy = {g.id for g in snap.gpus if g.healthy}
    assert set(decision.allocations) == {j.id for j in snap.jobs}
    assert set(decision.reasons) == {j.id for j in snap.jobs}
    handed = [g for ids in decision.allocations.values() for g in ids]
    assert len(handed) == len(set(handed)), "a GPU went to two jobs"
    assert set(handed) <= healthy
    pinned: dict[str, int] = {}
    for j in snap.jobs:
        n = len(decision.allocations[j.id])
        if n:
            assert n >= j.min_gpus or (j.pinned and n == len(j.gpus))
            assert n <= max(j.max_gpus, len(j.gpus))
        if j.pinned and set(j.gpus) <= healthy:
            assert set(decision.allocations[j.id]) == set(j.gpus), "a pinned job was moved"
        if pinned_kept(j, decision):
            pinned[j.user] = pinned.get(j.user, 0) + n
    if cap:
        for user, held in held_by_user(snap, decision).items():
            assert held <= max(cap, pinned.get(user, 0)), f"{user} holds {held} GPUs, cap {cap}"


def _gpus(n, per_node=4):
    return tuple(Gpu(f"n{i // per_node}-g{i % per_node}", f"n{i // per_node}") for i in range(n))


def linear(top=8):
    return SpeedModel({g: 10.0 * g for g in range(1, top + 1)})


def job(job_id, user, submit=0.0, lo=4, hi=None, req=None, work=1000.0, **kw):
    hi = hi or lo
    return Job(
        job_id,
        submit,
        work,
        min_gpus=lo,
        max_gpus=hi,
        requested_gpus=req or lo,
        user=user,
        speed=linear(hi),
        **kw,
    )


# -- properties on random snapshots ---------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=capped_snapshots())
def test_no_user_holds_more_than_the_cap(name, snap):
    policy = make_policy(name)
    decision = decide(policy, snap, NOW)
    check_under_caps(snap, decision)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=capped_snapshots())
def test_no_gpu_idles_because_of_the_cap(name, snap):
    """Every policy here runs a waiting job that fits in the free GPUs (backfill); so when GPUs
    stay free, a job that waits needs more than are free or has no room under the cap."""
    policy = make_policy(name)
    check_no_idle_for_the_cap(policy, snap, decide(policy, snap, NOW))


def check_no_idle_for_the_cap(policy, snap: Snapshot, decision: Decision) -> None:
    cap = snap.user_gpu_cap
    free = len(snap.usable_gpus) - sum(len(v) for v in decision.allocations.values())
    held = held_by_user(snap, decision)
    for j in snap.jobs:
        if decision.allocations[j.id] or j.pinned:
            continue
        room = cap - held[j.user]
        # The policy's size for it; once the cap holds it back, at most the room left.
        need = j.min_gpus if policy.elastic else j.requested_gpus
        if CAPPED in str(decision.reasons[j.id]):
            need = min(need, max(room, j.min_gpus))
        assert room < j.min_gpus or free < need, (
            f"{j.id} waits with {free} GPUs free and room for {room} under the cap"
        )
        if room < j.min_gpus:
            assert CAPPED in str(decision.reasons[j.id])


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=snapshots())
def test_without_a_cap_the_decision_is_the_policy_s_own(name, snap):
    assert snap.user_gpu_cap == 0
    policy = make_policy(name)
    assert decide(policy, snap, NOW) == policy.decide(snap, NOW)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=capped_snapshots())
def test_a_cap_nobody_reaches_changes_no_allocation(name, snap):
    policy = make_policy(name)
    bare = policy.decide(replace(snap, user_gpu_cap=0), NOW)
    if max(held_by_user(snap, bare).values(), default=0) > snap.user_gpu_cap:
        return
    decision = decide(policy, snap, NOW)
    assert dict(decision.allocations) == dict(bare.allocations)
    assert decision.order == bare.order


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=capped_snapshots(), capped=st.booleans())
def test_positions_follow_the_policy_s_order(name, snap, capped):
    if not capped:
        snap = replace(snap, user_gpu_cap=0)
    decision = decide(make_policy(name), snap, NOW)
    assert sorted(decision.order) == sorted(j.id for j in snap.jobs)
    waiting = [i for i in decision.order if not decision.allocations[i]]
    positions = queue_positions(decision)
    assert positions == {job_id: k for k, job_id in enumerate(waiting, 1)}


# -- exact cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_gpus_the_cap_keeps_from_one_user_go_to_another_in_the_same_decision(name):
    # Alice's two jobs would fill the 8 GPUs (they came first); with a cap of 4 her second
    # waits and Bob's job runs now, not at the next decision.
    snap = Snapshot(
        _gpus(8), (job("a1", "alice", 0), job("a2", "alice", 1), job("b1", "bob", 2)), 4
    )
    policy = make_policy(name)
    bare = policy.decide(replace(snap, user_gpu_cap=0), NOW)
    assert not bare.allocations["b1"], "the scenario needs the bare policy to favour alice"
    d = decide(policy, snap, NOW)
    assert {k: len(v) for k, v in d.allocations.items()} == {"a1": 4, "a2": 0, "b1": 4}
    assert str(d.reasons["a2"]) == "queued: alice may hold at most 4 GPUs at a time"
    assert queue_positions(d) == {"a2": 1}
    assert d.order == ("a1", "a2", "b1")


def test_an_elastic_job_runs_up_to_the_cap_and_the_rest_goes_to_others():
    snap = Snapshot(
        _gpus(8),
        (
            job("a", "alice", 0, lo=1, hi=8, work=1e5),
            job("b", "bob", 0, lo=1, hi=8, work=1e6),
        ),
        3,
    )
    d = decide(make_policy("adaptive"), snap, NOW)
    assert len(d.allocations["a"]) == 3 and len(d.allocations["b"]) == 3
    assert (
        str(d.reasons["a"])
        == "running on 3 of up to 8 GPUs: alice may hold at most 3 GPUs at a time"
    )
    assert (
        str(d.reasons["b"]) == "running on 3 of up to 8 GPUs: bob may hold at most 3 GPUs at a time"
    )


def test_a_grant_mid_change_keeps_its_gpus_and_the_user_s_other_jobs_wait():
    gpus = _gpus(8)
    resizing = job("a1", "alice", 0, lo=1, hi=4, gpus=tuple(g.id for g in gpus[:3]), pinned=True)
    snap = Snapshot(gpus, (resizing, job("a2", "alice", 1, lo=2), job("b1", "bob", 2, lo=2)), 4)
    for name in ALL:
        d = decide(make_policy(name), snap, NOW)
        assert set(d.allocations["a1"]) == set(resizing.gpus), name
        assert d.allocations["a2"] == () and len(d.allocations["b1"]) == 2, name
        assert str(d.reasons["a2"]) == "queued: alice may hold at most 4 GPUs at a time", name


def test_a_non_preemptive_policy_keeps_the_running_job_and_holds_back_the_waiting_one():
    # Static never preempts: alice's running job keeps its 3 GPUs, even against her older
    # job that waited for GPUs and would now fit.
    gpus = _gpus(8)
    running = job("new", "alice", 10, lo=3, gpus=tuple(g.id for g in gpus[:3]), started=True)
    older = job("old", "alice", 0, lo=2)
    d = decide(make_policy("static"), Snapshot(gpus, (running, older), 4), NOW)
    assert len(d.allocations["new"]) == 3 and d.allocations["old"] == ()
    assert str(d.reasons["old"]) == "queued: alice may hold at most 4 GPUs at a time"


def test_a_preemptive_policy_follows_its_order_within_the_cap():
    # Tiresias runs the job with less attained service first; the cap makes alice's two jobs
    # compete for her 4 GPUs, so her long-running one is suspended for the new one.
    gpus = _gpus(8)
    veteran = job("vet", "alice", 0, lo=4, gpus=tuple(g.id for g in gpus[:4]), started=True)
    veteran = replace(veteran, attained_gpu_s=1e6)
    d = decide(make_policy("tiresias"), Snapshot(gpus, (veteran, job("new", "alice", 5)), 4), NOW)
    assert d.allocations["vet"] == () and len(d.allocations["new"]) == 4
    assert str(d.reasons["vet"]) == "suspended: alice may hold at most 4 GPUs at a time"
    assert d.order == ("new", "vet") and queue_positions(d) == {"vet": 1}


def test_a_grant_the_policy_will_not_shrink_is_shrunk_by_the_cap():
    # Adaptive keeps a job about to finish as it is, whatever its maximum. When the cap was
    # lowered under it, the cap itself shrinks it, on GPUs it holds, and bob gets the rest.
    gpus = _gpus(4)
    grant = tuple(g.id for g in gpus)
    ending = job("end", "ann", 0, lo=1, hi=4, work_done=999.0, gpus=grant, resize_cost=6.0)
    snap = Snapshot(gpus, (ending, job("w", "bob", 1, lo=2, hi=4)), 2)
    policy = make_policy("adaptive")
    assert "about to finish" in str(policy.decide(snap, NOW).reasons["end"])
    d = decide(policy, snap, NOW)
    assert len(d.allocations["end"]) == 2 and set(d.allocations["end"]) <= set(grant)
    assert len(d.allocations["w"]) == 2
    assert (
        str(d.reasons["end"])
        == "running on 2 of up to 4 GPUs: ann may hold at most 2 GPUs at a time"
    )


def test_a_fixed_size_job_runs_smaller_when_only_that_fits_under_the_cap():
    gpus = _gpus(8)
    first = job("a1", "alice", 0, lo=2)
    flexible = job("a2", "alice", 1, lo=1, hi=4, req=4)
    d = decide(make_policy("static"), Snapshot(gpus, (first, flexible), 3), NOW)
    assert len(d.allocations["a1"]) == 2 and len(d.allocations["a2"]) == 1
    assert (
        str(d.reasons["a2"])
        == "running on 1 of up to 4 GPUs: alice may hold at most 3 GPUs at a time"
    )


def test_a_job_larger_than_the_cap_waits_and_says_why():
    d = decide(make_policy("adaptive"), Snapshot(_gpus(8), (job("big", "ann", lo=6),), 4), NOW)
    assert d.allocations["big"] == ()
    assert str(d.reasons["big"]) == "queued: ann may hold at most 4 GPUs at a time"


def test_a_waiting_job_whose_user_is_at_the_cap_names_the_cap():
    # Nobody is over the cap, so nothing changes; but ann's waiting job could not start even
    # with GPUs free, and its reason says so.
    gpus = _gpus(4)
    running = job("r", "ann", 0, lo=4, gpus=tuple(g.id for g in gpus), started=True)
    d = decide(make_policy("static"), Snapshot(gpus, (running, job("w", "ann", 1, lo=1)), 4), NOW)
    assert d.allocations["w"] == ()
    assert str(d.reasons["w"]) == "queued: ann may hold at most 4 GPUs at a time"


def test_without_a_cap_decide_returns_the_policy_s_decision_itself():
    sentinel = Decision({}, {}, ())

    class Fixed:
        name, elastic, preemptive = "fixed", False, False

        def decide(self, snapshot, now):
            return sentinel

    assert decide(Fixed(), Snapshot(_gpus(2), ()), 0) is sentinel


def test_the_cap_is_validated():
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(ValueError, match="user_gpu_cap"):
            Snapshot(_gpus(2), (), bad)


def test_queue_positions_skip_running_jobs_and_those_not_asked_about():
    d = Decision(
        {"a": ("g0",), "b": (), "c": (), "d": ()},
        {},
        ("c", "a", "b", "d"),
    )
    assert queue_positions(d) == {"c": 1, "b": 2, "d": 3}
    assert queue_positions(d, among={"b", "d"}) == {"b": 1, "d": 2}
    # A decision without an order (a policy outside core) numbers in allocation order.
    assert queue_positions(Decision(d.allocations, {})) == {"b": 1, "c": 2, "d": 3}


@pytest.mark.parametrize("name", ALL)
def test_a_job_the_cap_made_wait_takes_a_gpu_the_rounds_left_idle(name):
    """A case hypothesis found: bob's long-waiting 3-GPU job takes bob's whole cap in one
    round, ann's job takes its GPUs in the next, and bob's 1-GPU jobs, held back once already,
    must still get the GPU left over (the cap shares GPUs, it never idles them)."""

    def one(job_id, user, lo, hi, work, prior, queued_s=0.0):
        speed = SpeedModel(measured={}, prior=prior)
        return Job(job_id, 0.0, work, lo, hi, lo, user=user, speed=speed, queued_s=queued_s)

    single = {1: 10.0}
    jobs = (
        one("j0", "ann", 2, 4, 7.0, {1: 10.0, 4: 10.0 * 4**0.75}),
        *(one(f"j{i}", "bob", 1, 1, 1.0, single) for i in (1, 2, 3)),
        one("j4", "bob", 3, 3, 1.0, {1: 10.0, 3: 30.0}, queued_s=1.0),
        one("j5", "bob", 1, 1, 1.0, single),
        one("j6", "ann", 2, 3, 1.0, {1: 10.0, 3: 10.0 * 3**0.5}),
    )
    snap = Snapshot(_gpus(4), jobs, user_gpu_cap=3)
    policy = make_policy(name)
    decision = decide(policy, snap, NOW)
    check_under_caps(snap, decision)
    check_no_idle_for_the_cap(policy, snap, decision)
