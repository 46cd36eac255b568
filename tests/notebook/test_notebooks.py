"""Real notebooks, executed with nbclient against a real Jupyter server with the extension.

Each training cell's output is the job MIME type (the lab extension draws the card; nothing in
the kernel follows the job) with the job's text beside it, which is what this saved notebook
shows: the final state once ``job.wait()`` has seen the end. The demo notebook runs in
tests/binder, as Binder starts it (once: it is the longest notebook run of the suite).
"""

from __future__ import annotations

import os
import re

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from needs import module
from servers import free_port

from jupyter_elastic_gpu.notebook.job import JOB_MIME_TYPE

pytestmark = pytest.mark.slow

JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

DATA = """\
import numpy as np
rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 8)).astype("float32")
y = (x @ rng.normal(size=(8, 1))).astype("float32")
"""

TRAIN = """\
import keras
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=32, epochs=3, verbose=0)
"""


def run(nb, server, tmp_path, allow_errors=False) -> None:
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    env = {**os.environ, "ELASTIC_GPU_URL": server.api_url, "ELASTIC_GPU_TOKEN": server.token}
    client.execute(env=env)


def job_output(cell) -> tuple[str, str]:
    """(job id, text) of a training cell's one rich output: the job MIME type and its text,
    nothing else (no widget model that JupyterLab would prefer to the card)."""
    rich = [o for o in cell.outputs if o.output_type in ("display_data", "execute_result")]
    assert len(rich) == 1, rich
    data = rich[0]["data"]
    assert set(data) == {JOB_MIME_TYPE, "text/plain"}, data
    assert set(data[JOB_MIME_TYPE]) == {"job_id"} and JOB_ID.fullmatch(
        data[JOB_MIME_TYPE]["job_id"]
    )
    return data[JOB_MIME_TYPE]["job_id"], data["text/plain"]


def text_of(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "\n".join(parts)


def test_train_wait_load_and_predict(server_process, tmp_path):
    server = server_process(port=free_port())
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext jupyter_elastic_gpu"),
            new_code_cell(DATA),
            new_code_cell(
                "%%elastic_train --name demo --min-gpus 1 --max-gpus 2 --pass x,y --wait\n" + TRAIN
            ),
            new_code_cell(
                "job = _\nmodel = job.load_model()\n"
                "print('prediction', model.predict(x[:4], verbose=0).shape)\n"
                "print('steps', job.history[-1]['global_step'])\nprint('id', job.id)"
            ),
        ]
    )
    run(nb, server, tmp_path)
    out = text_of(nb.cells[3])
    assert "prediction (4, 1)" in out
    assert "steps 192" in out  # 3 epochs x 64 batches: nothing lost, nothing repeated
    # --wait: the card showed while the kernel waited; its text was rewritten at the end.
    job_id, text = job_output(nb.cells[2])
    assert f"id {job_id}" in out
    assert text.startswith(f"demo ({job_id}): done") and "load_model" in text, text


def test_resize_shows_in_the_text_and_bad_input_gets_clear_messages(server_process, tmp_path):
    server = server_process(port=free_port())
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext jupyter_elastic_gpu"),
            new_code_cell(DATA),
            # Long enough (at least 10 minutes) to rank behind a new job of unknown size.
            new_code_cell(
                "%%elastic_train --name big --min-gpus 1 --max-gpus 4 --pass x,y --as big\n"
                "import numpy as np\nx, y = np.tile(x, (8, 1)), np.tile(y, (8, 1))\n"
                + TRAIN.replace("epochs=3", "epochs=400")
            ),
            new_code_cell("big.wait(until='training')"),
            new_code_cell(
                "%%elastic_train --name small --min-gpus 2 --max-gpus 2 --pass x,y --wait\n"
                + TRAIN.replace("epochs=3", "epochs=1")
            ),
            # small held 2 GPUs, so big had shrunk before small ran
            new_code_cell(
                "print('sizes', [len(h['gpus']) for h in big.status()['history']])\n"
                "big.cancel()\nfinal = big.wait()"
            ),
            new_code_cell("%%elastic_train --min-gpus 3 --max-gpus 2\nprint('never')"),
            new_code_cell("%%elastic_train --bogus 1\nprint('never')"),
            new_code_cell("%%elastic_train --min-gpus 64\nprint('never')"),
            new_code_cell("%%elastic_train\nmodel.fit(x, y)"),
            new_code_cell(
                "%%elastic_train --max-gpus 64 --framework keras --as capped\nprint('capped')\n"
            ),
            new_code_cell("print(capped.status()['max_gpus'])\ncapped.cancel()"),
        ]
    )
    run(nb, server, tmp_path, allow_errors=True)
    sizes = text_of(nb.cells[5])
    assert "sizes [4, 2" in sizes, sizes
    # The first job's output ends with how it ended and the GPU counts it had.
    _, big = job_output(nb.cells[2])
    assert ": cancelled" in big.splitlines()[0] and "GPU counts so far: 4 → 2" in big, big
    _, small = job_output(nb.cells[4])
    assert small.startswith("small (") and ": done" in small, small
    errors = [text_of(nb.cells[i]) for i in range(6, 10)]
    assert "UsageError: %%elastic_train: --min-gpus (3) is above --max-gpus (2)" in errors[0]
    assert "UsageError" in errors[1] and "unrecognized arguments: --bogus" in errors[1]
    assert "--min-gpus (64) is more than the 4 GPUs of this server" in errors[2]
    assert (
        "the cell uses x, y from your notebook" in errors[3]
        and "add --pass" in errors[3]
        and "own process" in errors[3]
    )
    assert all(len(e.strip().splitlines()) == 1 for e in errors)
    # A maximum above the server's GPUs is lowered, as the CLI and the REST API do, and said.
    assert "note: --max-gpus 64 lowered to the 4 GPUs of this server" in text_of(nb.cells[10])
    job_output(nb.cells[10])
    assert all(
        JOB_MIME_TYPE not in o.get("data", {}) for i in range(6, 10) for o in nb.cells[i].outputs
    )
    assert text_of(nb.cells[11]).startswith("4")


def test_an_undefined_name_fails_once_with_its_traceback_and_a_hint(server_process, tmp_path):
    server = server_process(port=free_port())
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext jupyter_elastic_gpu"),
            new_code_cell("%%elastic_train --as job\nprint('start')\nundefined_thing + 1"),
            new_code_cell(
                "from jupyter_elastic_gpu.notebook.job import JobFailed\n"
                "try:\n    job.wait()\nexcept JobFailed as e:\n    print(e)\n"
                "print('restarts', job.status()['restarts'])"
            ),
        ]
    )
    run(nb, server, tmp_path)
    out = text_of(nb.cells[2])
    assert "NameError" in out and "undefined_thing" in out
    assert "own process" in out  # the hint
    assert "restarts 0" in out
    # wait() gave the cell's output the failure, as the card shows it
    _, text = job_output(nb.cells[1])
    assert ": failed" in text.splitlines()[0] and "NameError" in text and "own process" in text


TORCH_DATA = """\
import torch
g = torch.Generator().manual_seed(0)
x = torch.randn(1024, 8, generator=g)
y = x @ torch.randn(8, 1, generator=g)
"""

LIGHTNING_CELL = """\
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        xb, yb = batch
        return torch.nn.functional.mse_loss(self.net(xb), yb)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


trainer = L.Trainer(max_epochs=3, logger=False, enable_progress_bar=False)
trainer.fit(Regression(), DataLoader(TensorDataset(x, y), batch_size=32))
"""


def test_a_lightning_cell_trains_like_a_keras_cell(server_process, tmp_path):
    """A cell that defines a LightningModule and calls trainer.fit is a job, --pass included,
    and its model comes back into the kernel given its class."""
    module("lightning", "pip install -e '.[torch]'")
    server = server_process(port=free_port())
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext jupyter_elastic_gpu"),
            new_code_cell(TORCH_DATA),
            new_code_cell(
                "%%elastic_train --name lit --min-gpus 1 --max-gpus 2 --pass x,y --wait\n"
                + LIGHTNING_CELL
            ),
            new_code_cell(
                "job = _\n" + LIGHTNING_CELL.split("trainer =")[0]
                + "model = job.load_model(Regression)\n"
                "print('prediction', tuple(model.net(x[:4]).shape))\n"
                "print('steps', job.history[-1]['global_step'])\nprint('id', job.id)\n"
                "print('first', job.history[0]['replicas'])"
            ),
        ]
    )  # fmt: skip
    run(nb, server, tmp_path)
    out = text_of(nb.cells[3])
    assert "prediction (4, 1)" in out
    # DDP's batch_size is each GPU's: the global batch is 32 x the first grant's GPUs, kept
    # through resizes (keep-global); 3 epochs of it, nothing lost, nothing repeated
    first = int(re.search(r"first (\d+)", out).group(1))
    assert f"steps {3 * 1024 // (32 * first)}" in out
    job_id, text = job_output(nb.cells[2])
    assert text.startswith(f"lit ({job_id}): done") and "framework lightning" in text, text
    assert "job.load_model(MyModule)" in text
