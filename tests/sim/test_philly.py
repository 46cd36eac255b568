"""The Philly trace reader: selection, drops, clamps, application mapping, work and errors."""

from __future__ import annotations

import gzip
from datetime import date, datetime
from pathlib import Path

import pytest

from jupyter_elastic_gpu.sim.data import philly_trace
from jupyter_elastic_gpu.sim.profiles import synthetic_profile
from jupyter_elastic_gpu.sim.traces.philly import (
    APPLICATIONS,
    SYNTHETIC_APP_FAMILIES,
    application_for,
    read_philly,
    read_philly_with_stats,
)
from jupyter_elastic_gpu.sim.workload import TraceError, profile_throughput

SMALL = Path(__file__).parent / "fixtures" / "philly_small.csv"
REAL = philly_trace()  # the shipped trace, gzip-compressed
HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
START = "2017-10-09 07:00:00"


def _synthetic(app: str) -> dict[int, float]:
    return synthetic_profile(SYNTHETIC_APP_FAMILIES[app], 16)


def test_small_trace_exact():
    w, stats = read_philly_with_stats(SMALL)
    assert w.name == "philly"
    rows = [
        (j.job_id, j.submit_time, j.profile_name, j.min_gpus, j.requested_gpus, j.max_gpus, j.user)
        for j in w.jobs
    ]
    # Row 3 (06:59, 30 s) is dropped, so times count from row 2 (07:00:00), the first kept job.
    assert rows == [
        ("philly-2", 0.0, "bert", 1, 2, 4, "c1"),
        ("philly-1", 10.0, "cifar10", 1, 1, 2, "c1"),
        ("philly-5", 600.0, "yolov3", 1, 4, 8, "c2"),
        ("philly-6", 1200.0, "imagenet", 1, 16, 16, "c1"),  # 32 GPUs clamped to 16
        ("philly-8", 2400.0, "bert", 1, 8, 16, "c2"),
    ]
    durations = {"philly-2": 7200, "philly-1": 600, "philly-5": 36000, "philly-6": 100000}
    durations["philly-8"] = 1800
    for job in w.jobs:
        assert job.profile == _synthetic(job.profile_name)
        # Alone at its requested count, a job takes exactly its trace duration.
        assert job.work / profile_throughput(job.profile, job.requested_gpus) == pytest.approx(
            durations[job.job_id], rel=1e-12
        )
    assert w.jobs[0].work == 7200 * _synthetic("bert")[2]
    assert (stats.rows, stats.matched, stats.considered, stats.kept) == (8, 8, 8, 5)
    assert (stats.dropped_short, stats.dropped_no_gpus, stats.clamped) == (2, 1, 1)
    assert stats.applications == {"bert": 2, "cifar10": 1, "imagenet": 1, "yolov3": 1}
    assert stats.summary() == (
        "philly: kept 5 of 8 jobs (2 under 60 s dropped; 1 without GPUs dropped; "
        "1 clamped to the GPU cap); 2 bert, 1 cifar10, 1 imagenet, 1 yolov3"
    )
    assert read_philly(SMALL) == w


def test_cluster_start_and_limit():
    w = read_philly(SMALL, cluster="c2")
    assert w.name == "philly-c2"
    assert [(j.job_id, j.submit_time) for j in w.jobs] == [("philly-5", 0.0), ("philly-8", 1800.0)]

    w, stats = read_philly_with_stats(SMALL, start=START, limit=3)
    assert [(j.job_id, j.submit_time) for j in w.jobs] == [
        ("philly-2", 0.0),
        ("philly-1", 10.0),
        ("philly-5", 600.0),
    ]
    # The limit counts kept jobs: row 4 (45 s) was examined and dropped on the way.
    assert (stats.matched, stats.considered, stats.dropped_short, stats.kept) == (7, 4, 1, 3)

    for start in (START, "2017-10-09T07:00:00", datetime(2017, 10, 9, 7), "2017-10-09 09:00+02:00"):
        assert [j.job_id for j in read_philly(SMALL, start=start, limit=1).jobs] == ["philly-2"]
    assert len(read_philly(SMALL, start=date(2017, 10, 9))) == 5
    assert [j.job_id for j in read_philly(SMALL, start="2017-10-09 07:15").jobs] == [
        "philly-6",
        "philly-8",
    ]


def test_max_gpus_per_job_caps_request_and_elastic_bound():
    w, stats = read_philly_with_stats(SMALL, max_gpus_per_job=4)
    by_id = {j.job_id: j for j in w.jobs}
    assert (by_id["philly-2"].requested_gpus, by_id["philly-2"].max_gpus) == (2, 4)
    assert (by_id["philly-6"].requested_gpus, by_id["philly-6"].max_gpus) == (4, 4)
    assert (by_id["philly-8"].requested_gpus, by_id["philly-8"].max_gpus) == (4, 4)
    assert stats.clamped == 2
    assert max(by_id["philly-6"].profile) == 4
    assert by_id["philly-6"].work == 100000 * synthetic_profile("linear-ish", 4)[4]


def test_measured_app_profiles():
    curve = {1: 1.0, 2: 1.5, 4: 2.0}
    apps = {app: dict(curve) for app in APPLICATIONS}
    apps["imagenet"] = {1: 1.0, 8: 6.0}
    w = read_philly(SMALL, app_profiles=apps)
    by_id = {j.job_id: j for j in w.jobs}
    bert = by_id["philly-2"]
    assert (bert.requested_gpus, bert.max_gpus, bert.work) == (2, 4, 7200 * 1.5)
    yolo = by_id["philly-5"]  # capped by the largest count in its profile
    assert (yolo.requested_gpus, yolo.max_gpus, yolo.work) == (4, 4, 36000 * 2.0)
    imagenet = by_id["philly-6"]  # 32 GPUs, profile up to 8
    assert (imagenet.requested_gpus, imagenet.max_gpus, imagenet.work) == (8, 8, 100000 * 6.0)
    assert imagenet.profile == {1: 1.0, 8: 6.0}
    with pytest.raises(ValueError, match="no profile for imagenet"):
        read_philly(SMALL, app_profiles={a: curve for a in APPLICATIONS if a != "imagenet"})
    with pytest.raises(ValueError, match="positive"):
        read_philly(SMALL, app_profiles={**apps, "ncf": {1: 0.0}})


def test_application_rule_is_deterministic_and_stable():
    # Buckets by GPU-hours, as the Pollux workload generator.
    assert application_for(200 * 3600, "k") == "imagenet"
    assert application_for(100 * 3600, "k") == "imagenet"
    assert application_for(50 * 3600, "k") == "yolov3"
    assert application_for(10 * 3600, "k") == "yolov3"
    # The coin is a fixed hash of row text and seed: pinned so that it never drifts.
    assert [application_for(600, k, 0) for k in "xy"] == ["cifar10", "ncf"]
    assert [application_for(7200, k, 0) for k in "xy"] == ["deepspeech2", "bert"]
    picks = {application_for(600, f"row{i}", 0) for i in range(50)}
    assert picks == {"cifar10", "ncf"}
    picks = {application_for(5 * 3600, f"row{i}", 0) for i in range(50)}
    assert picks == {"deepspeech2", "bert"}
    # The seed reshuffles the coin; the same seed gives the same workload.
    apps = {s: [j.profile_name for j in read_philly(SMALL, seed=s).jobs] for s in range(4)}
    assert apps[0] == [j.profile_name for j in read_philly(SMALL, seed=0).jobs]
    assert len({tuple(a) for a in apps.values()}) > 1


def test_row_order_does_not_change_assignment(tmp_path):
    lines = SMALL.read_text().splitlines(keepends=True)
    shuffled = tmp_path / "p.csv"
    shuffled.write_text(lines[0] + "".join(reversed(lines[1:])))
    a = [(j.submit_time, j.profile_name, j.work) for j in read_philly(SMALL).jobs]
    b = [(j.submit_time, j.profile_name, j.work) for j in read_philly(shuffled).jobs]
    assert a == b


# --- bad input ---------------------------------------------------------------------------------


def _error(tmp_path, text: str, **kwargs) -> TraceError:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        read_philly(path, **kwargs)
    err = info.value
    assert Path(err.path).name == "trace.csv" and str(err).startswith(err.path)
    assert "\n" not in str(err)
    return err


GOOD = "2017-10-09 07:00:00,600,1,600,c1\n"


@pytest.mark.parametrize(
    ("row_text", "column", "words"),
    [
        ("2017-13-09 07:00:00,600,1,600,c1\n", "timestamp", "expected a timestamp"),
        ("yesterday,600,1,600,c1\n", "timestamp", "expected a timestamp"),
        (",600,1,600,c1\n", "timestamp", "missing value"),
        ("2017-10-09 07:01:00,-600,1,600,c1\n", "duration", "must not be negative"),
        ("2017-10-09 07:01:00,long,1,600,c1\n", "duration", "expected a number"),
        ("2017-10-09 07:01:00,inf,1,600,c1\n", "duration", "finite"),
        ("2017-10-09 07:01:00,600,two,600,c1\n", "num_gpus", "whole number"),
        ("2017-10-09 07:01:00,600,-1,600,c1\n", "num_gpus", "at least 0"),
        ("2017-10-09 07:01:00,600,1,-1,c1\n", "gpu_time", "must not be negative"),
        ("2017-10-09 07:01:00,600,1,,c1\n", "gpu_time", "missing value"),
    ],
)
def test_bad_rows_name_file_row_and_column(tmp_path, row_text, column, words):
    err = _error(tmp_path, HEADER + GOOD + row_text)
    assert (err.row, err.column) == (2, column)
    assert f"row 2, column '{column}'" in str(err) and words in str(err)


def test_bad_rows_outside_the_selection_are_not_parsed(tmp_path):
    # Only the timestamp of rows in the chosen cluster is read before selection.
    text = HEADER + GOOD + "2017-10-09 07:01:00,long,1,600,c2\n"
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert len(read_philly(path, cluster="c1")) == 1
    assert len(read_philly(path, limit=1)) == 1


def test_missing_column_and_empty_files(tmp_path):
    err = _error(
        tmp_path, "timestamp,duration,num_gpus,cluster\n" + "2017-10-09 07:00:00,600,1,c1\n"
    )
    assert err.column == "gpu_time" and "header" in str(err)
    assert "empty file" in str(_error(tmp_path, ""))
    assert "no jobs" in str(_error(tmp_path, HEADER))


def test_nothing_selected_is_explained(tmp_path):
    err = _error(tmp_path, HEADER + GOOD, cluster="zz")
    assert err.column == "cluster" and "no jobs in cluster 'zz' (clusters: c1)" in str(err)
    err = _error(tmp_path, HEADER + GOOD, start="2018-01-01")
    assert err.column == "timestamp" and "no jobs at or after 2018-01-01" in str(err)
    err = _error(tmp_path, HEADER + "2017-10-09 07:00:00,30,1,30,c1\n")
    assert "all 1 selected jobs were dropped (1 under 60 s" in str(err)


def test_bad_arguments():
    with pytest.raises(ValueError, match="start"):
        read_philly(SMALL, start="next tuesday")
    with pytest.raises(ValueError, match="limit"):
        read_philly(SMALL, limit=0)
    with pytest.raises(ValueError, match="max_gpus_per_job"):
        read_philly(SMALL, max_gpus_per_job=0)


def test_gzipped_trace_reads_the_same(tmp_path):
    packed = tmp_path / "philly_small.csv.gz"
    packed.write_bytes(gzip.compress(SMALL.read_bytes()))
    (a, sa), (b, sb) = read_philly_with_stats(SMALL), read_philly_with_stats(packed)
    assert sa == sb and a.jobs == b.jobs  # same job ids (row numbers), times and assignments


def test_real_trace():
    assert REAL.name == "philly.csv.gz"
    w, stats = read_philly_with_stats(REAL)
    assert stats.rows == 82247
    assert stats.kept == len(w) == stats.rows - stats.dropped_short - stats.dropped_no_gpus
    assert w.jobs[0].submit_time == 0.0
    assert all(1 <= j.requested_gpus <= j.max_gpus <= 16 for j in w.jobs)
    assert set(stats.applications) == set(APPLICATIONS)
    w = read_philly(REAL, cluster="6214e9", start="2017-10-09", limit=160)
    assert len(w) == 160 and {j.user for j in w.jobs} == {"6214e9"}
