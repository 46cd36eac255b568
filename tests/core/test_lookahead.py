"""``adaptive`` with ``lookahead`` (``core.policies.lookahead``): the mode whose forward run
scores better is followed, chosen once per set of jobs, and never inside a forward run."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.policies import AdaptiveParams, AdaptivePolicy, make_policy
from jupyter_elastic_gpu.core.policies import lookahead as lookahead_module
from jupyter_elastic_gpu.core.schedule import decide
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.forecast import forecast
from jupyter_elastic_gpu.sim.generate import generate_workload

ROOT = {g: 10.0 * g**0.5 for g in range(1, 17)}  # sub-linear: 4 GPUs go twice as fast as 1
GPUS = tuple(Gpu(f"g{i}", "n0") for i in range(8))


def job(job_id: str, work: float, submit: float = 0.0) -> Job:
    return Job(
        job_id, submit, work, min_gpus=1, max_gpus=8, speed=SpeedModel(ROOT), resize_cost=5.0
    )


#: Twelve short jobs and a long one on 8 GPUs: the critical path starts the long job at once
#: (the shorter makespan), the order alone last (the shorter mean JCT).
SHORTS = tuple(job(f"s{i}", 3000.0) for i in range(12))
SNAP = Snapshot(GPUS, (*SHORTS, job("long", 40000.0)))


def outcome(protect_critical: bool, snap: Snapshot = SNAP) -> tuple[float, float]:
    """(makespan, mean JCT) of the forward run of one plain mode, from time 0."""
    ahead = forecast(AdaptivePolicy(protect_critical=protect_critical), snap, 0.0)
    ends = [ahead.estimates[j.id].end for j in snap.jobs]
    return max(ends), sum(e - j.submit_time for e, j in zip(ends, snap.jobs)) / len(ends)


def follows(policy: AdaptivePolicy, snap: Snapshot = SNAP, now: float = 0.0) -> bool:
    """Whether ``policy`` (with lookahead) follows the critical path after deciding on ``snap``:
    its decision is the one of that mode."""
    made = decide(policy, snap, now).allocations
    critical = decide(AdaptivePolicy(protect_critical=True), snap, now).allocations
    order = decide(AdaptivePolicy(protect_critical=False), snap, now).allocations
    assert critical != order  # (the two modes decide differently here: the test means something)
    assert made in (critical, order)
    return made == critical


def test_the_two_modes_trade_one_metric_for_the_other_here():
    (span_c, jct_c), (span_o, jct_o) = outcome(True), outcome(False)
    assert span_c < span_o and jct_o < jct_c


def test_the_weight_decides_which_mode_is_followed():
    (span_c, jct_c), (span_o, jct_o) = outcome(True), outcome(False)
    for weight in (0.0, 1.0, 2.0, 5.0, 10.0):
        # What the choice minimises, worked out here from the forward runs themselves.
        critical_wins = weight * math.log(span_c) + math.log(jct_c) <= weight * math.log(
            span_o
        ) + math.log(jct_o)
        policy = AdaptivePolicy(lookahead=True, makespan_weight=weight)
        assert follows(policy) == critical_wins, weight
    assert not follows(AdaptivePolicy(lookahead=True, makespan_weight=0.0))  # mean JCT alone
    assert follows(AdaptivePolicy(lookahead=True, makespan_weight=10.0))  # makespan first


def test_the_choice_is_made_once_per_set_of_jobs():
    policy = AdaptivePolicy(lookahead=True)
    look = policy.chooser
    decide(policy, SNAP, 0.0)
    assert look.rollouts == 2
    later = replace(SNAP, jobs=tuple(replace(j, queued_s=600.0) for j in SNAP.jobs))
    decide(policy, later, 600.0)  # only time has passed: the same choice
    assert look.rollouts == 2
    fewer = replace(SNAP, jobs=SNAP.jobs[1:])  # a completion (or a decision made again
    decide(policy, fewer, 600.0)  # without a job that cannot start)
    assert look.rollouts == 4
    decide(policy, later, 600.0)  # back to the whole set: its choice is remembered
    assert look.rollouts == 4
    more = replace(SNAP, jobs=(*SNAP.jobs, job("new", 3000.0, submit=600.0)))
    decide(policy, more, 600.0)  # an arrival
    assert look.rollouts == 6


def test_a_job_set_of_another_run_with_the_same_ids_is_chosen_for_again():
    policy = AdaptivePolicy(lookahead=True)
    decide(policy, SNAP, 0.0)
    other = replace(SNAP, jobs=tuple(replace(j, total_work=j.total_work * 2) for j in SNAP.jobs))
    decide(policy, other, 0.0)
    assert policy.chooser.rollouts == 4


def test_a_forward_run_plays_the_mode_followed_and_chooses_nothing():
    policy = AdaptivePolicy(lookahead=True, makespan_weight=0.0)
    decide(policy, SNAP, 0.0)
    assert policy.played_forward().params.protect_critical is False
    before = policy.chooser.rollouts
    ahead = forecast(policy, SNAP, 0.0)
    assert policy.chooser.rollouts == before
    plain = forecast(AdaptivePolicy(protect_critical=False), SNAP, 0.0)
    assert ahead.estimates == plain.estimates
    # Without lookahead a policy plays itself.
    plain_policy = AdaptivePolicy()
    assert plain_policy.played_forward() is plain_policy


def test_past_the_jobs_it_can_afford_to_play_the_mode_followed_stays(monkeypatch):
    monkeypatch.setattr(lookahead_module, "ROLLOUT_JOBS", len(SNAP.jobs) - 1)
    policy = AdaptivePolicy(lookahead=True, makespan_weight=0.0)
    assert follows(policy)  # too many jobs to play: the critical path, as before any choice
    assert policy.chooser.rollouts == 0
    fewer = replace(SNAP, jobs=SNAP.jobs[1:])
    decide(policy, fewer, 0.0)
    assert policy.chooser.rollouts == 2


def test_a_forward_run_that_leaves_a_job_without_an_end_keeps_the_critical_path():
    # A job that never fits (more GPUs at its minimum than there are) never ends.
    huge = Job("huge", 0.0, 1000.0, min_gpus=8, max_gpus=8, speed=SpeedModel(ROOT))
    snap = Snapshot(GPUS[:4], (*SHORTS[:3], huge))
    policy = AdaptivePolicy(lookahead=True, makespan_weight=0.0)
    decide(policy, snap, 0.0)
    assert policy.chooser.choices == 1
    assert policy.chooser.rollouts == 1  # the critical path's run says nothing: no second
    assert policy.played_forward().params.protect_critical is True


@pytest.mark.parametrize("bad", [-1.0, -0.001])
def test_a_negative_makespan_weight_is_refused(bad):
    with pytest.raises(ValueError, match="makespan_weight"):
        AdaptiveParams(makespan_weight=bad)


def test_in_the_simulator_it_switches_modes_and_its_promises_hold():
    workload = generate_workload(3, jobs=40, window_s=2 * 3600.0, max_gpus=8)
    config = SimConfig(nodes=2, gpus_per_node=4, start_cost_s=6.0)
    runs = {}
    for name, params in {
        "lookahead": {"lookahead": True},
        "critical": {},
        "order": {"protect_critical": False},
    }.items():
        runs[name] = simulate(workload, make_policy("adaptive", **params), sidecar(6.0), config)
    # Every promise of the run that follows the choice is checked at every tick (a broken one
    # raises), and the run is the one that skips the held decisions.
    checked = simulate(
        workload,
        make_policy("adaptive", lookahead=True),
        sidecar(6.0),
        replace(config, check_holds=True),
    )
    assert checked.jobs == runs["lookahead"].jobs
    # It followed each mode some of the time: its run is neither of theirs.
    assert runs["lookahead"].jobs != runs["critical"].jobs
    assert runs["lookahead"].jobs != runs["order"].jobs
