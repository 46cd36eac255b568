"""When queued jobs start and running jobs end: the forecast of the live state, cached.

The forward run (``sim/forecast.py``) costs about as much as a few hundred decisions, so it
runs in a worker thread while the event loop goes on serving, at most once per state version,
one at a time, and every caller shares the run in flight. It runs under a budget
(``c.SchedulerService.forecast_budget`` seconds, ``forecast_jobs`` jobs played forward): the
jobs past it have no estimate, and the forecast says which bound cut it (``limits``; a queue
entry's ``estimate_limit``). No caller waits for a run longer than ``WAIT_S`` (nor the budget):
past it, it answers from the last forecast made, and the run's end is a new state version, so
that watchers (the panel) read its estimates. A new version that changed no job's state,
grant, size or measured speeds (a progress report, the common case) reuses a forecast younger
than ``REUSE_S``: its estimates are times, which stay true while the jobs go as forecast, and
the queue's estimates do not churn at every heartbeat. A forward run that fails leaves the
estimates empty (the queue is still answered) and is logged once.

The same run says why GPUs stay idle (``Outlook.idle``, from the policy's decision now) and,
for a queued job, when it starts and which job's end it waits for (``start``): the figures the
queue and the status add to the reasons the policy gave.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, fields
from typing import Any

from ..core.model import Snapshot
from ..core.policies import Policy
from ..core.reasons import EstimateLimit, Idle, Start
from ..core.schedule import decide, idle_reason
from ..sim.forecast import Forecast, forecast, played_forward
from . import policies
from .jobs import JobRecord
from .settings import SchedulerSettings

#: Seconds a forecast is reused across versions that changed only the jobs' progress.
REUSE_S = 30.0
#: A queued job whose forecast start lies this close after another job's end waits for it.
SAME_S = 1.0
#: The share of the budget the forward run may decide in: its last decision and the hand-over
#: to the event loop fit in the rest.
RUN_SHARE = 0.75
#: Longest a caller waits for the run in flight (the budget, if shorter): a short queue's run
#: is done by then, a long one's answers come from the last forecast meanwhile.
WAIT_S = 0.1


@dataclass(frozen=True)
class Outlook(Forecast):
    """The forecast, and why GPUs stay idle at its time (None: none does)."""

    idle: Idle | None = None


def outlook(
    policy: Policy,
    snap: Snapshot,
    now: float,
    order: Sequence[str] = (),
    max_jobs: int | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
) -> Outlook:
    """``snap`` played forward from ``now`` (bounded as ``forecast`` is), and why the decision
    now leaves GPUs idle."""
    policy = played_forward(policy)  # in this thread: never the policy's own choice
    idle = idle_reason(snap, decide(policy, snap, now), now)
    ahead = forecast(policy, snap, now, max_jobs=max_jobs, order=order, out_of_time=out_of_time)
    return Outlook(**{f.name: getattr(ahead, f.name) for f in fields(Forecast)}, idle=idle)


def limit(job_id: str, ahead: Forecast) -> EstimateLimit | None:
    """Why ``ahead`` has no (or only a start) estimate for ``job_id``: the bound that cut the
    run before it; None when its estimates are whole or nothing could be said (it never fits)."""
    if job_id in ahead.skipped:
        return "jobs"
    guess = ahead.estimates.get(job_id)
    if guess is None:  # newer than the forecast: the one of its state was not ready in time
        return "time"
    if guess.end is not None:
        return None
    return next((cut for cut in ahead.limits if cut != "jobs"), None)


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
    return Start(max(guess.start - now, 0.0), after, guess.kind)


class Estimates:
    """The forecast of the service's open jobs (``await estimates.forecast()``).

    Given the job table, the live settings (its policy and budget), the service's ``decider``
    (whose mode a policy that chooses between modes is played forward in), ``current_version``
    (the state version a forecast is of), what the forecast depends on besides the jobs
    (``gpu_infos``, the ``external`` processes on each GPU, the ``drained`` GPUs),
    ``snapshot`` (the state as the policy sees it), the log and ``changed``, to tell
    watchers of a forecast they missed."""

    def __init__(
        self,
        *,
        jobs: Mapping[str, JobRecord],
        settings: SchedulerSettings,
        decider: Policy,
        current_version: Callable[[], int],
        gpu_infos: Callable[[], list[Any]],
        external: Callable[[], dict[str, list[Any]]],
        drained: Callable[[], Set[str]],
        snapshot: Callable[[], Snapshot],
        log: logging.Logger,
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.jobs, self.settings, self.current_version = jobs, settings, current_version
        self.decider = decider
        self.gpu_infos, self.external, self.drained = gpu_infos, external, drained
        self.snapshot, self.log, self.changed = snapshot, log, changed
        # A policy of its own: the forward run decides in another thread.
        self._policy = policies.make(settings.policy, settings.policy_params)
        self._last = Outlook(0.0, {})
        self._version = -1
        self._shape: Any = None
        self._failed = False
        self._run: asyncio.Task | None = None  # the forward run in flight (one at a time)
        self._run_started = 0.0  # its start (monotonic)
        self._outrun = False  # a caller was answered from an older forecast during the run
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
                j.estimating,  # a forecast made on an unsettled pace is not reused past it
            )
            for j in self.jobs.values()
            if not j.final
        )
        external, drained = self.external(), self.drained()
        gpus = tuple(
            (g.id, not external.get(g.id) and g.id not in drained) for g in self.gpu_infos()
        )
        return jobs, gpus

    async def forecast(self) -> Outlook:
        """The forecast of the current version, or, when its run is not done within
        ``WAIT_S``, the last one made (a run never starts while another is in flight)."""
        version = self.current_version()
        if version == self._version:
            return self._last
        if self._run is None:
            now, shape = time.time(), self.shape()
            if shape == self._shape and now - self._last.at < REUSE_S:
                self._version = version
                return self._last
            self._run_started = time.monotonic()
            self._run = asyncio.ensure_future(self._forward(version, shape, now))
        run = self._run
        wait = min(WAIT_S, self.settings.forecast_budget)
        left = self._run_started + wait - time.monotonic()
        if left > 0:
            await asyncio.wait({run}, timeout=left)  # (a waiter that gives up leaves it be)
        if not run.done():
            self._outrun = True
        return self._last

    async def _forward(self, version: int, shape: Any, now: float) -> None:
        """One forward run of the state at ``version``, within the budget; its result is the
        last forecast."""
        stop = self._run_started + self.settings.forecast_budget * RUN_SHARE
        try:
            snap = self.snapshot()
            ranked = sorted(
                (j for j in self.jobs.values() if not j.final),
                key=lambda j: (j.rank is None, j.rank or 0, j.submitted_at, j.id),
            )  # the queue's order (views.queue)
            # The decider's mode where it chooses one (a policy of its own, as ``_policy``).
            played = played_forward(self.decider)
            result = await asyncio.to_thread(
                outlook,
                self._policy if played is self.decider else played,
                snap,
                now,
                [j.id for j in ranked],
                self.settings.forecast_jobs,
                lambda: time.monotonic() >= stop,
            )
        except Exception:
            if not self._failed:
                self.log.exception("elastic-gpu: the queue's forecast failed")
            self._failed = True
            result = Outlook(now, {}, complete=False)
        finally:
            self._run = None
        self.runs += 1
        self._last, self._version, self._shape = result, version, shape
        if self._outrun:  # callers got an older forecast: this one is news to them
            self._outrun = False
            await self.changed()
