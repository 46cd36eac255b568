"""End to end with real PyTorch Lightning on simulated GPUs (one CPU process per rank, gloo).

An unmodified Lightning script is resized 2 -> 4 -> 1 replicas mid-epoch. The proofs: the
script's own callback saw every (global step, batch index) of an uninterrupted run once, the
trainer reported each replica count, and the final weights are those of an uninterrupted run
with the same global batch.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from elastic_gpu_sidecar import protocol as P
from needs import module
from sidecar_helpers import ENV, SCRIPTS, finish, progress, run_resized, start, status

module("lightning", "pip install -e '.[torch]'")

SCRIPT = "lightning_regression.py"
STEPS_PER_EPOCH = 2048 // 8  # the script's samples / the global batch (4 per device x 2)
EPOCHS = 2


def steps_seen(out) -> tuple[list[tuple[int, int]], list[float]]:
    """(global step, batch index) of each step the script's callback saw, and its loss."""
    rows = [line.split() for line in (out / "steps.txt").read_text().splitlines()]
    return [(int(s), int(b)) for s, b, _ in rows], [float(loss) for _, _, loss in rows]


def final_state(job):
    """The final checkpoint's weights, global step and logged-step count."""
    import torch

    state = torch.load(job / "model.ckpt", map_location="cpu", weights_only=False)
    logged = state["loops"]["fit_loop"]["epoch_loop.state_dict"]["_batches_that_stepped"]
    return state["state_dict"], state["global_step"], logged


@pytest.mark.slow
def test_resize_keeps_every_step_and_the_weights(tmp_path):
    import torch

    # the uninterrupted run: one replica with the resized run's global batch (8)
    ref_job, ref_out = tmp_path / "ref", tmp_path / "ref-out"
    ref_out.mkdir()
    proc = start(
        ref_job, "--gpus", "0", "--simulated", "--", str(SCRIPTS / SCRIPT), str(ref_out), "8"
    )
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err

    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    plan = [("0,1", None), ("0,1,2,3", 40), ("0", 40)]
    code, err = run_resized(
        job, SCRIPT, (str(out), "4"), plan=plan, extra=("--checkpoint-interval", "1")
    )
    assert code == P.EXIT_DONE, err

    # every step once, numbered as in the uninterrupted run
    total = STEPS_PER_EPOCH * EPOCHS
    expected = [(s + 1, s % STEPS_PER_EPOCH) for s in range(total)]
    ref_steps, ref_losses = steps_seen(ref_out)
    steps, losses = steps_seen(out)
    assert ref_steps == expected
    assert steps == expected
    # each step trained on the same samples as in the uninterrupted run: the same loss over
    # the global batch, up to float rounding (a wrong batch is off by far more)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-4, atol=1e-6)
    # the trainer itself reported 2, 4 and 1 replicas, one count per generation
    by_gen: dict[int, set] = {}
    for r in progress(job):
        by_gen.setdefault(r["generation"], set()).add(r["replicas"])
    assert by_gen == {1: {2}, 2: {4}, 3: {1}}
    st = status(job)
    assert st["state"] == "done" and st["restarts"] == 0 and len(st["resizes"]) == 2
    log = (job / "trainer.log").read_text()
    batches = [int(b) for b in re.findall(r"resuming at epoch \d+, batch (\d+)", log)]
    assert len(batches) == 2 and any(batches), "no resize landed mid-epoch"
    assert "global batch 8 -> per-device 2 on 4 replicas" in log
    assert "global batch 8 -> per-device 8 on 1 replicas" in log
    assert "the script asks for Trainer(devices=8); the job's grant decides" in log
    assert "dataloader is not resumable" not in log  # Lightning's warning: this one is
    assert "(periodic)" in log  # periodic checkpoints were written with every rank taking part

    # the same global batches in the same order: the same weights, up to the order in which
    # the replicas' gradients are summed (float addition is not associative)
    weights, step, logged = final_state(job)
    ref_weights, ref_step, ref_logged = final_state(ref_job)
    assert step == ref_step == total
    assert logged == ref_logged == total  # the loggers' step too
    assert weights.keys() == ref_weights.keys()
    for name, value in weights.items():
        torch.testing.assert_close(value, ref_weights[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow
def test_keep_per_replica_keeps_the_device_batch_and_scales_the_learning_rate(tmp_path):
    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    code, err = run_resized(
        job,
        SCRIPT,
        (str(out), "4"),
        plan=[("0,1", None), ("0,1,2,3", 40)],
        extra=("--batch-policy", "keep-per-replica"),
    )
    assert code == P.EXIT_DONE, err
    log = (job / "trainer.log").read_text()
    assert (
        "keep-per-replica: global batch 16 -> per-device 4 on 4 replicas, learning rate x2" in log
    )
    assert re.search(
        r"the global batch changed \(8 -> 16\): the rest of the epoch is numbered", log
    )
    steps, _ = steps_seen(out)
    assert [s for s, _ in steps] == list(range(1, len(steps) + 1))  # no step lost or repeated
    recs = progress(job)
    assert {r["batch_size"] for r in recs if r["generation"] == 1} == {8}
    assert {r["batch_size"] for r in recs if r["generation"] == 2} == {16}
    # every sample of both epochs trained once, whatever the batch of each step
    assert recs[-1]["samples"] == EPOCHS * 2048 and recs[-1]["epoch_end"]
    import torch

    state = torch.load(job / "model.ckpt", map_location="cpu", weights_only=False)
    assert state["optimizer_states"][0]["param_groups"][0]["initial_lr"] == pytest.approx(0.02)


@pytest.mark.slow
def test_a_fit_that_finished_before_the_restart_gets_its_weights_back(tmp_path):
    """Two fit calls on one model; the resize lands in the second. The restarted script's
    first fit does not train again, and returns the weights it had trained."""
    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    # fit 0 trains 32 steps, fit 1 3 x 128: a stop after step 60 comes in fit 1
    code, err = run_resized(
        job, "lightning_two_fits.py", (str(out),), plan=[("0,1", None), ("0", 60)]
    )
    assert code == P.EXIT_DONE, err
    lines = [line.split() for line in (out / "steps.txt").read_text().splitlines()]
    steps = [(int(f), int(s), int(b)) for f, s, b in (r for r in lines if r[0] != "after")]
    assert steps == [(0, s, s - 1) for s in range(1, 33)] + [
        (1, s, (s - 1) % 128) for s in range(1, 385)
    ]
    after = [r[1:] for r in lines if r[0] == "after"]
    # each generation ran fit 0's line; the second one's weights are those fit 0 trained
    assert [a[0] for a in after] == ["0", "0", "1"] and after[0] == after[1]
    log = (job / "trainer.log").read_text()
    assert re.search(r"fit 0 finished before the restart: its weights restored from ckpt-", log)
    assert re.search(r"fit 1: resuming at epoch \d, batch \d+, global step \d+", log)


@pytest.mark.slow
def test_the_grant_decides_the_devices(tmp_path):
    """A Trainer built in a rank of two with devices=8 and ddp_spawn gets the grant's two
    CPU devices and DDP over gloo, and the log says so."""
    code = """
import lightning.pytorch as pl
from elastic_gpu_sidecar.trainer.lightning.install import install
from elastic_gpu_sidecar.trainer.lightning.runtime import Runtime
from elastic_gpu_sidecar.trainer.adapter import TrainerContext
from elastic_gpu_sidecar.trainer.stopsignal import StopRequest
from elastic_gpu_sidecar.jobdir import JobDir
import sys
job = JobDir(sys.argv[1])
rt = Runtime(TrainerContext(job, {}, 1, ["0", "1"], True, StopRequest()))
install(rt, "lightning.pytorch")
t = pl.Trainer(devices=8, strategy="ddp_spawn", accelerator="gpu", logger=False)
print("RESULT", type(t.accelerator).__name__, t.num_devices, type(t.strategy).__name__,
      t.strategy._process_group_backend, t.world_size, t.global_rank)
"""
    env = dict(
        ENV,
        ELASTIC_GPU_SIMULATED="1",
        ELASTIC_GPU_RANK="0",
        ELASTIC_GPU_SIDECAR_PID=str(os.getpid()),
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="2",
        CUDA_VISIBLE_DEVICES="",
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "RESULT CPUAccelerator 2 DDPStrategy gloo 2 0" in res.stdout
    assert (
        "the script asks for Trainer(accelerator='gpu', devices=8, strategy='ddp_spawn'); the "
        "job's grant decides: accelerator='cpu', devices=2, num_nodes=1, DDP over gloo"
    ) in res.stdout


# -- units: no Lightning, no processes ------------------------------------------------------------
def global_batches(n: int, global_batch: int, replicas: int, *, epoch=0, skip=0, shuffle=True):
    """The samples of each step across ``replicas`` ranks reading ``ElasticSampler``."""
    pytest.importorskip("torch")
    from elastic_gpu_sidecar.trainer.lightning.batching import ElasticSampler
    from torch.utils.data import BatchSampler, DistributedSampler

    per_rank = []
    for r in range(replicas):
        base = DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=shuffle, seed=3)
        base.set_epoch(epoch)
        sampler = ElasticSampler(base, skip_epoch=epoch, skip=skip)
        per_rank.append(list(BatchSampler(sampler, global_batch // replicas, drop_last=False)))
    assert len({len(b) for b in per_rank}) == 1, "every rank must run the same number of steps"
    return [sorted(i for rank in step for i in rank) for step in zip(*per_rank, strict=True)]


@pytest.mark.parametrize("shuffle", [True, False])
def test_elastic_sampler_reads_distributed_sampler_order(shuffle):
    pytest.importorskip("torch")
    from elastic_gpu_sidecar.trainer.lightning.batching import ElasticSampler
    from torch.utils.data import DistributedSampler

    for n, w in [(100, 1), (100, 4), (98, 4), (7, 3)]:
        for r in range(w):
            base = DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=shuffle, seed=5)
            base.set_epoch(2)
            assert list(ElasticSampler(base)) == list(base)
            assert len(ElasticSampler(base)) == len(base)


def test_a_resumed_epoch_trains_the_remaining_global_batches_on_any_count():
    whole = global_batches(96, 8, 2, epoch=1)
    assert len(whole) == 12 and global_batches(96, 8, 1, epoch=1) == whole
    for replicas in (1, 2, 4, 8):
        # 5 steps of 8 samples trained before the restart
        assert global_batches(96, 8, replicas, epoch=1, skip=40) == whole[5:], replicas
    # the skip is for the interrupted epoch only, and only once
    pytest.importorskip("torch")
    from elastic_gpu_sidecar.trainer.lightning.batching import ElasticSampler
    from torch.utils.data import DistributedSampler

    base = DistributedSampler(range(96), num_replicas=2, rank=0, seed=3)
    sampler = ElasticSampler(base, skip_epoch=1, skip=40)
    assert sampler.remaining() == 48  # epoch 0 is read whole
    sampler.set_epoch(1)
    assert sampler.remaining() == 28 and len(list(sampler)) == 28
    assert len(list(sampler)) == 48


def test_batch_plan_for_each_policy():
    from elastic_gpu_sidecar import protocol as P
    from elastic_gpu_sidecar.trainer.lightning.batching import plan

    keep, per = P.BatchPolicy.KEEP_GLOBAL, P.BatchPolicy.KEEP_PER_REPLICA
    p = plan(4, replicas=4, reference=2, policy=keep, max_steps=None)
    assert (p.per_device, p.global_batch, p.lr_scale, p.notes) == (2, 8, 1.0, [])
    p = plan(4, replicas=3, reference=2, policy=keep, max_steps=100)
    assert (p.per_device, p.global_batch) == (3, 9)
    assert "does not divide over 3 replicas" in p.notes[0] and "max_steps=100" in p.notes[0]
    p = plan(4, replicas=4, reference=2, policy=per, max_steps=None)
    assert (p.per_device, p.global_batch, p.lr_scale, p.notes) == (4, 16, 2.0, [])
    # a step count means nothing once the global batch changes: keep-global instead, said so
    p = plan(4, replicas=4, reference=2, policy=per, max_steps=100)
    assert (p.per_device, p.global_batch, p.lr_scale) == (2, 8, 1.0)
    assert "max_steps=100" in p.notes[0]


def test_grant_kwargs_say_what_the_grant_overrides():
    from elastic_gpu_sidecar.trainer.lightning.grant import grant_kwargs

    def grant(**kwargs):
        return grant_kwargs(
            kwargs, world=2, simulated=True, make_strategy=lambda b: ("ddp", b), backend="gloo"
        )

    out, said = grant(devices=8, max_epochs=3)
    assert out == dict(
        devices=2, max_epochs=3, accelerator="cpu", num_nodes=1, strategy=("ddp", "gloo")
    )
    assert said == [
        "the script asks for Trainer(devices=8); the job's grant decides: accelerator='cpu', "
        "devices=2, num_nodes=1, DDP over gloo"
    ]
    assert grant(devices="auto", strategy="ddp", accelerator="cpu")[1] == []
    assert grant(devices=2)[1] == []
    assert "strategy='fsdp'" in grant(strategy="fsdp")[1][0]
