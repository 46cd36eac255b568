"""The simulator takes the last decision while it holds (``Decision.holds_until``) instead of
asking again at every tick: the same run as the tick-by-tick replay, with fewer decisions."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from jupyter_elastic_gpu.core.mechanism import sidecar, termination
from jupyter_elastic_gpu.core.model import Decision, Snapshot
from jupyter_elastic_gpu.core.placement import place
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.sim import data
from jupyter_elastic_gpu.sim.engine import (
    EVERY_TICK,
    ON_EVENT,
    BrokenPromise,
    SimConfig,
    SimResult,
    simulate,
)
from jupyter_elastic_gpu.sim.generate import generate_workload
from jupyter_elastic_gpu.sim.traces.philly import read_philly
from jupyter_elastic_gpu.sim.traces.pollux import scaling_curves
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload


def same_run(a: SimResult, b: SimResult) -> bool:
    """Every job's start, finish and resizes, and the GPUs in use (per user) over time."""
    return (a.jobs, a.timeline, a.user_timeline, a.resizes) == (
        b.jobs,
        b.timeline,
        b.user_timeline,
        b.resizes,
    )


def three_ways(workload, mechanism, config, **params):
    """The run that skips held decisions, the tick-by-tick one, and the one that checks every
    promise (it raises ``BrokenPromise`` on one that is broken); ``params``: adaptive's."""
    policy = make_policy("adaptive", **params)
    held = simulate(workload, policy, mechanism, config)
    every = simulate(workload, policy, mechanism, replace(config, skip_held=False))
    checked = simulate(workload, policy, mechanism, replace(config, check_holds=True))
    assert same_run(held, every) and same_run(held, checked)
    assert every.skipped == checked.skipped == 0
    assert held.decisions + held.skipped == every.decisions == checked.decisions
    # Each decision made is counted once under why it was asked for; the held run asks at
    # every event as the tick-by-tick one does, and never for a tick whose decision held.
    for run in (held, every, checked):
        assert sum(run.decided_on.values()) == run.decisions
    assert held.decided_on.get(ON_EVENT) == every.decided_on.get(ON_EVENT)
    assert EVERY_TICK not in held.decided_on
    return held


RULES = {
    "no rules": {},
    "rounds": {"rounds": True},
    "user cap": {"user_gpu_cap": 4},
    "fair share": {"fair_share": True},
}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rules", list(RULES))
def test_generated_workloads_run_the_same_with_fewer_decisions(seed, rules):
    workload = generate_workload(seed, jobs=40, window_s=3 * 3600.0, max_gpus=8)
    config = SimConfig(nodes=2, gpus_per_node=4, start_cost_s=6.0, **RULES[rules])
    held = three_ways(workload, sidecar(6.0), config)
    if rules == "fair share":
        # Usage decays as time passes, so shares move: no decision holds.
        assert held.skipped == 0
    elif rules == "user cap":
        assert held.skipped > 0  # only decisions the cap leaves as the policy made them hold
    else:
        assert held.skipped > held.decisions / 8


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rounds", [False, True])
def test_the_critical_path_s_promises_hold_too(seed, rounds):
    workload = generate_workload(seed, jobs=40, window_s=3 * 3600.0, max_gpus=8)
    config = SimConfig(nodes=2, gpus_per_node=4, start_cost_s=6.0, rounds=rounds)
    held = three_ways(workload, sidecar(6.0), config, protect_critical=True)
    assert held.skipped > held.decisions / 8


def test_resizes_that_lose_work_run_the_same():
    workload = generate_workload(4, jobs=30, window_s=2 * 3600.0, max_gpus=8)
    held = three_ways(workload, termination(60.0, 600.0), SimConfig(nodes=2, gpus_per_node=4))
    assert held.skipped > 0


def test_a_philly_sample_runs_the_same_with_fewer_decisions():
    # 300 jobs from a busy fortnight of the trace, those under a day long, on 16 GPUs: a queue.
    profiles = scaling_curves(str(data.pollux_traces()), 8, 16)
    trace = read_philly(
        data.philly_trace(),
        start="2017-11-15",
        limit=300,
        max_gpus_per_job=16,
        app_profiles=profiles,
    )
    day = [j for j in trace.jobs if j.work / j.true_throughput((j.requested_gpus,)) <= 86400]
    held = three_ways(Workload("philly", day), sidecar(6.0), SimConfig(nodes=2, gpus_per_node=8))
    assert held.resizes > 100 and held.skipped > held.decisions


class Liar:
    """Says its decision holds for ever, but gives the GPU to the job whose turn it is by the
    clock (ten minutes each): a decision that changes with time alone."""

    name = "liar"
    elastic = False
    preemptive = True

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        ids = sorted(job.id for job in snapshot.jobs)
        turn = ids[int(now // 600) % len(ids)]
        counts = {job_id: int(job_id == turn) for job_id in ids}
        current = {job.id: job.gpus for job in snapshot.jobs}
        allocations = place(snapshot.gpus, current, counts)
        return Decision(allocations, dict.fromkeys(ids, ""), tuple(ids), holds_until=math.inf)


def test_a_broken_promise_is_caught():
    jobs = [JobSpec(name, 0.0, 3600.0, {1: 1.0}) for name in ("a", "b")]
    workload = Workload("turns", jobs)
    config = SimConfig(nodes=1, gpus_per_node=1)
    # Believed, the lie changes the run: the turn at ten minutes never comes.
    held = simulate(workload, Liar(), sidecar(6.0), config)
    every = simulate(workload, Liar(), sidecar(6.0), replace(config, skip_held=False))
    assert not same_run(held, every)
    with pytest.raises(
        BrokenPromise, match=r"liar said its decision holds until t=inf s, but at t=600 s"
    ):
        simulate(workload, Liar(), sidecar(6.0), replace(config, check_holds=True))


class Counted:
    """``adaptive``, with a count of the promises the engine reads."""

    name = "adaptive"
    elastic = True
    preemptive = True

    def __init__(self) -> None:
        self.policy = make_policy("adaptive")
        self.read = 0

    def decide(self, snapshot: Snapshot, now: float) -> Decision:
        decision = self.policy.decide(snapshot, now)

        def promise() -> float | None:
            self.read += 1
            return decision.holds_until

        return Decision(decision.allocations, decision.reasons, decision.order, promise)


def test_a_promise_is_worked_out_only_where_a_tick_reads_it():
    # A decision that an arrival or a completion follows before the next tick is made again
    # there: its promise is never worked out (here 132 of 304), and the run is the same.
    workload = generate_workload(2, jobs=40, window_s=3 * 3600.0, max_gpus=8)
    config = SimConfig(nodes=2, gpus_per_node=4, start_cost_s=6.0)
    counted = Counted()
    run = simulate(workload, counted, sidecar(6.0), config)
    assert same_run(run, simulate(workload, make_policy("adaptive"), sidecar(6.0), config))
    assert run.skipped > 0
    assert 0 < counted.read < run.decisions
