"""``job.load_model()`` loads what each framework's adapter saved: a Hugging Face model folder
as the class it was trained as, a Lightning checkpoint as the module class it is given (and a
clear error without one). Real transformers and Lightning, models saved as the adapters save
them."""

from __future__ import annotations

import pytest
from elastic_gpu_sidecar import protocol as P
from needs import module

from jupyter_elastic_gpu.notebook.job import ElasticJob

module("lightning", "pip install -e '.[torch]'")
module("transformers", "pip install -e '.[torch]'")


class Done:
    """A scheduler that says the job is done with its model at ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def job(self, job_id):
        return {"id": job_id, "state": "done", "model_path": self.path}


def test_a_hugging_face_model_loads_as_the_class_it_was_trained_as(tmp_path):
    import transformers

    config = transformers.BertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, num_labels=3,
    )  # fmt: skip
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path / P.MODEL_DIR)
    model = ElasticJob(Done(tmp_path / P.MODEL_DIR), "j-1").load_model()
    assert type(model).__name__ == "BertForSequenceClassification"
    assert model.config.num_labels == 3


def test_a_lightning_checkpoint_loads_as_the_module_given(tmp_path):
    import lightning as L
    import torch

    class Tiny(L.LightningModule):
        def __init__(self, width: int = 3):
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Linear(width, 1)

    trainer = L.Trainer(logger=False, enable_checkpointing=False, max_epochs=0)
    trainer.strategy.connect(Tiny(width=5))
    trainer.save_checkpoint(tmp_path / P.MODEL_CKPT)
    job = ElasticJob(Done(tmp_path / P.MODEL_CKPT), "j-2")
    with pytest.raises(TypeError, match=r"job.load_model\(MyModule\)"):
        job.load_model()
    model = job.load_model(Tiny)
    assert isinstance(model, Tiny) and model.net.in_features == 5
