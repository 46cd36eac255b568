"""Why a job has the GPUs it has, and why GPUs sit idle: the figures behind a decision.

A policy gives every job a ``Reason`` (``Decision.reasons``): a small frozen value holding the
figures the policy decided on (GPUs needed and free, who holds them, what a resize costs and
what it would save, how long a job has left). Each has a ``kind`` and ``figures()``, the data
the API sends (``reason_kinds``), and ``str(reason)`` is their text (``reason_text.say``).
Drivers add what only they know (``Start``: when a queued job should start, from the
forecast; the names of the jobs a reason mentions) where they show it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .reason_kinds import Ahead, Because, IdleCause, JobRef, ReasonFigures, ReasonKind
from .reason_text import NAMED_HOLDERS, about, cause, plural, say, start_words

K = ReasonKind

#: Why a running job keeps its GPUs whatever else happens (``Kept.because``).
IN_PROGRESS: Because = "in_progress"
FINISHING: Because = "finishing"
RESIZED: Because = "resized"
STARTED: Because = "started"


def _given(**figures: Any) -> ReasonFigures:
    """The figures that are known (None: not said)."""
    return {k: v for k, v in figures.items() if v is not None}  # type: ignore[return-value]


class Reason:
    """Why one job has what a decision gives it: ``kind`` and ``figures()`` are what the API
    sends, ``str()`` their text; ``cause()`` says how it keeps GPUs idle (for ``Idle``)."""

    __slots__ = ()
    kind: ReasonKind = K.RUNNING

    def figures(self) -> ReasonFigures:
        return {}

    def __str__(self) -> str:
        return say(self.kind, self.figures())

    def cause(self, job_id: str, public: bool = False) -> str | None:
        """Why ``job_id`` takes none of the idle GPUs, as part of an ``Idle`` sentence (None:
        it has nothing to do with them); ``public``: for someone who may not see the job."""
        return cause({"id": job_id}, self.kind, self.figures(), public)


@dataclass(frozen=True, slots=True)
class Told(Reason):
    """A reason a driver gives as it is (a state change only it knows of): its kind and
    figures."""

    kind: ReasonKind  # type: ignore[misc]
    given: Mapping[str, Any] | None = None

    def figures(self) -> ReasonFigures:
        return dict(self.given or {})  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Waiting(Reason):
    """A job that gets no GPUs: what it needs, what is free, and who holds the rest.

    ``holders`` are the jobs that hold GPUs in the decision, each with why it comes first."""

    needs: int
    free: int
    holders: tuple[tuple[str, Ahead], ...] = ()
    suspended: bool = False
    kind = K.WAITING

    def figures(self) -> ReasonFigures:
        named: list[JobRef] = [{"id": i, "ahead": a} for i, a in self.holders[:NAMED_HOLDERS]]
        others = len(self.holders) - len(named)
        return _given(
            needs=self.needs,
            free=self.free,
            holders=named or None,
            others=others or None,
            suspended=self.suspended or None,
        )


@dataclass(frozen=True, slots=True)
class Apart(Reason):
    """A job that waits although as many GPUs as it needs are free: no group of them (a
    server, or one kind on a server where kinds are mixed) holds its minimum together.
    ``kinds``: the free GPUs by kind (``2 A100-80GB, 1 T4``), where kinds are mixed."""

    needs: int
    free: int
    widest: int
    kinds: str = ""
    suspended: bool = False
    kind = K.SPREAD

    def figures(self) -> ReasonFigures:
        return _given(
            needs=self.needs,
            free=self.free,
            widest=self.widest,
            kinds=self.kinds or None,
            suspended=self.suspended or None,
        )


@dataclass(frozen=True, slots=True)
class Running(Reason):
    """A job at the size a fixed-size policy gives it (its request)."""

    gpus: int

    def figures(self) -> ReasonFigures:
        return {"gpus": self.gpus}


@dataclass(frozen=True, slots=True)
class AtMaximum(Running):
    kind = K.AT_MAXIMUM


@dataclass(frozen=True, slots=True)
class Kept(Running):
    """A job whose grant is kept as it is, ``because`` (one of the values above).

    The figures where they exist: ``left_s`` and ``cost_s`` for a job about to finish (it has
    less than a few resizes of work left), ``hold_s`` for one changed moments ago (how long
    it is left alone after a change) and ``changed_at`` (when)."""

    because: Because = IN_PROGRESS
    left_s: float | None = None
    cost_s: float | None = None
    hold_s: float | None = None
    changed_at: float | None = None
    kind = K.KEPT

    def figures(self) -> ReasonFigures:
        return _given(
            gpus=self.gpus,
            because=self.because,
            left_s=self.left_s,
            cost_s=self.cost_s,
            hold_s=self.hold_s,
            changed_at=self.changed_at,
        )


@dataclass(frozen=True, slots=True)
class Elastic(Reason):
    """A running elastic job below its maximum ``top``; subclasses say why."""

    gpus: int
    top: int

    def figures(self) -> ReasonFigures:
        return {"gpus": self.gpus, "top": self.top}


@dataclass(frozen=True, slots=True)
class Critical(Elastic):
    kind = K.CRITICAL


@dataclass(frozen=True, slots=True)
class Crowded(Elastic):
    """No GPU is free: the ones it could add do more for other jobs."""

    kind = K.CROWDED


@dataclass(frozen=True, slots=True)
class NoFaster(Elastic):
    """GPUs are free, but the job's speed model says it would go no faster on them."""

    kind = K.NO_FASTER


@dataclass(frozen=True, slots=True)
class ResizeWouldNotPay(Elastic):
    """GPUs are free, but growing to ``to`` GPUs would save ``gain_s`` seconds of the job's
    time left, less than the ``need_s`` a resize that costs ``cost_s`` must save (the policy's
    margin: docs/policies.md)."""

    to: int = 0
    cost_s: float = 0.0
    gain_s: float = 0.0
    need_s: float = 0.0
    kind = K.RESIZE_WOULD_NOT_PAY

    def figures(self) -> ReasonFigures:
        return {
            "gpus": self.gpus,
            "top": self.top,
            "to": self.to,
            "cost_s": self.cost_s,
            "gain_s": self.gain_s,
            "need_s": self.need_s,
        }


@dataclass(frozen=True, slots=True)
class Resized(Elastic):
    """A running job this decision resizes from ``held`` GPUs, and what it does to its time
    left: a grow saves ``change_s`` seconds (before the ``cost_s`` pause), a shrink makes it
    end ``-change_s`` later, to make room for ``for_job`` (the first job that gains GPUs in
    the decision; ``starts``: it starts now, else it grows)."""

    held: int = 0
    cost_s: float = 0.0
    change_s: float = 0.0
    for_job: str | None = None
    starts: bool = False
    kind = K.RESIZED

    def figures(self) -> ReasonFigures:
        room: JobRef | None = None
        if self.for_job is not None and self.gpus < self.held:
            room = {"id": self.for_job, "starts": self.starts}
        return _given(
            gpus=self.gpus,
            top=self.top,
            held=self.held,
            cost_s=self.cost_s,
            change_s=self.change_s,
            for_job=room,
        )


@dataclass(frozen=True, slots=True)
class Limited(Reason):
    """A job a per-user limit keeps waiting (``gpus`` 0) or at ``gpus`` of up to ``top``;
    ``limit`` is the limit's figures (``user_cap``, or fair share's ``share``)."""

    limit: ReasonFigures
    gpus: int = 0
    top: int = 0
    suspended: bool = False
    kind = K.LIMITED

    def figures(self) -> ReasonFigures:
        return {
            **self.limit,
            **_given(gpus=self.gpus or None, top=self.top or None),
            **_given(suspended=self.suspended or None),
        }


def user_cap(user: str, cap: int) -> ReasonFigures:
    """The per-user cap as a ``Limited.limit``."""
    return {"user": user, "cap": cap}


@dataclass(frozen=True, slots=True)
class Start:
    """When a queued job should get GPUs: in ``in_s`` seconds, when ``after`` (a job id, or
    None) finishes, on GPUs of kind ``on`` where kinds are mixed. A driver's addition to a
    waiting job's figures, from the forecast."""

    in_s: float
    after: str | None = None
    on: str | None = None

    def figures(self) -> ReasonFigures:
        return _given(
            start_in_s=self.in_s,
            start_after={"id": self.after} if self.after else None,
            start_kind=self.on or None,
        )

    def __str__(self) -> str:
        return start_words(self.in_s, self.on, self.after)


@dataclass(frozen=True, slots=True)
class Cause:
    """One job's part in leaving GPUs idle."""

    job_id: str
    user: str
    reason: Reason


@dataclass(frozen=True, slots=True)
class Idle:
    """Why ``gpus`` usable GPUs get no job at time ``at``: the jobs that could take them and
    why they do not (none: no job can use more)."""

    gpus: int
    causes: tuple[Cause, ...] = ()
    at: float | None = None
    kind = K.IDLE

    def figures(self, may_see: Callable[[str], bool] | None = None) -> ReasonFigures:
        """The figures, for a reader who may see the jobs of the users ``may_see`` accepts
        (None: all); another user's job is named without its figures."""
        causes: list[IdleCause] = []
        for c in self.causes:
            said: IdleCause = {"job": {"id": c.job_id}, "kind": c.reason.kind}
            figures = c.reason.figures()
            if may_see is None or may_see(c.user):
                said["figures"] = figures
            else:  # why it is kept, never its numbers
                said["public"] = True
                if "because" in figures:
                    said["figures"] = {"because": figures["because"]}
            causes.append(said)
        return _given(gpus=self.gpus, causes=causes or None, at=self.at)

    def text(self, may_see: Callable[[str], bool] | None = None) -> str:
        """The sentence, for the reader ``figures`` says."""
        return say(self.kind, self.figures(may_see))

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
    "Apart",
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
    "ReasonKind",
    "ResizeWouldNotPay",
    "Resized",
    "Running",
    "Start",
    "Told",
    "Waiting",
    "about",
    "plural",
    "user_cap",
]
