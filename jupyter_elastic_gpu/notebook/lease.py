"""``%gpu_lease N``: give this running kernel N GPUs (or none, or one MIG slice:
``%gpu_lease 1g.10gb``) by restarting it with a lease.

A kernel cannot change which GPUs CUDA shows it once it has started, so the lease comes with a
restart: the magic asks first (the kernel's variables are lost; its notebook keeps its
outputs), then asks its Jupyter server (``POST kernels/ID/lease``), which waits for the lease
to be admitted and only then restarts the kernel with it. When the lease cannot be had the
answer says why and the kernel is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .client import SchedulerClient, SchedulerError


def this_kernel_id() -> str | None:
    """The id of the kernel this code runs in, from its connection file's name."""
    try:
        from ipykernel.connect import get_connection_file
    except ImportError:
        return None
    try:
        name = os.path.basename(get_connection_file())
    except Exception:  # not in a kernel
        return None
    if name.startswith("kernel-") and name.endswith(".json"):
        return name[len("kernel-") : -len(".json")]
    return None


def gpu_lease(
    client: SchedulerClient,
    gpus: int,
    yes: bool = False,
    mig: str | None = None,
    ask: Callable[[str], str] = input,
    kernel_id: str | None = None,
) -> str:
    """Ask, then ask the server; returns what to tell the user (SchedulerError when refused).
    ``mig``: a MIG profile, for one slice of it instead of ``gpus`` GPUs."""
    kernel_id = kernel_id or this_kernel_id()
    if kernel_id is None:
        raise SchedulerError("%gpu_lease works in a kernel that a Jupyter server started")
    what = f"{gpus} GPU{'' if gpus == 1 else 's'}" if gpus else "no GPU"
    if mig:
        what = f"a {mig} MIG slice"
    if not yes:
        answer = ask(
            f"Restart this kernel with {what}? Its variables are lost; the notebook keeps its "
            "outputs. [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            return "nothing changed"
    doc = client.lease_kernel(kernel_id, gpus, timeout=600, mig=mig)
    gpu_list = ",".join(doc.get("gpus") or [])
    return f"{doc.get('message', 'restarting')}" + (f" ({gpu_list})" if gpu_list else "")
