"""When queued jobs start and running jobs end: the forecast of the live state, cached.

The forward run (``sim/forecast.py``) costs about as much as a few hundred decisions, so it
runs in a worker thread while the event loop goes on serving, at most once per state version,
and callers asking at the same time share one run. A new version that changed no job's state,
lease, size or measured speeds (a progress report, the common case) reuses a forecast younger
than ``REUSE_S``: its estimates are times, which stay true while the jobs go as forecast, and
the queue's estimates do not churn at every heartbeat. A forward run that fails leaves the
estimates empty (the queue is still answered) and is logged once.

The same run says why GPUs stay idle (``Outlook.idle``, from the policy's decision now) and,
for a queued job, when it starts and which job's end it waits for (``start``): the figures the
queue and the status add to the reasons the policy gave.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.model import Snapshot
from ..core.policies import Policy
from ..core.reasons import Idle, Start
from ..core.schedule import decide, idle_reason
from ..sim.forecast import Forecast, forecast
from . import policies

if TYPE_CHECKING:
    from .service import SchedulerService

#: Seconds a forecast is reused across versions that changed only the jobs' progress.
REUSE_S = 30.0
#: A queued job whose forecast start lies this close after another job's end waits for it.
SAME_S = 1.0


@dataclass(frozen=True)
class Outlook(Forecast):
    """The forecast, and why GPUs stay idle at its time (None: none does)."""

    idle: Idle | None = None


def outlook(policy: Policy, snap: Snapshot, now: float) -> Outlook:
    """``snap`` played forward from ``now``, and why the decision now leaves GPUs idle."""
    ahead = forecast(policy, snap, now)
    idle = idle_reason(snap, decide(policy, snap, now))
    return Outlook(ahead.at, ahead.estimates, ahead.decisions, ahead.complete, idle)


def start(job_id: str, ahead: Forecast, now: float) -> Start | None:
    """When ``job_id`` starts, from ``ahead``, and the job whose end frees its GPUs (the
    one that ends at its start; None when its start is not at an end: it comes at a later
    decision, or from a job that shrinks). None when the forecast cannot say."""
    guess = ahead.estimates.get(job_id)
    if guess is None or guess.start is None:
        return None
    ends = [
        (e.end, other)
        for other, e in ahead.estimates.items()
        if other != job_id and e.end is not None and e.end <= guess.start + SAME_S
    ]
    end, after = max(ends) if ends else (None, None)
    if end is None or guess.start - end > SAME_S:
        after = None
    return Start(max(guess.start - now, 0.0), after)


class Estimates:
    """The forecast of ``service``'s open jobs (``await estimates.forecast()``)."""

    def __init__(self, service: SchedulerService) -> None:
        self.service = service
        # A policy of its own: the forward run decides in another thread.
        self._policy = policies.make(service.policy, service.policy_params)
        self._lock = asyncio.Lock()
        self._last = Outlook(0.0, {})
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

    async def forecast(self) -> Outlook:
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
                result = await asyncio.to_thread(outlook, self._policy, snap, now)
            except Exception:
                if not self._failed:
                    self.service.log.exception("elastic-gpu: the queue's forecast failed")
                self._failed = True
                result = Outlook(now, {}, complete=False)
            self.runs += 1
            self._last, self._version, self._shape = result, version, shape
            return result
