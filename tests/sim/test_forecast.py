"""The forward run that estimates when queued jobs start and running jobs end."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.policies import POLICIES, make_policy
from jupyter_elastic_gpu.core.schedule import decide
from jupyter_elastic_gpu.sim.forecast import MAX_DECISIONS, forecast

NOW = 1_000_000.0


def job(job_id, work, done=0.0, gpus=(), speed=10.0, submitted=NOW - 100, **kw) -> Job:
    return Job(
        id=job_id,
        submit_time=submitted,
        total_work=work,
        work_done=done,
        speed=SpeedModel({1: speed}),
        gpus=tuple(gpus),
        started=bool(gpus),
        **kw,
    )


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_queued_job_starts_when_the_running_one_ends(policy):
    """One GPU; the running job has 1000 samples left at 10/s: it ends in exactly 100 s, and
    the queued one (longer: no policy puts it first) starts then and ends 500 s later (no
    resize cost)."""
    running = job("r", 2000.0, done=1000.0, gpus=["0"], last_change=NOW - 100, submitted=NOW - 200)
    queued = job("q", 5000.0)
    f = forecast(make_policy(policy), Snapshot((Gpu("0"),), (running, queued)), NOW)
    assert f.estimates["r"].start is None  # it holds GPUs now
    assert f.estimates["r"].end == pytest.approx(NOW + 100.0, abs=1e-6)
    assert f.estimates["q"].start == pytest.approx(NOW + 100.0, abs=1e-6)
    assert f.estimates["q"].end == pytest.approx(NOW + 600.0, abs=1e-6)
    assert f.complete


def test_a_start_pays_its_resize_cost():
    running = job("r", 2000.0, done=1000.0, gpus=["0"], last_change=NOW - 3600, resize_cost=6.0)
    queued = job("q", 500.0, resize_cost=6.0)
    f = forecast(make_policy("static"), Snapshot((Gpu("0"),), (running, queued)), NOW)
    assert f.estimates["q"].start == pytest.approx(NOW + 100.0)
    assert f.estimates["q"].end == pytest.approx(NOW + 100.0 + 6.0 + 50.0)


def test_a_grant_mid_change_pauses_until_its_change_is_done():
    """A job that started 2 s ago and pays 6 s per start makes progress from 4 s on."""
    starting = job("s", 100.0, gpus=["0"], last_change=NOW - 2, resize_cost=6.0, pinned=True)
    f = forecast(make_policy("adaptive"), Snapshot((Gpu("0"),), (starting,)), NOW)
    assert f.estimates["s"].end == pytest.approx(NOW + 4.0 + 10.0)


def test_a_job_that_can_never_fit_has_no_estimate():
    """Two GPUs, one of them busy with a process the scheduler did not start."""
    gpus = (Gpu("0"), Gpu("1", healthy=False))
    big = job("big", 100.0, min_gpus=2, max_gpus=2)
    small = job("small", 100.0)
    f = forecast(make_policy("adaptive"), Snapshot(gpus, (big, small)), NOW)
    assert f.estimates["big"].start is None and f.estimates["big"].end is None
    assert f.estimates["small"].end is not None
    assert not f.complete


def test_the_per_user_cap_holds_in_the_forward_run():
    gpus = (Gpu("0"), Gpu("1"))
    first = job("a1", 100.0, gpus=["0"], user="ann", last_change=NOW - 3600)
    second = job("a2", 100.0, user="ann")
    snap = Snapshot(gpus, (first, second), user_gpu_cap=1)
    f = forecast(make_policy("adaptive"), snap, NOW)
    assert f.estimates["a2"].start == pytest.approx(f.estimates["a1"].end)


def big_snapshot(n: int, seed: int = 1) -> Snapshot:
    """``n`` jobs on 64 GPUs (8 nodes of 8), the GPUs handed out by a first decision."""
    rng = random.Random(seed)
    gpus = tuple(Gpu(f"n{i}-g{k}", f"n{i}") for i in range(8) for k in range(8))
    jobs = []
    for i in range(n):
        low = rng.choice([1, 1, 2, 4])
        speed = rng.uniform(50, 200)
        jobs.append(
            Job(
                id=f"j{i}",
                submit_time=NOW - rng.uniform(0, 3600),
                total_work=speed * rng.uniform(300, 3 * 3600),
                min_gpus=low,
                max_gpus=min(low * rng.choice([1, 2, 4]), 64),
                speed=SpeedModel({1: speed}),
                resize_cost=6.0,
                user=rng.choice(["ann", "bob", "eve"]),
            )
        )
    snap = Snapshot(gpus, tuple(jobs))
    first = decide(make_policy("adaptive"), snap, NOW)
    held = tuple(
        replace(j, gpus=first.allocations[j.id], started=True, last_change=NOW - 600)
        if first.allocations[j.id]
        else j
        for j in jobs
    )
    return Snapshot(gpus, held)


def test_500_jobs_stay_bounded_and_every_job_gets_an_estimate():
    snap = big_snapshot(500)
    f = forecast(make_policy("adaptive"), snap, NOW)
    assert f.decisions <= MAX_DECISIONS
    assert f.complete
    for j in snap.jobs:
        e = f.estimates[j.id]
        assert e.end is not None and e.end > NOW
        if j.gpus:
            assert e.start is None
        else:
            assert NOW <= e.start < e.end
    # Pure: the same snapshot and time, the same forecast.
    assert forecast(make_policy("adaptive"), snap, NOW) == f


def test_a_tight_bound_leaves_the_rest_unknown_rather_than_guessed():
    snap = big_snapshot(200)
    f = forecast(make_policy("adaptive"), snap, NOW, max_decisions=3)
    assert f.decisions <= 3 and not f.complete
    unknown = [e for e in f.estimates.values() if e.end is None]
    assert unknown


def test_the_head_of_a_long_queue_is_estimated_as_an_unbounded_run_would():
    """The jobs that start soonest get the estimate a run without a decision budget gives:
    only the far tail of a long queue is estimated coarsely."""
    snap = big_snapshot(500)
    bounded = forecast(make_policy("adaptive"), snap, NOW)
    exact = forecast(make_policy("adaptive"), snap, NOW, max_decisions=100_000)
    assert exact.complete
    queued = [j.id for j in snap.jobs if not j.gpus]
    head = sorted(queued, key=lambda i: exact.estimates[i].start)[:10]
    for job_id in head:
        assert bounded.estimates[job_id].start == pytest.approx(exact.estimates[job_id].start)


def test_with_two_kinds_free_a_job_needing_both_waits_and_the_one_behind_it_starts():
    """One A100 and one T4 free: the 2-GPU job cannot start on them (a job runs on one kind),
    as live; the 1-GPU job behind it starts now, on GPUs the first could not use."""
    gpus = tuple(Gpu(f"g{i}", "box", kind=k) for i, k in enumerate(["A100", "A100", "T4", "T4"]))
    a = job("a", 10_000.0, gpus=["g0"], last_change=NOW - 3600, min_gpus=1, max_gpus=1)
    c = job("c", 20_000.0, gpus=["g2"], last_change=NOW - 3600, min_gpus=1, max_gpus=1)
    e = job("e", 1e6, min_gpus=2, max_gpus=2, requested_gpus=2)  # served before f
    f = job("f", 2e6, min_gpus=1, max_gpus=1)
    ahead = forecast(make_policy("adaptive"), Snapshot(gpus, (a, c, e, f)), NOW)
    assert ahead.estimates["f"].start == pytest.approx(NOW)
    # e starts once two GPUs of one kind are free: not before a (1,000 s) or c (2,000 s) ends
    assert ahead.estimates["e"].start >= NOW + 1000.0


def test_where_kinds_are_mixed_the_estimate_names_the_kind_a_job_starts_on():
    """Two A100s held by a job that ends in about a minute, two T4s by one that ends in about
    17 minutes (both about to finish: kept whatever comes): a waiting job three times as fast
    on an A100 starts on the A100s (named in its estimate and in its reason's words); on GPUs
    of one kind, no kind is named."""
    gpus = tuple(Gpu(f"g{i}", "box", kind=k) for i, k in enumerate(["A100", "A100", "T4", "T4"]))
    held = {"last_change": NOW - 3600, "max_gpus": 2, "resize_cost": 300.0}
    a = job("a", 1_000.0, gpus=["g0", "g1"], **held)
    t = job("t", 20_000.0, gpus=["g2", "g3"], **held)
    w = job("w", 1e5, max_gpus=2)
    speeds = {"a": {"A100": 1.0, "T4": 1.0}, "t": {"A100": 1.0, "T4": 1.0}}
    speeds["w"] = {"A100": 3.0, "T4": 1.0}
    snap = Snapshot(gpus, (a, t, w), kind_speed=speeds)
    ahead = forecast(make_policy("adaptive"), snap, NOW)
    assert ahead.estimates["w"].kind == "A100"
    assert NOW < ahead.estimates["w"].start < NOW + 200.0  # (a ends, then the next decision)
    from jupyter_elastic_gpu.core.reason_text import say
    from jupyter_elastic_gpu.scheduler.estimates import start

    shown = start("w", ahead, NOW)
    assert shown is not None and shown.on == "A100"
    words = say("waiting", {"needs": 1, "free": 0, **shown.figures()})
    assert words.endswith("starts in under a minute on A100, when a finishes")
    alike = tuple(replace(g, kind="A100") for g in gpus)
    assert (
        forecast(make_policy("adaptive"), replace(snap, gpus=alike), NOW).estimates["w"].kind
        is None
    )
