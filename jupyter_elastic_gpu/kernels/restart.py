"""``POST kernels/ID/lease``: give a running kernel of this server a GPU lease (``%gpu_lease``).

The lease is asked for and waited on *before* the kernel is touched: when it cannot be had
(the admission timeout passes, the size is refused) the answer says why and the kernel keeps
running as it is. Once the GPUs are held the kernel is restarted through the server's kernel
manager (its variables are lost, its notebook keeps its outputs) and comes back with exactly
those GPUs visible (or its MIG slice, with ``mig``). ``gpus`` 0 gives the lease back the same
way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import Conflict, NotFound
from ..models import KernelLease, KernelLeaseRequest, parse
from .provisioner import ElasticGPUProvisioner

#: Restarts in flight, kept so that they are not collected before they finish.
_restarts: set[asyncio.Task] = set()


#: Longest a restart waits for the cell that asked for it (``%gpu_lease``) to finish.
CELL_GRACE_S = 30.0


async def _restart_when_idle(mkm: Any, kernel_id: str) -> None:
    """Restart once the kernel is done with the cell that asked (its answer reaches the
    notebook), or after ``CELL_GRACE_S``."""
    kernel = mkm.get_kernel(kernel_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CELL_GRACE_S
    while getattr(kernel, "execution_state", "idle") == "busy" and loop.time() < deadline:
        await asyncio.sleep(0.1)
    await mkm.restart_kernel(kernel_id)


async def restart_with_lease(serverapp: Any, kernel_id: str, body: object) -> KernelLease:
    request = parse(KernelLeaseRequest, body, "kernel lease")
    gpus, mig = request.gpus, request.mig
    mkm = serverapp.kernel_manager
    if kernel_id not in mkm:
        raise NotFound(f"no kernel {kernel_id!r} runs in this Jupyter server")
    provisioner = getattr(mkm.get_kernel(kernel_id), "provisioner", None)
    if not isinstance(provisioner, ElasticGPUProvisioner):
        raise Conflict(
            "this kernel was not started by the elastic-gpu provisioner, so it cannot be given "
            "a lease: pick a 'Python 3 (N GPUs)' kernel (jupyter elastic-gpu kernelspec "
            "install), or ask your admin to leave c.ElasticGPUApp.kernel_gpus at 'leased'"
        )
    if gpus:
        await provisioner.acquire(gpus, mig)  # LeaseNotGranted (409) leaves the kernel as is
    provisioner.gpus, provisioner.mig = gpus, mig or ""
    what = f"a {mig} MIG slice" if mig else f"{gpus} GPU(s)"
    task = asyncio.ensure_future(_restart_when_idle(mkm, kernel_id))
    _restarts.add(task)
    task.add_done_callback(_restarts.discard)
    return KernelLease(
        kernel_id=kernel_id,
        lease=provisioner.lease_id if gpus else None,
        gpus=list(provisioner.lease_gpus) if gpus else [],
        message=f"restarting the kernel with {what}"
        if gpus
        else "restarting the kernel without GPUs",
    )
