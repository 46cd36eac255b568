"""Keras on PyTorch: one device of the grant.

Keras 3 has no multi-device data parallel for its torch backend (its distribution API is
JAX's; torch would need one process per device under ``DistributedDataParallel``, which
``Model.fit`` does not drive). So a job trains on the first device of its grant, reports one
replica whatever the grant, and the log says so: a resize still stops it at the next step,
checkpoints and resumes it at the exact step, on the new grant's first device. Keras picks its
torch device once, at import (simulated GPUs: ``KERAS_TORCH_DEVICE=cpu``, set before).
"""

from __future__ import annotations

import os

from ..tlog import log
from .backends import Backend


class TorchBackend(Backend):
    name = "torch"
    label = "PyTorch"
    elastic = False

    def prepare(self, gpus: list[str], simulated: bool) -> None:
        # on GPUs Keras takes "cuda": the first of the grant, as CUDA_VISIBLE_DEVICES lists it
        if simulated:
            os.environ.setdefault("KERAS_TORCH_DEVICE", "cpu")

    def standby_import(self) -> str | None:
        return "nothing imported (Keras picks its torch device at import; no grant yet)"

    def setup(self, gpus: list[str], simulated: bool) -> int:
        from keras.src.backend.torch.core import get_device

        device = get_device()
        kind = f"simulated GPU {gpus[0]}" if simulated else f"GPU {gpus[0]}"
        log(
            f"Keras on PyTorch trains on one device of the grant ({kind}, {device}) and reports "
            f"1 replica: Keras 3 has no multi-device data parallel for the torch backend"
            + (f"; {len(gpus) - 1} granted GPU(s) unused" if len(gpus) > 1 else "")
        )
        return 1
