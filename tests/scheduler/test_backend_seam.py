"""The seam between the routes and the scheduler (``scheduler/port/backend.py``): every backend
and wrapper implements each declared operation as declared, the routes call only declared
operations, and the Hub's scope check and the embedded server's start read the declarations."""

from __future__ import annotations

import ast
import contextlib
import inspect
from pathlib import Path

import pytest
from servers import RecordingLauncher

from jupyter_elastic_gpu.errors import Forbidden, StorageUnavailable, Unavailable
from jupyter_elastic_gpu.hub.identity import HubPrincipal
from jupyter_elastic_gpu.hub.service import ScopedBackend
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.port import backend as seam
from jupyter_elastic_gpu.scheduler.port.local import LocalBackend
from jupyter_elastic_gpu.scheduler.port.remote import RemoteBackend
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store
from jupyter_elastic_gpu.server import handlers
from jupyter_elastic_gpu.server.extension import ReadyBackend

JOB = {
    "kind": "synthetic",
    "min_gpus": 1,
    "max_gpus": 1,
    "synthetic": {"work": 10, "throughput": {"1": 5}},
}
READER = HubPrincipal("rita")  # reaches the service, without the submit scope
SUBMITTER = HubPrincipal("sam", submits=True)


def _shape(sig: inspect.Signature) -> list[tuple]:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in sig.parameters.values()]


@pytest.mark.parametrize("cls", [LocalBackend, RemoteBackend, ReadyBackend, ScopedBackend])
def test_every_backend_implements_each_operation_as_declared(cls):
    for name in seam.OPERATIONS:
        method = getattr(cls, name)
        assert inspect.iscoroutinefunction(method), (cls.__name__, name)
        sig = inspect.signature(method)
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])  # (self)
        assert _shape(sig) == _shape(seam.signature(name)), (cls.__name__, name)


def test_each_operation_declares_its_access_and_models():
    ops = seam.OPERATIONS
    assert ops["submit"].access is seam.Access.CHANGE and ops["queue"].access is seam.Access.READ
    assert ops["heartbeat"].access is seam.Access.SECRET
    assert ops["submit"].request.__name__ == "SubmitRequest"
    assert ops["job"].response.__name__ == "JobView" and ops["job"].request is None
    # An operation that takes a body declares its model, and only those do.
    for op in ops.values():
        takes_body = "body" in seam.signature(op.name).parameters
        assert (op.request is not None) == takes_body, op.name


def _backend_calls(tree: ast.AST) -> set[str]:
    """Names X in ``self.backend.X(...)`` and ``self.app.backend.X(...)``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "backend":
                found.add(node.func.attr)
    return found


def test_the_routes_call_only_declared_operations():
    root = Path(handlers.__file__).parent.parent
    called = set()
    for path in (
        "server/handlers.py",
        "server/updates_socket.py",
        "server/admin_page.py",
        "kernels/channel.py",
    ):
        called |= _backend_calls(ast.parse((root / path).read_text()))
    assert called and called <= set(seam.OPERATIONS), called - set(seam.OPERATIONS)


@contextlib.asynccontextmanager
async def local(tmp_path):
    store = await Store.open(":memory:")
    svc = SchedulerService(
        store, SimulatedInventory(2), RecordingLauncher(), lambda j: "", job_root=str(tmp_path)
    )
    try:
        yield LocalBackend(svc, mode="hub")
    finally:
        await store.close()


async def test_the_hub_lets_a_reader_read_and_change_nothing(tmp_path):
    async with local(tmp_path) as inner:
        scoped = ScopedBackend(inner)
        assert (await scoped.whoami(READER)).user == "rita"
        assert (await scoped.queue(READER)).queue == []
        for change in (
            scoped.submit(READER, JOB),
            scoped.open_lease(READER, {"gpus": 1}),
            scoped.set_group_weight(READER, "lab", {"weight": 2}),
        ):
            with pytest.raises(Forbidden, match="custom:elastic-gpu:submit"):
                await change
        assert inner.service.jobs == {}  # nothing was changed
        job = await scoped.submit(SUBMITTER, JOB)
        assert (await scoped.job(SUBMITTER, job.id)).user == "sam"
        with pytest.raises(Forbidden):
            await scoped.cancel(READER, job.id)


async def test_a_backend_that_failed_to_start_says_why_on_every_operation(tmp_path):
    async def broken() -> None:
        raise StorageUnavailable("the database is read-only: make it writable")

    ready = ReadyBackend(broken)
    for call in (ready.queue(READER), ready.submit(READER, JOB)):
        with pytest.raises(StorageUnavailable, match="make it writable"):
            await call

    async def odd() -> None:
        raise OSError("no such device")

    with pytest.raises(Unavailable, match=r"did not start \(OSError: no such device"):
        await ReadyBackend(odd).gpus(READER)

    async with local(tmp_path) as inner:

        async def start() -> None:
            ready.set(inner)

        ready = ReadyBackend(start)
        assert (await ready.whoami(READER)).mode == "hub"
