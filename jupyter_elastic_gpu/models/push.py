"""What the websocket (``ws``) sends: one of these per text frame (``server/updates_socket.py``,
``server/panel.py``). The socket builds them as plain documents; these models are their
contract, which the API document and the front end's types are made from."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, RootModel

from .base import Count, Strict
from .responses import Gpus, JobList, JobView, PublicJob, Queue, QueueEntry, Status

Ids = Annotated[list[str], Field(min_length=1)]


class StatusUpdate(Strict):
    """A message of ``ws?view=status``: the status document, at once and after every change
    of state (at least every 25 s)."""

    type: Literal["update"]
    version: int = Field(ge=-1, description="-1 on the first message.")
    status: Status


class PanelSnapshot(Strict):
    """The first message of ``ws?view=panel``: what ``GET gpus``, ``GET queue`` and ``GET
    jobs`` answer the caller."""

    type: Literal["snapshot"]
    version: Count
    gpus: Gpus
    queue: Queue
    jobs: JobList


class ListDelta(Strict):
    """What turns a list of entries keyed by ``id`` into the new one: drop ``removed``, then
    replace or append ``changed``, then put the entries in ``order`` when it is there (it is
    sent only when the first two steps do not give the new order)."""

    removed: Ids | None = Field(
        None,
        description="Ids of entries gone (a job that left the queue, or a finished job past "
        "`recent_jobs`).",
    )
    order: list[str] | None = Field(
        None,
        description="Every id in the new order, when applying `removed` and `changed` does not "
        "give it.",
    )


class QueueDelta(ListDelta):
    """The change of ``Queue.queue``."""

    changed: Annotated[list[QueueEntry], Field(min_length=1)] | None = Field(
        None, description="Entries new or different, whole."
    )


class JobsDelta(ListDelta):
    """The change of ``JobList.jobs``."""

    changed: Annotated[list[JobView | PublicJob], Field(min_length=1)] | None = Field(
        None, description="Entries new or different, whole."
    )


class PanelDelta(Strict):
    """Every later message of ``ws?view=panel``: only what changed since the previous one;
    none of ``gpus``, ``queue``, ``jobs`` when the state moved on without a change the caller
    sees (the panel is then current at ``version``)."""

    type: Literal["delta"]
    version: Count
    gpus: Gpus | None = Field(None, description="The whole GPU document, when it changed.")
    queue: QueueDelta | None = None
    jobs: JobsDelta | None = None


class SocketError(Strict):
    """The last message before the socket closes on an error (as ``ErrorBody``)."""

    type: Literal["error"]
    message: str
    reason: str | None = None


class UpdateMessage(RootModel[StatusUpdate | PanelSnapshot | PanelDelta | SocketError]):
    """One message of ``ws``: ``update`` for ``?view=status``, ``snapshot`` then ``delta`` for
    ``?view=panel``, ``error`` before it closes."""
