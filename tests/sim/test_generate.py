"""The synthetic workload generator and the synthetic profile families."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from jupyter_elastic_gpu.sim.generate import generate_and_write, generate_workload
from jupyter_elastic_gpu.sim.profiles import SYNTHETIC_FAMILIES, synthetic_profile
from jupyter_elastic_gpu.sim.traces.native import read_native
from jupyter_elastic_gpu.sim.workload import profile_throughput


def _alone(job) -> float:
    """Seconds a job takes alone at its requested count."""
    return job.work / profile_throughput(job.profile, job.requested_gpus)


# --- profiles ----------------------------------------------------------------------------------


def test_families_are_increasing_and_ordered():
    curves = {name: synthetic_profile(name, 64) for name in SYNTHETIC_FAMILIES}
    for curve in curves.values():
        assert curve[1] == 1.0
        assert all(curve[g + 1] > curve[g] for g in range(1, 64))
        assert all(curve[g] <= g for g in curve)  # never super-linear
    for g in range(2, 65):
        assert curves["linear-ish"][g] > curves["moderate"][g] > curves["poor"][g]


def test_profile_values_and_arguments():
    p = synthetic_profile("poor", 8, base_throughput=10.0)
    assert sorted(p) == list(range(1, 9))
    assert p[4] == pytest.approx(10 * 4 / (1 + 0.6 * 1.5 + 0.15 * 3))
    assert round(synthetic_profile("linear-ish", 16)[16], 2) == 13.06
    assert round(synthetic_profile("moderate", 8)[8], 2) == 4.91
    with pytest.raises(ValueError, match="unknown synthetic profile family 'fast'"):
        synthetic_profile("fast", 8)
    with pytest.raises(ValueError):
        synthetic_profile("poor", 0)
    with pytest.raises(ValueError):
        synthetic_profile("poor", 4, base_throughput=0)


# --- generator ---------------------------------------------------------------------------------


def test_deterministic_per_seed():
    assert generate_workload(7) == generate_workload(7)
    assert generate_workload(7).jobs != generate_workload(8).jobs
    # Pinned: a seed gives the same workload on every Python/numpy version.
    first = generate_workload(0).jobs[0]
    assert (first.job_id, first.submit_time, first.requested_gpus, first.user) == (
        "job-0000",
        1139.0,
        1,
        "user4",
    )
    assert (first.profile_name, first.work) == ("linear-ish", 11200.0)


def test_defaults_are_a_sensible_lab_workload():
    w = generate_workload(3)
    assert len(w) == 50 and w.name == "synthetic-seed3"
    assert all(0 <= j.submit_time < 8 * 3600 for j in w.jobs)
    assert len({j.job_id for j in w.jobs}) == 50
    for j in w.jobs:
        assert j.requested_gpus in (1, 2, 4, 8)
        assert (j.min_gpus, j.max_gpus) == (1, min(2 * j.requested_gpus, 8))
        assert max(j.profile) == 8
        assert j.profile == synthetic_profile(j.profile_name, 8, 100.0)
        assert 60 - 1e-6 <= _alone(j) <= 7 * 86400
        assert _alone(j) == pytest.approx(round(_alone(j)), abs=1e-6)  # whole seconds
    assert len({j.user for j in w.jobs}) > 1


def test_statistics_follow_the_knobs():
    w = generate_workload(1, jobs=4000, window_s=4e6, duration=("lognormal", 600.0, 1.0))
    durations = sorted(_alone(j) for j in w.jobs)
    assert durations[len(durations) // 2] == pytest.approx(600, rel=0.08)
    gpus = Counter(j.requested_gpus for j in w.jobs)
    for count, share in {1: 0.5, 2: 0.25, 4: 0.2, 8: 0.05}.items():
        assert gpus[count] / 4000 == pytest.approx(share, abs=0.03)
    users = Counter(j.user for j in w.jobs)  # Zipf: user1 about twice user2
    assert users["user1"] / users["user2"] == pytest.approx(2, rel=0.15)
    # Poisson arrivals: inter-arrival gaps are roughly exponential (coefficient of variation 1).
    times = [j.submit_time for j in w.jobs]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    assert sd / mean == pytest.approx(1, abs=0.15)


def test_knobs_are_respected():
    w = generate_workload(
        5,
        jobs=30,
        window_s=600,
        duration=("fixed", 900),
        gpu_mix={2: 1, 4: 1},
        users=["ann", "bo"],
        user_skew=0,
        max_gpus=4,
        profiles=["poor"],
        elastic_fraction=0,
        base_throughput=2.0,
        name="mine",
    )
    assert w.name == "mine" and len(w) == 30
    assert all(j.submit_time < 600 for j in w.jobs)
    assert {j.requested_gpus for j in w.jobs} == {2, 4}
    assert {j.user for j in w.jobs} == {"ann", "bo"}
    assert {j.profile_name for j in w.jobs} == {"poor"}
    assert all(j.min_gpus == j.max_gpus == j.requested_gpus for j in w.jobs)
    assert all(_alone(j) == pytest.approx(900) for j in w.jobs)
    assert w.jobs[0].profile == synthetic_profile("poor", 4, 2.0)
    burst = generate_workload(0, jobs=5, window_s=0)
    assert {j.submit_time for j in burst.jobs} == {0.0}
    clipped = generate_workload(0, duration=("exponential", 10.0), min_duration_s=100)
    assert all(_alone(j) == pytest.approx(100) for j in clipped.jobs)
    half = generate_workload(0, jobs=400, elastic_fraction=0.5)
    rigid = sum(j.min_gpus == j.max_gpus == j.requested_gpus for j in half.jobs)
    assert 150 < rigid < 250


def test_one_knob_leaves_the_other_properties_alone():
    a = generate_workload(2, gpu_mix={1: 1})
    b = generate_workload(2, gpu_mix={4: 1, 8: 1})
    assert [j.submit_time for j in a.jobs] == [j.submit_time for j in b.jobs]
    assert [j.user for j in a.jobs] == [j.user for j in b.jobs]
    assert [_alone(j) for j in a.jobs] == pytest.approx([_alone(j) for j in b.jobs])


@pytest.mark.parametrize(
    "knobs",
    [
        {"jobs": 0},
        {"window_s": -1},
        {"duration": ("gamma", 1, 2)},
        {"duration": ("lognormal", -5, 1)},
        {"duration": ("fixed", "x")},
        {"gpu_mix": {16: 1}},
        {"gpu_mix": {1: 1, 8: 1}, "max_gpus": 4},
        {"gpu_mix": {1: -1}},
        {"gpu_mix": {}},
        {"users": 0},
        {"users": ["a", "a"]},
        {"profiles": ["fast"]},
        {"elastic_fraction": 1.5},
        {"max_gpus": 0},
        {"min_duration_s": 10, "max_duration_s": 5},
        {"user_skew": -1},
    ],
)
def test_bad_knobs(knobs):
    """Bad values are refused up front (a count above max_gpus only in an explicit mix)."""
    with pytest.raises(ValueError):
        generate_workload(0, **knobs)


def test_default_mix_is_trimmed_to_max_gpus():
    w = generate_workload(0, jobs=200, max_gpus=2)
    assert {j.requested_gpus for j in w.jobs} == {1, 2}
    assert all(j.max_gpus <= 2 for j in w.jobs)


def test_generate_and_write_round_trips(tmp_path):
    jobs_path, profiles_path = generate_and_write(tmp_path / "out", seed=4, jobs=40, max_gpus=4)
    assert (jobs_path.name, profiles_path.name) == ("jobs.csv", "profiles.csv")
    back = read_native(jobs_path, profiles_path)
    assert back.jobs == generate_workload(4, jobs=40, max_gpus=4).jobs
    profile_rows = profiles_path.read_text().splitlines()
    assert profile_rows[0] == "profile,gpus,throughput"
    assert len(profile_rows) == 1 + 4 * len({j.profile_name for j in back.jobs})
