"""What the script's own callbacks see when its job is resized mid-epoch (real TensorFlow,
simulated GPUs, the real sidecar): the (epoch, batch) sequence of an unresized run.

The script (scripts/batch_recorder.py) writes down every callback event; it holds training
at each resize point until the sidecar is resizing, so every resize lands at the step the
test chose (or the next one), on any machine.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest
from elastic_gpu_sidecar import protocol as P
from sidecar_helpers import progress, run_resized, status

pytestmark = pytest.mark.slow
STEPS = 150  # batches of 32 per epoch in batch_recorder.py (4800 samples)


def events(path) -> list[list]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def resumes(job) -> list[tuple[int, int]]:
    """(epoch, batch in this generation's steps) of every mid-fit resume, from trainer.log."""
    log = (job / "trainer.log").read_text()
    return [
        (int(e) - 1, int(b)) for e, b in re.findall(r"resuming at epoch (\d+), batch (\d+)", log)
    ]


def run(tmp_path, plan, *script_args, extra=()):
    """``sidecar_helpers.run_resized`` with exact resize points: generation g is resized once
    it has trained ``plan[g][1]`` steps, where the script holds until the resize comes."""
    job, path = tmp_path / "job", tmp_path / "events.jsonl"
    holds = [str(steps) for _, steps in plan[1:]]
    args = [str(path), *script_args, "--hold", *holds]
    code, err = run_resized(job, "batch_recorder.py", args, plan=plan, extra=extra)
    assert code == P.EXIT_DONE, err
    replicas = [len(gpus.split(",")) for gpus, _ in plan]
    assert [r["replicas"] for r in progress(job) if r.get("first")] == replicas
    assert status(job)["restarts"] == 0
    return job, events(path)


def test_keep_global_callbacks_see_every_batch_once_in_order(tmp_path):
    # 2 -> 4 -> 1 replicas: the first resize lands in epoch 0, the second in epoch 1
    plan = [("0,1", None), ("0,1,2,3", 40), ("0", 150)]
    job, ev = run(tmp_path, plan, "--verbose", "1")
    unresized = [[e, b] for e in range(3) for b in range(STEPS)]
    ends = [x for x in ev if x[0] == "end"]
    assert [x[1:3] for x in ends] == unresized  # every (epoch, batch) once, in order
    assert all(isinstance(x[2], int) for x in ends)
    # a stop lands before any callback hears of the step: begins match too
    assert [x[1:] for x in ev if x[0] == "begin"] == unresized
    # each generation ran on its own replica count; params are the whole fit's
    assert ends[0][3] == 2 and ends[-1][3] == 1 and {x[3] for x in ends} == {1, 2, 4}
    assert {(x[4], x[5]) for x in ends} == {(STEPS, 3)}
    assert [x[1:] for x in ev if x[0] == "train_begin"] == [[3, STEPS]] * 3  # one per process
    assert [x[1] for x in ev if x[0] == "epoch_end"] == [0, 1, 2]
    assert [x for x in ev if x[0] == "train_end"] == [["train_end"]]
    # the resumed epoch begins again in the new process (per-epoch set-up is redone) ...
    begins = [x[1] for x in ev if x[0] == "epoch_begin"]
    assert sorted(set(begins)) == [0, 1, 2] and begins == sorted(begins)
    # ... and both resizes landed mid-epoch: epoch 0, then epoch 1
    mid = resumes(job)
    assert [e for e, _ in mid] == [0, 1] and all(b > 0 for _, b in mid), mid
    # the resumed epoch's progress bar continues where the epoch stands
    log = (job / "trainer.log").read_text()
    for epoch, batch in mid:
        after = log[log.index(f"resuming at epoch {epoch + 1}, batch {batch}") :]
        assert re.search(rf"(\d+)/{STEPS}\b", after).group(1) == str(batch + 1)


def test_keep_per_replica_numbers_batches_in_the_scripts_batch(tmp_path):
    # reference: 2 replicas, batch 32. On 4 replicas a step is 64 samples (two of the script's
    # batches), on 1 replica 16 samples (half a batch: indices 40, 40.5, 41, ...)
    plan = [("0,1", None), ("0,1,2,3", 40), ("0", 60)]
    job, ev = run(tmp_path, plan, "--epochs", "2", extra=("--batch-policy", "keep-per-replica"))
    ends = [x for x in ev if x[0] == "end"]
    assert {(x[4], x[5]) for x in ends} == {(STEPS, 2)}  # the script's numbering
    assert [x[1:] for x in ev if x[0] == "begin"] == [x[1:3] for x in ends]
    for epoch in (0, 1):
        seq = [(x[2], x[3]) for x in ends if x[1] == epoch]
        assert seq[0][0] == 0
        # each step starts where the previous one ended: index = samples before it / 32
        for (batch, replicas), (following, _) in itertools.pairwise(seq):
            assert following - batch == replicas / 2, (epoch, batch, following)
        last, replicas = seq[-1]
        assert last < STEPS <= last + replicas / 2  # the epoch ends with its last sample
        # whole positions are ints, others are floats (only on 1 replica: 16-sample steps)
        for batch, replicas in seq:
            assert isinstance(batch, int) == (batch == int(batch)), batch
            assert batch == int(batch) or replicas == 1
    assert any(isinstance(x[2], float) for x in ends)
    assert len(ends) == progress(job)[-1]["global_step"]  # one call per optimizer step
    assert [x[1] for x in ev if x[0] == "epoch_end"] == [0, 1]
    assert any(b > 0 for _, b in resumes(job))


def test_replayed_batches_are_seen_again_with_their_own_index(tmp_path):
    # a generator cannot be skipped: the interrupted epoch is trained again from its start,
    # and callbacks see those batches again, as often as the optimizer trains them
    plan = [("0,1", None), ("0,1,2,3", 40)]
    job, ev = run(tmp_path, plan, "--input", "generator", "--epochs", "2")
    first = next(r for r in progress(job) if r.get("first") and r["generation"] == 2)
    replayed = first["replayed"]
    assert 0 < replayed < STEPS
    unresized = [[e, b] for e in range(2) for b in range(STEPS)]
    ends = [x[1:] for x in ev if x[0] == "end"]
    stopped = sum(1 for x in ends if x[2] == 2)  # steps trained before the resize
    assert stopped % STEPS == replayed  # the stop landed mid-epoch; that part runs again
    redo = stopped - replayed
    assert [x[:2] for x in ends] == unresized[:stopped] + unresized[redo:]
    assert {(x[3], x[4]) for x in ends} == {(STEPS, 2)}
    assert len(ends) == progress(job)[-1]["global_step"]
    assert [x[1] for x in ev if x[0] == "epoch_end"] == [0, 1]


def test_early_stop_in_the_resumed_epoch_still_ends_training_once(tmp_path):
    # the resumed fit runs as two Keras calls; a callback that stops training at the end of
    # the resumed epoch ends the first: the user's callbacks must still see their train end
    plan = [("0,1", None), ("0", 40)]
    _, ev = run(tmp_path, plan, "--stop-after-epoch", "0")
    assert [x[1:3] for x in ev if x[0] == "end"] == [[0, b] for b in range(STEPS)]
    assert [x[1] for x in ev if x[0] == "epoch_end"] == [0]
    assert [x for x in ev if x[0] == "train_end"] == [["train_end"]]


# -- the plan and numbering of resumed inputs, in process (real tf.data, no sidecar) ----------
def plan_for(x, *, epoch, batch, samples, replicas, policy="keep-per-replica", spe=None):
    from elastic_gpu_sidecar.trainer.keras import inputs

    args = dict(
        x=x,
        y=None,
        batch_size=None,
        sample_weight=None,
        steps_per_epoch=spe,
        validation_data=None,
        validation_split=0.0,
        validation_batch_size=None,
        shuffle=False,
    )
    position = dict(start_epoch=epoch, start_batch=batch, start_samples=samples)
    return inputs.plan(
        args, **position, epochs=3, replicas=replicas, reference_replicas=2, policy=policy, seed=0
    )


def numbering_for(plan, epoch):
    from elastic_gpu_sidecar.trainer.keras.callback import Numbering

    return Numbering.of(plan, epoch, 3)


def samples_of(segment) -> list[int]:
    import numpy as np

    batches = segment["x"].take(segment["steps_per_epoch"])
    return [int(i) for b in batches for i in np.asarray(b)]


def test_infinite_dataset_with_steps_per_epoch_resumes_in_samples():
    tf = pytest.importorskip("tensorflow")
    # 100 batches of 32 per epoch from an endless stream: sample i of epoch e is e*3200 + i
    ds = tf.data.Dataset.range(10**9).batch(32).repeat()
    # keep-per-replica, 2 -> 4 replicas at epoch 1, after 40 batches of 32: steps of 64
    plan = plan_for(ds, epoch=1, batch=40, samples=1280, replicas=4, spe=100)
    rest = plan.segments[0]
    assert (rest["steps_per_epoch"], plan.script_steps, plan.global_batch) == (30, 100, 64)
    assert samples_of(rest) == list(range(3200 + 1280, 6400))
    n = numbering_for(plan, 1)
    assert [n.index(1, j) for j in (0, 1, 29)] == [40, 42, 98]
    assert n.index(2, 3) == 6  # later epochs start at 0, in steps of two batches
    assert n.params({"steps": 30, "epochs": 2, "verbose": 1}) == {
        "steps": 100, "epochs": 3, "verbose": 1
    }  # fmt: skip
    # 4 -> 2 replicas after 10 more steps: the checkpoint's batch (30) counts steps of 64,
    # the samples (1920) are what locate the rest of the epoch: 40 steps of 32, not 70
    plan = plan_for(ds, epoch=1, batch=30, samples=1920, replicas=2, spe=100)
    rest = plan.segments[0]
    assert rest["steps_per_epoch"] == 40
    assert samples_of(rest) == list(range(3200 + 1920, 6400))
    assert [numbering_for(plan, 1).index(1, j) for j in (0, 39)] == [60, 99]
    # 2 -> 1 replica: steps of 16 samples, half a batch of the script's numbering
    plan = plan_for(ds, epoch=1, batch=60, samples=1920, replicas=1, spe=100)
    assert plan.segments[0]["steps_per_epoch"] == 80
    assert [numbering_for(plan, 1).index(1, j) for j in (0, 1, 79)] == [60, 60.5, 99.5]
    assert isinstance(numbering_for(plan, 1).index(1, 2), int)


def test_numbering_of_replayed_boundary_and_skipped_resumes():
    tf = pytest.importorskip("tensorflow")
    # a finite dataset with steps_per_epoch is replayed from the epoch's start: no offset
    ds = tf.data.Dataset.range(3200).batch(32)
    plan = plan_for(ds, epoch=1, batch=40, samples=1280, replicas=2, spe=50)
    assert plan.replayed == 40 and len(plan.segments) == 1
    n = numbering_for(plan, 1)
    assert n.identity and n.index(1, 0) == 0 and plan.script_steps == 50
    # a resume at an epoch boundary: Keras' numbering is already right
    plan = plan_for(ds, epoch=2, batch=0, samples=0, replicas=2, policy="keep-global")
    assert numbering_for(plan, 2).identity and plan.script_steps == 100
    # keep-global, mid-epoch: the offset is the batches already trained
    plan = plan_for(ds, epoch=1, batch=40, samples=1280, replicas=4, policy="keep-global")
    n = numbering_for(plan, 1)
    assert not n.identity and [n.index(1, 0), n.index(1, 59), n.index(2, 0)] == [40, 99, 0]
