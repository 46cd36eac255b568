"""The Hugging Face adapter: ``transformers.Trainer`` made elastic, one process per device.

The leader (``ranks.py``) starts one rank per granted device with torchrun's environment;
in each, ``runtime.install`` wraps the Trainer's arguments, constructor and ``train`` before
the script runs, so the script's own Trainer picks the devices, the batch policy
(``batching``), the stop and resume points (``callback``) and the checkpoints
(``checkpoints``) up without a change. Nothing here is imported before the adapter is used:
transformers takes seconds to import.
"""

from __future__ import annotations

import time

from ..adapter import Session, TrainerContext


class TransformersAdapter:
    name = "transformers"
    process_per_device = True

    def import_framework(self) -> None:
        import transformers  # noqa: F401

        from . import runtime  # noqa: F401  (torch, transformers' Trainer; no device)

    def start(self, context: TrainerContext) -> Session:
        self.import_framework()
        from . import runtime

        ready_at = round(time.time(), 3)
        rt = runtime.Runtime(context, ready_at)
        rt.say("transformers ready")
        runtime.install(rt)
        return rt
