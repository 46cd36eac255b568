"""``logs --follow``: successive tails of one growing log turned into the lines not printed
yet, until the job ends, riding out a restart of the scheduler."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from elastic_gpu_sidecar.protocol import JobState

from .notebook.client import SchedulerClient, SchedulerError

#: Lines fetched per poll by ``logs --follow``: new lines are found by aligning two windows.
FOLLOW_WINDOW = 2000
#: How long ``logs --follow`` rides out an unreachable scheduler (a restart) before giving up.
FOLLOW_RECONNECT_S = 30.0


def new_lines(seen: list[str], current: list[str]) -> tuple[list[str], bool]:
    """The lines of ``current`` after those already ``seen``, and whether some may be missing.

    Both are the last lines of one growing log, so ``current`` starts with a suffix of
    ``seen``: the longest such overlap is taken (the log cannot say more without offsets).
    """
    for skip in range(len(seen) + 1):
        k = len(seen) - skip
        if (
            k <= len(current)
            and (k == 0 or seen[skip] == current[0])
            and seen[skip:] == current[:k]
        ):
            return current[k:], bool(seen) and k == 0 and bool(current)
    return current, False  # not reached: k == 0 always matches


class LogFollower:
    """Turns successive tails of one growing log into the text not printed yet.

    A partial last line is held back until it is complete (or the job has ended), so a line is
    never printed in two pieces.
    """

    GAP = "[... lines skipped: the log grew faster than it was followed ...]\n"

    def __init__(self, tail: int) -> None:
        self.tail = tail
        self.seen: list[str] | None = None

    def feed(self, text: str, final: bool) -> str:
        parts = text.split("\n")  # not splitlines(): a progress bar's "\r" ends no line
        lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] and final else [])
        if self.seen is None:
            fresh, gap = lines[-self.tail :], False
        else:
            fresh, gap = new_lines(self.seen, lines)
        self.seen = lines
        out = (self.GAP if gap else "") + "".join(fresh)
        return out + "\n" if final and out and not out.endswith("\n") else out


def follow_logs(
    client: SchedulerClient,
    job_id: str,
    key: str,
    tail: int,
    interval: float = 1.0,
    out: TextIO | None = None,
) -> dict[str, Any]:
    """Print the log's last ``tail`` lines, then every new line until the job ends; return the
    final job. An unreachable scheduler (a restart) is waited for up to FOLLOW_RECONNECT_S."""
    out = out or sys.stdout
    follower = LogFollower(tail)
    unreachable_since: float | None = None
    while True:
        try:
            job = client.job(job_id)  # state before log: a final state means a complete log
            text = client.logs(job_id, tail=FOLLOW_WINDOW).get(key) or ""
        except SchedulerError as e:
            if e.status is not None:
                raise
            unreachable_since = unreachable_since or time.monotonic()
            if time.monotonic() - unreachable_since > FOLLOW_RECONNECT_S:
                raise
            time.sleep(interval)
            continue
        unreachable_since = None
        final = JobState(job.get("state")).final
        out.write(follower.feed(text, final))
        out.flush()
        if final:
            return job
        time.sleep(interval)
