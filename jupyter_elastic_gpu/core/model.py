"""The snapshot a policy decides on, and the decision it returns.

Everything here is a frozen value: a policy cannot change the world, only describe the
allocation it wants. The simulator and the live scheduler both build these from their own
state, which is what makes a policy mean the same thing in a benchmark and in production.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, make_dataclass
from functools import cached_property
from typing import Any

from .fairshare import FairShare
from .reasons import Reason
from .speed import SpeedModel

#: The fewest GPUs a job runs on when it does not say.
DEFAULT_MIN_GPUS = 1


def gpu_counts(
    min_gpus: int, max_gpus: int | None, requested_gpus: int | None, every: int
) -> tuple[int, int, int]:
    """(min, max, requested): the one rule for the counts a job leaves out. ``max_gpus``
    omitted is ``every`` GPU the job may have (the scheduler shrinks it when others need
    them); ``requested_gpus`` omitted is ``min_gpus``; neither is above ``every``. A
    ``min_gpus`` above ``every`` is the caller's to refuse."""
    top = every if max_gpus is None else min(max_gpus, every)
    want = min_gpus if requested_gpus is None else requested_gpus
    return min_gpus, top, min(want, top)


class InvalidJob(ValueError):
    """A job description that no policy could honour (e.g. min_gpus > max_gpus)."""


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU. ``healthy`` is False when it is failed or used by a process we did not start."""

    id: str
    node: str = "node0"
    healthy: bool = True
    #: What kind of GPU it is (``A100-SXM4-80GB``); GPUs of one kind are interchangeable.
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Job:
    """A training job as the scheduler sees it at one instant.

    ``total_work``/``work_done`` are in the job's work units; ``speed`` turns them into time.
    ``gpus`` is the current grant (empty: queued or suspended). ``resize_cost`` is the
    measured seconds without progress that one change of grant costs this job.
    """

    id: str
    submit_time: float
    total_work: float
    min_gpus: int = DEFAULT_MIN_GPUS
    max_gpus: int = DEFAULT_MIN_GPUS
    requested_gpus: int | None = None
    work_done: float = 0.0
    user: str = "default"
    weight: float = 1.0
    speed: SpeedModel = field(default_factory=SpeedModel)
    resize_cost: float = 0.0
    gpus: tuple[str, ...] = ()
    started: bool = False
    attained_gpu_s: float = 0.0
    queued_s: float = 0.0
    resizes: int = 0
    last_change: float | None = None
    pinned: bool = False

    def __post_init__(self) -> None:
        if self.min_gpus < 1:
            raise InvalidJob(f"job {self.id}: min_gpus must be at least 1, got {self.min_gpus}")
        if self.max_gpus < self.min_gpus:
            raise InvalidJob(
                f"job {self.id}: max_gpus ({self.max_gpus}) is below min_gpus ({self.min_gpus})"
            )
        if self.requested_gpus is None:
            requested = gpu_counts(self.min_gpus, self.max_gpus, None, self.max_gpus)[2]
            object.__setattr__(self, "requested_gpus", requested)
        elif not self.min_gpus <= self.requested_gpus <= self.max_gpus:
            raise InvalidJob(
                f"job {self.id}: requested_gpus ({self.requested_gpus}) must lie between "
                f"min_gpus ({self.min_gpus}) and max_gpus ({self.max_gpus})"
            )
        if self.total_work < 0 or self.work_done < 0:
            raise InvalidJob(f"job {self.id}: work must not be negative")
        if self.weight <= 0:
            raise InvalidJob(f"job {self.id}: weight must be positive, got {self.weight}")

    @property
    def remaining_work(self) -> float:
        return max(self.total_work - self.work_done, 0.0)

    @property
    def running(self) -> bool:
        return bool(self.gpus)

    def remaining_time(self, gpus: int) -> float:
        """R(g): seconds to finish at ``gpus`` GPUs, from the speed model."""
        return self.speed.remaining_time(self.remaining_work, gpus)


#: ``Job``'s slots in a class that is neither frozen nor checked, which ``trusted_job`` fills at
#: plain attribute speed and then makes a Job.
_JobValues = make_dataclass(
    "_JobValues", [f.name for f in fields(Job)], slots=True, eq=False, repr=False
)


#: ``Job``'s fields in order: the order ``trusted_job`` takes them in. Its callers pass them by
#: position (``sim/simjob.py``, ``sim/forecast.py``); when the fields change, this fails at
#: import so that they change with them.
JOB_FIELDS = (
    "id",
    "submit_time",
    "total_work",
    "min_gpus",
    "max_gpus",
    "requested_gpus",
    "work_done",
    "user",
    "weight",
    "speed",
    "resize_cost",
    "gpus",
    "started",
    "attained_gpu_s",
    "queued_s",
    "resizes",
    "last_change",
    "pinned",
)
if tuple(f.name for f in fields(Job)) != JOB_FIELDS:  # pragma: no cover
    raise ImportError(
        "core.model.Job's fields changed: update JOB_FIELDS and the callers of trusted_job"
    )


def trusted_job(*values: object) -> Job:
    """A Job of every field's value in order (``JOB_FIELDS``), without ``Job``'s checks, three
    times faster than ``Job(*values)``: for a driver that builds the same jobs again and again
    and had each through ``Job``'s checks once (the simulator at each decision, the forecast at
    each step of its forward run)."""
    job = _JobValues(*values)
    job.__class__ = Job
    return job


@dataclass(frozen=True)
class Snapshot:
    """GPUs and the active (queued or running) jobs at one instant, and the rules they share.

    ``user_gpu_cap`` is the most GPUs one user's jobs may hold at a time (0: no cap);
    ``fair_share`` the weights and usage that share the GPUs between users (None: off).
    Policies read neither: ``core.schedule.decide`` applies both around any policy.
    ``kind_speed``: where the GPUs are of several kinds, each job's speed on each kind
    (``core/kinds.py``), which placement weighs (the fast kind to the job that gains most).
    """

    gpus: tuple[Gpu, ...]
    jobs: tuple[Job, ...]
    user_gpu_cap: int = 0
    fair_share: FairShare | None = None
    kind_speed: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cap = self.user_gpu_cap
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ValueError(
                f"user_gpu_cap must be a whole number of GPUs, 0 for no cap; got {cap!r}"
            )
        ids = [g.id for g in self.gpus]
        if len(set(ids)) != len(ids):
            raise ValueError("GPU ids must be unique")
        job_ids = [j.id for j in self.jobs]
        if len(set(job_ids)) != len(job_ids):
            raise ValueError("job ids must be unique")

    @cached_property
    def usable_gpus(self) -> tuple[Gpu, ...]:
        """The healthy GPUs; worked out once (a policy and the rules around it ask often)."""
        return tuple(g for g in self.gpus if g.healthy)


class _WorkedOutWhenRead:
    """A dataclass field that may be given as a function of no arguments, called when the
    field is first read: for a value that costs to work out and that most readers never ask
    for (a decision's promise: the simulator reads it only where no event comes first)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = "_" + name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the field's default
        value = obj.__dict__[self._key]
        if callable(value):
            value = obj.__dict__[self._key] = value()
        return value

    def __set__(self, obj: object, value: Any) -> None:
        obj.__dict__[self._key] = value


@dataclass(frozen=True)
class Decision:
    """Target allocation {job id: GPU ids} (empty tuple: wait) and a reason per job for people
    (``core.reasons``: the figures behind it; ``str()`` puts it into words).

    ``order`` is every job id in the policy's priority order, first served first (adaptive's
    plan order, a fixed-size policy's admission order): the order of the queue, read by
    ``core.schedule.queue_positions``.

    ``holds_until`` is how long the policy promises this decision: None, nothing (a driver asks
    again at every tick); a time t, as long as nothing happens but the passing of time (no
    arrival, completion, measurement, or end of a resize pause; running jobs that are not
    mid-resize progress at their modelled speed ``job.speed.throughput(len(job.gpus))`` and
    waiting jobs' ``queued_s`` grows), a decision at any instant before t has these same
    allocations (its order and reasons may differ). The simulator skips the decisions it
    covers; its ``check_holds`` option verifies them. A policy may pass a function that works
    it out, called when ``holds_until`` is first read.
    """

    allocations: Mapping[str, tuple[str, ...]]
    reasons: Mapping[str, Reason]
    order: tuple[str, ...] = ()
    holds_until: float | None = _WorkedOutWhenRead()  # type: ignore[assignment]
