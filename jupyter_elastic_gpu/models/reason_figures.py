"""The figures behind a reason, as the API sends them beside its text (``reason_kind``,
``reason_figures``): the numbers and the jobs named, bounded, so that a front end makes the
text itself (``core/reason_text.py``, the lab extension's ``reasons.ts``) and never reads it."""

from __future__ import annotations

from typing import Annotated

from elastic_gpu_sidecar.protocol import JobState
from pydantic import Field

from ..core.reason_kinds import Ahead, Because, ReasonKind
from .base import Count, Strict

#: Longest text a reason's figures carry (an error's message, an idle rule's sentence).
MAX_DETAIL = 1000
#: Most jobs a reason's figures name (holders of a waiting job's GPUs, idle GPUs' causes).
MAX_NAMED = 8
Seconds = Annotated[float, Field(allow_inf_nan=False)]
Detail = Annotated[str, Field(max_length=MAX_DETAIL)]
#: What ``reason_kind`` is, in the job, the queue and the status.
REASON_KIND = (
    "what kind of reason 'reason' is, for front ends to tell reasons apart without reading "
    "the text (core/reason_kinds.py documents each value; 'reason_figures' holds its figures)"
)
REASON_FIGURES = (
    "the numbers and jobs behind 'reason': 'reason' is their text (core/reason_text.py, and "
    "the lab extension's reasons.ts, make the same text from reason_kind and these)"
)


class JobRef(Strict):
    """A job a reason mentions: its id, and its name where the reader may see it."""

    id: str
    name: str | None = None
    ahead: Ahead | None = Field(None, description="why it holds GPUs before a waiting job")
    starts: bool | None = Field(
        None, description="the job a shrink made room for starts now (false: it grows)"
    )


class ShareFigures(Strict):
    """Fair share's figures: ``user``'s share now (``due`` of ``total`` GPUs, at ``weight`` of
    ``weights``), and who used more than theirs (``over``, ``ratio`` times, over the last
    ``half_life_s``)."""

    user: str
    due: Count
    total: Count
    weight: Seconds
    weights: Seconds
    over: str | None = None
    ratio: Seconds | None = None
    half_life_s: Seconds | None = None


class IdleCause(Strict):
    """One job's part in leaving GPUs idle; no figures when the reader may not see the job."""

    job: JobRef
    kind: ReasonKind
    figures: ReasonFigures | None = None
    public: bool | None = None


class ReasonFigures(Strict):
    """The figures behind a reason; each kind uses those ``ReasonKind`` says
    (core/reason_kinds.py). Times in seconds, ``at`` and ``changed_at`` epoch seconds."""

    gpus: Count | None = Field(None, description="GPUs it holds or gets (a resize's 'to')")
    top: Count | None = Field(None, description="its maximum")
    held: Count | None = Field(None, description="GPUs it held before a resize ('from')")
    needs: Count | None = None
    free: Count | None = None
    suspended: bool | None = None
    holders: list[JobRef] | None = Field(
        None, max_length=MAX_NAMED, description="the jobs that hold the GPUs it waits for"
    )
    others: Count | None = Field(None, description="more holders, not named")
    because: Because | None = Field(None, description="why a kept grant is kept")
    left_s: Seconds | None = None
    cost_s: Seconds | None = Field(None, description="what a resize costs it")
    hold_s: Seconds | None = Field(None, description="how long it is left alone after a change")
    changed_at: Seconds | None = None
    to: Count | None = Field(None, description="the size growing would take it to")
    gain_s: Seconds | None = None
    need_s: Seconds | None = None
    change_s: Seconds | None = Field(None, description="time left saved (<0: added) by a resize")
    for_job: JobRef | None = Field(None, description="the job a shrink made room for")
    user: str | None = None
    cap: Count | None = Field(None, description="the per-user GPU cap")
    share: ShareFigures | None = None
    start_in_s: Seconds | None = Field(None, description="when a queued job should start")
    start_after: JobRef | None = Field(None, description="the job whose end it starts at")
    start_kind: str | None = Field(
        None, max_length=120, description="the kind of GPU it starts on, where kinds are mixed"
    )
    causes: list[IdleCause] | None = Field(None, max_length=MAX_NAMED)
    at: Seconds | None = Field(None, description="when the idle line was said")
    by: str | None = Field(None, description="who held, resumed or cancelled it")
    admin: bool | None = None
    job_id: str | None = None
    stopping: bool | None = None
    died: bool | None = None
    withdrawn: bool | None = None
    state: JobState | None = None
    for_others: bool | None = None
    silent_s: Seconds | None = None
    release_in_s: Seconds | None = Field(None, description="when a kernel's lease is released")
    idle_s: Seconds | None = Field(None, description="how long a kernel has run nothing")
    detail: Detail | None = None
    widest: Count | None = Field(
        None, description="the most free GPUs together (on one server, of one kind)"
    )
    kinds: Detail | None = Field(None, description="free GPUs by kind: `1 A100-80GB, 1 T4`")
    profile: Detail | None = Field(None, description="the MIG profile a lease asks for or holds")
    slices: Count | None = Field(None, description="the MIG instances of that profile there are")
    before: Count | None = Field(None, description="leases waiting for one before this one")
    drained: Count | None = Field(
        None, description="the MIG instances of that profile on GPUs an admin drained"
    )


IdleCause.model_rebuild()  # its figures are a ReasonFigures, declared after it
