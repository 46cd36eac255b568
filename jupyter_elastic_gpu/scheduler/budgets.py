"""What one user may keep in the scheduler: open jobs and stored bytes.

A shared scheduler holds every user's jobs in memory and in its database, and each open job
costs every decision and every forecast a little. ``max_open_jobs`` and ``max_stored_bytes``
(``c.SchedulerService``) bound what one user's submissions take, admins' included: a
submission past either is refused before anything changes (429, 507), with the figure, the
limit and the setting. Kernels' GPU leases are not counted: each is bound to a running kernel.

The tally is kept per user as jobs are submitted, each job's stored bytes measured once, so a
submission looks at its own user's jobs only, never at the database or at everyone's jobs; a
job that left the scheduler (expired) drops out of it at its user's next submission.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OverStorageBudget, TooManyJobs
from ..models import SubmitRequest
from .interactive import is_lease
from .jobs import JobRecord
from .settings import SchedulerSettings


def stored_bytes(spec: SubmitRequest) -> int:
    """What a job's request takes in the database: its script, args, name, paths ... as the
    record keeps them (JSON)."""
    return len(spec.model_dump_json(exclude={"inputs"}))


def _mb(n: float) -> str:
    return f"{n / 2**20:.3g} MB"


class UserTally:
    """Each user's submitted jobs still in ``jobs`` (the service's), with their stored bytes,
    held to the limits of ``settings`` (the live ``max_open_jobs`` and ``max_stored_bytes``)."""

    def __init__(self, jobs: Mapping[str, JobRecord], settings: SchedulerSettings) -> None:
        self._jobs, self.settings = jobs, settings
        self._users: dict[str, dict[str, int]] | None = None

    def _of(self, user: str) -> dict[str, int]:
        if self._users is None:  # first use: the jobs loaded from the database, once
            self._users = {}
            for job in self._jobs.values():
                if not is_lease(job):
                    self._users.setdefault(job.user, {})[job.id] = stored_bytes(job.spec)
        mine = self._users.setdefault(user, {})
        for job_id in [j for j in mine if j not in self._jobs]:
            del mine[job_id]
        return mine

    def check(self, user: str, spec: SubmitRequest) -> int:
        """The stored bytes of a new job of ``user`` with ``spec``, or TooManyJobs /
        OverStorageBudget when it would take them past the limits."""
        mine = self._of(user)
        size = stored_bytes(spec)
        section = f"c.{type(self.settings).__name__}"
        most = self.settings.max_open_jobs
        if most:
            open_jobs = sum(1 for job_id in mine if not self._jobs[job_id].final)
            if open_jobs >= most:
                raise TooManyJobs(
                    f"{user} has {open_jobs} open jobs, the most one user may have "
                    f"({section}.max_open_jobs = {most}): wait until some finish, or cancel "
                    "some"
                )
        most = self.settings.max_stored_bytes
        used = sum(mine.values())
        if most and used + size > most:
            raise OverStorageBudget(
                f"{user}'s jobs take {_mb(used)} of the scheduler's database and this one "
                f"{_mb(size)}; one user may keep {_mb(most)} ({section}.max_stored_bytes = "
                f"{most}): finished jobs give theirs back when they expire (job_retention_days; "
                "`jupyter elastic-gpu keep JOB --off` for kept ones), and a script that "
                "imports its code from a file takes less"
            )
        return size

    def add(self, job: JobRecord, size: int) -> None:
        """Count ``job`` (just submitted, ``size`` from ``check``)."""
        self._of(job.user)[job.id] = size
