"""``Decision.holds_until``: how long a decision stays the same while only time passes."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_policies import snapshots

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel, decide
from jupyter_elastic_gpu.core.fairshare import FairShare
from jupyter_elastic_gpu.core.policies import AdaptivePolicy, holds, make_policy
from jupyter_elastic_gpu.core.policies.critical import critical_path
from jupyter_elastic_gpu.core.policies.holds import steady


@dataclass
class Plan:
    job: Job
    key: float


def carried_out(snap: Snapshot, allocations, now: float) -> Snapshot:
    """The snapshot once ``allocations`` are carried out (and their pauses are over)."""
    jobs = []
    for job in snap.jobs:
        gpus = tuple(allocations[job.id])
        if gpus != job.gpus:
            job = replace(
                job,
                gpus=gpus,
                started=job.started or bool(gpus),
                pinned=False,
                last_change=now,
                resizes=job.resizes + bool(job.gpus),
            )
        jobs.append(job)
    return replace(snap, jobs=tuple(jobs))


def later(snap: Snapshot, dt: float) -> Snapshot:
    """The snapshot ``dt`` seconds on, with nothing happening but time passing: running jobs
    progress at their modelled speed (mid-resize ones not at all), waiting ones wait."""
    jobs = []
    for job in snap.jobs:
        if job.running:
            speed = 0.0 if job.pinned else job.speed.throughput(len(job.gpus))
            job = replace(
                job,
                work_done=job.work_done + speed * dt,
                attained_gpu_s=job.attained_gpu_s + dt * len(job.gpus),
            )
        else:
            job = replace(job, queued_s=job.queued_s + dt)
        jobs.append(job)
    return replace(snap, jobs=tuple(jobs))


def first_completion(snap: Snapshot) -> float:
    """Seconds until the first running job would finish (an event, not time passing)."""
    ends = [
        job.remaining_time(len(job.gpus)) for job in snap.jobs if job.running and not job.pinned
    ]
    return min(ends, default=math.inf)


NOW = 3000.0


@st.composite
def queues(draw) -> Snapshot:
    """A busy box at ``NOW``: more jobs than GPUs, some near their end, some resized moments
    ago, waiting jobs of every age."""
    gpus = tuple(Gpu(f"g{i}") for i in range(draw(st.integers(1, 4))))
    free = [g.id for g in gpus]
    jobs = []
    for i in range(draw(st.integers(2, 9))):
        hi = draw(st.integers(1, 3))
        alpha = draw(st.floats(0.3, 1.0))
        n = draw(st.integers(0, hi))
        held, free = tuple(free[:n]), free[n:]
        prior = {g: 10.0 * g**alpha for g in range(1, hi + 1)}
        measured = {len(held): prior[len(held)] * draw(st.floats(0.8, 1.2))} if held else {}
        work = draw(st.floats(100, 1e4))
        jobs.append(
            Job(
                id=f"j{i}",
                submit_time=draw(st.floats(0, 100)),
                total_work=work,
                work_done=draw(st.floats(0, 0.999)) * work if held else 0.0,
                min_gpus=1,
                max_gpus=hi,
                speed=SpeedModel(measured, prior),
                resize_cost=draw(st.sampled_from([0.0, 6.0, 60.0])),
                gpus=held,
                started=bool(held),
                queued_s=draw(st.floats(0, 3000)),
                resizes=draw(st.integers(0, 3)),
                last_change=NOW - draw(st.floats(0, 1200)) if held else None,
            )
        )
    return Snapshot(gpus, tuple(jobs))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.one_of(snapshots(), queues()))
def test_a_steady_decision_is_the_decision_at_any_time_before_it_ends(snap):
    now = NOW
    policy = AdaptivePolicy(aging_s=600.0)  # a fast aging: the order moves within minutes
    for _ in range(4):  # carry the decisions out until one changes nothing
        decision = policy.decide(snap, now)
        if steady(snap, decision.allocations):
            break
        snap = carried_out(snap, decision.allocations, now)
    assume(steady(snap, decision.allocations))
    until = decision.holds_until
    assert until is not None and until >= now
    span = min(until - now, first_completion(snap) * (1 - 1e-6), 1e7)
    assume(span > 0)
    for share in (0.001, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.9999):
        dt = share * span
        assert policy.decide(later(snap, dt), now + dt).allocations == decision.allocations


def test_a_decision_that_changes_anything_promises_nothing():
    gpus = (Gpu("g0"), Gpu("g1"))
    job = Job("a", 0.0, 1000.0, 1, 2, speed=SpeedModel(prior={1: 1.0, 2: 2.0}))
    decision = AdaptivePolicy().decide(Snapshot(gpus, (job,)), 100.0)
    assert decision.allocations["a"]  # it starts
    assert decision.holds_until == 100.0


def running(job_id, gpus, work=10_000.0, done=0.0, **kw):
    speed = SpeedModel({len(gpus): float(len(gpus))}, {g: float(g) for g in range(1, 5)})
    return Job(
        job_id,
        0.0,
        work,
        1,
        len(gpus),
        work_done=done,
        speed=speed,
        gpus=tuple(gpus),
        started=True,
        **{"resize_cost": 6.0, **kw},
    )


def queued(job_id, work, waited, submit=0.0):
    return Job(
        job_id,
        submit,
        work,
        1,
        1,
        speed=SpeedModel(prior={1: 1.0}),
        resize_cost=6.0,
        queued_s=waited,
    )


def test_it_ends_before_a_running_job_comes_about_to_finish():
    # 600 s of work left at 1 unit/s: about to finish (4 x 6 s left) at 576 s from now.
    snap = Snapshot((Gpu("g0"),), (running("a", ["g0"], work=1000.0, done=400.0),))
    decision = AdaptivePolicy(protect_critical=False).decide(snap, 0.0)
    assert 575.0 < decision.holds_until < 576.0
    # With the critical path (the job is all of it), the promise is shorter: the bounds on
    # the path compare the job with a horizon that falls as it runs.
    critical = AdaptivePolicy(protect_critical=True).decide(snap, 0.0)
    assert 0.0 < critical.holds_until < decision.holds_until


def test_it_ends_before_a_cooldown_does_if_the_job_could_grow_then():
    # Resized moments ago to one of its two GPUs: once the cooldown ends it may take the other.
    job = replace(running("a", ["g0"], last_change=30.0), max_gpus=2)
    snap = Snapshot((Gpu("g0"), Gpu("g1")), (job,))
    policy = AdaptivePolicy()
    decision = policy.decide(snap, 40.0)
    assert decision.allocations == {"a": ("g0",)}
    end = 30.0 + policy.cooldown_s(job)
    assert 40.0 < decision.holds_until < end
    assert decision.holds_until > end - 1e-3
    assert policy.decide(later(snap, end + 1.0 - 40.0), end + 1.0).allocations["a"] == (
        "g0",
        "g1",
    )
    # At its maximum, or on every GPU there is, the cooldown keeps it from nothing.
    for snap in (
        Snapshot((Gpu("g0"),), (job,)),
        Snapshot((Gpu("g0"), Gpu("g1")), (replace(job, max_gpus=1),)),
    ):
        decision = policy.decide(snap, 40.0)
        assert decision.holds_until > end + 100.0
        assert policy.decide(later(snap, end + 1.0 - 40.0), end + 1.0).allocations == (
            decision.allocations
        )


def test_two_waiting_jobs_that_change_places_change_nothing_here():
    # Keys are GPU-time at the minimum over 1 + waited / aging_s (an hour). c is twice as long
    # as d but has waited an hour: 2000 / 2 = 1000 against 1050, c first. Both age alike from
    # here, which helps the longer job less: 2000 / (2 + x) = 1050 / (1 + x) at x = 100 / 950,
    # 378.9 s from now. The running job (shorter than both, no resize cost) keeps the GPU.
    policy = AdaptivePolicy(aging_s=3600.0)
    c, d = queued("c", 2000.0, 3600.0), queued("d", 1050.0, 0.0)
    snap = Snapshot((Gpu("g0"),), (running("r", ["g0"], work=500.0, resize_cost=0.0), c, d))
    decision = policy.decide(snap, 0.0)
    assert decision.order == ("r", "c", "d")
    meet = 3600.0 * 100 / 950
    plans = [Plan(job, policy.priority_key(job)) for job in snap.jobs]
    order = holds.order_holds_until(0.0, [holds._course(policy, plan) for plan in plans])
    assert meet - 1.0 < order < meet
    keys = {j.id: policy.priority_key(j) for j in later(snap, meet + 1.0).jobs}
    assert keys["d"] < keys["c"]  # they do change places ...
    assert decision.holds_until > meet  # ... but neither would get the GPU in either order


def test_decide_keeps_the_promise_only_where_the_decision_is_the_policy_s_own():
    gpus = tuple(Gpu(f"g{i}") for i in range(4))
    jobs = (
        running("a", ["g0", "g1"], user="ann", work=1e6),
        running("b", ["g2", "g3"], user="bob", work=1e6),
    )
    policy = make_policy("adaptive")
    own = policy.decide(Snapshot(gpus, jobs), 0.0)
    assert own.holds_until > 0.0
    assert decide(policy, Snapshot(gpus, jobs), 0.0).holds_until == own.holds_until
    # A cap nobody reaches: the policy's decision, promise and all.
    assert decide(policy, Snapshot(gpus, jobs, user_gpu_cap=2), 0.0).holds_until == (
        own.holds_until
    )
    # Fair share moves with time (usage decays): no promise.
    fair = FairShare({}, {"ann": 1000.0})
    assert decide(policy, Snapshot(gpus, jobs, fair_share=fair), 0.0).holds_until is None


def test_a_job_coming_near_its_end_ends_no_promise_while_the_reservations_fit():
    """A running job whose time left comes within the critical slack of the horizon is kept
    (never suspended for a reservation); that changes the decision only if a reservation then
    no longer fits. Here the long job's reservation (all 4 of its GPUs) fits beside both short
    jobs whatever: the promise runs past the moments they come near their ends, to the first
    short job's finish guard."""
    gpus = tuple(Gpu(f"g{i}") for i in range(6))
    wide = SpeedModel({4: 360.0}, {1: 100.0, 2: 190.0, 3: 200.0, 4: 360.0})
    long = Job("long", 0.0, 1e7, 1, 4, speed=wide, resize_cost=6.0, gpus=("g0", "g1", "g2", "g3"))

    def short(i: int, left: float) -> Job:
        done = 10_000.0 - left
        rigid = SpeedModel({1: 1.0})
        return Job(f"s{i}", 0.0, 10_000.0, 1, 1, work_done=done, speed=rigid, resize_cost=6.0)

    jobs = (long, replace(short(1, 5000.0), gpus=("g4",)), replace(short(2, 8000.0), gpus=("g5",)))
    snap = Snapshot(gpus, tuple(replace(j, started=True) for j in jobs))
    policy = AdaptivePolicy()
    path = critical_path(snap.jobs, 0.0, len(gpus), 0.1, 0.3, 1.0)
    assert [(r.job.id, r.gpus) for r in path.reservations] == [("long", 4)]
    near = 5000.0 - 0.1 * path.earliest  # s1 within the slack from here on (or sooner)
    decision = policy.decide(snap, 0.0)
    assert steady(snap, decision.allocations)
    guard = 5000.0 - policy.params.finish_guard * 6.0
    assert near + 1000.0 < decision.holds_until < guard
    assert decision.holds_until > guard - 1e-3
    for dt in (near - 1.0, near + 1.0, 4000.0, 0.9999 * decision.holds_until):
        assert policy.decide(later(snap, dt), dt).allocations == decision.allocations
