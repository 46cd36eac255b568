"""Fast checks of the sidecar's building blocks (standard library only, no TensorFlow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.cli import format_status
from elastic_gpu_sidecar.errors import describe, hint_for
from elastic_gpu_sidecar.jobdir import JobDir, ProgressTail, atomic_write_json, read_json
from elastic_gpu_sidecar.measurements import Measurements
from elastic_gpu_sidecar.trainer.checkpoint import CheckpointStore
from elastic_gpu_sidecar.trainer.synthetic import parse_profile, speed_at


def test_grant_validation():
    c = P.Grant.from_json({"generation": 3, "gpus": ["0", "1"], "action": "run"})
    assert (c.generation, c.gpus, c.action) == (3, ["0", "1"], "run")
    assert P.Grant.from_json({"generation": 4, "gpus": [], "action": "stop"}).action == "stop"
    for bad in (
        {"generation": -1, "gpus": ["0"]},
        {"generation": True, "gpus": ["0"]},
        {"generation": 1, "gpus": "0,1"},
        {"generation": 1, "gpus": ["0"], "action": "pause"},
        {"generation": 1, "gpus": [], "action": "run"},
        {"generation": 1, "gpus": ["0; rm -rf /"]},
        [1, 2],
    ):
        with pytest.raises(ValueError):
            P.Grant.from_json(bad)
    assert P.parse_gpus(" 0, 1 ,2") == ["0", "1", "2"]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "status.json"
    for i in range(20):
        atomic_write_json(target, {"i": i})
    assert read_json(target) == {"i": 19}
    assert os.listdir(tmp_path) == ["status.json"]
    (tmp_path / "bad.json").write_text("{half")
    with pytest.raises(ValueError):
        read_json(tmp_path / "bad.json")
    assert read_json(tmp_path / "missing.json", {"d": 1}) == {"d": 1}


def test_progress_tail_reads_only_complete_lines(tmp_path):
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    assert tail.read() == []
    with open(path, "w") as f:
        f.write('{"a": 1}\n{"a": 2}\n{"a": ')
    assert [r["a"] for r in tail.read()] == [1, 2]
    with open(path, "a") as f:
        f.write("3}\n")
    assert [r["a"] for r in tail.read()] == [3]


def test_checkpoints_are_atomic_pruned_and_verified(tmp_path):
    lines: list[str] = []
    store = CheckpointStore(tmp_path, log=lines.append)
    names = [
        store.write({"state.json": json.dumps({"n": i}).encode()}, {"n": i}).name for i in range(4)
    ]
    assert (tmp_path / "latest").read_text().strip() == names[-1]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ckpt-")) == names[-2:]
    assert store.latest().meta["n"] == 3
    # a checkpoint referenced by the newest one (a finished fit's model) survives pruning
    keep = names[-1]
    for i in range(4, 7):
        store.write({"state.json": b"{}"}, {"n": i, "references": [keep]})
    assert (tmp_path / keep).is_dir()

    # a torn write of the newest checkpoint (truncated data) is detected: the previous is used
    newest = store.latest()
    data = newest.file("state.json")
    data.write_bytes(data.read_bytes()[:1])
    got = store.latest()
    assert got.meta["n"] == 5
    assert any("is damaged" in line and newest.name in line for line in lines)
    assert any("falling back to the previous good checkpoint" in line for line in lines)

    # a checkpoint directory without its meta (writer killed before commit) is never used
    (tmp_path / "ckpt-00000099").mkdir()
    (tmp_path / "ckpt-00000099" / "state.json").write_text("{}")
    assert store.latest().meta["n"] == 5


def test_half_written_temp_checkpoint_is_removed(tmp_path):
    lines: list[str] = []
    store = CheckpointStore(tmp_path, log=lines.append)
    store.write({"state.json": b"{}"}, {"n": 1})
    tmp = tmp_path / ".tmp-2-12345"
    tmp.mkdir()
    (tmp / "state.json").write_text("partial")
    assert store.latest().meta["n"] == 1
    store.clean_partial()
    assert not tmp.exists()
    assert any("half-written" in line for line in lines)
    assert store.write({"state.json": b"{}"}, {"n": 2}).name == "ckpt-00000002"


def test_profile_interpolation():
    prof = parse_profile("4:360,1:100,2:190")
    assert prof == [(1, 100.0), (2, 190.0), (4, 360.0)]
    assert speed_at(prof, 1) == 100.0
    assert speed_at(prof, 3) == pytest.approx(275.0)
    assert speed_at(prof, 8) == 360.0  # no gain assumed beyond the last measured point
    for bad in ("", "1:0", "x:100", "1-100"):
        with pytest.raises(ValueError):
            parse_profile(bad)


def test_hints_for_common_mistakes():
    assert "defined or imported by the script" in hint_for("NameError", "name 'df' is not defined")
    assert "environment" in hint_for("ModuleNotFoundError", python="/usr/bin/python3")
    assert hint_for("ZeroDivisionError") is None
    try:
        undefined_in_this_cell  # noqa: B018
    except NameError as e:
        info = describe(e)
    assert info["type"] == "NameError" and info["kind"] == "user"
    assert "undefined_in_this_cell" in info["traceback"]


def test_status_is_readable():
    st = {
        "state": "running",
        "generation": 2,
        "gpus": ["0", "1"],
        "replicas": 2,
        "sidecar_pid": 10,
        "trainer_pid": 11,
        "restarts": 0,
        "resizes": [
            {
                "generation": 2,
                "from_gpus": ["0"],
                "to_gpus": ["0", "1"],
                "pause_s": 1.5,
                "lost_steps": 0,
            }
        ],
        "error": None,
        "exit_code": None,
        "updated_at": 0,
    }
    prog = {
        "epoch": 0,
        "epochs": 3,
        "step_in_epoch": 5,
        "steps_per_epoch": 10,
        "global_step": 5,
        "loss": 0.5,
        "samples_per_s": 100.0,
        "batch_size": 32,
        "replicas": 2,
    }
    text = format_status(st, prog)
    assert "generation 2, gpus 0,1 (2 replicas)" in text
    assert "epoch 1/3, step 5/10" in text
    assert "0 -> 0,1, pause 1.50 s, lost steps 0" in text


def test_cli_usage_errors(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "elastic_gpu_sidecar", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    r = run("resize", "--job-dir", str(tmp_path / "nope"), "--gpus", "0")
    assert r.returncode == P.EXIT_USAGE and "no such job dir" in r.stderr
    r = run("run", "--job-dir", str(tmp_path / "j"), "--gpus", "0")
    assert r.returncode == P.EXIT_USAGE and "nothing to run" in r.stderr
    r = run("run", "--job-dir", str(tmp_path / "j"), "--gpus", "0", "--", "missing.py")
    assert r.returncode == P.EXIT_USAGE and "script not found" in r.stderr
    job = JobDir(tmp_path / "j2")
    job.create()
    job.write_grant(P.Grant(1, ["0"], "run"))
    r = run("resize", "--job-dir", str(job.path), "--gpus", "0,1")
    assert r.returncode == 0 and "no sidecar running" in r.stdout
    assert job.read_grant().generation == 2 and job.read_grant().gpus == ["0", "1"]


def test_a_job_dir_of_an_older_sidecar_keeps_working(tmp_path):
    """A job dir with only the legacy grant file (an older sidecar's) is read, and written on
    beside the new one while it is there; a new job dir gets only the new one."""
    old = JobDir(tmp_path / "old")
    old.create()
    atomic_write_json(old.path / P.LEGACY_GRANT, {"generation": 3, "gpus": ["0"], "action": "run"})
    assert old.read_grant().generation == 3
    old.write_grant(P.Grant(4, ["0", "1"], "run"))
    for name in (P.GRANT, P.LEGACY_GRANT):
        assert read_json(old.path / name)["generation"] == 4
    new = JobDir(tmp_path / "new")
    new.create()
    new.write_grant(P.Grant(1, ["0"], "run"))
    assert (new.path / P.GRANT).exists() and not (new.path / P.LEGACY_GRANT).exists()


def test_sidecar_package_stays_light():
    """The sidecar and the synthetic workload must not pull in TensorFlow or numpy, nor the
    trainer before its adapter starts (a standby imports the framework on its own)."""
    code = (
        "import sys, elastic_gpu_sidecar.cli, elastic_gpu_sidecar.supervisor, "
        "elastic_gpu_sidecar.trainer.synthetic, elastic_gpu_sidecar.heartbeat,"
        " elastic_gpu_sidecar.trainer.run, elastic_gpu_sidecar.trainer.keras;"
        "heavy = [m for m in ('tensorflow', 'numpy', 'keras', 'jupyter_elastic_gpu') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _resize(m: Measurements, requested_at: float, first_at: float, **first) -> dict:
    m.pending = m.resize_requested(2, ["0"], ["0", "1"], requested_at, "sidecar")
    m.first_step({"t": first_at, "first": True, "resumed_from": 0, **first}, 0, ["0", "1"])
    return m.resizes[-1]


def test_resize_cost_is_the_mean_pause():
    m = Measurements()
    assert m.resize_cost() is None
    _resize(m, 100.0, 102.0)
    _resize(m, 200.0, 204.0)
    assert m.resize_cost() == 3.0


def test_a_pause_that_waited_for_the_import_counts_without_it():
    # a resize before the standby interpreter was ready: 1 s to stop, 6 s of import, 1 s to
    # the first step; the next resize will find the standby ready
    m = Measurements()
    m.pending = m.resize_requested(2, ["0"], ["0", "1"], 100.0, "sidecar")
    record = {"t": 108.0, "first": True, "resumed_from": 5, "ready_at": 107.0}
    line = m.first_step(record, 5, ["0", "1"], handed_at=101.0, standby=True)
    entry = m.resizes[-1]
    assert entry["pause_s"] == 8.0 and entry["import_wait_s"] == 6.0
    assert "6.00 s of it waited for the framework's import" in line
    assert m.resize_cost() == 2.0
    # from a ready standby the trainer goes on at once: the whole pause counts
    m.pending = m.resize_requested(3, ["0", "1"], ["0"], 200.0, "sidecar")
    record = {"t": 201.5, "first": True, "resumed_from": 9, "ready_at": 200.4}
    line = m.first_step(record, 9, ["0"], handed_at=200.5, standby=True)
    assert m.resizes[-1]["import_wait_s"] == 0.0 and "import" not in line
    assert m.resize_cost() == 1.75


def test_without_a_standby_every_resize_pays_the_import():
    m = Measurements()
    m.pending = m.resize_requested(2, ["0"], ["0", "1"], 100.0, "termination")
    record = {"t": 108.0, "first": True, "resumed_from": 5, "ready_at": 107.0}
    m.first_step(record, 5, ["0", "1"], handed_at=101.0, standby=False)
    assert "import_wait_s" not in m.resizes[-1] and m.resize_cost() == 8.0


def test_resize_cost_survives_a_sidecar_restart():
    m = Measurements()
    _resize(m, 100.0, 102.0)
    m.pending = m.resize_requested(3, ["0", "1"], ["0"], 200.0, "sidecar")
    m.first_step({"t": 209.0, "first": True, "ready_at": 208.0}, None, ["0"], handed_at=201.0,
                 standby=True)  # fmt: skip
    again = Measurements(json.loads(json.dumps(m.resizes)))  # status.json's copy
    assert again.resize_cost() == m.resize_cost() == 2.0


def test_every_job_gets_a_framework_adapter_that_imports_nothing_until_used():
    code = (
        "import sys; from elastic_gpu_sidecar.trainer.adapter import adapter_for;"
        "a = adapter_for({}); print(a.name, 'tensorflow' in sys.modules);"
        "a.import_framework(); print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["keras", "False", "True", "True"], out


def test_out_of_device_memory_says_what_to_change_in_every_framework():
    from elastic_gpu_sidecar.errors import hint_for

    tf = hint_for("ResourceExhaustedError", "OOM when allocating tensor")
    torch = hint_for("OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB")
    old_torch = hint_for("RuntimeError", "CUDA out of memory. Tried to allocate 2.00 GiB")
    assert tf == torch == old_torch
    assert "--min-gpus" in torch and "keep-global" in torch and "keep-per-replica" in torch
    assert hint_for("RuntimeError", "shape mismatch") is None


def test_a_saved_model_is_whole_or_the_previous_one(tmp_path):
    """File or folder, the saver writes at a hidden name with the same suffixes (frameworks'
    savers go by them) and only a complete result replaces the previous one."""
    from elastic_gpu_sidecar.jobdir import save_atomically

    names = []

    def keras_like(path):
        names.append(path.name)
        assert path.name.endswith(".weights.h5") and path.name.startswith(".")
        path.write_bytes(b"new")

    (tmp_path / "model.weights.h5").write_bytes(b"old")
    save_atomically(tmp_path / "model.weights.h5", keras_like)
    assert (tmp_path / "model.weights.h5").read_bytes() == b"new"

    def folder(path):
        path.mkdir()
        (path / "config.json").write_text("{}")

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "stale.bin").write_bytes(b"x")
    save_atomically(tmp_path / "model", folder)
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json"]

    def fails(path):
        path.mkdir()
        (path / "half").write_bytes(b"x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_atomically(tmp_path / "model", fails)
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.weights.h5"]


def test_a_killed_group_is_gone_when_end_group_returns():
    """The sidecar goes on (a restart on the same GPUs, its own exit) only once every process
    of the trainer's group is gone: a SIGKILLed process with memory to give back is still
    there for a while after the kill, holding it."""
    from elastic_gpu_sidecar.procs import end_group, group_members

    member = "import time; b = bytearray(256 << 20); b[::4096] = b'x' * (len(b) // 4096); "
    member += "print(flush=True); time.sleep(600)"
    leader = (
        "import subprocess, sys, time\n"
        f"ps = [subprocess.Popen([sys.executable, '-c', {member!r}], stdout=subprocess.PIPE)"
        " for _ in range(3)]\n"
        "for p in ps: p.stdout.readline()\n"
        "print(' '.join(str(p.pid) for p in ps), flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", leader], stdout=subprocess.PIPE, start_new_session=True
    )
    members = [int(p) for p in proc.stdout.readline().split()]
    assert set(group_members(proc.pid)) == {proc.pid, *members}
    assert end_group(proc) == []
    assert group_members(proc.pid) == []
