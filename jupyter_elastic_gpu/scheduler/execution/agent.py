"""Shared mode: a user's own Jupyter server starts the sidecars of that user's jobs.

The shared daemon decides but never starts processes (it may run as another account); each
user's server polls it for launches of its user's jobs and starts them with the local
launcher, so trainers run as the user who submitted them. It removes the directories of its
user's expired jobs the same way (``retention.py``). Level-triggered: a launch the daemon
still lists after the sidecar started is ignored; one that was lost is listed again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...errors import ElasticGPUError
from ..principal import Principal
from ..storage import jobdirs
from .launcher import BaseLauncher

log = logging.getLogger(__name__)  # under the package logger, which the app adopts


class LaunchAgent:
    def __init__(
        self, backend: Any, launcher: BaseLauncher, who: Principal, interval_s: float = 1.0
    ) -> None:
        self.backend, self.launcher, self.who, self.interval_s = backend, launcher, who, interval_s
        self.started: dict[tuple[str, int], dict[str, Any]] = {}
        self._complained = False

    async def run_once(self) -> int:
        """Start every listed launch not started yet (forgetting the ended ones no longer
        listed), and remove the directories of expired jobs; returns how many were started."""
        started = 0
        listed = await self.backend.launches(self.who)
        keys = {(request.job_id, request.generation) for request in listed.launches}
        for request in listed.launches:
            key = (request.job_id, request.generation)
            record = self.started.get(key)
            if record is not None and self.launcher.alive(record) is not False:
                continue
            self.started[key] = await self.launcher.launch(request)
            started += 1
        for key in [k for k in self.started if k not in keys]:
            if self.launcher.alive(self.started[key]) is False:  # over: as if never started
                del self.started[key]
        if listed.ended:
            await self._end(set(listed.ended))
        if listed.expired:
            await self._remove(listed.expired)
        return started

    async def _end(self, job_ids: set[str]) -> None:
        """End every process started for these jobs, whose claim the scheduler voided."""
        for key in [k for k in self.started if k[0] in job_ids]:
            record = self.started.pop(key)
            if await self.launcher.end(record):
                log.warning("elastic-gpu: job %s: its processes were ended (claim void)", key[0])

    async def _remove(self, expired: list[Any]) -> None:
        """Remove expired jobs' dirs as this server's user, then say they are gone (one that
        cannot be removed is said in the log and not listed again)."""
        for job in expired:
            try:
                await asyncio.to_thread(jobdirs.remove_job_dir, job.job_dir, job.id)
            except (OSError, ElasticGPUError) as e:
                log.warning(
                    "elastic-gpu: expired job %s: its directory %s is left in place: %s",
                    job.id,
                    job.job_dir,
                    getattr(e, "message", None) or e,
                )
        await self.backend.removed(self.who, {"jobs": [job.id for job in expired]})

    async def run(self) -> None:
        while True:
            try:
                await self.run_once()
                self._complained = False
            except ElasticGPUError as e:
                if not self._complained:
                    log.warning("elastic-gpu: cannot fetch launches: %s", e.message)
                    self._complained = True
            except Exception:
                log.exception("elastic-gpu: launch agent round failed")
            await asyncio.sleep(self.interval_s)
