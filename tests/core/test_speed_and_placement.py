"""The speed model and placement: small exact cases."""

from __future__ import annotations

import math

import pytest

from jupyter_elastic_gpu.core import Gpu, SpeedModel
from jupyter_elastic_gpu.core.placement import PlacementError, nodes_spanned, place


def test_measured_points_and_interpolation():
    m = SpeedModel({1: 100.0, 4: 340.0})
    assert m.throughput(1) == 100.0
    assert m.throughput(4) == 340.0
    assert m.throughput(2) == pytest.approx(180.0)
    assert m.throughput(0) == 0.0
    assert m.remaining_time(1000, 0) == math.inf
    assert m.remaining_time(0, 2) == 0.0


def test_monotone_between_measured_points():
    m = SpeedModel({1: 100.0, 2: 190.0, 8: 600.0})
    values = [m.throughput(g) for g in range(1, 9)]
    assert values == sorted(values)


def test_prior_is_scaled_to_the_nearest_measurement():
    prior = {1: 100.0, 2: 200.0, 4: 400.0, 8: 800.0}
    m = SpeedModel({2: 150.0}, prior)  # the job runs at 3/4 of its profile
    assert m.throughput(2) == 150.0
    assert m.throughput(4) == pytest.approx(300.0)
    assert m.throughput(8) == pytest.approx(600.0)
    assert m.throughput(1) == pytest.approx(75.0)


def test_default_prior_is_sublinear_and_increasing():
    m = SpeedModel()
    assert m.throughput(1) == 1.0
    assert 1.0 < m.throughput(2) < 2.0
    assert m.throughput(8) < 8.0
    assert m.with_measurement(2, 50.0).throughput(2) == 50.0


def _two_nodes():
    return [Gpu(f"a{i}", "a") for i in range(4)] + [Gpu(f"b{i}", "b") for i in range(4)]


def test_curve_lists_the_same_throughputs_and_grows_on_demand():
    model = SpeedModel({2: 180.0}, {1: 100.0, 2: 190.0, 4: 350.0})
    short = list(model.curve(3))
    assert short == [0.0] + [model.throughput(g) for g in range(1, 4)]
    assert model.curve(6)[:4] == short
    assert model.curve(6)[6] == model.throughput(6) > model.throughput(4)


def test_new_job_goes_to_the_tightest_node():
    gpus = _two_nodes()
    current = {"x": ("a0", "a1", "a2")}
    out = place(gpus, current, {"x": 3, "y": 1, "z": 3})
    assert out["x"] == ("a0", "a1", "a2")
    # y fits in node a's last GPU (best fit), z gets node b.
    assert out["y"] == ("a3",)
    assert all(g.startswith("b") for g in out["z"])


def test_shrink_keeps_gpus_on_the_fullest_node_and_grow_stays_local():
    gpus = _two_nodes()
    out = place(gpus, {"x": ("a0", "b0", "b1")}, {"x": 2})
    assert out["x"] == ("b0", "b1")
    out = place(gpus, {"x": ("b0",)}, {"x": 3})
    assert out["x"] == ("b0", "b1", "b2")


def test_spans_nodes_only_when_no_node_fits():
    gpus = _two_nodes()
    out = place(gpus, {}, {"big": 6})
    assert nodes_spanned(out["big"], gpus) == (4, 2)


def _mixed_box():
    """One server with two kinds of GPU, interleaved in its own order."""
    kinds = ["A100", "T4", "A100", "T4", "A100", "T4"]
    return [Gpu(f"g{i}", "box", kind=k) for i, k in enumerate(kinds)]


def test_a_job_keeps_to_one_kind_of_gpu_as_it_keeps_to_one_node():
    gpus = _mixed_box()
    kind = {g.id: g.kind for g in gpus}
    out = place(gpus, {}, {"x": 3, "y": 2})
    assert {kind[g] for g in out["x"]} in ({"A100"}, {"T4"})
    assert len({kind[g] for g in out["y"]}) == 1
    # a grow stays on the kind it runs on, a shrink keeps it there
    out = place(gpus, {"x": ("g1",)}, {"x": 3})
    assert out["x"] == ("g1", "g3", "g5")
    out = place(gpus, {"x": ("g0", "g2", "g4")}, {"x": 2, "y": 3})
    assert out["x"] == ("g0", "g2") and out["y"] == ("g1", "g3", "g5")
    # more than one kind has free: cut to what one kind has free, the most free one ...
    assert [kind[g] for g in place(gpus, {"x": ("g1",)}, {"x": 1, "big": 4})["big"]] == ["A100"] * 3
    # ... unless that is below the job's minimum: across kinds then (the live scheduler cuts
    # such a grant to one group and keeps the job waiting)
    spread = place(gpus, {}, {"big": 4}, least={"big": 4})["big"]
    assert sorted(len([g for g in spread if kind[g] == k]) for k in ("A100", "T4")) == [1, 3]


def test_gpus_of_one_kind_are_placed_as_before_kinds_were_known():
    plain = _two_nodes()
    named = [Gpu(g.id, g.node, kind="L4") for g in plain]
    for current, counts in (
        ({"x": ("a0", "a1", "a2")}, {"x": 3, "y": 1, "z": 3}),
        ({}, {"big": 6}),
    ):
        assert place(named, current, counts) == place(plain, current, counts)


def test_unhealthy_gpus_are_never_placed():
    gpus = [Gpu("a0", "a", healthy=False), Gpu("a1", "a")]
    assert place(gpus, {"x": ("a0",)}, {"x": 1})["x"] == ("a1",)
    with pytest.raises(PlacementError):
        place(gpus, {}, {"x": 2})


def test_speed_ups_and_the_power_law_through_two_counts():
    m = SpeedModel(prior={1: 100.0, 2: 180.0, 4: 320.0})
    assert m.speedup(1, 4) == 3.2
    assert m.speedup(2, 4) == pytest.approx(2 * 320.0 / 180.0)
    assert m.exponent(1, 4) == pytest.approx(math.log(3.2) / math.log(4))
    assert m.exponent(1, 4) == m.exponent(1, 4)  # cached, the same
    idle = SpeedModel({1: 0.0, 2: 0.0})
    assert idle.speedup(1, 2) == 0.0 and idle.exponent(1, 2) is None


def test_the_summary_a_policy_reads_is_each_lookup_s_own_answer():
    m = SpeedModel({2: 150.0}, prior={1: 100.0, 2: 180.0, 4: 500.0})
    lookups = (m.throughput(1), m.exponent(1, 4), m.best_rate(1, 4), m.options(1, 4, 0.1))
    assert m.summary(1, 4, 0.1) == (*lookups, tuple(m.curve(4)[:5]))
    assert m.best_rate(1, 4) > 1  # (it scales super-linearly from 2 to 4 GPUs)
    # A job that cannot scale has no fit; without a premium, or a count within reach, no options.
    assert m.summary(2, 2, None)[:4] == (m.throughput(2), None, 1.0, None)
    assert m.summary(4, 2, 0.1)[3] is None
    assert len(m.summary(4, 2, 0.1)[4]) == 3  # throughputs at 0, 1 and 2 GPUs
    assert m.summary(1, 4, 0.1) is m.summary(1, 4, 0.1)  # cached


def test_the_frontier_finds_the_slowest_count_within_a_time_as_a_scan_would():
    f = SpeedModel(prior={1: 100.0, 2: 180.0, 3: 180.0, 4: 320.0, 8: 400.0}).frontier(1, 8)
    assert list(f.counts) == [1, 2, 4, 5, 6, 7, 8]  # 3 GPUs are no faster than 2

    def scan(seconds: float) -> int:
        return next((i for i, s in enumerate(f.secs) if s <= seconds), len(f.secs))

    probes = [*f.secs, *(s * (1 + 1e-12) for s in f.secs), *(s * (1 - 1e-12) for s in f.secs)]
    for seconds in [*probes, 0.0, -1.0, math.inf, -math.inf, math.nan]:
        assert f.first_within(seconds) == scan(seconds), seconds


def test_placement_sees_a_gpu_turn_busy_between_two_calls():
    gpus = _two_nodes()
    assert place(gpus, {"x": ("a0", "a1")}, {"x": 2})["x"] == ("a0", "a1")
    gpus[1] = Gpu("a1", "a", healthy=False)  # the same list, changed in place
    moved = place(gpus, {"x": ("a0", "a1")}, {"x": 2})["x"]
    assert "a1" not in moved and len(moved) == 2
    assert place(_two_nodes(), {"x": ("a0", "a1")}, {"x": 2})["x"] == ("a0", "a1")
