"""What a reason is, as data: its kind and its figures, the same on every side of the API.

A front end tells reasons apart by ``ReasonKind`` and reads their numbers and jobs from
``ReasonFigures``; it never parses the text, which ``reason_text.say`` makes from the two (and
the lab extension's ``reasons.ts`` makes the same way). Jobs are named by ``JobRef``: the core
knows their ids, the edge that shows a reason adds the names its reader may see.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, TypedDict


class ReasonKind(str, Enum):
    """Why a job has what it has (a job's ``reason_kind``), or why GPUs sit idle."""

    __str__ = str.__str__
    __format__ = str.__format__

    #: Submitted, no decision yet.
    NEW = "new"
    #: Gets no GPUs: needs more than are free (``needs``, ``free``, ``holders``); queued, or
    #: ``suspended`` when it ran before.
    WAITING = "waiting"
    #: Gets no GPUs: ``free`` GPUs would do, but a job runs on one server (and on one kind of
    #: GPU where kinds are mixed), and at most ``widest`` of them are together there
    #: (``needs``; ``kinds``: the free GPUs by kind, where kinds are mixed).
    SPREAD = "spread"
    #: Gets no MIG instance of ``profile`` (``core/slices.py``): all ``slices`` of them are
    #: held (none: no GPU has one now, or only GPUs an admin drained: ``drained`` of them),
    #: and ``before`` more wait before it.
    MIG_SLICE = "mig_slice"
    #: At the size a fixed-size policy gives it (``gpus``).
    RUNNING = "running"
    #: At its maximum (``gpus``).
    AT_MAXIMUM = "at_maximum"
    #: Its grant is kept as it is (``because``: its resize is in progress, it is about to
    #: finish, it was resized or started moments ago; ``hold_s``, ``changed_at``).
    KEPT = "kept"
    #: Below its maximum on the critical path: these GPUs end it in time with the rest.
    CRITICAL = "critical"
    #: Below its maximum, no GPU free: the others do more for other jobs.
    CROWDED = "crowded"
    #: Below its maximum with GPUs free: more would not make it faster.
    NO_FASTER = "no_faster"
    #: Below its maximum with GPUs free: growing to ``to`` would save ``gain_s``, less than
    #: its resize must (``cost_s``, ``need_s``).
    RESIZE_WOULD_NOT_PAY = "resize_would_not_pay"
    #: Resized by this decision from ``held`` to ``gpus`` (``for_job``: the job a shrink
    #: made room for).
    RESIZED = "resized"
    #: Held back by a per-user limit: the cap (``user``, ``cap``) or fair share (``share``).
    LIMITED = "limited"
    #: Its user's own server is not running: jobs start from it.
    WAITING_FOR_SERVER = "waiting_for_server"
    #: Starting on ``gpus`` for the first time.
    STARTING = "starting"
    #: Starting again on ``gpus`` from its checkpoint.
    RESUMING = "resuming"
    #: Restarting on ``gpus`` from a checkpoint.
    RESIZING = "resizing"
    #: Suspended by a person (``by``; ``admin``: an admin's hold); ``stopping`` while it
    #: still checkpoints.
    HELD = "held"
    #: Suspended by the policy (``for_others``: its GPUs went to jobs that need them more).
    SUSPENDED = "suspended"
    #: Resumed by a person (``by``): queued again.
    UNHELD = "unheld"
    #: Being cancelled (``by``): checkpoint, then stop.
    CANCELLING = "cancelling"
    #: Cancelled (``by`` a person, or ``detail``: what voided its claim).
    CANCELLED = "cancelled"
    #: Finished its work.
    DONE = "done"
    #: Failed (``detail``: its error).
    FAILED = "failed"
    #: Queued again: its sidecar stopped answering ``silent_s`` ago, or ``detail``.
    REQUEUED = "requeued"
    #: A notebook kernel's lease holding ``gpus``.
    KERNEL = "kernel"
    #: A kernel's lease about to be released in ``release_in_s`` (``detail``: the rule that
    #: warns; ``idle_s``: how long its kernel has run nothing, when that is the rule).
    IDLE_WARNING = "idle_warning"
    #: A kernel's lease released by a rule (``detail``).
    RELEASED = "released"
    #: A kernel's lease that ended (``died``: its kernel died; ``withdrawn``: before it got
    #: GPUs).
    KERNEL_ENDED = "kernel_ended"
    #: Another user's job: only its ``state`` and ``gpus``.
    PUBLIC = "public"
    #: Why ``gpus`` usable GPUs get no job (the idle-GPU line; ``causes``).
    IDLE = "idle"

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)


#: Why a job that holds GPUs comes before a waiting one.
Ahead = Literal[
    "critical",  # on the critical path
    "shorter",  # less GPU-time left
    "waited",  # has waited longer
    "priority",  # a higher priority
    "running",  # already running (a running job is kept unless moving it pays)
    "earlier",  # submitted earlier
    "less_left",  # less time left
    "less_service",  # less attained service
    "less_weighted",  # less progress-weighted service
]

#: Why a kept grant is kept (``ReasonKind.KEPT``).
Because = Literal["in_progress", "finishing", "resized", "started"]


class JobRef(TypedDict, total=False):
    """A job a reason mentions: its id, its name where the reader may see it, and why it is
    ahead (a holder of a waiting job's GPUs)."""

    id: str
    name: str
    ahead: Ahead
    starts: bool  # the job a shrink made room for starts now (else: it grows)


class ShareFigures(TypedDict, total=False):
    """Fair share's figures: ``user``'s share now (``due`` of ``total`` GPUs, at ``weight`` of
    ``weights``), and who used more than theirs (``over``, ``ratio`` times over the last
    ``half_life_s``)."""

    user: str
    due: int
    total: int
    weight: float
    weights: float
    over: str
    ratio: float
    half_life_s: float


class IdleCause(TypedDict, total=False):
    """One job's part in leaving GPUs idle: its reason's kind and figures (none for a reader
    who may not see the job: ``public``)."""

    job: JobRef
    kind: ReasonKind
    figures: ReasonFigures
    public: bool


class ReasonFigures(TypedDict, total=False):
    """The numbers and jobs behind a reason; each kind uses those its ``ReasonKind`` says."""

    gpus: int
    top: int
    held: int
    needs: int
    free: int
    suspended: bool
    holders: list[JobRef]
    others: int
    because: Because
    left_s: float
    cost_s: float
    hold_s: float
    changed_at: float
    to: int
    gain_s: float
    need_s: float
    change_s: float
    for_job: JobRef
    user: str
    cap: int
    share: ShareFigures
    start_in_s: float
    start_after: JobRef
    start_kind: str
    causes: list[IdleCause]
    at: float
    by: str
    admin: bool
    job_id: str
    stopping: bool
    died: bool
    withdrawn: bool
    state: str
    for_others: bool
    silent_s: float
    release_in_s: float
    idle_s: float
    detail: str
    widest: int
    kinds: str
    profile: str
    slices: int
    before: int
    drained: int


__all__ = ["Ahead", "Because", "IdleCause", "JobRef", "ReasonFigures", "ReasonKind", "ShareFigures"]
