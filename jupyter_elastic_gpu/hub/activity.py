"""A queued or running job counts as its owner's activity at the Hub.

jupyterhub-idle-culler stops servers, and with ``--cull-users`` deletes users, whose last
activity is old. A user waiting for a long training job has no browser open, yet their work
is not idle: the service tells the Hub, every ``interval_s``, that each user with an open job
is active, and so is their default server (``POST /hub/api/users/NAME/activity``; the
service's role needs ``users:activity`` and nothing else). Stopping a server does not stop
its user's trainers anyway (docs/jupyterhub.md); the report keeps the server that launches a
queued job's trainer, and the user, from being culled while the job waits or runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..scheduler.jobs import JobRecord

log = logging.getLogger(__name__)  # under the package logger, which the app adopts

#: Status the Hub answers when the user has no default server (only user activity is kept).
NO_SUCH_SERVER = 400


def open_job_users(jobs: Iterable[JobRecord]) -> list[str]:
    """The owners of jobs that are queued or running (not done, failed or cancelled)."""
    return sorted({job.user for job in jobs if not job.final})


class ActivityReporter:
    """Reports the activity of users with open jobs to the Hub's API."""

    def __init__(
        self,
        api_url: str,
        token: str,
        jobs: Callable[[], Iterable[JobRecord]],
        interval_s: float,
    ) -> None:
        self.api_url = api_url.rstrip("/") + "/"
        self.token, self.jobs, self.interval_s = token, jobs, interval_s
        self.client = AsyncHTTPClient()
        self._complained: set[str] = set()

    async def _post(self, user: str, body: dict) -> int:
        request = HTTPRequest(
            f"{self.api_url}users/{quote(user, safe='')}/activity",
            method="POST",
            body=json.dumps(body),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            request_timeout=20,
        )
        try:
            return (await self.client.fetch(request)).code
        except HTTPClientError as e:
            return e.code

    async def report_once(self) -> dict[str, int]:
        """Report every user with an open job now; returns {user: the Hub's status}."""
        now = datetime.now(timezone.utc).isoformat()
        answers = {}
        for user in open_job_users(self.jobs()):
            status = await self._post(
                user, {"last_activity": now, "servers": {"": {"last_activity": now}}}
            )
            if status == NO_SUCH_SERVER:
                status = await self._post(user, {"last_activity": now})
            answers[user] = status
            if status >= 300 and user not in self._complained:
                self._complained.add(user)
                log.warning(
                    "elastic-gpu: the Hub answered %s to the activity report of %s (403: give "
                    "the service's role the users:activity scope)",
                    status,
                    user,
                )
        return answers

    async def run(self) -> None:
        while True:
            try:
                await self.report_once()
            except Exception as e:  # the Hub down or restarting: try again next round
                log.warning("elastic-gpu: cannot report activity to the Hub: %s", e)
            await asyncio.sleep(self.interval_s)
