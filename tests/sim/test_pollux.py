"""The Pollux reader on a hand-made application, and fidelity on the shipped real traces."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from jupyter_elastic_gpu.core.mechanism import Mechanism
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.sim.data import pollux_traces, pollux_workload
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.traces.pollux import load_applications, read_pollux, scaling_curves
from jupyter_elastic_gpu.sim.workload import TraceError

FIX = Path(__file__).parent / "fixtures" / "pollux"
DATA = pollux_traces()  # the shipped measurements


def test_work_and_speed_follow_the_measurements():
    wl = read_pollux(str(FIX / "workloads" / "toy.csv"), str(FIX), gpus_per_node=2, max_gpus=2)
    a, b = wl.jobs
    # Batch 32 is twice the smallest batch: each step yields (3 + 1) / (3 / 2 + 1) = 1.6 steps
    # of progress; two epochs of 100 -> 125 steps.
    assert a.job_id == "toy-0" and a.work == pytest.approx(125.0)
    # One GPU accumulates two micro-batches of 16: 1 / (0.2 + 0.2); two GPUs on one node: 1 / 0.22.
    assert a.profile == pytest.approx({1: 2.5, 2: 1 / 0.22})
    assert a.true_throughput((1, 1)) == pytest.approx(1 / 0.25)  # spread over two nodes
    assert (a.min_gpus, a.requested_gpus, a.max_gpus) == (1, 2, 2)
    assert b.work == pytest.approx(200.0)
    assert b.profile == pytest.approx({1: 5.0, 2: 1 / 0.12})
    assert b.submit_time == 70.0


def test_restart_times_are_per_application_where_given():
    toy = str(FIX / "workloads" / "toy.csv")
    assert {j.restart_s for j in read_pollux(toy, str(FIX), 2, 2).jobs} == {None}  # the run's
    wl = read_pollux(toy, str(FIX), 2, 2, restart_s={"toy": 42.0, "other": 1.0})
    assert [j.restart_s for j in wl.jobs] == [42.0, 42.0]


def test_yolov3_is_capped_at_8_images_a_gpu_unless_other_limits_are_given():
    apps = load_applications(str(DATA))
    assert apps["yolov3"].max_local_bsz == 8  # the Pollux artifact's limit
    assert (
        apps["cifar10"].max_local_bsz == load_applications(str(DATA), {})["cifar10"].max_local_bsz
    )
    uncapped = load_applications(str(DATA), {})["yolov3"]
    assert uncapped.max_local_bsz > 8  # what its traces measured
    # at 16 images a GPU the capped one accumulates two micro-batches a step: slower
    assert apps["yolov3"].steps_per_second((4,), 64) < uncapped.steps_per_second((4,), 64)


def test_unknown_application_names_row_and_column():
    with pytest.raises(TraceError, match=r"bad_app.csv, row 2, column 'application'.*resnet"):
        read_pollux(str(FIX / "workloads" / "bad_app.csv"), str(FIX), gpus_per_node=2)


def test_missing_traces_folder_is_a_clear_error():
    with pytest.raises(TraceError, match="not a folder"):
        read_pollux(str(FIX / "workloads" / "toy.csv"), str(FIX / "nope"))


def test_gzipped_traces_and_workload_read_the_same(tmp_path):
    """Every file of an application folder, and the workload, may be gzip-compressed."""
    for src in FIX.rglob("*.csv"):
        dest = tmp_path / src.relative_to(FIX)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as f, gzip.open(str(dest) + ".gz", "wb") as g:
            shutil.copyfileobj(f, g)
    plain = read_pollux(str(FIX / "workloads" / "toy.csv"), str(FIX), gpus_per_node=2, max_gpus=2)
    packed = read_pollux(
        str(tmp_path / "workloads" / "toy.csv.gz"), str(tmp_path), gpus_per_node=2, max_gpus=2
    )
    assert packed.name == plain.name == "toy"
    for a, b in zip(plain.jobs, packed.jobs, strict=True):
        assert (a.job_id, a.work, a.profile) == (b.job_id, b.work, b.profile)


@pytest.mark.parametrize(
    ("workload", "nodes", "published"),
    [("workload-6", 16, 3469.7), ("sc20like-16gpu-24jobs", 4, 2464.8)],
)
def test_tiresias_matches_the_pollux_simulator_within_10_percent(workload, nodes, published):
    """Fidelity against the Pollux simulator's own figures (benchmarks/fidelity.py says where
    each comes from): 60 s rounds, 30 s per (re)allocation, Tiresias with its two queues."""
    wl = read_pollux(str(pollux_workload(workload)), str(DATA), max_gpus=nodes * 4)
    cfg = SimConfig(nodes=nodes, gpus_per_node=4, tick_s=60, rounds=True, start_cost_s=30)
    result = simulate(wl, make_policy("tiresias"), Mechanism("restart", 30.0), cfg)
    mean = result.summary()["mean_jct_s"]
    assert abs(mean - published) / published < 0.10, mean


def test_measured_scaling_curves_start_at_one():
    curves = scaling_curves(str(DATA))
    assert set(curves) >= {"cifar10", "imagenet", "ncf"}
    for curve in curves.values():
        assert curve[1] == pytest.approx(1.0)
    assert curves["imagenet"][8] > 6  # imagenet scales well on one node pair
    assert load_applications(str(DATA))["bert"].epochs == 2
