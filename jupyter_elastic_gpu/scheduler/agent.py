"""Shared mode: a user's own Jupyter server starts the sidecars of that user's jobs.

The shared daemon decides but never starts processes (it may run as another account); each
user's server polls it for launches of its user's jobs and starts them with the local
launcher, so trainers run as the user who submitted them. Level-triggered: a launch the daemon
still lists after the sidecar started is ignored; one that was lost is listed again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import ElasticGPUError
from .launcher import BaseLauncher
from .principal import Principal

log = logging.getLogger("jupyter_elastic_gpu")


class LaunchAgent:
    def __init__(
        self, backend: Any, launcher: BaseLauncher, who: Principal, interval_s: float = 1.0
    ) -> None:
        self.backend, self.launcher, self.who, self.interval_s = backend, launcher, who, interval_s
        self.started: dict[tuple[str, int], dict[str, Any]] = {}
        self._complained = False

    async def run_once(self) -> int:
        """Start every listed launch not started yet; returns how many were started."""
        started = 0
        for request in (await self.backend.launches(self.who)).launches:
            key = (request.job_id, request.generation)
            record = self.started.get(key)
            if record is not None and self.launcher.alive(record) is not False:
                continue
            self.started[key] = await self.launcher.launch(request)
            started += 1
        return started

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
