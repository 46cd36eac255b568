"""The real sidecar driving the synthetic workload (no TensorFlow): every protocol path that
does not depend on the trainer's framework, in seconds."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import time

from elastic_gpu_sidecar import protocol as P
from sidecar_helpers import (
    checkpoint_step,
    cli,
    finish,
    progress,
    start,
    status,
    trainer_pids_alive,
    wait_for,
)

PROFILE = "1:100,2:190,4:360"


def synthetic(job, *extra, gpus="0", work=12000, scale=10.0, every=60.0):
    return start(
        job,
        "--gpus",
        gpus,
        "--synthetic",
        "--profile",
        PROFILE,
        "--work",
        str(work),
        "--time-scale",
        str(scale),
        "--checkpoint-interval",
        str(every),
        *extra,
    )


def wait_samples(job, generation, samples, proc, timeout=60):
    def seen():
        return any(r["generation"] == generation and r["samples"] >= samples for r in progress(job))

    wait_for(seen, timeout=timeout, proc=proc, what=f"{samples} samples in gen {generation}")


def trainer_pid(job):
    try:
        return status(job)["trainer_pid"]
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def test_resize_changes_speed_per_profile_and_conserves_work(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job)
    wait_samples(job, 1, 2500, proc)
    assert cli("resize", "--job-dir", str(job), "--gpus", "0,1").returncode == 0
    wait_samples(job, 2, 7000, proc)
    assert cli("resize", "--job-dir", str(job), "--gpus", "0,1,2,3").returncode == 0
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err

    recs = progress(job)
    assert recs[-1]["samples"] == 12000
    assert recs[-1]["global_step"] == math.ceil(12000 / 32)
    speeds = {}
    for gen, gpus in ((1, 1), (2, 2), (3, 4)):
        rates = [r["samples_per_s"] for r in recs if r["generation"] == gen and r["samples_per_s"]]
        assert {r["replicas"] for r in recs if r["generation"] == gen} == {gpus}
        speeds[gpus] = statistics.median(rates)
    for gpus, expected in ((1, 1000), (2, 1900), (4, 3600)):
        assert abs(speeds[gpus] / expected - 1) < 0.15, speeds
    # nothing lost, nothing repeated: each generation starts where the previous one stopped
    st = status(job)
    assert [r["lost_steps"] for r in st["resizes"]] == [0, 0]
    assert all(r["pause_s"] is not None and r["pause_s"] > 0 for r in st["resizes"])
    firsts = [r for r in recs if r.get("first")]
    lasts = [max(r["global_step"] for r in recs if r["generation"] == g) for g in (1, 2)]
    assert [f["resumed_from"] for f in firsts[1:]] == lasts
    result = json.loads((job / "result.json").read_text())
    assert result["state"] == "done" and result["samples"] == 12000


def test_termination_mechanism_loses_the_work_since_the_periodic_checkpoint(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, "--mechanism", "termination", work=9000, scale=10.0, every=1.0)
    wait_samples(job, 1, 2500, proc)

    def past_a_checkpoint():  # some work is done after the last periodic checkpoint
        saved = checkpoint_step(job)
        return saved is not None and progress(job)[-1]["global_step"] > saved

    wait_for(past_a_checkpoint, timeout=30, proc=proc, what="work past a periodic checkpoint")
    assert cli("resize", "--job-dir", str(job), "--gpus", "0,1").returncode == 0
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    st = status(job)
    (resize,) = st["resizes"]
    assert resize["mechanism"] == "termination"
    assert resize["lost_steps"] > 0
    assert progress(job)[-1]["samples"] == 9000  # the lost work was done again, counted once
    log = (job / "sidecar.log").read_text()
    assert "killed by SIGKILL" in log


def test_sidecar_killed_takes_its_trainer_with_it(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, work=10**7)
    pid = wait_for(lambda: trainer_pid(job), timeout=30, proc=proc, what="a trainer")
    wait_samples(job, 1, 100, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not trainer_pids_alive([pid]), timeout=10, what="the trainer to die")


def test_suspend_then_run_again_resumes(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, work=8000, every=0.5)
    wait_samples(job, 1, 3000, proc)
    r = cli("suspend", "--job-dir", str(job), "--wait")
    assert r.returncode == 0 and "state: suspended" in r.stdout
    code, _, _ = finish(proc)
    assert code == P.EXIT_SUSPENDED
    assert status(job)["state"] == "suspended"
    stopped_at = progress(job)[-1]["global_step"]
    assert not (job / "result.json").exists()

    proc = start(job)  # same job dir, nothing else: resumes what job.json describes
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    resumed = [r for r in recs if r.get("first")][-1]
    assert resumed["generation"] == 2 and resumed["resumed_from"] == stopped_at
    assert recs[-1]["samples"] == 8000


def test_cancel_by_signal_checkpoints_and_stops(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, work=10**7)
    wait_samples(job, 1, 2000, proc)
    os.kill(proc.pid, signal.SIGTERM)
    code, _, err = finish(proc)
    assert code == P.EXIT_CANCELLED, err
    st = status(job)
    assert st["state"] == "cancelled" and st["exit_code"] == P.EXIT_CANCELLED
    assert json.loads((job / "result.json").read_text())["state"] == "cancelled"
    assert "stop requested" in (job / "trainer.log").read_text()  # a checkpoint was written
    assert not (job / "sidecar.pid").exists()


def test_damaged_checkpoint_is_skipped_on_resume(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, work=8000, every=0.3)
    wait_samples(job, 1, 3000, proc)
    cli("suspend", "--job-dir", str(job))
    assert finish(proc)[0] == P.EXIT_SUSPENDED
    ckpts = job / "checkpoints"
    newest = (ckpts / "latest").read_text().strip()
    previous = sorted(p.name for p in ckpts.iterdir() if p.name.startswith("ckpt-"))[-2]
    prev_step = json.loads((ckpts / previous / "meta.json").read_text())["global_step"]
    state = ckpts / newest / "state.json"
    state.write_bytes(state.read_bytes()[:-3])  # a torn write

    proc = start(job)
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    log = (job / "trainer.log").read_text()
    assert f"checkpoint {newest} is damaged" in log
    assert f"falling back to the previous good checkpoint {previous}" in log
    resumed = [r for r in progress(job) if r.get("first")][-1]
    assert resumed["resumed_from"] == prev_step
    assert progress(job)[-1]["samples"] == 8000


def test_crashes_are_retried_with_backoff_then_the_job_fails(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, "--max-restarts", "1", "--backoff", "0.2", work=10**7, every=0.3)
    killed = []
    for _ in range(2):
        pid = wait_for(
            lambda: (p := trainer_pid(job)) not in (None, *killed) and p,
            timeout=30,
            proc=proc,
            what="a new trainer",
        )
        wait_for(
            lambda pid=pid: any(r.get("pid") == pid for r in progress(job)),
            timeout=30,
            proc=proc,
            what="its first step",
        )
        # a periodic checkpoint to resume from (the first retry must restore it)
        wait_for(
            lambda: checkpoint_step(job) is not None, timeout=30, proc=proc, what="a checkpoint"
        )
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    code, _, err = finish(proc)
    assert code == P.EXIT_FAILED
    st = status(job)
    assert st["state"] == "failed" and st["restarts"] == 2
    assert st["error"]["type"] == "TrainerCrashed" and "SIGKILL" in st["error"]["message"]
    log = (job / "sidecar.log").read_text()
    assert "restart 1/1 from the last checkpoint in 0.2 s" in log
    assert "trainer resumed at step" in log  # the retry restored the periodic checkpoint
    assert "job failed: TrainerCrashed" in err


def test_stop_timeout_kills_and_resumes_from_the_periodic_checkpoint(tmp_path):
    job = tmp_path / "job"
    proc = synthetic(job, "--stop-timeout", "1", work=6000, every=0.3)
    wait_samples(job, 1, 2000, proc)
    pid = trainer_pid(job)
    os.kill(pid, signal.SIGSTOP)  # a trainer that cannot answer (hung in a collective, say)
    t0 = time.monotonic()
    assert cli("resize", "--job-dir", str(job), "--gpus", "0,1").returncode == 0
    wait_for(lambda: status(job)["generation"] == 2, timeout=20, proc=proc, what="generation 2")
    assert time.monotonic() - t0 >= 1.0
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    log = (job / "sidecar.log").read_text()
    assert "trainer did not checkpoint within 1 s: killing it" in log
    assert "resuming from the last periodic checkpoint" in log
    (resize,) = status(job)["resizes"]
    assert resize["lost_steps"] is not None and resize["pause_s"] >= 1.0
    assert progress(job)[-1]["samples"] == 6000
    assert not trainer_pids_alive([pid])
