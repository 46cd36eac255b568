"""Two frameworks under one scheduler, live: a Keras job and a PyTorch Lightning job share the
4 simulated GPUs of a real Jupyter server, and the scheduler resizes both of them (the Keras
job shrinks for the Lightning one, which grows once the Keras job is done). Real sidecars,
real trainers: TensorFlow in one process, Lightning as one DDP rank per GPU.

Each script trains until the end of the epoch in which the test drops its stop file: which job
ends first is the test's to say, not a race between two trainers' speeds on a busy machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apikit import api, until
from needs import module

module("lightning", "pip install -e '.[torch]'")

pytestmark = pytest.mark.slow

#: Epochs either script is declared to train; the test stops each well before.
EPOCHS = 1000


def keras_script(stop: Path) -> str:
    return f"""
import os
import numpy as np
import keras


class StopWhenTold(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if os.path.exists({str(stop)!r}):
            self.model.stop_training = True


rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 16)).astype("float32")
y = (x @ rng.normal(size=(16, 1))).astype("float32")
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=32, epochs={EPOCHS}, verbose=0, callbacks=[StopWhenTold()])
"""


def lightning_script(stop: Path) -> str:
    return f"""
import os
import torch
import lightning as L
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), 1e-3)


class StopWhenTold(L.Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        # one answer for every rank, or the ranks would part ways at the next collective
        told = os.path.exists({str(stop)!r})
        if trainer.strategy.reduce_boolean_decision(told, all=False):
            trainer.should_stop = True


L.seed_everything(0)
g = torch.Generator().manual_seed(0)
x = torch.randn(4096, 16, generator=g)
y = x @ torch.randn(16, 1, generator=g)
loader = DataLoader(TensorDataset(x, y), batch_size=32)
trainer = L.Trainer(max_epochs={EPOCHS}, enable_progress_bar=False, logger=False,
                    enable_checkpointing=False, enable_model_summary=False,
                    callbacks=[StopWhenTold()])
trainer.fit(Regression(), loader)
"""


def records(job: dict) -> list[dict]:
    path = Path(job["job_dir"]) / "progress.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def replica_path(job: dict) -> list[int]:
    """The replica counts the trainer itself reported, in order, without repeats."""
    out: list[int] = []
    for r in records(job):
        if r.get("replicas") and (not out or out[-1] != r["replicas"]):
            out.append(r["replicas"])
    return out


async def test_a_keras_job_and_a_lightning_job_share_the_gpus_and_are_both_resized(
    jp_fetch, tmp_path
):
    async def on(job_id, *counts, states=("running",)):
        job = await api(jp_fetch, f"jobs/{job_id}")
        if job["state"] in ("failed", "cancelled"):
            raise AssertionError(f"{job['name']} ended: {job['error']}")
        replicas = (job["progress"] or {}).get("replicas")
        return job if job["state"] in states and (not counts or replicas in counts) else None

    keras = await api(
        jp_fetch,
        "jobs",
        "POST",
        {"name": "keras", "script": keras_script(tmp_path / "stop-keras"), "max_gpus": 4},
    )
    assert keras["framework"] == "keras" and keras["elastic"] is True
    await until(lambda: on(keras["id"], 4), 180, "the Keras job on 4 GPUs")

    torch_job = await api(
        jp_fetch,
        "jobs",
        "POST",
        {
            "name": "lightning",
            "script": lightning_script(tmp_path / "stop-lightning"),
            "max_gpus": 4,
        },
    )
    assert torch_job["framework"] == "lightning" and torch_job["elastic"] is True
    shrunk = await until(lambda: on(keras["id"], 1, 2, 3), 180, "the Keras job shrunk")
    n = shrunk["progress"]["replicas"]
    await until(lambda: on(torch_job["id"]), 180, "the Lightning job running")

    (tmp_path / "stop-keras").touch()
    await until(lambda: on(keras["id"], states=("done",)), 300, "the Keras job done")
    await until(lambda: on(torch_job["id"], 4), 300, "the Lightning job grown to 4 GPUs")
    (tmp_path / "stop-lightning").touch()
    done = await until(lambda: on(torch_job["id"], states=("done",)), 300, "Lightning done")

    keras_done = await api(jp_fetch, f"jobs/{keras['id']}")
    keras_path = replica_path(keras_done)  # shrunk once or more while both trained
    assert keras_path[0] == 4 and n in keras_path[1:], keras_path
    # the Lightning job started on what the Keras job left and grew when it was done
    lightning_path = replica_path(done)
    told = [e["message"] for e in (await api(jp_fetch, f"jobs/{torch_job['id']}/events"))["events"]]
    assert lightning_path[0] < 4 and lightning_path[-1] == 4, (lightning_path, told)
    # every step of both trained once: the steps each trainer reported only ever grow, to the
    # end of the epoch in which it was told to stop
    for job in (keras_done, done):
        recs = records(job)
        steps = [r["global_step"] for r in recs]
        assert steps == sorted(steps), (job["name"], steps)
        last = recs[-1]  # (not a multiple of 128: on 3 GPUs a batch of 32 makes other epochs)
        assert last.get("epoch_end") and last["step_in_epoch"] == last["steps_per_epoch"], last
        events = (await api(jp_fetch, f"jobs/{job['id']}/events"))["events"]
        assert any(e["kind"] == "resize" for e in events), job["name"]
