"""Batch sizes chosen by goodput in the simulator (``--batch-policy goodput``), checked against
sums worked out here from the shipped Pollux measurements, epoch by epoch."""

from __future__ import annotations

import dataclasses

import pytest

from jupyter_elastic_gpu.core.mechanism import Mechanism
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.sim.data import pollux_traces, pollux_workload
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.traces.goodput import GoodputBatching
from jupyter_elastic_gpu.sim.traces.pollux import compact, load_applications, read_pollux
from jupyter_elastic_gpu.sim.workload import Workload

APPS = load_applications(str(pollux_traces()))


def seconds_at(app, batch: int, placement: tuple[int, ...], start: float = 0.0) -> float:
    """Seconds to train from progress ``start`` to the end at ``batch`` on ``placement``,
    summed epoch by epoch from the measurements."""
    rate = app.steps_per_second(placement, batch)
    total = 0.0
    for e in range(app.epochs):
        lo, hi = max(app.progress_at(e), start), app.progress_at(e + 1)
        if hi > lo:
            total += (hi - lo) / app.efficiency(batch, e) / rate
    return total


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_batch_chosen_finishes_soonest_and_fits_the_gpus(name):
    app, batching = APPS[name], GoodputBatching(APPS[name])
    for gpus in (1, 2, 4, 8):
        if gpus > batching.max_gpus():
            continue
        placement = compact(gpus, 4)
        for start in (0.0, batching.work / 3):
            seg = batching.start(placement, start)
            fits = [b for b in batching.batches if b >= gpus * app.min_local_bsz]
            assert seg is not None and seg.batch in fits
            best = min(seconds_at(app, b, placement, start) for b in fits)
            assert seconds_at(app, seg.batch, placement, start) == pytest.approx(best)
            # The average rate over the rest of the job gives its exact completion.
            assert (batching.work - start) / seg.speed == pytest.approx(best)


@pytest.mark.parametrize("name", ["cifar10", "imagenet", "yolov3"])
def test_a_segment_s_progress_is_exact_at_any_time(name):
    """Efficiency changes by epoch, so progress is not linear in time: after t seconds a
    segment is where the epoch-by-epoch sum puts it."""
    app, batching = APPS[name], GoodputBatching(APPS[name])
    start = app.progress_at(2) + 0.5 * (app.progress_at(3) - app.progress_at(2))
    seg = batching.start((4,), start)
    whole = seconds_at(app, seg.batch, (4,), start)
    for share in (0.0, 0.1, 0.37, 0.8, 1.0, 1.5):
        # Find by bisection where the epoch-by-epoch sum says the job is after share * whole.
        lo, hi = start, batching.work
        for _ in range(100):
            mid = (lo + hi) / 2
            elapsed = whole - seconds_at(app, seg.batch, (4,), mid)
            lo, hi = (mid, hi) if elapsed < share * whole else (lo, mid)
        assert seg.progress_after(share * whole) == pytest.approx(lo, rel=1e-6)


def test_larger_batches_gain_as_training_goes_on():
    """What the policy is told a job is worth at each count is the goodput of the epoch it is
    in: the gradient noise grows as training goes on, so many GPUs (with their larger batches)
    are worth more near the end than at the start."""
    app, batching = APPS["cifar10"], GoodputBatching(APPS["cifar10"])
    early = batching.goodput(0.0, 4, 16)
    late = batching.goodput(0.9 * batching.work, 4, 16)
    assert late[16] / late[1] > early[16] / early[1]
    epoch = batching.epoch(0.9 * batching.work)
    for g in (1, 8, 16):
        by_batch = [
            app.steps_per_second(compact(g, 4), b) * app.efficiency(b, epoch)
            for b in batching.batches
            if b >= g * app.min_local_bsz
        ]
        assert late[g] == pytest.approx(max(by_batch))
    # The profile (and the lower bounds) is the whole job's average at its best batch.
    assert batching.average(0.0, 4, 16)[8] == pytest.approx(batching.speed((4, 4)))


def one_job(name: str, gpus: int, batch_policy: str) -> Workload:
    wl = read_pollux(
        str(pollux_workload("sc20like-16gpu-24jobs")),
        str(pollux_traces()),
        4,
        16,
        batch_policy=batch_policy,
    )
    job = next(j for j in wl.jobs if j.profile_name.startswith(name))
    job = dataclasses.replace(job, submit_time=0.0, requested_gpus=gpus)
    return Workload("one", [job])


def test_a_job_alone_ends_when_its_epochs_add_up():
    """``static`` holds the requested GPUs throughout: the job's time is the start cost plus
    the epoch-by-epoch sum at the batch chosen."""
    wl = one_job("cifar10", 4, "goodput")
    cfg = SimConfig(nodes=4, gpus_per_node=4, tick_s=60, start_cost_s=30)
    result = simulate(wl, make_policy("static"), Mechanism("sidecar", 30.0), cfg)
    (job,) = result.jobs
    app = APPS["cifar10"]
    (batch,) = job["batches"]
    assert job["jct_s"] == pytest.approx(30 + seconds_at(app, batch, (4,)))


def test_progress_survives_resizes_and_every_job_finishes():
    """A whole shipped workload under the adaptive policy, goodput on: every job finishes,
    each trained at one or more batches, and a resized job's batches followed its GPUs."""
    wl = read_pollux(
        str(pollux_workload("sc20like-16gpu-24jobs")),
        str(pollux_traces()),
        4,
        16,
        batch_policy="goodput",
    )
    cfg = SimConfig(nodes=4, gpus_per_node=4, tick_s=60, rounds=True, start_cost_s=30)
    result = simulate(wl, make_policy("adaptive"), Mechanism("sidecar", 30.0), cfg)
    assert len(result.jobs) == 24 and all(j["finish_s"] > j["start_s"] for j in result.jobs)
    assert all(1 <= len(j["batches"]) <= j["resizes"] + 1 for j in result.jobs)
    assert any(len(j["batches"]) > 1 for j in result.jobs)


def test_fixed_batches_are_the_rows_batches():
    """Without goodput, nothing changes: a job's work is steps at its row's batch."""
    fixed = one_job("cifar10", 4, "fixed").jobs[0]
    assert fixed.batching is None and fixed.profile_name.startswith("cifar10@")
    batch = int(fixed.profile_name.split("@")[1])
    assert fixed.work == pytest.approx(APPS["cifar10"].work(batch))


def test_an_unknown_batch_policy_is_refused():
    with pytest.raises(ValueError, match="batch policy 'best': expected one of fixed, goodput"):
        read_pollux(
            str(pollux_workload("sc20like-16gpu-24jobs")), str(pollux_traces()), batch_policy="best"
        )
