"""The Hugging Face Trainer adapter: the batch policy in the Trainer's terms, and end to end an
unmodified Trainer script resized 2 -> 4 -> 1 simulated GPUs (one CPU process per GPU, gloo).

The end-to-end proofs: the script's own callback saw every optimizer step exactly once, each
generation reported its replica count, and the final weights equal those of the same script
run once, uninterrupted, in one process with the same global batch. Equal within a tolerance,
not bit for bit: the ranks' gradients are averaged by an all-reduce where one process takes
one batch's mean (or accumulates two halves), which rounds differently, and Adam magnifies
such differences once the gradients are small. A data order shifted by one batch, or a
different one, moves the weights by orders of magnitude more.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.trainer.hf.batching import plan
from needs import module
from sidecar_helpers import (
    ENV,
    SCRIPTS,
    cli,
    finish,
    progress,
    run_resized,
    start,
    status,
    wait_for,
)

module("transformers", "pip install -e '.[torch]'")
module("accelerate", "pip install -e '.[torch]'")

KEEP_GLOBAL, KEEP_PER_REPLICA = P.BatchPolicy.KEEP_GLOBAL, P.BatchPolicy.KEEP_PER_REPLICA


@pytest.mark.parametrize(
    ("per_device", "acc", "world", "reference", "expected"),
    [
        (8, 1, 2, 2, (8, 1)),  # the reference grant: the script's own arguments
        (8, 1, 4, 2, (4, 1)),  # more replicas: smaller per-device batches
        (8, 1, 1, 2, (8, 2)),  # fewer: accumulate, the per-device batch stays what fitted
        (6, 1, 4, 2, (3, 1)),
        (4, 2, 1, 4, (4, 8)),
        (3, 1, 1, 3, (3, 3)),
    ],
)
def test_keep_global_keeps_the_global_batch(per_device, acc, world, reference, expected):
    p = plan(KEEP_GLOBAL, per_device, acc, world, reference)
    assert (p.per_device, p.accumulation) == expected
    assert p.global_batch == per_device * acc * reference
    assert p.note is None and p.lr_scale == 1.0


def test_a_global_batch_that_cannot_be_kept_is_said():
    p = plan(KEEP_GLOBAL, 5, 1, 3, 2)  # 10 samples a step cannot be split over 3 replicas
    assert p.global_batch == 12 and p.reference_global == 10
    assert p.note == (
        "the global batch 10 cannot be kept on 3 replicas (not divisible): using 4 x 1 x 3 = 12"
    )
    assert "(the script's global batch: 10)" in p.describe(KEEP_GLOBAL)


def test_keep_per_replica_keeps_the_per_device_batch_and_scales_the_learning_rate():
    p = plan(KEEP_PER_REPLICA, 8, 2, 4, 2)
    assert (p.per_device, p.accumulation, p.global_batch, p.lr_scale) == (8, 2, 64, 2.0)
    assert p.describe(KEEP_PER_REPLICA) == (
        "batch policy keep-per-replica: per-device batch 8 x gradient accumulation 2 x 4 "
        "replicas = global batch 64 (the script's global batch: 32); learning rate x2 of the "
        "script's"
    )


def _weights(path):
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


@pytest.mark.slow
def test_trainer_resized_keeps_every_step_and_the_result(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    job, steps, out = tmp_path / "job", tmp_path / "steps.txt", tmp_path / "out"
    grants = [("0,1", None), ("0,1,2,3", 5), ("0", 5)]
    # meanwhile, the same script uninterrupted, in one plain process with the same global batch
    with (tmp_path / "ref.log").open("w") as ref_log:
        reference_run = subprocess.Popen(
            [
                sys.executable,
                str(SCRIPTS / "hf_classify.py"),
                str(tmp_path / "ref-steps.txt"),
                str(tmp_path / "ref"),
                "16",
            ],
            env=ENV,
            stdout=ref_log,
            stderr=subprocess.STDOUT,
        )
    # per-device batch 8 on the first grant of 2: a global batch of 16, 32 steps an epoch
    # periodic checkpoints too, every 0.3 s: wherever they fall, they must change nothing
    code, err = run_resized(
        job,
        "hf_classify.py",
        [str(steps), str(out), "8"],
        plan=grants,
        extra=("--checkpoint-interval", "0.3"),
    )
    assert code == P.EXIT_DONE, err

    # the script's own callback saw every optimizer step once, across three processes
    assert [int(s) for s in steps.read_text().split()] == list(range(1, 97))
    recs = progress(job)
    by_gen: dict[int, set] = {}
    for r in recs:
        by_gen.setdefault(r["generation"], set()).add(r["replicas"])
    assert by_gen == {1: {2}, 2: {4}, 3: {1}}
    assert {r["batch_size"] for r in recs} == {16}
    firsts = [r for r in recs if r.get("first")]
    assert [r["generation"] for r in firsts] == [1, 2, 3]
    assert firsts[0]["resumed_from"] == 0
    for before, first in itertools.pairwise(firsts):
        last = max(r["global_step"] for r in recs if r["generation"] == before["generation"])
        assert first["resumed_from"] == last and first["global_step"] == last + 1
    assert all(r["pid"] and r["ready_at"] and r["replayed"] == 0 for r in firsts)
    assert any(r["resumed_from"] % 32 for r in firsts[1:]), "no resize landed mid-epoch"
    assert recs[-1]["global_step"] == 96 and recs[-1]["samples"] == 96 * 16

    st = status(job)
    assert st["state"] == "done" and st["restarts"] == 0
    assert [(r["from_gpus"], r["to_gpus"]) for r in st["resizes"]] == [
        (["0", "1"], ["0", "1", "2", "3"]),
        (["0", "1", "2", "3"], ["0"]),
    ]
    assert all(r["lost_steps"] == 0 for r in st["resizes"])
    log = (job / "trainer.log").read_text()
    for line in (
        "per-device batch 8 x gradient accumulation 1 x 2 replicas = global batch 16",
        "per-device batch 4 x gradient accumulation 1 x 4 replicas = global batch 16",
        "per-device batch 8 x gradient accumulation 2 x 1 replicas = global batch 16",
        "Trainer on 4 process(es), CPU (simulated GPUs), backend gloo",
    ):
        assert line in log
    assert log.count("(stop requested) in") == 2 and "is damaged" not in log
    latest = (job / "checkpoints" / "latest").read_text().strip()
    meta = json.loads((job / "checkpoints" / latest / "meta.json").read_text())
    assert (meta["global_step"], meta["done"], meta["epoch"]) == (96, True, 3.0)
    for name in ("optimizer.pt", "scheduler.pt", "trainer_state.json", "rng_state.pth"):
        assert name in meta["files"]

    assert reference_run.wait(timeout=300) == 0, (tmp_path / "ref.log").read_text()[-4000:]
    elastic, reference = _weights(job / "model"), _weights(tmp_path / "ref")
    assert elastic.keys() == reference.keys()
    worst = max(float((elastic[k] - reference[k]).abs().max()) for k in reference)
    assert worst < 2e-3, worst


@pytest.mark.slow
def test_a_finished_train_call_is_restored_not_trained_again(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    job, markers = tmp_path / "job", tmp_path / "markers"
    markers.mkdir()
    proc = start(
        job, "--gpus", "0", "--simulated", "--", str(SCRIPTS / "hf_after_train.py"), str(markers)
    )
    trained = markers / "trained"
    wait_for(trained.exists, timeout=180, proc=proc, what="the end of train()")
    # the script is past train(), waiting: the stop finds no training in flight
    res = cli("resize", "--job-dir", str(job), "--gpus", "0,1")
    assert res.returncode == 0, res.stderr
    wait_for(
        lambda: len(trained.read_text().splitlines()) == 2,
        timeout=180,
        proc=proc,
        what="train() of the second generation",
    )
    (markers / "go").touch()
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    # 64 samples, global batch 8: 8 steps, each trained once; the second train() returned the
    # first one's result without a step
    assert [int(s) for s in (markers / "steps").read_text().split()] == list(range(1, 9))
    first, second = trained.read_text().splitlines()
    assert first == second and first.startswith("8 ")
    log = (job / "trainer.log").read_text()
    assert "stopping for the sidecar (no training step in flight" in log
    assert "train call 0 finished before the restart: restored from ckpt-00000001" in log
    assert status(job)["generation"] == 2
    assert {r["generation"] for r in progress(job)} == {1}
    # the final model is the one the finished call checkpointed, exactly
    saved = _weights(job / "checkpoints" / "ckpt-00000001")
    final = _weights(job / "model")
    assert all(bool((saved[k] == final[k]).all()) for k in saved)


@pytest.mark.slow
def test_keep_per_replica_scales_the_learning_rate_and_says_what_max_steps_means(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from elastic_gpu_sidecar.jobdir import JobDir
    from elastic_gpu_sidecar.trainer.adapter import TrainerContext
    from elastic_gpu_sidecar.trainer.hf.runtime import Runtime
    from elastic_gpu_sidecar.trainer.stopsignal import StopRequest

    monkeypatch.setenv("WORLD_SIZE", "4")
    config = {"batch_policy": "keep-per-replica", "reference_replicas": 2, "epochs": 2}
    job = JobDir(tmp_path)
    rt = Runtime(TrainerContext(job, config, 1, ["0", "1", "2", "3"], True, StopRequest()), 0.0)

    def arguments():
        return SimpleNamespace(
            per_device_train_batch_size=8,
            gradient_accumulation_steps=1,
            learning_rate=0.01,
            max_steps=100,
            num_train_epochs=3.0,
        )

    args = arguments()
    rt.apply_batch_policy(args, own_optimizer=False)
    assert (args.per_device_train_batch_size, args.learning_rate) == (8, 0.02)
    assert args.num_train_epochs == 2
    rt.apply_batch_policy(args, own_optimizer=False)  # the same arguments for another Trainer
    assert args.learning_rate == 0.02
    out = capsys.readouterr().out
    assert (
        "max_steps=100 counts optimizer steps as the Trainer does: at global batch 32 instead "
        "of the script's 16, each of them trains 2 x the samples"
    ) in out
    assert (
        "num_train_epochs=2 (the job's --epochs); the script's max_steps=100 overrides it, as "
        "in the Trainer"
    ) in out
    assert rt.note is None

    mine = arguments()
    rt.apply_batch_policy(mine, own_optimizer=True)
    assert mine.learning_rate == 0.01
    assert rt.note == "learning rate not scaled: the script passes its own optimizer"
    rt.writer.close()
