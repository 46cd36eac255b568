"""The torchrun adapter: a script written for ``torchrun`` runs unmodified, elastic by restart.

Each rank runs the script as is, with the environment torchrun gives its workers
(``ranks.py``). The script owns its training loop, its batch and its checkpoint; the adapter
changes none of them. It stops the script as torchrun's agent does (SIGTERM, ``stopping``),
the script saves and exits, and the next generation runs it again on the new ranks, where it
resumes from its own checkpoint. In between, the adapter only measures (``meter``,
``loaders``, ``savepoint``): steps, epochs, samples and the step of the script's last save,
so the sidecar's progress, speed and lost-work figures are those of any other job.
"""

from __future__ import annotations

import time

from ..adapter import Session, TrainerContext


class TorchrunAdapter:
    name = "torchrun"
    process_per_device = True

    def import_framework(self) -> None:
        import torch
        import torch.distributed  # noqa: F401

    def start(self, context: TrainerContext) -> Session:
        self.import_framework()
        ready_at = round(time.time(), 3)
        from .session import TorchrunSession

        return TorchrunSession(context, ready_at)
