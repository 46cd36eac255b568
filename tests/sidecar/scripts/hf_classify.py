"""A plain Hugging Face Trainer script: a tiny BERT classifier on synthetic tokens.

Nothing in it knows about elastic training. Usage: ``hf_classify.py STEPS_FILE OUT_DIR
[PER_DEVICE_BATCH]``: on the main process, a callback appends each optimizer step's
global step to STEPS_FILE; the trained model is saved to OUT_DIR when training ends.
Dropout is off, so the result depends only on the data order and the batch, not on which
process drew which random numbers.
"""

import sys

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

STEPS_FILE, OUT_DIR = sys.argv[1], sys.argv[2]
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 8
N, SEQ = 512, 8


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(1, 100, (N, SEQ), generator=g)
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class StepRecorder(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            with open(STEPS_FILE, "a") as f:
                f.write(f"{state.global_step}\n")


torch.manual_seed(0)
config = BertConfig(
    vocab_size=100,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=SEQ,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    num_labels=2,
)
model = BertForSequenceClassification(config)
args = TrainingArguments(
    output_dir=OUT_DIR,
    per_device_train_batch_size=BATCH,
    num_train_epochs=3,
    learning_rate=1e-2,
    seed=7,
    report_to=[],
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=5,
    dataloader_num_workers=0,
)
trainer = Trainer(model=model, args=args, train_dataset=Data(), callbacks=[StepRecorder()])
result = trainer.train()
print(f"trained {result.global_step} steps, loss {result.training_loss:.4f}")
trainer.save_model(OUT_DIR)
