"""End to end with Keras 3 on JAX and on PyTorch (``KERAS_BACKEND``), real frameworks.

On JAX the job is data parallel over its grant (simulated GPUs: JAX CPU devices) and is
resized 2 -> 4 -> 1 mid-epoch; on PyTorch it trains on one device of any grant, and a resize
still stops it at the next step and resumes it at the exact step. The proofs are the script's
own callback (every batch it saw, with the optimizer's iteration counter), the replica counts
the trainer reported, and the optimizer's iterations when the script ends.
"""

from __future__ import annotations

import json
import re

import pytest
from elastic_gpu_sidecar import protocol as P
from needs import module
from sidecar_helpers import ENV, SCRIPTS, finish, progress, run_resized, start, status

module("jax", "pip install -e '.[jax]'")
module("torch", "pip install -e '.[torch]'")

pytestmark = pytest.mark.slow
STEPS = 150  # batches per epoch of keras3_recorder.py


def run(tmp_path, backend: str, plan, *script_args: str):
    job, events = tmp_path / "job", tmp_path / "events.jsonl"
    env = dict(ENV, KERAS_BACKEND=backend)
    code, err = run_resized(
        job, "keras3_recorder.py", [str(events), *script_args], plan=plan, env=env
    )
    assert code == P.EXIT_DONE, err
    seen = [json.loads(line) for line in events.read_text().splitlines()]
    return job, seen, (job / "trainer.log").read_text()


def check_every_step_once(job, seen, log, epochs: int) -> None:
    # each batch of each epoch ended exactly once, in order, across every generation
    assert [(e, b) for e, b, _ in seen] == [(e, b) for e in range(epochs) for b in range(STEPS)]
    # the optimizer took one step per batch: none lost to a restart, none taken twice
    assert [i for _, _, i in seen] == list(range(1, epochs * STEPS + 1))
    assert f"optimizer iterations {epochs * STEPS}" in log
    assert progress(job)[-1]["global_step"] == epochs * STEPS
    offsets = [int(b) for b in re.findall(r"resuming at epoch \d+, batch (\d+)", log)]
    assert offsets and all(offsets), "a resize did not land mid-epoch"
    assert "tensorflow imported: False" in log


def replicas_by_generation(job) -> dict[int, set[int]]:
    by_gen: dict[int, set[int]] = {}
    for r in progress(job):
        by_gen.setdefault(r["generation"], set()).add(r["replicas"])
    return by_gen


def test_jax_data_parallel_resized_keeps_every_step(tmp_path):
    plan = [("0,1", None), ("0,1,2,3", 100), ("0", 100)]
    job, seen, log = run(tmp_path, "jax", plan, "--hold", "100", "100")
    check_every_step_once(job, seen, log, 3)
    assert replicas_by_generation(job) == {1: {2}, 2: {4}, 3: {1}}
    assert "DataParallel over 4 simulated GPUs (JAX CPU devices)" in log
    assert "batch policy keep-global: global batch 32 -> per-replica 8 on 4 replicas" in log
    assert [(r["from_gpus"], r["to_gpus"]) for r in status(job)["resizes"]] == [
        (["0", "1"], ["0", "1", "2", "3"]),
        (["0", "1", "2", "3"], ["0"]),
    ]


def test_torch_trains_on_one_device_and_resumes_at_the_exact_step(tmp_path):
    plan = [("0,1", None), ("0", 100)]
    job, seen, log = run(tmp_path, "torch", plan, "--epochs", "2", "--hold", "100")
    check_every_step_once(job, seen, log, 2)
    assert replicas_by_generation(job) == {1: {1}, 2: {1}}
    why = "Keras 3 has no multi-device data parallel for the torch backend"
    assert log.count(why) == 2
    assert "trains on one device of the grant (simulated GPU 0, cpu)" in log
    # on a grant of two, every record says that one of them is unused
    notes = {r.get("note") for r in progress(job) if r["generation"] == 1}
    assert notes == {
        "training on 1 of the 2 granted devices (Keras on PyTorch: see the trainer log)"
    }
    assert all("note" not in r for r in progress(job) if r["generation"] == 2)


def test_jax_refuses_batches_that_do_not_split_into_equal_shards():
    from elastic_gpu_sidecar.trainer.keras.jaxbackend import JaxBackend

    jax = JaxBackend()
    for ok in [(32, 32, 4), (32, 16, 4), (30, 7, 1)]:
        jax.check_split(*ok)
    with pytest.raises(RuntimeError, match="a batch of 32 samples does not split"):
        jax.check_split(32, 32, 3)
    with pytest.raises(RuntimeError, match="a batch of 6 samples does not split"):
        jax.check_split(32, 6, 4)


def test_the_backend_is_read_as_keras_reads_it_without_importing_it(tmp_path, monkeypatch):
    from elastic_gpu_sidecar.trainer.keras import backends

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    assert backends.configured() == "tensorflow"  # no keras.json: Keras' default
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "torch"}))
    assert backends.configured() == "torch"
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert backends.configured() == "jax"


def test_a_backend_the_trainer_cannot_serve_fails_once_saying_which_it_can(tmp_path):
    """A setting of the job's, not a fault of the machine: not retried."""
    job = tmp_path / "job"
    env = dict(ENV, KERAS_BACKEND="numpy")
    script = str(SCRIPTS / "keras3_recorder.py")
    proc = start(job, "--gpus", "0", "--simulated", "--", script, str(tmp_path / "e"), env=env)
    code, _, err = finish(proc)
    assert code == P.EXIT_FAILED and "KERAS_BACKEND='numpy'" in err
    st = status(job)
    assert st["state"] == "failed" and st["restarts"] == 0
    assert "KERAS_BACKEND='numpy'" in st["error"]["message"]
    assert "jax" in st["error"]["message"] and "tensorflow" in st["error"]["message"]
