"""What the API answers: jobs as their owner and as everyone else sees them, the queue, the
status, the GPUs, events, logs, the grant a sidecar is told to run on."""

from __future__ import annotations

from typing import Any, Literal

from elastic_gpu_sidecar.protocol import (
    BatchPolicy,
    Framework,
    GrantAction,
    JobKind,
    JobState,
    Vocabulary,
)
from pydantic import Field

from ..core.reason_kinds import ReasonKind
from ..core.reasons import EstimateLimit
from .base import Count, Strict
from .heartbeat import ErrorInfo, ProgressRecord
from .reason_figures import (
    REASON_FIGURES,
    REASON_KIND,
    ReasonFigures,
)
from .requests import LaunchRequest


class EventKind(Vocabulary):
    """What an entry of a job's event log records (``GET jobs/ID/events``)."""

    SUBMITTED = "submitted"
    ADMITTED = "admitted"  # first start
    RESUMED = "resumed"  # a start after a suspension or a lost sidecar
    RUNNING = "running"  # the sidecar confirmed a start or a resize
    RESIZE = "resize"
    SUSPEND = "suspend"  # asked to checkpoint and stop
    SUSPENDED = "suspended"
    LOST = "lost"  # its sidecar stopped answering
    CANCEL = "cancel"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RESTART = "restart"  # the scheduler restarted (job_id null)
    QUARANTINED = "quarantined"  # its database row could not be read: moved aside, kept
    HOLD = "hold"  # suspended by a person: no GPUs until resumed
    RELEASE = "release"  # resumed by a person: queued again
    PRIORITY = "priority"  # an admin changed its priority
    DRAIN = "drain"  # an admin drained a GPU or put it back (job_id null)
    KEPT = "kept"  # its owner (or an admin) kept it past the retention, or let it expire again
    EXPIRED = "expired"  # finished jobs past the retention were forgotten (job_id null)
    DEADLINE = "deadline"  # asked to give GPUs back (or stop) within a grace period


class ErrorBody(Strict):
    message: str = Field(description="One sentence saying what was wrong and what to do.")
    reason: str | None = None


class Whoami(Strict):
    user: str
    admin: bool
    mode: Literal["embedded", "daemon", "hub"] = Field(
        description="`embedded`: the scheduler runs in this server; `daemon`: a shared scheduler "
        "answers; `hub`: the JupyterHub service answers."
    )


class GrantView(Strict):
    """The grant a sidecar is told to run on (its answer to a heartbeat)."""

    generation: Count = Field(description="Increases with every new grant.")
    gpus: list[str]
    action: GrantAction


class JobProgress(Strict):
    """The job's last progress record, condensed."""

    epoch: int | None = Field(None, description="0-based epoch in progress.")
    epochs: int | None = None
    step: int | None = Field(None, description="Batches done in this epoch.")
    steps_per_epoch: int | None = None
    global_step: int | None = None
    samples: float | None = None
    replicas: int | None = None
    loss: float | None = None
    metrics: dict[str, float | None] = Field(default_factory=dict)
    samples_per_s: float | None = None
    batch_size: int | None = Field(None, description="The global batch of the last step.")
    noise_scale: float | None = Field(
        None,
        description="The gradient noise scale in samples (jobs that measure it): a batch of "
        "B samples makes noise_scale / (noise_scale + B) of the use of each sample that a "
        "small batch makes.",
    )
    noise_steps: int | None = Field(
        None, description="The pairs of steps measured (one in 8) that the noise scale is from."
    )
    fraction: float | None = Field(
        None, description="Share of the total work done, where the total is known."
    )
    note: str | None = Field(
        None,
        description="What the framework's adapter says of the run (a setting of the script's "
        "that the grant overrides, a batch policy it cannot honour as asked).",
    )


class GrantChange(Strict):
    t: float = Field(description="Epoch seconds.")
    gpus: list[str]
    why: str
    why_kind: ReasonKind | None = Field(None, description="'why' as a reason_kind")
    why_figures: ReasonFigures | None = Field(None, description="'why''s figures")


#: What ``estimating`` says, in the job and in the queue.
ESTIMATING = (
    "true while the job's end is not told yet: its pace has not settled (too few progress "
    "records, over too short a time, or their predicted ends still disagree; the rule is "
    "core/eta.py), so eta_s and estimated_end are null and front ends say 'estimating...'; "
    "false for finished jobs and kernels' leases"
)


class JobView(Strict):
    """A job as its owner (or an admin) sees it."""

    id: str
    name: str
    user: str
    state: JobState
    kind: JobKind
    gpus: list[str] = Field(description="GPUs the job holds now.")
    generation: int = Field(description="Generation of the desired grant.")
    min_gpus: int
    max_gpus: int
    requested_gpus: int
    reason: str
    reason_kind: ReasonKind = Field(ReasonKind.NEW, description=REASON_KIND)
    reason_figures: ReasonFigures = Field(default_factory=ReasonFigures, description=REASON_FIGURES)
    position: int | None = Field(description="Place in the queue while queued.")
    submitted_at: float = Field(description="Epoch seconds.")
    started_at: float | None = Field(description="First time its trainer ran.")
    finished_at: float | None
    progress: JobProgress | None
    eta_s: float | None = Field(
        description="Seconds to finish at the current speed; null while `estimating`."
    )
    estimating: bool = Field(False, description=ESTIMATING)
    throughput: dict[str, float] = Field(
        description="Measured samples/s per GPU count (keys are counts as strings)."
    )
    throughput_by_kind: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description='The same per kind of GPU where kinds are mixed (`{"T4": {"2": 180.0}}`): '
        "what placement weighs (the fast kind to the job that gains most from it).",
    )
    resize_cost_s: float | None = Field(description="Mean measured resize pause.")
    resizes: int
    history: list[GrantChange] = Field(description="The last 50 grant changes.")
    restarts: int
    error: ErrorInfo | None
    exit_code: int | None
    model_path: str | None
    job_dir: str
    epochs: int | None
    batch_policy: BatchPolicy
    measure_noise: bool = Field(False, description="the job measures its gradient noise scale")
    mig: str | None = Field(
        None, description="the MIG profile it runs on one instance of (null: whole GPUs)"
    )
    framework: Framework | None = Field(
        None,
        description="the framework adapter that runs the script, as settled at submission "
        "(never `auto`); null for a synthetic job or a kernel's lease",
    )
    elastic: bool | None = Field(
        None,
        description="whether the GPU count may change while it runs: false when its framework "
        "cannot resize the script (it runs at `requested_gpus` throughout, and `notes` says "
        "why); null for a job without a framework",
    )
    priority: float
    held: bool = Field(
        False,
        description="suspended by a person (its owner or an admin): it gets no GPUs until "
        "resumed (POST jobs/ID/resume)",
    )
    notes: list[str] = Field(
        [],
        description="what the scheduler changed in the request (counts above the server's, a "
        "script that runs at one GPU count and why)",
    )
    notebook: str | None = Field(
        None, description="the notebook that submitted it, relative to the server's root"
    )
    kept: bool = Field(
        False,
        description="kept past the retention: once finished, it never expires (POST jobs/ID/keep)",
    )


class LeaseGrant(Strict):
    """The answer to ``POST leases``: the lease (a job of kind ``interactive``) and what its
    kernel's provisioner heartbeats with. The secret is shown this once."""

    job: JobView
    secret: str = Field(
        description="The lease's heartbeat secret (`Authorization: Bearer`), shown this once."
    )
    heartbeat_url: str = Field(description="Where the provisioner heartbeats.")
    heartbeat_interval: float = Field(description="Seconds between heartbeats.")


class KernelLease(Strict):
    """The answer to ``POST kernels/ID/lease``: the kernel restarts with these GPUs."""

    kernel_id: str
    lease: str | None = Field(description="the lease's job id (null: no GPUs)")
    gpus: list[str]
    message: str


class PublicJob(Strict):
    """Another user's job, as everyone may see it: owner, size and state."""

    id: str
    user: str
    state: JobState
    gpus: list[str]
    min_gpus: int
    max_gpus: int
    position: int | None


#: What a list of jobs says about those it left out.
HIDDEN = (
    "finished jobs that match the filter but were left out by its time window (the most recent "
    "of each user, or 'since'): 'all=true' lists them"
)


class JobList(Strict):
    jobs: list[JobView | PublicJob]
    hidden: int = Field(0, description=HIDDEN)


class QueueEntry(Strict):
    """An open job in queue order; ``name`` and the estimates only for the caller's own jobs."""

    id: str
    user: str
    state: JobState
    gpus: list[str]
    min_gpus: int
    max_gpus: int
    position: int | None
    reason: str
    reason_kind: ReasonKind = Field(ReasonKind.NEW, description=REASON_KIND)
    reason_figures: ReasonFigures = Field(default_factory=ReasonFigures, description=REASON_FIGURES)
    name: str | None = None
    estimated_start: float | None = Field(
        None,
        description="when a job that holds no GPUs gets them (epoch seconds), from the "
        "policy run forward on the current state; null when it holds GPUs or nothing can be "
        "said (it can never fit, or its start lies past the forecast's horizon)",
    )
    estimated_end: float | None = Field(
        None,
        description="when it finishes (epoch seconds), from the same forward run; null "
        "while 'estimating'",
    )
    estimating: bool = Field(False, description=ESTIMATING)
    estimate_limit: EstimateLimit | None = Field(
        None,
        description="why a job of the caller's lacks an estimate: the bound that stopped the "
        "forward run before it: 'jobs' (not among the forecast_jobs it plays), 'time' (its "
        "forecast_budget ran out, or the forecast of the current state was not ready within "
        "it), 'decisions', 'horizon'; null when its estimates are whole or nothing can be said",
    )


class Queue(Strict):
    queue: list[QueueEntry]


class StatusProgress(Strict):
    epoch: int | None = None
    epochs: int | None = None
    step: int | None = None
    replicas: int | None = None


class StatusJob(Strict):
    """One job in the status document; ``name`` and ``reason`` only for the caller's own."""

    id: str
    name: str | None
    user: str
    state: JobState
    gpus: list[str]
    min_gpus: int
    max_gpus: int
    progress: StatusProgress
    reason: str | None = None
    reason_kind: ReasonKind | None = Field(None, description=REASON_KIND)
    reason_figures: ReasonFigures | None = Field(None, description=REASON_FIGURES)


#: What the idle-GPU line says, in the status and the GPUs.
IDLE = (
    "why usable GPUs stay idle, with the figures behind it (\"2 GPUs idle: growing 'resnet' "
    'to 4 would save ~5 s, a resize costs ~8 s"); null when none is'
)
IDLE_KIND = "'idle' when 'idle' is said: the idle line as a reason_kind"
IDLE_FIGURES = "the figures behind 'idle' (gpus, at, causes: each job's kind and figures)"


class StatusSlice(Strict):
    """One MIG instance of a GPU in ``status``."""

    uuid: str
    profile: str
    holder: str | None = Field(None, description="Id of the lease or job on it.")


class StatusGpu(Strict):
    id: str
    kind: str = Field("simulated", description="What kind of GPU it is (as in `GET gpus`).")
    holder: str | None
    mig: list[StatusSlice] | None = Field(
        None, description="Its MIG instances and their holders where MIG mode is on."
    )


class Status(Strict):
    """Open jobs (and the caller's finished ones) and the GPUs with their holders."""

    gpus: list[StatusGpu]
    jobs: list[StatusJob]
    hidden: int = Field(0, description=HIDDEN)
    idle: str | None = Field(None, description=IDLE)
    idle_kind: ReasonKind | None = Field(None, description=IDLE_KIND)
    idle_figures: ReasonFigures | None = Field(None, description=IDLE_FIGURES)


class GpuProcessView(Strict):
    pid: int
    user: str | None
    memory_mb: float | None = Field(description="MiB")
    command: str | None


class MigSliceView(Strict):
    uuid: str = Field(description="What CUDA_VISIBLE_DEVICES names it by (`MIG-...`).")
    profile: str = Field(description="Its MIG profile, e.g. `1g.10gb`.")
    memory_total_mb: float | None
    memory_used_mb: float | None
    utilization: float | None = Field(
        None,
        description="0..1: how busy its engines were since the last inventory read, from "
        "NVML's GPU performance monitoring (Hopper and later); null where NVML reports none.",
    )
    holder: str | None = Field(None, description="Id of the lease or job holding the slice.")
    holder_user: str | None = None
    holder_name: str | None = Field(
        None, description="Name of the holding lease or job; null when it is another user's."
    )


class GpuView(Strict):
    id: str
    index: int
    node: str = Field(description="Host name.")
    name: str = Field(description="Model name (`Simulated GPU` for simulated ones).")
    kind: str = Field(
        description="What kind of GPU it is, as the scheduler tells kinds apart: the model "
        "without the vendor's words (`A100-SXM4-80GB`, `T4`), the kind a simulated GPU was "
        'described as (`simulated_gpus = "2xA100-80GB,2xT4"`), or `simulated`.'
    )
    uuid: str | None
    memory_total_mb: float | None
    memory_used_mb: float | None
    utilization: float | None
    holder: str | None = Field(description="Id of the job holding the GPU.")
    holder_user: str | None
    holder_name: str | None = Field(
        description="Name of the holding job; null when it belongs to another user."
    )
    external_processes: list[GpuProcessView] = Field(
        description="Processes on this GPU that the scheduler did not start."
    )
    healthy: bool = Field(
        description="False while processes outside the scheduler use the GPU; the scheduler then "
        "leaves it alone."
    )
    drained: bool = Field(
        False,
        description="drained by an admin for maintenance: no job gets it, jobs on it move off",
    )
    mig: list[MigSliceView] | None = Field(
        None,
        description="Its MIG instances, where MIG mode is on (null: off, or not supported). "
        "CUDA sees the instances, not one GPU, so no job is placed on a GPU in MIG mode; the "
        "scheduler never changes a GPU's MIG layout.",
    )


class Gpus(Strict):
    source: Literal["nvml", "simulated"]
    gpus: list[GpuView]
    idle: str | None = Field(None, description=IDLE)
    idle_kind: ReasonKind | None = Field(None, description=IDLE_KIND)
    idle_figures: ReasonFigures | None = Field(None, description=IDLE_FIGURES)


class Event(Strict):
    seq: int
    job_id: str | None = Field(description="Null for scheduler-wide events.")
    t: float = Field(description="Epoch seconds.")
    kind: EventKind
    message: str = Field(description="The change and its reason")
    data: dict[str, Any] | None = Field(
        description='Details, e.g. `{"gpus", "generation"}` or `{"from", "to", "generation"}`.',
    )


class Events(Strict):
    events: list[Event]


class ProgressList(Strict):
    progress: list[ProgressRecord]


class Logs(Strict):
    trainer: str
    sidecar: str


class Updates(Strict):
    version: int


class Expired(Strict):
    """A job that expired (``SchedulerService.job_retention_days``) whose directory its owner's
    side removes: the shared scheduler never touches job files itself."""

    id: str
    job_dir: str


class Forgotten(Strict):
    """The answer of ``POST launches/removed``: the expired jobs no longer listed."""

    jobs: list[str]


class Launches(Strict):
    launches: list[LaunchRequest]
    expired: list[Expired] = Field(
        [],
        description="the caller's expired jobs whose directories are still to be removed: the "
        "caller's server removes each, then says so (POST launches/removed)",
    )
    ended: list[str] = Field(
        [],
        description="the caller's jobs whose claim on GPUs was voided: the caller's server ends "
        "every process it started for them",
    )


class ShareUser(Strict):
    """One user's fair share (``GET admin/shares``): ``share`` is the fraction of the GPUs due
    to them now, ``ratio`` their decayed usage fraction over their weight's fraction (3.0: they
    used three times their share)."""

    user: str
    groups: list[str] = Field(description="The user's groups at their latest submission.")
    weight: float = Field(description="The largest weight of the user's groups (1 without any).")
    share: float = Field(description="Fraction (0 to 1) of the GPUs due to this user now.")
    entitled_gpus: int = Field(description="Whole GPUs due to this user now.")
    gpus: int = Field(description="GPUs the user's jobs hold now.")
    usage_gpu_s: float = Field(description="GPU-seconds used")
    usage_fraction: float = Field(description="The user's part of everyone's decayed usage.")
    ratio: float = Field(
        description="usage_fraction over the weight's fraction: 3.0 is three times the share."
    )


class ShareGroup(Strict):
    group: str
    weight: float
    users: list[str]
    gpus: int
    usage_fraction: float


class Shares(Strict):
    """Fair share between users and groups, for admins (docs/policies.md, Fair share)."""

    half_life_s: float = Field(description="Seconds after which usage counts half.")
    gpus: int = Field(description="Usable GPUs.")
    users: list[ShareUser]
    groups: list[ShareGroup]
