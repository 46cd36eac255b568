"""End to end with real TensorFlow on simulated GPUs (N logical CPU devices).

Unmodified scripts train while being resized 2 -> 4 -> 1 replicas mid-epoch; the proofs are
the optimizer's own iteration counter in the saved model, the loss, and the replica counts
the trainer itself reported.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sys

import numpy as np
import pytest
from elastic_gpu_sidecar import protocol as P
from sidecar_helpers import (
    SCRIPTS,
    checkpoint_step,
    children,
    cli,
    finish,
    progress,
    run_resized,
    start,
    status,
    trainer_pids_alive,
    wait_for,
    wait_step,
)

pytestmark = pytest.mark.slow
RESIZES = "2 -> 4 -> 1"


@pytest.fixture(scope="module")
def keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(SCRIPTS))  # the subclassed model's class must be registered
    import elastic_models  # noqa: F401
    import keras

    yield keras
    sys.path.remove(str(SCRIPTS))


def load_and_predict(keras, job, n_features):
    model = keras.models.load_model(job / "model.keras")
    pred = model.predict(np.zeros((3, n_features), "float32"), verbose=0)
    assert pred.shape[0] == 3 and np.isfinite(pred).all()
    return int(model.optimizer.iterations.numpy())


def check_resized_run(job, expected_steps, code, err, plan):
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    # the trainer itself reported each replica count, one per generation
    by_gen = {}
    for r in recs:
        by_gen.setdefault(r["generation"], set()).add(r["replicas"])
    grants = [gpus.split(",") for gpus, _ in plan]
    assert by_gen == {g: {len(grant)} for g, grant in enumerate(grants, start=1)}
    st = status(job)
    assert st["state"] == "done" and st["restarts"] == 0
    assert [(r["from_gpus"], r["to_gpus"]) for r in st["resizes"]] == list(
        itertools.pairwise(grants)
    )
    assert all(0 <= r["import_wait_s"] <= r["pause_s"] for r in st["resizes"])
    assert all(r["pause_s"] > 0 for r in st["resizes"])
    # the loss continues across each resize instead of starting over
    first_loss = next(r["loss"] for r in recs if r["loss"] is not None)
    for gen in (2, 3):
        before = [r["loss"] for r in recs if r["generation"] == gen - 1 and r["loss"]][-1]
        after = next(r["loss"] for r in recs if r["generation"] == gen and r["loss"])
        assert after < 1.5 * before and after < first_loss, (gen, before, after)
    # one record per epoch end, each below the first (an epoch may end a little
    # above the one before: training is noisy, more so across a change of replicas)
    ends = [r["loss"] for r in recs if r.get("epoch_end")]
    assert len(set(ends)) == len(ends) and all(e < ends[0] for e in ends[1:]), ends
    assert recs[-1]["global_step"] == expected_steps
    log = (job / "trainer.log").read_text()
    offsets = [int(b) for b in re.findall(r"resuming at epoch \d+, batch (\d+)", log)]
    assert any(offsets), "no resize landed mid-epoch"
    return recs


@pytest.mark.parametrize(
    ("script", "n_features", "steps", "plan"),
    [
        # Sequential model, tf.data pipeline: 3 epochs x 256 steps
        ("seq_tfdata.py", 32, 768, [("0,1", None), ("0,1,2,3", 40), ("0", 40)]),
        # subclassed model under the script's own MirroredStrategy, two fit calls
        ("subclassed_strategy.py", 16, 64 + 512, [("0,1", None), ("0,1,2,3", 40), ("0", 40)]),
    ],
)
def test_resize_keeps_every_step(tmp_path, keras, script, n_features, steps, plan):
    job = tmp_path / "job"
    code, err = run_resized(job, script, plan=plan, extra=("--checkpoint-interval", "5"))
    check_resized_run(job, steps, code, err, plan)
    assert load_and_predict(keras, job, n_features) == steps
    log = (job / "trainer.log").read_text()
    if script == "subclassed_strategy.py":
        assert "the script's MirroredStrategy() is the job's strategy (4 replicas)" in log
        assert "replicas in sync: 4" in log and "replicas in sync: 1" in log
        # the third generation starts in fit 1, on the same model: fit 1's checkpoint restores
        # it, so fit 0's (pruned once fit 1 has checkpointed twice) is not read
        assert "fit 0 finished before the restart: skipped (a later fit restores" in log
        assert "is damaged" not in log
    assert "batch policy keep-global: global batch 32 -> per-replica 8 on 4 replicas" in log


def test_a_finished_fit_of_another_model_is_restored_from_its_own_checkpoint(tmp_path):
    job = tmp_path / "job"
    # fit 0 (the first model) has 32 steps; the resize comes in fit 1, on the second model
    plan = [("0,1", None), ("0", 60)]
    code, err = run_resized(job, "two_models.py", plan=plan, extra=("--checkpoint-interval", "1"))
    assert code == P.EXIT_DONE, err
    log = (job / "trainer.log").read_text()
    assert re.search(r"fit 0 finished before the restart: restored its result from ckpt-\d+", log)
    sums = re.findall(r"first model weights sum (\S+)", log)
    assert len(sums) == 2 and sums[0] == sums[1], sums  # the same weights in both generations
    assert "is damaged" not in log


def test_numpy_input_with_callbacks_and_validation(tmp_path, keras):
    # 3 replicas do not divide the global batch (32: 11, 11, 10 samples), which Keras' own
    # build from the first batch cannot take (replica_shapes.py); validation runs there too
    job = tmp_path / "job"
    events = tmp_path / "events.txt"
    plan = [("0,1", None), ("0,1,2", 40), ("0", 40)]
    code, err = run_resized(job, "func_numpy.py", [str(events)], plan=plan)
    check_resized_run(job, 3 * 224, code, err, plan)
    assert load_and_predict(keras, job, 32) == 3 * 224
    lines = events.read_text().split("\n")
    # each generation is a new process (one train_begin each), but every epoch ended once
    # and training ended once: no epoch was repeated or lost
    assert lines.count("train_begin") == 3 and lines.count("train_end") == 1
    ends = [line.split() for line in lines if line.startswith("epoch_end")]
    assert [int(e[1]) for e in ends] == [0, 1, 2]
    assert all(float(e[3]) > 0 for e in ends)  # validation ran and reached the callback
    assert "epochs in history: [0, 1, 2]" in (job / "trainer.log").read_text()


def test_generator_input_replays_the_interrupted_epoch(tmp_path, keras):
    job = tmp_path / "job"
    code, err = run_resized(
        job, "generator_input.py", plan=[("0,1", None), ("0,1,2,3", 40), ("0", 40)]
    )
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    replayed = sum(r.get("replayed", 0) for r in recs if r.get("first"))
    assert replayed > 0  # at least one resize landed mid-epoch
    assert "cannot be skipped exactly" in (job / "trainer.log").read_text()
    # exactly the steps of an uninterrupted run plus the replayed epoch starts, no more
    assert load_and_predict(keras, job, 16) == 3 * 128 + replayed
    assert sum(r["lost_steps"] for r in status(job)["resizes"]) == replayed


def test_keep_per_replica_scales_batch_and_learning_rate(tmp_path, keras):
    job = tmp_path / "job"
    events = tmp_path / "events.txt"
    code, err = run_resized(
        job,
        "func_numpy.py",
        [str(events)],
        plan=[("0,1", None), ("0,1,2,3", 40)],
        extra=("--batch-policy", "keep-per-replica", "--epochs", "1", "--lr-warmup-steps", "20"),
        hold_for_standby=True,  # 224 steps in all: the epoch can end before a slow standby
    )
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    assert {r["batch_size"] for r in recs if r["generation"] == 1} == {32}
    assert {r["batch_size"] for r in recs if r["generation"] == 2} == {64}
    assert recs[-1]["samples"] == 7168  # every sample once, whatever the batch size
    assert recs[-1]["epochs"] == 1  # --epochs overrides the script's fit(epochs=3)
    log = (job / "trainer.log").read_text()
    assert "per-replica batch 16; global batch 32 -> 64 on 4 replicas" in log
    assert "learning rate x2 of the script's value (from x1, linear ramp over 20 steps)" in log
    model = keras.models.load_model(job / "model.keras")
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(0.1)  # 0.05 x 2


def test_killed_trainer_resumes_from_its_periodic_checkpoint(tmp_path, keras):
    job = tmp_path / "job"
    proc = start(
        job,
        "--gpus",
        "0,1",
        "--simulated",
        "--checkpoint-interval",
        "1",
        "--backoff",
        "0.1",
        "--",
        str(SCRIPTS / "seq_tfdata.py"),
    )
    wait_step(job, 1, 300, proc)  # mid-epoch 2, several periodic checkpoints written
    pid = status(job)["trainer_pid"]
    saved = checkpoint_step(job)  # the newest complete checkpoint; a later one may come
    os.kill(pid, signal.SIGKILL)
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    st = status(job)
    assert st["restarts"] == 1
    log = (job / "sidecar.log").read_text()
    assert "trainer crashed (killed by SIGKILL); restart 1/3" in log
    lost = int(re.search(r"trainer resumed at step \d+; (\d+) steps lost", log).group(1))
    reached = int(re.search(rf"trainer {pid} ended: .* at step (\d+)", log).group(1))
    assert saved is not None and 0 <= lost <= reached - saved  # at most since that checkpoint
    assert load_and_predict(keras, job, 32) == 768  # the lost steps were trained again, once


def test_script_error_fails_once_with_traceback_and_hint(tmp_path):
    job = tmp_path / "job"
    proc = start(job, "--gpus", "0", "--simulated", "--", str(SCRIPTS / "buggy.py"))
    code, _, err = finish(proc)
    assert code == P.EXIT_FAILED
    assert "NameError: name 'x_train' is not defined" in err
    assert 'buggy.py", line 7' in err
    assert "hint: the script runs in a Python process of its own" in err
    assert "the cell runs" not in err and "notebook kernel" not in err  # a script's hint
    st = status(job)
    assert st["restarts"] == 0 and st["state"] == "failed"
    assert st["error"]["type"] == "NameError" and "buggy.py" in st["error"]["traceback"]
    assert "elastic_gpu_sidecar" not in st["error"]["traceback"]
    assert (job / "sidecar.log").read_text().count("started (") == 1


def test_suspend_resume_and_cancel(tmp_path, keras):
    job = tmp_path / "job"
    proc = start(job, "--gpus", "0,1", "--simulated", "--", str(SCRIPTS / "seq_tfdata.py"))
    wait_step(job, 1, 30, proc)
    assert cli("suspend", "--job-dir", str(job)).returncode == 0
    code, _, err = finish(proc)
    assert code == P.EXIT_SUSPENDED, err
    assert status(job)["state"] == "suspended" and status(job)["trainer_pid"] is None
    stopped = progress(job)[-1]
    assert stopped.get("stopped") and 0 < stopped["step_in_epoch"] < 256

    proc = start(job, "--gpus", "0,1,2,3")  # resume the same job on another grant
    wait_step(job, 2, stopped["global_step"] + 20, proc)
    os.kill(proc.pid, signal.SIGTERM)  # cancel: checkpoint, stop
    code, _, err = finish(proc)
    assert code == P.EXIT_CANCELLED, err
    st = status(job)
    assert st["state"] == "cancelled" and st["exit_code"] == P.EXIT_CANCELLED
    first = next(r for r in progress(job) if r.get("first") and r["generation"] == 2)
    assert first["resumed_from"] == stopped["global_step"]
    last = progress(job)[-1]
    assert last.get("stopped")
    meta = json.loads(
        (
            job / "checkpoints" / (job / "checkpoints" / "latest").read_text().strip() / "meta.json"
        ).read_text()
    )
    assert meta["global_step"] == last["global_step"] and meta["reason"] == "stop requested"


def test_sidecar_sigkill_leaves_no_trainer(tmp_path):
    job = tmp_path / "job"
    proc = start(job, "--gpus", "0,1", "--simulated", "--", str(SCRIPTS / "seq_tfdata.py"))
    # killed while the trainer is still importing TensorFlow ...
    pid = wait_for(
        lambda: (job / "status.json").exists() and status(job)["trainer_pid"],
        timeout=30,
        proc=proc,
        what="a trainer",
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not trainer_pids_alive([pid]), timeout=10, what="the trainer to die")
    # ... and while it trains, with a standby interpreter next to it
    proc = start(
        job, "--gpus", "0,1", "--simulated", "--fresh", "--", str(SCRIPTS / "seq_tfdata.py")
    )
    wait_step(job, 1, 50, proc)
    kids = wait_for(
        lambda: len(found := children(proc.pid)) >= 2 and found,
        timeout=60,
        proc=proc,
        what="the trainer and its standby interpreter",
    )
    assert status(job)["trainer_pid"] in kids
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not trainer_pids_alive(kids), timeout=10, what="every child to die")


def stop_signal_blocked(pid: int) -> bool:
    """Whether the trainer ``pid`` has taken over its stop signal (``StopRequest.install``
    blocks it first thing; before that, the signal's default action would end it)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(line.split()[1] for line in f if line.startswith("SigBlk:"))
    except (OSError, StopIteration):
        return False
    return bool(int(mask, 16) & (1 << (signal.SIGUSR1 - 1)))


def test_resize_while_the_trainer_starts_does_not_wait_for_it(tmp_path):
    job = tmp_path / "job"
    proc = start(job, "--gpus", "0,1", "--simulated", "--epochs", "1", "--",
                 str(SCRIPTS / "seq_tfdata.py"))  # fmt: skip
    wait_for(lambda: (job / "status.json").exists() and status(job)["trainer_pid"], timeout=30,
             proc=proc, what="a trainer")  # fmt: skip
    # The resize must come while the trainer imports TensorFlow (seconds), not in the moment
    # before its interpreter has taken the stop signal over.
    pid = status(job)["trainer_pid"]
    wait_for(lambda: stop_signal_blocked(pid), timeout=30, proc=proc, what="the trainer's handler")
    assert cli("resize", "--job-dir", str(job), "--gpus", "0,1,2,3").returncode == 0
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    log = (job / "trainer.log").read_text()
    assert "stop requested before training started: exiting at once" in log
    assert {r["replicas"] for r in progress(job)} == {4}  # generation 1 never trained
    assert progress(job)[-1]["global_step"] == 256
    # no standby yet (it starts after a first step): the pause waited for TensorFlow's import,
    # which the job's resize cost leaves out
    (resize,) = status(job)["resizes"]
    assert 0 < resize["import_wait_s"] <= resize["pause_s"]
