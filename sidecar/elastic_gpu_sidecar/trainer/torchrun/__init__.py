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

from ...frameworks import starts_process_group
from .. import ranks
from ..adapter import Session, TrainerContext
from ..tlog import log


class TorchrunAdapter:
    name = "torchrun"
    process_per_device = True

    def import_framework(self) -> None:
        import torch
        import torch.distributed  # noqa: F401

    def ranks_for(self, config: dict, devices: int) -> int:
        """One rank per device, but one in all for a plain loop (no process group): copies
        of it on each device would train the same thing side by side, into one checkpoint."""
        try:
            with open(config["script"], encoding="utf-8") as f:
                source = f.read()
        except (KeyError, OSError, UnicodeDecodeError):
            return devices
        if devices > 1 and not starts_process_group(source):
            log(
                "the script starts no process group (a plain training loop): it runs as one "
                f"process, on the first GPU of the grant ({devices - 1} more stay unused)"
            )
            return 1
        return devices

    def start(self, context: TrainerContext) -> Session:
        self.import_framework()
        ready_at = ranks.ready_at(round(time.time(), 3))
        from .session import TorchrunSession

        return TorchrunSession(context, ready_at)
