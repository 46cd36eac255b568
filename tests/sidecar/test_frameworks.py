"""Which framework a script uses, read from its source alone, and whether it can be resized:
what both the scheduler (a job's GPU range) and the trainer (its adapter) go by."""

from __future__ import annotations

import pytest
from elastic_gpu_sidecar.frameworks import detect, resumes_itself
from elastic_gpu_sidecar.protocol import Framework

TORCH_LOOP = """
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    opt.zero_grad()
    model(torch.randn(4, 2)).sum().backward()
    opt.step()
"""

TORCH_RESUMING = """
import os
import torch
torch.distributed.init_process_group("gloo")
model = torch.nn.Linear(2, 1)
if os.path.exists("ckpt.pt"):
    model.load_state_dict(torch.load("ckpt.pt"))
for step in range(10):
    torch.save(model.state_dict(), "ckpt.pt")
"""


@pytest.mark.parametrize(
    ("source", "framework"),
    [
        ("import keras\nkeras.Sequential().fit()", Framework.KERAS),
        ("import tensorflow as tf\nm = tf.keras.Sequential()", Framework.KERAS),
        ("from tensorflow import keras", Framework.KERAS),
        ("import lightning as L\nL.Trainer().fit(m)", Framework.LIGHTNING),
        ("import lightning.pytorch as pl", Framework.LIGHTNING),
        ("import pytorch_lightning as pl\nimport torch", Framework.LIGHTNING),
        ("from transformers import Trainer, TrainingArguments", Framework.TRANSFORMERS),
        ("from transformers import Seq2SeqTrainer", Framework.TRANSFORMERS),
        ("import transformers\nt = transformers.Trainer(model=m)", Framework.TRANSFORMERS),
        (TORCH_RESUMING, Framework.TORCHRUN),
    ],
)
def test_a_framework_it_can_resize_is_read_from_the_imports(source, framework):
    found = detect(source)
    assert found.framework == framework
    assert found.elastic and found.why is None


def test_lightning_wins_over_the_torch_it_imports_too():
    source = "import torch\nimport lightning\nimport tensorflow"
    assert detect(source).framework == Framework.LIGHTNING


def test_transformers_without_its_trainer_is_a_torch_loop():
    """A model from transformers trained by a loop of the script's own is torchrun's: elastic
    only when the script checkpoints itself."""
    loop = "from transformers import AutoModel\nimport torch\n" + TORCH_LOOP
    found = detect(loop)
    assert found.framework == Framework.TORCHRUN and not found.elastic
    resuming = "from transformers import AutoModel\n" + TORCH_RESUMING
    assert detect(resuming) == detect(resuming, Framework.TORCHRUN)
    assert detect(resuming).elastic


def test_a_torch_loop_without_its_own_checkpoint_runs_at_one_count():
    found = detect(TORCH_LOOP)
    assert found.framework == Framework.TORCHRUN and not found.elastic
    assert "checkpoint of its own" in found.why and "one GPU count" in found.why


def test_saving_without_loading_is_no_checkpoint():
    source = TORCH_LOOP + "torch.save(model.state_dict(), 'm.pt')\n"
    found = detect(source)
    assert not found.elastic and not found.one_device


def test_a_loop_without_a_process_group_trains_on_one_device():
    """No init_process_group: copies of it on several GPUs would each train the same thing."""
    plain = TORCH_RESUMING.replace('torch.distributed.init_process_group("gloo")\n', "")
    found = detect(plain)
    assert found.framework == Framework.TORCHRUN and not found.elastic and found.one_device
    assert "no process group" in found.why and "one GPU" in found.why
    assert detect(TORCH_RESUMING).elastic and not detect(TORCH_RESUMING).one_device


def test_nothing_recognised_runs_under_keras_at_one_count_and_says_how_to_name_it():
    found = detect("import numpy as np\nprint(np.ones(3).sum())")
    assert found.framework == Framework.KERAS and not found.elastic
    assert "--framework" in found.why and "no supported framework" in found.why


def test_a_script_that_does_not_parse_is_nothing_recognised():
    found = detect("import lightning\ndef broken(:\n")
    assert found.framework == Framework.KERAS and not found.elastic
    assert "no supported framework" in found.why


def test_a_module_only_mentioned_is_not_imported():
    source = "# import lightning\nname = 'torch'\nprint('keras')"
    assert not detect(source).elastic


@pytest.mark.parametrize("said", [Framework.KERAS, Framework.LIGHTNING, Framework.TRANSFORMERS])
def test_the_framework_said_overrides_the_imports(said):
    found = detect("import numpy", said)
    assert found == detect("import numpy", said.value)  # the enum or its value
    assert found.framework == said and found.elastic


def test_torchrun_said_is_elastic_only_with_the_scripts_own_checkpoint():
    assert not detect("import keras", Framework.TORCHRUN).elastic
    assert detect(TORCH_RESUMING, "torchrun").elastic
    assert not detect("def broken(:", "torchrun").elastic


def test_auto_said_is_reading_the_imports():
    assert detect(TORCH_RESUMING, "auto") == detect(TORCH_RESUMING)


def test_a_framework_that_does_not_exist_is_refused():
    with pytest.raises(ValueError):
        detect("import torch", "jax")


def test_a_script_resumes_itself_when_it_saves_and_loads_whatever_its_process_group():
    plain = TORCH_RESUMING.replace('torch.distributed.init_process_group("gloo")\n', "")
    assert resumes_itself(TORCH_RESUMING) and resumes_itself(plain)
    assert not resumes_itself(TORCH_LOOP) and not resumes_itself("def broken(:")
