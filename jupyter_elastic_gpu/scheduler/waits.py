"""Bounded waits that a cancellation always ends.

Before Python 3.12, ``asyncio.wait_for`` returns normally when its task is cancelled in the
same moment the awaited thing completes: the cancellation is lost. The scheduler loop waits
for a poke with a timeout, and a poke often comes just before the server stops, so the loop
ran on and the stop waited for it forever. ``wait_at_most`` waits with ``asyncio.wait``,
which never swallows its caller's cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


async def wait_at_most(aw: Awaitable[object], timeout: float) -> bool:
    """Await ``aw`` for up to ``timeout`` seconds; whether it finished in time (its error, if
    it raised, is raised here). Not finished: it is cancelled, and waited for until it has
    let go of what it held (a condition's lock, say)."""
    inner = asyncio.ensure_future(aw)
    try:
        await asyncio.wait({inner}, timeout=timeout)
    finally:
        if not inner.done():
            inner.cancel()
            await asyncio.wait({inner})
    if inner.cancelled():
        return False
    inner.result()
    return True
