"""A plain Lightning script: a tiny regression on a fixed synthetic dataset.

Usage: lightning_regression.py OUT_DIR [BATCH]. Rank 0 appends ``global_step batch_idx loss``
of every training step (the loss over the global batch) to OUT_DIR/steps.txt from a callback of
its own, which is how a test sees that no step was lost or repeated across restarts, and that
each step trained on the same samples as in an uninterrupted run.
"""

import os
import sys

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

OUT = sys.argv[1]
BATCH = int(sys.argv[2]) if len(sys.argv) > 2 else 4


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        self.global_loss = self.all_gather(loss.detach()).mean().item()  # of the global batch
        return loss

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.7)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class StepRecorder(pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.is_global_zero:
            with open(os.path.join(OUT, "steps.txt"), "a") as f:
                f.write(f"{trainer.global_step} {batch_idx} {pl_module.global_loss!r}\n")


pl.seed_everything(7)
g = torch.Generator().manual_seed(0)
x = torch.randn(2048, 8, generator=g)
y = x @ torch.randn(8, 1, generator=g) + 0.1 * torch.randn(2048, 1, generator=g)
loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True)

trainer = pl.Trainer(
    max_epochs=2,
    devices=8,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=OUT,
    callbacks=[StepRecorder()],
)
trainer.fit(Regression(), loader)
