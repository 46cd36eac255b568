"""A script written for torchrun, as people write them (nothing in it knows of the sidecar).

DDP over the ranks torchrun starts (gloo), a tiny regression with a DistributedSampler, a
SIGTERM handler that makes the loop save {model, optimizer, step} at its next step and exit,
and a resume from that checkpoint when it exists.

    torchrun_ddp.py OUT [--total N] [--save-every K] [--no-save-on-term] [--on-term ...]

``--on-term ignore`` installs a handler that does nothing, ``--on-term default`` none.

Rank 0 appends "STEP WORLD" to OUT/steps.txt for each step it trains; every rank appends
"PID RANK WORLD" to OUT/ranks.txt when it starts.
"""

import argparse
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--total", type=int, default=600)
parser.add_argument("--save-every", type=int, default=0)
parser.add_argument("--no-save-on-term", dest="save_on_term", action="store_false")
parser.add_argument("--on-term", choices=["stop", "ignore", "default"], default="stop")
args = parser.parse_args()

rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
world = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
with open(os.path.join(args.out, "ranks.txt"), "a") as f:
    f.write(f"{os.getpid()} {rank} {world}\n")

g = torch.Generator().manual_seed(1)
x = torch.randn(512, 16, generator=g)
y = x @ torch.randn(16, 1, generator=g)
data = TensorDataset(x, y)
sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=8, sampler=sampler)

torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.02)
ckpt = os.path.join(args.out, "ckpt.pt")
step = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    step = state["step"]
    if rank == 0:
        print(f"resuming from step {step} on {world} ranks", flush=True)

stopping = False


def on_sigterm(signum, frame):
    global stopping
    stopping = True


if args.on_term == "stop":
    signal.signal(signal.SIGTERM, on_sigterm)
elif args.on_term == "ignore":
    signal.signal(signal.SIGTERM, lambda signum, frame: None)


def save():
    if rank == 0:
        tmp = ckpt + ".tmp"
        torch.save(
            {"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp
        )
        os.replace(tmp, ckpt)


while step < args.total:
    epoch, skip = divmod(step, len(loader))
    sampler.set_epoch(epoch)
    for i, (xb, yb) in enumerate(loader):
        if i < skip:
            continue
        if stopping:
            if args.save_on_term:
                save()
            sys.exit(0)
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if rank == 0:
            with open(os.path.join(args.out, "steps.txt"), "a") as f:
                f.write(f"{step} {world}\n")
        if args.save_every and step % args.save_every == 0:
            save()
        if step >= args.total:
            break

if rank == 0:
    print(f"trained {step} steps, loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
