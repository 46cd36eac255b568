"""Which jobs a list shows: the options ``jupyter elastic-gpu status`` and ``%elastic_jobs``
share (``--all``, ``--state``, ``--user``, ``--since``), the query they send (``GET status``,
``GET jobs``: ``models.JobFilter``, which the scheduler applies), and the line that says what
the list left out.

Without ``--all`` or ``--since`` a list shows the open jobs and those that ended within
``DEFAULT_WINDOW``: what a person means by "my jobs" on a box that has run thousands.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from elastic_gpu_sidecar.protocol import JobState

from .errors import BadRequest
from .models import JobFilter

#: What a list shows of finished jobs without --all or --since (a --since value).
DEFAULT_WINDOW = "24h"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")

#: (flags, argparse keyword arguments) of every option of a job list.
FILTER_OPTIONS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        ("--all",),
        {
            "action": "store_true",
            "help": "every job the scheduler keeps (default: the open jobs and those finished "
            f"in the last {DEFAULT_WINDOW})",
        },
    ),
    (
        ("--state",),
        {
            "metavar": "S,...",
            "help": f"only jobs in these states: {', '.join(JobState.values())}",
        },
    ),
    (
        ("--user",),
        {"metavar": "NAME", "help": "only NAME's jobs (another user's: admins only)"},
    ),
    (
        ("--since",),
        {
            "metavar": "WHEN",
            "help": "finished jobs that ended since WHEN: a time back from now (90m, 36h, 7d, "
            f"2w) or a date (2025-03-01, 2025-03-01T14:00); default {DEFAULT_WINDOW}",
        },
    ),
]


def add_filter_options(parser: argparse.ArgumentParser | Any) -> None:
    for flags, kwargs in FILTER_OPTIONS:
        parser.add_argument(*flags, **kwargs)


def magic_filter_options(func: Callable) -> Callable:
    """Decorate a magic with every list option (IPython's ``@argument``)."""
    from IPython.core.magic_arguments import argument

    for flags, kwargs in reversed(FILTER_OPTIONS):
        func = argument(*flags, **kwargs)(func)
    return func


def parse_since(text: str, now: float) -> float:
    """``--since``: epoch seconds from a duration back from ``now`` or a local date/time;
    ValueError saying what is expected."""
    match = _DURATION.match(text)
    if match:
        return max(now - float(match.group(1)) * _UNITS[match.group(2)], 0.0)
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise ValueError(
            f"--since: expected a time back from now (90m, 36h, 7d, 2w) or a date "
            f"(2025-03-01, 2025-03-01T14:00), got {text!r}"
        ) from None


def job_filter(args: argparse.Namespace, now: float) -> JobFilter:
    """The filter the options ask for (the recent jobs by default); ValueError naming the
    option when one is wrong. Checked here as the scheduler checks it: nothing bad is sent."""
    if args.all and args.since is not None:
        raise ValueError("--all and --since do not go together: give one of them")
    since = None if args.all else parse_since(args.since or DEFAULT_WINDOW, now)
    query = {
        "all": "true" if args.all else None,
        "state": args.state,
        "user": args.user,
        "since": None if since is None else repr(since),
    }
    try:
        return JobFilter.from_query(query.get)
    except BadRequest as e:
        flagged = re.sub(r"^(job filter: )?(state|user|since):", r"--\2:", e.message)
        raise ValueError(flagged) from None


def hidden_line(hidden: int, args: argparse.Namespace) -> str | None:
    """What a list says about the finished jobs it left out, and how to see them."""
    if not hidden:
        return None
    jobs = "job" if hidden == 1 else "jobs"
    if args.since:
        return f"{hidden} finished {jobs} ended earlier than --since {args.since}: --all lists them"
    return (
        f"{hidden} finished {jobs} ended more than {DEFAULT_WINDOW} ago: --since 7d (or "
        "--all) lists them"
    )
