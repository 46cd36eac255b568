"""A Lightning script with two ``fit`` calls on one model, each with a Trainer of its own.

Usage: lightning_two_fits.py OUT_DIR. Rank 0 appends ``fit global_step batch_idx`` of every
training step to OUT_DIR/steps.txt, and ``after <fit> <weight sum>`` when a fit returns.
"""

import os
import sys

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

OUT = sys.argv[1]


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class StepRecorder(pl.Callback):
    def __init__(self, fit):
        self.fit = fit

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.is_global_zero:
            with open(os.path.join(OUT, "steps.txt"), "a") as f:
                f.write(f"{self.fit} {trainer.global_step} {batch_idx}\n")


def weight_sum(model) -> float:
    return sum(float(p.detach().double().sum()) for p in model.parameters())


pl.seed_everything(3)
g = torch.Generator().manual_seed(0)
x = torch.randn(1024, 8, generator=g)
y = x @ torch.randn(8, 1, generator=g)
loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
model = Regression()
for fit, (epochs, batches) in enumerate([(1, 32), (3, 1.0)]):
    trainer = pl.Trainer(
        max_epochs=epochs,
        limit_train_batches=batches,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=OUT,
        callbacks=[StepRecorder(fit)],
    )
    trainer.fit(model, loader)
    if trainer.is_global_zero:
        with open(os.path.join(OUT, "steps.txt"), "a") as f:
            f.write(f"after {fit} {weight_sum(model)!r}\n")
