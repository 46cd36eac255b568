"""The simulator on scenarios small enough to compute by hand, and on random workloads."""

from __future__ import annotations

import gc
import math
from dataclasses import replace

import pytest

from jupyter_elastic_gpu.core.mechanism import Mechanism, sidecar, termination
from jupyter_elastic_gpu.core.model import InvalidJob, Job
from jupyter_elastic_gpu.core.policies import POLICIES, make_policy
from jupyter_elastic_gpu.sim.bounds import lower_bounds
from jupyter_elastic_gpu.sim.compare import Costs, compare, parse_run
from jupyter_elastic_gpu.sim.engine import SimConfig, Simulation, SimulationStalled, simulate
from jupyter_elastic_gpu.sim.generate import generate_workload
from jupyter_elastic_gpu.sim.report import format_table
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload

FREE = Mechanism("free", 0.0)


def linear_job(job_id, submit, work, lo=1, hi=4, req=None, per_gpu=1.0):
    return JobSpec(
        job_id,
        submit,
        work,
        {g: per_gpu * g for g in range(1, hi + 1)},
        min_gpus=lo,
        max_gpus=hi,
        requested_gpus=req or lo,
    )


def jcts(result):
    return {j["job_id"]: j["jct_s"] for j in result.jobs}


def one_node(gpus):
    return SimConfig(nodes=1, gpus_per_node=gpus)


def test_static_runs_fifo_at_the_requested_size():
    wl = Workload("w", [linear_job("a", 0, 100, 2, 2), linear_job("b", 0, 100, 2, 2)])
    r = simulate(wl, make_policy("static"), FREE, one_node(2))
    assert jcts(r) == pytest.approx({"a": 50.0, "b": 100.0})
    assert r.summary()["makespan_s"] == pytest.approx(100.0)
    assert r.summary()["utilization"] == pytest.approx(1.0)


def test_adaptive_runs_a_short_arrival_first_then_gives_everything_back():
    # Linear speed-up, free resizes: a alone gets 4 GPUs; b arrives at t=10 and, being
    # shorter, takes all 4 (a is suspended at 40 units done); b ends at 20, a resumes on 4 GPUs
    # and ends at 20 + 360 / 4 = 110. Shortest first is optimal here.
    wl = Workload("w", [linear_job("a", 0, 400), linear_job("b", 10, 40)])
    r = simulate(wl, make_policy("adaptive"), FREE, one_node(4))
    assert jcts(r) == pytest.approx({"a": 110.0, "b": 10.0})
    assert r.resizes == 1


def test_adaptive_shares_when_speed_up_is_sub_linear():
    # With sqrt speed-up the long job is only shrunk, and it grows back when b is done.
    def sqrt_job(job_id, submit, work):
        return JobSpec(job_id, submit, work, {g: g**0.5 for g in range(1, 5)}, 1, 4, 1)

    wl = Workload("w", [sqrt_job("a", 0, 400), sqrt_job("b", 10, 40)])
    sim = simulate(wl, make_policy("adaptive"), FREE, one_node(4))
    a, b = sorted(sim.jobs, key=lambda j: j["job_id"])
    assert a["resizes"] == 2 and b["jct_s"] < a["jct_s"]
    assert all(n == 4 for _, n in sim.timeline[:-1])  # no GPU idles until the end


def test_sidecar_pause_costs_time_but_no_work():
    # srtf preempts a (100 s of work) for b (10 s) at t=50; a resumes at 60 after a 5 s pause.
    wl = Workload("w", [linear_job("a", 0, 100, 1, 1), linear_job("b", 50, 10, 1, 1)])
    r = simulate(wl, make_policy("srtf"), sidecar(5.0), one_node(1))
    assert jcts(r) == pytest.approx({"a": 115.0, "b": 10.0})
    assert r.lost_gpu_s == pytest.approx(5.0)


def test_termination_loses_the_work_since_the_last_checkpoint():
    # Checkpoints every 30 s: killed at t=50, a keeps the 30 s checkpoint and loses 20 s of work.
    wl = Workload("w", [linear_job("a", 0, 100, 1, 1), linear_job("b", 50, 10, 1, 1)])
    r = simulate(wl, make_policy("srtf"), termination(5.0, 30.0), one_node(1))
    assert jcts(r) == pytest.approx({"a": 135.0, "b": 10.0})
    assert r.lost_gpu_s == pytest.approx(20.0 + 5.0)


def test_start_cost_delays_every_job_once():
    wl = Workload("w", [linear_job("a", 0, 100, 1, 1)])
    r = simulate(wl, make_policy("static"), FREE, SimConfig(1, 1, start_cost_s=7))
    assert jcts(r) == {"a": 107.0}


def test_a_job_with_its_own_restart_time_pauses_that_long_and_its_policy_is_told_so():
    # srtf preempts a (100 s of work) for b (10 s) at t=50. a's restarts take 20 s (its first
    # start too), b's 3 s: the run's own costs (start 7 s, the sidecar's 5 s) are never charged.
    a = replace(linear_job("a", 0, 100, 1, 1), restart_s=20.0)
    b = replace(linear_job("b", 50, 10, 1, 1), restart_s=3.0)
    wl = Workload("w", [a, b])
    r = simulate(wl, make_policy("srtf"), sidecar(5.0), SimConfig(1, 1, start_cost_s=7.0))
    # a: 20 s start, 30 s of work by t=50; b: 3 s start, done at 63; a resumes 20 s later.
    assert jcts(r) == pytest.approx({"a": 20.0 + 100.0 + 3.0 + 10.0 + 20.0, "b": 13.0})
    assert lower_bounds(wl, 1, 1, 7.0)["mean_jct_s"] == pytest.approx((120.0 + 13.0) / 2)
    table = format_table(compare(wl, ["srtf"], SimConfig(1, 1, start_cost_s=7.0), progress=False))
    assert "2 of the jobs restart in a time of their own (restart_s)" in table
    # A policy is told each job's own cost; one with none, the mechanism's.
    c = linear_job("c", 0, 100, 1, 1)
    sim = Simulation(Workload("w", [a, c]), make_policy("adaptive"), sidecar(5.0), one_node(2))
    sim.active = sim.jobs
    assert {j.id: j.resize_cost for j in sim._snapshot().jobs} == {"a": 20.0, "c": 5.0}
    # ... where the mechanism loses work, that too (half a checkpoint interval on average)
    sim = Simulation(
        Workload("w", [a]), make_policy("adaptive"), termination(5.0, 30.0), one_node(1)
    )
    sim.active = sim.jobs
    assert sim._snapshot().jobs[0].resize_cost == pytest.approx(20.0 + 15.0)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_a_restart_time_must_be_a_number_of_seconds(bad):
    with pytest.raises(ValueError, match="job a: a restart must take 0 or more seconds"):
        replace(linear_job("a", 0, 100), restart_s=bad)


def test_rounds_mode_waits_for_the_next_tick():
    wl = Workload("w", [linear_job("a", 10, 100, 1, 1)])
    r = simulate(wl, make_policy("static"), FREE, SimConfig(1, 1, tick_s=60, rounds=True))
    # Arrives at 10, placed at the tick at 60, done at 160.
    assert jcts(r) == {"a": 150.0}


def test_placement_speed_is_used_when_a_job_spans_nodes():
    def spread(placement):
        return 4.0 if placement == (4,) else 2.0  # across nodes it runs at half speed

    spec = JobSpec("a", 0, 400, {4: 4.0}, 4, 4, 4, placement_speed=spread)
    cfg = SimConfig(nodes=2, gpus_per_node=2)
    r = simulate(Workload("w", [spec]), make_policy("static"), FREE, cfg)
    assert jcts(r) == {"a": 200.0}


@pytest.mark.parametrize(
    "run", [*sorted(POLICIES), "termination", "termination-aware", "tiresias@termination"]
)
def test_every_job_finishes_under_every_policy(run):
    wl = generate_workload(3, jobs=40, window_s=4 * 3600, max_gpus=8)
    policy, mech = parse_run(run)
    mechanism = Costs().mechanism(mech)
    r = simulate(wl, make_policy(policy), mechanism, SimConfig(2, 4))
    assert len(r.jobs) == 40
    bound = lower_bounds(wl, 8, 4)
    s = r.summary()
    assert s["makespan_s"] >= bound["makespan_s"] - 1e-6
    assert s["mean_jct_s"] >= bound["mean_jct_s"] - 1e-6
    assert 0 < s["utilization"] <= 1 + 1e-9
    for job in r.jobs:
        assert job["submit_s"] <= job["start_s"] <= job["finish_s"]


def test_simulation_is_deterministic():
    wl = generate_workload(5, jobs=30, window_s=3600)
    a = simulate(wl, make_policy("adaptive"), sidecar(6), SimConfig(2, 4))
    b = simulate(wl, make_policy("adaptive"), sidecar(6), SimConfig(2, 4))
    assert a.jobs == b.jobs and a.timeline == b.timeline


def test_lower_bounds_by_hand():
    # Two 400-unit jobs on 4 linear GPUs at t=0: best alone 100 s each; packing needs 200 s.
    wl = Workload("w", [linear_job("a", 0, 400), linear_job("b", 0, 400)])
    assert lower_bounds(wl, 4, 4) == {"makespan_s": 200.0, "mean_jct_s": 100.0}


def test_compare_runs_side_by_side_and_rejects_unknown_names():
    wl = generate_workload(1, jobs=12, window_s=1800, max_gpus=4)
    comp = compare(wl, ["adaptive", "static", "termination"], SimConfig(1, 4), progress=False)
    data = comp.to_json()
    assert set(data["policies"]) == {"adaptive", "static", "termination"}
    assert data["policies"]["termination"]["mechanism"] == "termination"
    for key in (
        "makespan_s",
        "mean_jct_s",
        "median_jct_s",
        "p95_jct_s",
        "utilization",
        "resizes",
        "lost_gpu_s",
        "jobs",
    ):
        assert key in data["policies"]["adaptive"]
    assert set(data["lower_bound"]) == {"makespan_s", "mean_jct_s"}
    with pytest.raises(ValueError, match="unknown policy 'fifo'"):
        compare(wl, ["fifo"], SimConfig(1, 4), progress=False)
    with pytest.raises(ValueError, match="unknown mechanism"):
        parse_run("optimus@teleport")


def test_a_job_larger_than_the_cluster_is_refused():
    wl = Workload("w", [linear_job("a", 0, 100, 8, 8)])
    with pytest.raises(ValueError, match="needs at least 8 GPUs"):
        simulate(wl, make_policy("static"), FREE, one_node(4))


def test_a_policy_that_never_finishes_is_reported_not_looped_forever():
    # optimus ignores resize costs; with termination each 6 <-> 7 GPU swap loses the work it
    # gained, so it never finishes. The run stops and says so.
    wl = generate_workload(3, jobs=40, window_s=4 * 3600, max_gpus=8)
    cfg = SimConfig(2, 4, stall_factor=5)
    with pytest.raises(SimulationStalled, match="optimus with the termination-aware mechanism"):
        simulate(wl, make_policy("optimus"), termination(60, 600), cfg)
    comp = compare(wl, ["adaptive", "optimus@termination"], cfg, progress=False)
    assert "adaptive" in comp.results and "optimus@termination" in comp.stalled
    # Every run stalled: the table still says what was compared and why nothing finished.
    alone = compare(wl, ["optimus@termination"], cfg, progress=False)
    table = format_table(alone)
    assert "40 jobs on 2 x 4 GPUs" in table and "optimus@termination" in table


def test_the_collector_is_paused_while_a_run_lasts_and_only_then():
    wl = Workload("w", [linear_job("a", 0, 100), linear_job("b", 10, 100)])
    during = []
    simulate(
        wl, make_policy("adaptive"), FREE, one_node(2), lambda n: during.append(gc.isenabled())
    )
    assert during == [False, False] and gc.isenabled()


def test_a_snapshot_shows_each_job_as_the_simulation_has_it():
    wl = Workload("w", [linear_job("a", 0, 100, 1, 4, 2)])
    sim = Simulation(wl, make_policy("adaptive"), sidecar(6.0), one_node(4))
    job = sim.jobs[0]
    sim.active = [job]
    sim.now = 50.0
    job.work_done, job.gpus, job.started, job.pause_until = 30.0, ("n0-g0", "n0-g1"), True, 60.0
    job.attained_gpu_s, job.queued_s, job.resizes, job.last_change = 70.0, 5.0, 3, 45.0
    (seen,) = sim._snapshot().jobs
    (again,) = sim._snapshot().jobs  # built without Job's checks, which the first one passed
    assert type(again) is Job and again == seen == Job(
        id="a",
        submit_time=0.0,
        total_work=100.0,
        min_gpus=1,
        max_gpus=4,
        requested_gpus=2,
        work_done=30.0,
        speed=seen.speed,
        resize_cost=6.0,
        gpus=("n0-g0", "n0-g1"),
        started=True,
        attained_gpu_s=70.0,
        queued_s=5.0,
        resizes=3,
        last_change=45.0,
        pinned=True,
    )


def test_a_job_no_policy_could_honour_is_refused_when_it_comes_in():
    wl = Workload("w", [linear_job("a", 0, 100), linear_job("b", 10, 100, lo=3, hi=2)])
    with pytest.raises(InvalidJob, match="job b: max_gpus"):
        simulate(wl, make_policy("adaptive"), FREE, one_node(4))
