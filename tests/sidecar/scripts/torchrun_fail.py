"""A torchrun script one of whose ranks fails at a given step, for the rank launcher's tests.

    torchrun_fail.py raise|kill RANK STEP

``raise``: that rank raises ValueError (the script's bug); ``kill``: it is SIGKILLed (the
machine took it). The other ranks are then left in the next step's all-reduce.
"""

import os
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

how, bad_rank, bad_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
model = DistributedDataParallel(nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.ones(8, 4), torch.zeros(8, 1)
for step in range(1, 100_000):
    if rank == bad_rank and step == bad_step:
        if how == "raise":
            raise ValueError(f"rank {rank} cannot go on at step {step}")
        os.kill(os.getpid(), signal.SIGKILL)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
