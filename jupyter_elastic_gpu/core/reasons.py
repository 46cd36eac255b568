"""Why a job has the GPUs it has, and why GPUs sit idle: the figures behind a decision.

A policy gives every job a ``Reason`` (``Decision.reasons``): a small frozen value holding the
figures the policy decided on (GPUs needed and free, what a resize costs and what it would
save, how long a job has left), and ``str(reason)`` writes it for people. This module is the
one place where reasons are put into words; drivers add what only they know (``Start``: when a
queued job should start, from the forecast) and write the text when they show it.

The words are short (a line of the sidebar) and round their figures ("~6 s", "~3 min"): the
figures are estimates, and a text that changed at every progress report would be rewritten
and pushed to every viewer each time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: Why a running job keeps its GPUs whatever else happens (``Kept.because``).
IN_PROGRESS = "its resize is in progress"
FINISHING = "it is about to finish"
RESIZED = "it was resized moments ago"
STARTED = "it started moments ago"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def about(seconds: float) -> str:
    """A duration as an estimate: '~6 s', '~35 s', '~3 min', '~1.5 h', '~2 days'.

    Coarser as it grows (whole seconds under 10 s, then steps of 5 s, minutes, hours), so that
    a figure that drifts as a job progresses changes its text rarely."""
    if not math.isfinite(seconds):
        return "never"
    s = max(seconds, 0.0)
    if s < 0.5:
        return "under 1 s"
    if s < 10:
        return f"~{round(s)} s"
    if s < 57.5:
        return f"~{5 * round(s / 5)} s"
    if s < 59.5 * 60:
        return f"~{max(round(s / 60), 1)} min"
    if s < 23.5 * 3600:
        h = s / 3600
        return f"~{h:.1f} h" if h < 9.95 else f"~{round(h)} h"
    d = s / 86400
    return f"~{d:.1f} days" if d < 9.95 else f"~{round(d)} days"


class Reason:
    """Why one job has what a decision gives it; ``str()`` says it, ``cause()`` says how it
    keeps GPUs idle (for ``Idle``), ``public`` drops what only its owner may read."""

    __slots__ = ()

    def cause(self, job_id: str, public: bool = False) -> str | None:
        """Why ``job_id`` takes none of the idle GPUs, as part of an ``Idle`` sentence (None:
        it has nothing to do with them); ``public``: for someone who may not see the job."""
        return None


@dataclass(frozen=True, slots=True)
class Waiting(Reason):
    """A job that gets no GPUs: what it needs, what is free, and who holds the rest.

    ``holders`` jobs hold GPUs in the decision; ``ahead`` says why they come first, in words
    that agree with their number."""

    needs: int
    free: int
    holders: int = 0
    ahead: str = ""
    suspended: bool = False

    def __str__(self) -> str:
        text = (
            f"{'suspended' if self.suspended else 'queued'}: "
            f"needs {plural(self.needs, 'GPU')}, {self.free} free"
        )
        if self.holders:
            text += f"; GPUs held by {plural(self.holders, 'job')} {self.ahead}"
        return text

    def cause(self, job_id: str, public: bool = False) -> str | None:
        return f"{job_id} needs {self.needs}" if self.needs > self.free else None


@dataclass(frozen=True, slots=True)
class Running(Reason):
    """A job at the size a fixed-size policy gives it (its request)."""

    gpus: int

    def __str__(self) -> str:
        return f"running on {plural(self.gpus, 'GPU')}"


@dataclass(frozen=True, slots=True)
class AtMaximum(Running):
    def __str__(self) -> str:
        return f"running on {plural(self.gpus, 'GPU')} (its maximum)"


@dataclass(frozen=True, slots=True)
class Kept(Running):
    """A job whose lease is kept as it is, ``because`` (one of the phrases above).

    The figures where they exist: ``left_s`` and ``cost_s`` for a job about to finish (it has
    less than a few resizes of work left), ``hold_s`` for one changed moments ago (how long
    it is left alone after a change)."""

    because: str = IN_PROGRESS
    left_s: float | None = None
    cost_s: float | None = None
    hold_s: float | None = None

    def _figures(self) -> str:
        if self.left_s is not None and self.cost_s is not None:
            return f" ({about(self.left_s)} left; a resize costs {about(self.cost_s)})"
        if self.hold_s is not None:
            return f" (left alone {about(self.hold_s)} after a change)"
        return ""

    def __str__(self) -> str:
        return f"running on {plural(self.gpus, 'GPU')}: kept as is because {self.because}" + (
            self._figures()
        )

    def cause(self, job_id: str, public: bool = False) -> str | None:
        return f"{job_id} is kept as is because {self.because}" + (
            "" if public else self._figures()
        )


@dataclass(frozen=True, slots=True)
class Elastic(Reason):
    """A running elastic job below its maximum ``top``; subclasses say why."""

    gpus: int
    top: int

    def _head(self) -> str:
        return f"running on {self.gpus} of up to {self.top} GPUs"


@dataclass(frozen=True, slots=True)
class Critical(Elastic):
    def __str__(self) -> str:
        return (
            f"{self._head()}: on the critical path, these end it in time with the rest of the work"
        )

    def cause(self, job_id: str, public: bool = False) -> str | None:
        return f"{job_id} has what ends it in time with the rest of the work"


@dataclass(frozen=True, slots=True)
class Crowded(Elastic):
    """No GPU is free: the ones it could add do more for other jobs."""

    def __str__(self) -> str:
        return f"{self._head()}: the others help other jobs more"


@dataclass(frozen=True, slots=True)
class NoFaster(Elastic):
    """GPUs are free, but the job's speed model says it would go no faster on them."""

    def __str__(self) -> str:
        return f"{self._head()}: more would not make it faster"

    def cause(self, job_id: str, public: bool = False) -> str | None:
        return f"{job_id} would go no faster on more"


@dataclass(frozen=True, slots=True)
class ResizeWouldNotPay(Elastic):
    """GPUs are free, but growing to ``to`` GPUs would save ``gain_s`` seconds of the job's
    time left, less than the ``need_s`` a resize that costs ``cost_s`` must save (the policy's
    margin: docs/policies.md)."""

    to: int = 0
    cost_s: float = 0.0
    gain_s: float = 0.0
    need_s: float = 0.0

    def _figures(self) -> str:
        text = f"would save {about(self.gain_s)}, a resize costs {about(self.cost_s)}"
        if self.gain_s >= self.cost_s:  # saves more than it costs, but not by the margin
            text += f" (must save {about(self.need_s)})"
        return text

    def __str__(self) -> str:
        return f"{self._head()}: {self.to} {self._figures()}"

    def cause(self, job_id: str, public: bool = False) -> str | None:
        if public:
            return f"growing {job_id} would not pay for its resize"
        return f"growing {job_id} to {self.to} {self._figures()}"


@dataclass(frozen=True, slots=True)
class Resized(Elastic):
    """A running job this decision resizes from ``held`` GPUs, and what it does to its time
    left: a grow saves ``change_s`` seconds (before the ``cost_s`` pause), a shrink makes it
    end ``-change_s`` later (its GPUs do more for other jobs)."""

    held: int = 0
    cost_s: float = 0.0
    change_s: float = 0.0

    def __str__(self) -> str:
        if self.gpus > self.held:
            return (
                f"{self._head()}: grown from {self.held}, saves {about(self.change_s)}, "
                f"a resize costs {about(self.cost_s)}"
            )
        return (
            f"{self._head()}: shrunk from {self.held} for jobs its GPUs help more "
            f"(it ends {about(-self.change_s)} later)"
        )


@dataclass(frozen=True, slots=True)
class Limited(Reason):
    """A job a per-user limit keeps waiting (``gpus`` 0) or at ``gpus`` of up to ``top``;
    ``limit`` is the limit in words (``user_cap``, or fair share's own sentence)."""

    limit: str
    gpus: int = 0
    top: int = 0
    suspended: bool = False

    def __str__(self) -> str:
        if self.gpus:
            return f"running on {self.gpus} of up to {self.top} GPUs: {self.limit}"
        return f"{'suspended' if self.suspended else 'queued'}: {self.limit}"

    def cause(self, job_id: str, public: bool = False) -> str | None:
        return f"{job_id} is at its user's limit" if public else f"{job_id}: {self.limit}"


def user_cap(user: str, cap: int) -> str:
    """The per-user cap as a ``Limited.limit``."""
    return f"{user} may hold at most {plural(cap, 'GPU')} at a time"


@dataclass(frozen=True, slots=True)
class Start:
    """When a queued job should get GPUs: in ``in_s`` seconds, when ``after`` (a job id, or
    None) finishes. A driver's addition to a waiting job's reason, from the forecast."""

    in_s: float
    after: str | None = None

    def __str__(self) -> str:
        when = "starts in under a minute" if self.in_s < 60 else f"starts in {about(self.in_s)}"
        return f"{when}, when {self.after} finishes" if self.after else when


@dataclass(frozen=True, slots=True)
class Cause:
    """One job's part in leaving GPUs idle."""

    job_id: str
    user: str
    reason: Reason


@dataclass(frozen=True, slots=True)
class Idle:
    """Why ``gpus`` usable GPUs get no job: the jobs that could take them and why they do not
    (none: no job can use more)."""

    gpus: int
    causes: tuple[Cause, ...] = ()

    def text(self, may_see: Callable[[str], bool] | None = None) -> str:
        """The sentence, for a reader who may see the jobs of the users ``may_see`` accepts
        (None: all); another user's job is named without its figures."""
        parts = []
        for c in self.causes:
            part = c.reason.cause(c.job_id, public=may_see is not None and not may_see(c.user))
            if part:
                parts.append(part)
        why = "; ".join(parts) or "no job can use more"
        return f"{plural(self.gpus, 'GPU')} idle: {why}"

    def __str__(self) -> str:
        return self.text()


#: Why a queued job has no estimated start: a bound cut the forecast short before it, the
#: jobs played (``max_jobs``), the caller's time, the decisions or the horizon.
EstimateLimit = Literal["jobs", "time", "decisions", "horizon"]


__all__ = [
    "FINISHING",
    "IN_PROGRESS",
    "RESIZED",
    "STARTED",
    "AtMaximum",
    "Cause",
    "Critical",
    "Crowded",
    "Elastic",
    "EstimateLimit",
    "Idle",
    "Kept",
    "Limited",
    "NoFaster",
    "Reason",
    "ResizeWouldNotPay",
    "Resized",
    "Running",
    "Start",
    "Waiting",
    "about",
    "plural",
    "user_cap",
]
