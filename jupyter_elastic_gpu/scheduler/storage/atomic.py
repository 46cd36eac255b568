"""Changes to jobs that the database must confirm: in memory as on disk, all or nothing.

The service changes a job's record in memory, then writes it. When the write fails (a full
disk, a locked or failing database), the request answers the error and the record must be as
it was before, or memory and database would tell two stories: a cancel answered 507 that still
cancels, a job started in memory whose start no restart remembers. ``atomically`` runs a change
inside one store transaction and, if anything in it fails, puts back every job it was told
about (``keep``) as it was when the transaction began. The decision loop retries on its next
round; a sidecar sends its heartbeat again.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from ..jobs import JobRecord
from .store import Store

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _fields_of(job: JobRecord) -> dict[str, Any]:
    """``job``'s fields as they are now. A record changes by having a field set to a new
    value or by entries added to or removed from its lists and dicts (never inside a nested
    model or grant, which are replaced whole): so copying those containers, one level down, is
    a whole copy, at a fraction of a deep copy's cost (it is taken on every decision)."""
    return {
        name: copy.copy(value) if isinstance(value, (list, dict)) else value
        for name, value in job.__dict__.items()
    }


class Undo:
    """Copies of jobs taken before they change; ``restore`` puts them back in place (the same
    objects: whoever holds a job sees it restored)."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[JobRecord, dict[str, Any]]] = {}

    def keep(self, job: JobRecord) -> None:
        """Remember ``job`` as it is now (once: the first copy is the one restored)."""
        if id(job) not in self._kept:
            self._kept[id(job)] = (job, _fields_of(job))

    def restore(self) -> None:
        for job, before in self._kept.values():
            job.__dict__.clear()
            job.__dict__.update(before)


#: The ``Undo`` of the outermost ``atomically`` under way in this task.
_OUTER: contextvars.ContextVar[Undo | None] = contextvars.ContextVar("atomically", default=None)


@contextlib.asynccontextmanager
async def atomically(store: Store, *jobs: JobRecord) -> AsyncIterator[Undo]:
    """One transaction; on any error, ``jobs`` (and those kept on the yielded ``Undo``) are
    restored and the error goes on. Copies are taken once the transaction holds the write
    lock, so no other change is half-way through them. Inside another ``atomically``, it
    joins it: its jobs are kept by the outer one, which restores everything on failure."""
    outer = _OUTER.get()
    if outer is not None:
        async with store.transaction():
            for job in jobs:
                outer.keep(job)
            yield outer
        return
    undo = Undo()
    token = _OUTER.set(undo)
    try:
        async with store.transaction():
            for job in jobs:
                undo.keep(job)
            yield undo
    except BaseException:
        undo.restore()
        raise
    finally:
        _OUTER.reset(token)


def atomic(method: F) -> F:
    """For a method ``(self, job, ...)`` of an object with a ``store``: the change it makes to
    ``job`` is written whole or not at all (``atomically``)."""

    @functools.wraps(method)
    async def change(self: Any, job: JobRecord, *args: Any, **kwargs: Any) -> Any:
        async with atomically(self.store, job):
            return await method(self, job, *args, **kwargs)

    return change  # type: ignore[return-value]
