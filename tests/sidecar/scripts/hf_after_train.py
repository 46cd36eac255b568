"""A Trainer script that goes on after training: a tiny BERT classifier, then a wait.

Usage: ``hf_after_train.py MARKER_DIR``. On the main process it appends each optimizer step's
global step to MARKER_DIR/steps, and once ``train()`` returned it writes its result to
MARKER_DIR/trained (appending, one line per process), then waits until MARKER_DIR/go exists
(a stand-in for whatever a script does after training: evaluation, export).
"""

import os
import sys
import time

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

MARKERS = sys.argv[1]


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(2)
        self.ids = torch.randint(1, 100, (64, 8), generator=g)
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class StepRecorder(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            with open(os.path.join(MARKERS, "steps"), "a") as f:
                f.write(f"{state.global_step}\n")


torch.manual_seed(0)
config = BertConfig(
    vocab_size=100,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=8,
    num_labels=2,
)
args = TrainingArguments(
    output_dir=os.path.join(MARKERS, "out"),
    per_device_train_batch_size=8,
    num_train_epochs=1,
    seed=3,
    report_to=[],
    save_strategy="no",
    disable_tqdm=True,
    dataloader_num_workers=0,
)
trainer = Trainer(
    model=BertForSequenceClassification(config),
    args=args,
    train_dataset=Data(),
    callbacks=[StepRecorder()],
)
result = trainer.train()
if trainer.is_world_process_zero():
    with open(os.path.join(MARKERS, "trained"), "a") as f:
        f.write(f"{result.global_step} {result.training_loss:.6f} {trainer.state.global_step}\n")
while not os.path.exists(os.path.join(MARKERS, "go")):
    time.sleep(0.05)
