"""Users' own Jupyter servers, as a scheduler that does not start sidecars itself sees them.

In shared and JupyterHub modes a user's jobs start from their own server, which polls for its
launches (``launches.py``). A user whose server has not polled within ``server_timeout`` has
nobody to start their jobs: their queued jobs wait for it instead of being given GPUs nobody
would use, and the policy sees them again once it polls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from elastic_gpu_sidecar.protocol import JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Told
from .jobs import JobRecord
from .settings import SchedulerSettings

#: What a queued job of a user whose own Jupyter server is gone says (``server_timeout``).
WAITING_FOR_SERVER = Told(ReasonKind.WAITING_FOR_SERVER)


class UserServers:
    """When each user's server last polled, and whose jobs wait for theirs.

    Given whether this scheduler starts the sidecars itself (then no job waits for a server),
    its live settings (``server_timeout``) and ``poke``, to decide again when a server that
    was gone polls: its user's jobs may be given GPUs again."""

    def __init__(
        self, *, starts_processes: bool, settings: SchedulerSettings, poke: Callable[[], None]
    ) -> None:
        self.starts_processes, self.settings, self.poke = starts_processes, settings, poke
        self._seen: dict[str, float] = {}  # user -> last poll of their server's agent
        #: Users whose queued jobs wait for their server (as of the last ``step``).
        self.absent: frozenset[str] = frozenset()

    def restarted(self, users: Iterable[str], now: float) -> None:
        """After a restart: these users' servers get one timeout to poll again."""
        for user in users:
            self._seen[user] = now

    def polled(self, user: str, now: float) -> None:
        """``user``'s server asked for its launches: it is there to start them."""
        self._seen[user] = now
        if user in self.absent:
            self.poke()

    def step(self, jobs: Iterable[JobRecord], now: float) -> bool:
        """Look again at whose server is gone: users with open jobs whose server has not
        polled within ``server_timeout``; whether that changed (their jobs change with it)."""
        if self.starts_processes:
            return False
        timeout = self.settings.server_timeout
        absent = frozenset(
            job.user
            for job in jobs
            if not job.final and now - self._seen.get(job.user, -math.inf) > timeout
        )
        changed, self.absent = absent != self.absent, absent
        return changed

    def waits(self, job: JobRecord) -> bool:
        """Whether ``job`` is queued while nobody is there to start it: its owner's server."""
        return job.state == JobState.QUEUED and job.user in self.absent
