"""When queued jobs start and running jobs end: the forecast of the live state, cached.

The forward run (``sim/forecast.py``) costs about as much as a few hundred decisions, so it
runs in a worker thread while the event loop goes on serving, at most once per state version,
and callers asking at the same time share one run. A new version that changed no job's state,
lease, size or measured speeds (a progress report, the common case) reuses a forecast younger
than ``REUSE_S``: its estimates are times, which stay true while the jobs go as forecast, and
the queue's estimates do not churn at every heartbeat. A forward run that fails leaves the
estimates empty (the queue is still answered) and is logged once.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ..sim.forecast import Forecast, forecast
from . import policies

if TYPE_CHECKING:
    from .service import SchedulerService

#: Seconds a forecast is reused across versions that changed only the jobs' progress.
REUSE_S = 30.0


class Estimates:
    """The forecast of ``service``'s open jobs (``await estimates.forecast()``)."""

    def __init__(self, service: SchedulerService) -> None:
        self.service = service
        # A policy of its own: the forward run decides in another thread.
        self._policy = policies.make(service.policy, service.policy_params)
        self._lock = asyncio.Lock()
        self._last = Forecast(0.0, {})
        self._version = -1
        self._shape: Any = None
        self._failed = False
        #: Forward runs made (for tests and figures).
        self.runs = 0

    def shape(self) -> Any:
        """What a forecast depends on besides time and progress."""
        jobs = tuple(
            (
                j.id,
                j.state,
                j.held,
                tuple(j.held_gpus),
                j.total_work is None,
                tuple(sorted(j.throughput)),
            )
            for j in self.service.jobs.values()
            if not j.final
        )
        external, drained = self.service.external(), self.service.admin.drained
        gpus = tuple(
            (g.id, not external.get(g.id) and g.id not in drained) for g in self.service.gpu_infos()
        )
        return jobs, gpus

    async def forecast(self) -> Forecast:
        async with self._lock:  # callers at the same time share one run
            version = self.service.version
            if version == self._version:
                return self._last
            now = time.time()
            shape = self.shape()
            if shape == self._shape and now - self._last.at < REUSE_S:
                self._version = version
                return self._last
            snap = self.service.core_snapshot()
            try:
                result = await asyncio.to_thread(forecast, self._policy, snap, now)
            except Exception:
                if not self._failed:
                    self.service.log.exception("elastic-gpu: the queue's forecast failed")
                self._failed = True
                result = Forecast(now, {}, complete=False)
            self.runs += 1
            self._last, self._version, self._shape = result, version, shape
            return result
