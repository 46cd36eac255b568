"""What every PyTorch adapter asks of ``torch.distributed`` inside a rank (``ranks.py``).

Imported only in a rank of a PyTorch job (it imports torch).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from .. import protocol as P


def simulated() -> bool:
    return os.environ.get(P.ENV_SIMULATED) == "1"


def backend() -> str:
    """gloo for simulated GPUs (CPU processes), NCCL for real ones."""
    return "gloo" if simulated() or not torch.cuda.is_available() else "nccl"


def device() -> torch.device:
    """This rank's device: ``cuda:LOCAL_RANK`` of the grant, or the CPU when simulated."""
    if simulated() or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def agree(flag: bool) -> bool:
    """True on every rank when it is True on any: a stop request reaches the ranks at slightly
    different moments, and all of them must stop after the same step (a collective call left
    waiting for a rank that stopped would hang). Call it at each step boundary."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=_collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _collective_device() -> torch.device:
    return torch.device("cpu") if dist.get_backend() == "gloo" else device()
