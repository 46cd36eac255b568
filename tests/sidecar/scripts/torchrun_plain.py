"""A plain PyTorch training loop: no process group, its own checkpoint, a SIGTERM handler.

    torchrun_plain.py OUT [--total N]

Appends each step it trains to OUT/steps.txt.
"""

import argparse
import os
import signal
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--total", type=int, default=300)
args = parser.parse_args()

g = torch.Generator().manual_seed(1)
x = torch.randn(256, 8, generator=g)
y = x.sum(dim=1, keepdim=True)
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
ckpt = os.path.join(args.out, "ckpt.pt")
step = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    step = state["step"]

stopping = False


def on_sigterm(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)
while step < args.total:
    for xb, yb in loader:
        if stopping:
            torch.save(
                {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, ckpt
            )
            sys.exit(0)
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        with open(os.path.join(args.out, "steps.txt"), "a") as f:
            f.write(f"{step} {os.environ.get('WORLD_SIZE')}\n")
        if step >= args.total:
            break
