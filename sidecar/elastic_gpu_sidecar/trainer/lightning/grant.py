"""A ``Trainer`` made for the grant, whatever devices the script asked for.

The script is written for some machine (``devices=8``, ``strategy="ddp_spawn"``); the job runs
on the GPUs the scheduler grants, one rank per device started by the trainer (``ranks.py``).
So the ``Trainer`` of every rank gets the grant's accelerator, device count and DDP over the
grant's backend; Lightning sees ``LOCAL_RANK`` in the environment and starts no process of its
own. What the script asked for differently is said once in the log, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable

#: The Trainer arguments the grant decides.
GRANT_ARGS = ("accelerator", "devices", "num_nodes", "strategy")
_DEFAULTS = {"accelerator": "auto", "devices": "auto", "num_nodes": 1, "strategy": "auto"}
_DDP_NAMES = {"ddp", "auto"}


def _said(value) -> str:
    return repr(value) if isinstance(value, str | int | list | tuple) else type(value).__name__


def grant_kwargs(
    kwargs: dict,
    *,
    world: int,
    simulated: bool,
    make_strategy: Callable[[str], object],
    backend: str,
    epochs: int | None = None,
) -> tuple[dict, list[str]]:
    """The script's ``Trainer`` arguments with the grant's devices, and one line for each
    choice of the script's that the grant overrides."""
    accelerator = "cpu" if simulated else "gpu"
    messages = []
    asked = {k: kwargs[k] for k in GRANT_ARGS if k in kwargs and kwargs[k] != _DEFAULTS[k]}
    strategy = kwargs.get("strategy")
    if isinstance(strategy, str) and strategy.lower() in _DDP_NAMES:
        asked.pop("strategy", None)
    own_ddp = strategy is not None and type(strategy).__name__ == "DDPStrategy"
    if own_ddp:
        asked.pop("strategy", None)  # the script's own DDP options stay; the backend is the grant's
    if asked.get("devices") == world or asked.get("devices") == [*range(world)]:
        asked.pop("devices", None)
    if asked.get("accelerator") in (accelerator, "cuda" if accelerator == "gpu" else None):
        asked.pop("accelerator", None)
    if asked:
        said = ", ".join(f"{k}={_said(v)}" for k, v in asked.items())
        messages.append(
            f"the script asks for Trainer({said}); the job's grant decides: "
            f"accelerator={accelerator!r}, devices={world}, num_nodes=1, DDP over {backend}"
        )
    out = dict(kwargs)
    if own_ddp:
        strategy._process_group_backend = backend
    else:
        strategy = make_strategy(backend)
    out.update(accelerator=accelerator, devices=world, num_nodes=1, strategy=strategy)
    if epochs:
        if kwargs.get("max_epochs") not in (None, epochs):
            messages.append(f"max_epochs={kwargs['max_epochs']} -> {epochs} (the job's --epochs)")
        out["max_epochs"] = epochs
    return out, messages
