"""The trace data shipped inside the package: complete, with its licences, and found by name."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.sim import data
from jupyter_elastic_gpu.sim.traces.pollux import load_applications

APPLICATIONS = {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
WORKLOADS = ["sc20like-16gpu-24jobs"] + [f"workload-{i}" for i in range(1, 9)]


def test_shipped_data_is_complete_and_carries_its_licences():
    root = data.shipped()
    # Redistributing the data requires its licence texts and attribution to go with it.
    for name in ("README.md", "LICENSE-APACHE-2.0", "LICENSE-CC-BY-4.0"):
        assert (root / name).is_file(), name
    assert "Apache License" in (root / "LICENSE-APACHE-2.0").read_text()
    assert "Attribution 4.0 International" in (root / "LICENSE-CC-BY-4.0").read_text("utf-8-sig")
    assert set(load_applications(str(data.pollux_traces()))) == APPLICATIONS
    assert data.pollux_workload_names() == WORKLOADS
    assert data.philly_trace() == root / "philly" / "philly.csv.gz"


def test_workloads_are_found_by_name():
    path = data.pollux_workload("workload-6")
    assert path == data.pollux_traces() / "workloads" / "workload-6.csv"
    assert data.pollux_workload("workload-6.csv") == path
    for bad in ("workload-9", "../workloads/workload-6", ""):
        with pytest.raises(FileNotFoundError, match="there are: sc20like-16gpu-24jobs, workload-1"):
            data.pollux_workload(bad)


def test_another_folder_can_stand_in(tmp_path, monkeypatch):
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    assert data.trace_data() == data.shipped()
    (tmp_path / "pollux" / "workloads").mkdir(parents=True)
    (tmp_path / "pollux" / "workloads" / "mine.csv").write_text("name,time\n")
    (tmp_path / "philly").mkdir()
    (tmp_path / "philly" / "philly.csv").write_text("timestamp\n")
    assert data.trace_data(tmp_path) == tmp_path
    assert data.pollux_workload_names(tmp_path) == ["mine"]
    assert data.philly_trace(tmp_path) == tmp_path / "philly" / "philly.csv"
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    assert data.trace_data() == tmp_path
    # A folder that is named but is not laid out like the data is an error, not a fallback.
    with pytest.raises(FileNotFoundError, match=r"has no pollux/ folder"):
        data.trace_data(tmp_path / "philly")
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "philly"))
    with pytest.raises(FileNotFoundError, match=r"\$ELASTIC_GPU_TRACE_DATA .* no pollux/"):
        data.trace_data()
    with pytest.raises(FileNotFoundError, match=r"no philly\.csv\.gz or philly\.csv"):
        data.philly_trace(tmp_path / "pollux")
