"""``Backend``: the seam between the web routes and whatever answers them.

Every deployment answers the same typed operations: ``LocalBackend`` from the scheduler in
this process, ``RemoteBackend`` from a shared scheduler over HTTP, and wrappers around either
(``Forwarding``: one that starts its backend on first use, the Hub's scope check). Each
operation declares what its caller needs (``Access``) and the model its body is validated as,
so that the Hub's authorisation reads them here rather than from a list of method names.

The bodies travel as sent (``Any``): the scheduler validates each against its declared model
only once it knows the caller may touch the job, so a stranger's malformed body is refused as
a stranger's, not parsed.
"""

from __future__ import annotations

import enum
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from ...models import (
    CancelRequest,
    DrainChange,
    Events,
    Forgotten,
    Gpus,
    GpuView,
    GrantView,
    GroupWeightRequest,
    Heartbeat,
    JobFilter,
    JobList,
    JobView,
    KeepChange,
    Launches,
    LeaseGrant,
    LeaseRequest,
    Logs,
    PriorityChange,
    ProgressList,
    Queue,
    Removed,
    Shares,
    Status,
    SubmitRequest,
    Updates,
    Whoami,
)
from ..principal import Principal


class Access(enum.Enum):
    """What a caller needs for an operation."""

    #: Changes nothing: anyone who may reach the scheduler, on the jobs they may see.
    READ = "read"
    #: Submits or changes jobs, leases, GPUs or shares (a Hub user needs the submit scope).
    CHANGE = "change"
    #: A sidecar's heartbeat, authorised by its job's secret instead of a user.
    SECRET = "secret"


@dataclass(frozen=True)
class Operation:
    """One operation of ``Backend``: its name, who may call it, its body's model (None: it
    takes none) and its answer's model."""

    name: str
    access: Access
    request: type[BaseModel] | None
    response: type[BaseModel]


_DECLARED = "__elastic_gpu_operation__"


def operation(access: Access, request: type[BaseModel] | None = None) -> Callable:
    """Declare a ``Backend`` method an operation with ``access`` and body model ``request``."""

    def mark(method: Callable) -> Callable:
        setattr(method, _DECLARED, (access, request))
        return method

    return mark


class Backend(Protocol):
    """What the routes call; ``who`` is the caller, as the server authenticated them."""

    @operation(Access.READ)
    async def whoami(self, who: Principal) -> Whoami: ...

    @operation(Access.READ)
    async def gpus(self, who: Principal) -> Gpus: ...

    @operation(Access.READ)
    async def jobs(self, who: Principal, query: JobFilter = ...) -> JobList: ...

    @operation(Access.CHANGE, SubmitRequest)
    async def submit(self, who: Principal, body: Any) -> JobView: ...

    @operation(Access.READ)
    async def job(self, who: Principal, job_id: str) -> JobView: ...

    @operation(Access.CHANGE, LeaseRequest)
    async def open_lease(self, who: Principal, body: Any) -> LeaseGrant: ...

    @operation(Access.CHANGE, CancelRequest)
    async def cancel(self, who: Principal, job_id: str, body: Any = None) -> JobView: ...

    @operation(Access.CHANGE)
    async def suspend(self, who: Principal, job_id: str) -> JobView: ...

    @operation(Access.CHANGE)
    async def resume(self, who: Principal, job_id: str) -> JobView: ...

    @operation(Access.CHANGE, PriorityChange)
    async def set_priority(self, who: Principal, job_id: str, body: Any) -> JobView: ...

    @operation(Access.CHANGE, DrainChange)
    async def drain(self, who: Principal, gpu_id: str, body: Any) -> GpuView: ...

    @operation(Access.READ)
    async def logs(self, who: Principal, job_id: str, tail: int) -> Logs: ...

    @operation(Access.READ)
    async def events(self, who: Principal, job_id: str) -> Events: ...

    @operation(Access.READ)
    async def progress(self, who: Principal, job_id: str, since: float | None) -> ProgressList: ...

    @operation(Access.READ)
    async def queue(self, who: Principal) -> Queue: ...

    @operation(Access.READ)
    async def status(self, who: Principal, query: JobFilter = ...) -> Status: ...

    @operation(Access.READ)
    async def wait_updates(self, who: Principal, since: int, timeout: float) -> Updates: ...

    @operation(Access.READ)
    async def launches(self, who: Principal) -> Launches: ...

    @operation(Access.CHANGE, Removed)
    async def removed(self, who: Principal, body: Any) -> Forgotten: ...

    @operation(Access.CHANGE, KeepChange)
    async def keep(self, who: Principal, job_id: str, body: Any) -> JobView: ...

    @operation(Access.SECRET, Heartbeat)
    async def heartbeat(self, job_id: str, secret: str, body: Any) -> GrantView: ...

    @operation(Access.READ)
    async def shares(self, who: Principal) -> Shares: ...

    @operation(Access.CHANGE, GroupWeightRequest)
    async def set_group_weight(self, who: Principal, group: str, body: Any) -> Shares: ...


def _operations() -> dict[str, Operation]:
    found = {}
    for name, method in vars(Backend).items():
        declared = getattr(method, _DECLARED, None)
        if declared is not None:
            response = typing.get_type_hints(method)["return"]
            found[name] = Operation(name, declared[0], declared[1], response)
    return found


#: Every operation of ``Backend`` by name, in the order declared.
OPERATIONS: dict[str, Operation] = _operations()


def signature(name: str) -> inspect.Signature:
    """The declared signature of operation ``name`` (without ``self``), for checking that a
    backend implements it as declared."""
    sig = inspect.signature(getattr(Backend, name))
    return sig.replace(parameters=list(sig.parameters.values())[1:])


class Forwarding:
    """A ``Backend`` that hands each operation to ``self.inner`` through ``forward``: the base
    of the wrappers, which override ``forward`` (start first, check a scope first)."""

    def __init__(self, inner: Backend | None = None) -> None:
        self.inner = inner

    async def forward(self, op: Operation, *args: Any, **kwargs: Any) -> Any:
        """Call ``op`` of the inner backend; a wrapper adds what it is for around this."""
        if self.inner is None:
            raise RuntimeError(f"{type(self).__name__} has no backend to forward {op.name} to")
        return await getattr(self.inner, op.name)(*args, **kwargs)


def _forwarder(op: Operation) -> Callable:
    async def method(self: Forwarding, *args: Any, **kwargs: Any) -> Any:
        return await self.forward(op, *args, **kwargs)

    method.__name__ = method.__qualname__ = op.name
    method.__doc__ = f"``{op.name}`` of the inner backend, through ``forward``."
    method.__signature__ = inspect.signature(getattr(Backend, op.name))  # type: ignore[attr-defined]
    return method


for _op in OPERATIONS.values():
    setattr(Forwarding, _op.name, _forwarder(_op))
