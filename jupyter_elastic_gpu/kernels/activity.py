"""How long a lease's kernel has run nothing, as the Jupyter server that runs it saw it.

The provisioner reports its kernel's idleness with each heartbeat, but a provisioner is code
the user can replace (any installed package may add one), and one that always says "busy"
would keep its GPUs for good. The server's own kernel manager sees every message the kernel
sends and every request it is sent (``last_activity``, ``execution_state``): that is the
server's word, which the embedded scheduler reads for the leases of its own kernels.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..scheduler.jobs import JobRecord


def kernel_idle_s(kernels: Any, job: JobRecord) -> float | None:
    """Seconds since the kernel holding ``job``'s lease last did anything, from ``kernels``
    (the server's MappingKernelManager); None when no kernel of this server holds it (one
    started by nbclient or papermill outside the server: the provisioner's word stands)."""
    pid = job.reported.trainer_pid
    for kernel_id in list(kernels.list_kernel_ids()):
        try:
            km = kernels.get_kernel(kernel_id)
        except KeyError:  # shut down meanwhile
            continue
        provisioner = getattr(km, "provisioner", None)
        if getattr(provisioner, "lease_id", None) != job.id and not (
            pid and getattr(provisioner, "pid", None) == pid
        ):
            continue
        return manager_idle_s(km)
    return None


def manager_idle_s(km: Any) -> float | None:
    """Seconds since the kernel of the server's kernel manager ``km`` last did anything (0
    while it executes); None where ``km`` keeps no such record (a kernel outside a server)."""
    try:  # the server's kernel manager has it once it watches the kernel's activity
        last = getattr(km, "last_activity", None)
    except Exception:  # traitlets: not set yet
        return None
    if not isinstance(last, datetime.datetime):
        return None
    if getattr(km, "execution_state", None) == "busy":
        return 0.0
    now = datetime.datetime.now(last.tzinfo)
    return max((now - last).total_seconds(), 0.0)
