"""The PyTorch Lightning adapter: ``Trainer`` made elastic from outside the script.

One rank per granted device (``ranks.py``) runs the script; in each, the ``Trainer`` gets the
grant's devices and DDP (``grant``), and ``fit`` gets a checkpoint at the step every rank agreed
to stop after, a resume at that exact step through Lightning's own checkpoints, and the job's
batch policy (``runtime``, ``fit``, ``callback``, ``batching``, ``install``). Nothing here is
imported before the adapter is used: Lightning takes seconds to import.
"""

from __future__ import annotations

import importlib.util
import re
import time

from ..adapter import Session, TrainerContext


def packages(source: str) -> list[str]:
    """The Lightning packages to take over: those the script names (``lightning`` when it
    names neither: it may import it through a module of its own), if installed."""
    named = [
        pkg
        for pkg, pattern in (
            ("lightning.pytorch", r"\b(?:import|from)\s+lightning\b"),
            ("pytorch_lightning", r"\bpytorch_lightning\b"),
        )
        if re.search(pattern, source)
    ]
    found = []
    for pkg in named or ["lightning.pytorch"]:
        try:
            if importlib.util.find_spec(pkg) is not None:
                found.append(pkg)
        except ModuleNotFoundError:
            continue
    return found


class LightningAdapter:
    name = "lightning"
    process_per_device = True

    def import_framework(self) -> None:
        import lightning.pytorch  # noqa: F401  (no device touched)

    def start(self, context: TrainerContext) -> Session:
        try:
            with open(context.config["script"], encoding="utf-8") as f:
                source = f.read()
        except (KeyError, OSError, UnicodeDecodeError):
            source = ""
        chosen = packages(source)
        if not chosen:
            raise RuntimeError("neither lightning nor pytorch_lightning is installed")
        for pkg in chosen:
            importlib.import_module(pkg)
        ready_at = round(time.time(), 3)
        from .install import install
        from .runtime import Runtime

        rt = Runtime(context)
        rt.ready_at = ready_at
        rt.say(f"{' and '.join(chosen)} ready ({rt.replicas} ranks)")
        for pkg in chosen:
            install(rt, pkg)
        return rt
