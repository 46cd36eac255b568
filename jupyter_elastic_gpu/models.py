"""Every request and response of the scheduler's API, typed and validated once.

The routes (``server/handlers.py``), the service, the CLI, the magic and the tests all use these
models, and ``server/openapi.yaml`` describes them (``tests/scheduler/test_openapi.py`` checks
that the two agree). States, actions, policies and kinds are the protocol's enums
(``elastic_gpu_sidecar.protocol``), shared with the sidecar.

Validation happens here, at the edge: a request that passes can be honoured as sent, and one
that does not gets one readable sentence back (``BadRequest``) before anything changes. Every
number is finite and bounded, every string and list has a length limit, so nothing a client
sends can break a later decision.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from elastic_gpu_sidecar.protocol import (
    MAX_GPU_ID_CHARS,
    BatchPolicy,
    JobKind,
    JobState,
    LeaseAction,
    Mechanism,
    SidecarState,
    Vocabulary,
    check_gpu_id,
)
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from .errors import BadRequest

NAME = re.compile(r"^(?=.*\S)[\w.\- ]{1,80}$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w{0,99}$")
MAX_SCRIPT_BYTES = 1_000_000
MAX_INPUT_BYTES = 200_000_000
#: More GPUs than any box or job has: bounds every count a client sends.
MAX_GPUS = 4096
MAX_PID = 2**22  # Linux's pid_max ceiling
MAX_TEXT = 100_000  # longest free text kept from a sidecar (a traceback)

GpuId = Annotated[str, Field(max_length=MAX_GPU_ID_CHARS), AfterValidator(check_gpu_id)]
GpuIds = Annotated[list[GpuId], Field(max_length=MAX_GPUS)]
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS)]
Seconds = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=2**53)]
Amount = Annotated[float, Field(ge=0, le=1e18, allow_inf_nan=False)]
Value = Annotated[float, Field(ge=-1e300, le=1e300, allow_inf_nan=False)]
Pid = Annotated[int, Field(ge=1, le=MAX_PID)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Speeds = Annotated[dict[GpuCount, Amount], Field(max_length=MAX_GPUS)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class _Lenient(BaseModel):
    """What a sidecar sends: fields this version does not know are dropped, not refused (a
    sidecar in a user's environment may be a version ahead of the scheduler)."""

    model_config = ConfigDict(extra="ignore")


def parse(model: type[BaseModel], body: object, what: str) -> Any:
    """``body`` validated as ``model``, or BadRequest with one readable sentence."""
    if not isinstance(body, dict):
        raise BadRequest(f"the {what} must be a JSON object (docs/api.md lists its fields)")
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise BadRequest(f"{what}: {describe(e)}") from None


def describe(error: ValidationError, rename: Callable[[str], str] = str) -> str:
    """A pydantic error as one sentence: ``field: what is wrong, got X; ...``; ``rename`` turns
    field names into what the user typed (a CLI flag)."""
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"])
        msg = rename(item["msg"].removeprefix("Value error, "))
        if item["type"] == "extra_forbidden":
            msg = "unknown field (docs/api.md lists the fields)"
        elif isinstance(item.get("input"), (int, float, str)) and item["loc"]:
            value = item["input"]
            msg += f", got {value[:40]!r}" if isinstance(value, str) else f", got {value}"
        parts.append(f"{rename(where)}: {msg}" if where else msg)
    return "; ".join(parts)


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


# -- requests ---------------------------------------------------------------------------------


class SyntheticSpec(_Model):
    """A job without TensorFlow: its steps take the time its speed profile says."""

    work: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)] = Field(
        description="samples to process in total"
    )
    throughput: Speeds = Field(description="samples/s at each GPU count")
    time_scale: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] = Field(
        1.0, description="how much faster than real time"
    )
    batch: Annotated[int, Field(ge=1, le=10**7)] = 32

    @model_validator(mode="after")
    def _points(self) -> SyntheticSpec:
        if not self.throughput:
            raise ValueError("throughput needs at least one GPUS: SAMPLES_PER_S point")
        for gpus, speed in self.throughput.items():
            if speed <= 0:
                raise ValueError(f"throughput at {gpus} GPUs must be above 0, got {speed}")
        return self


class SubmitRequest(_Model):
    """The body of ``POST jobs`` (docs/api.md), and a job's spec as the scheduler keeps it.

    Omitted sizes mean: ``min_gpus`` 1, ``max_gpus`` every GPU of the server (the scheduler
    shrinks the job when others need GPUs), ``requested_gpus`` ``min_gpus``. Counts above what
    the server has are settled by ``fit_to(total)``.
    """

    name: str | None = None
    kind: JobKind = JobKind.SCRIPT
    script: str | None = None
    args: Annotated[list[Annotated[str, Field(max_length=10_000)]], Field(max_length=1000)] = []
    cwd: Annotated[str | None, Field(max_length=4096)] = None
    min_gpus: GpuCount = 1
    max_gpus: GpuCount | None = None
    requested_gpus: GpuCount | None = Field(None, description="the count asked for")
    epochs: Annotated[int | None, Field(ge=1, le=10**6)] = None
    priority: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = 1.0
    batch_policy: BatchPolicy = BatchPolicy.KEEP_GLOBAL
    simulated: bool | None = None
    inputs: Annotated[dict[str, str], Field(max_length=100)] = {}
    synthetic: SyntheticSpec | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SubmitRequest:
        if self.name is not None and not NAME.match(self.name):
            raise ValueError("name must be 1-80 letters, digits, spaces, '.', '_' or '-'")
        top = self.max_gpus
        if top is not None and self.min_gpus > top:
            raise ValueError(
                f"min_gpus ({self.min_gpus}) is above max_gpus ({top}): ask for a range such "
                f"as min_gpus {top}, max_gpus {self.min_gpus}"
            )
        want = self.requested_gpus
        if want is not None and not (self.min_gpus <= want <= (top or MAX_GPUS)):
            raise ValueError(
                f"requested_gpus ({want}) must lie between min_gpus ({self.min_gpus}) and "
                f"max_gpus ({top if top is not None else 'every GPU'})"
            )
        if self.kind == JobKind.SCRIPT:
            if not self.script or not self.script.strip():
                raise ValueError("a script job needs the training code in 'script'")
            if len(self.script.encode()) > MAX_SCRIPT_BYTES:
                raise ValueError(
                    "the script is larger than 1 MB: put the code in a file and import it"
                )
            if self.synthetic is not None:
                raise ValueError("'synthetic' only goes with kind 'synthetic'")
        elif self.synthetic is None:
            raise ValueError("a synthetic job needs 'synthetic': {work, throughput}")
        for name, blob in self.inputs.items():
            if not IDENTIFIER.match(name):
                raise ValueError(f"input name {name!r} is not a Python identifier")
            if len(blob) > MAX_INPUT_BYTES:
                raise ValueError(f"input {name!r} is larger than 150 MB: save it to a file instead")
        return self

    def fit_to(self, total: int, user_cap: int = 0) -> tuple[SubmitRequest, list[str]]:
        """The request settled on a server with ``total`` GPUs whose users may each hold at
        most ``user_cap`` (0: no cap), and notes for the user.

        The one rule for counts above what can be had, wherever a job comes from: a
        ``min_gpus`` above it is refused (the job could never start); ``max_gpus`` and
        ``requested_gpus`` above it are lowered to it, and a note says so.
        """
        limit, where = total, f"the {total} GPUs of this server"
        if 0 < user_cap < total:
            limit, where = user_cap, f"the {user_cap} GPUs one user may hold (the per-user cap)"
        if self.min_gpus > limit:
            raise BadRequest(
                f"min_gpus ({self.min_gpus}) is more than {where}: the job could never start"
            )
        notes = []
        top = limit if self.max_gpus is None else self.max_gpus
        if top > limit:
            notes.append(f"max_gpus {top} lowered to {where}")
            top = limit
        want = self.min_gpus if self.requested_gpus is None else self.requested_gpus
        if want > top:
            notes.append(f"requested_gpus {want} lowered to {top}")
            want = top
        settled = self.model_copy(update={"max_gpus": top, "requested_gpus": want, "inputs": {}})
        return settled, notes


class ErrorInfo(_Lenient):
    """Why a job failed: the exception, its traceback, and what to do."""

    type: Annotated[str, Field(max_length=200)]
    message: Text = ""
    traceback: Text | None = None
    hint: Annotated[str | None, Field(max_length=2000)] = None


class ProgressRecord(_Lenient):
    """One line of a job's ``progress.jsonl``, written by its trainer (docs/sidecar.md)."""

    t: Seconds
    generation: Count | None = None
    replicas: GpuCount | None = None
    epoch: Count | None = None
    epochs: Count | None = None
    step_in_epoch: Count | None = None
    steps_per_epoch: Count | None = None
    global_step: Count | None = None
    samples: Amount | None = None
    loss: Value | None = None
    metrics: Annotated[
        dict[Annotated[str, Field(max_length=200)], Value | None], Field(max_length=100)
    ] = {}
    samples_per_s: Amount | None = None
    batch_size: Count | None = None
    first: bool | None = None
    pid: Pid | None = None
    resumed_from: Count | None = None
    replayed: Count | None = None
    epoch_end: bool | None = None
    stopped: bool | None = None

    def total_samples(self) -> float | None:
        """Samples the whole training needs (None until epochs, steps and batch are known)."""
        if not (self.epochs and self.steps_per_epoch and self.batch_size):
            return None
        return float(self.epochs) * float(self.steps_per_epoch) * float(self.batch_size)


class Heartbeat(_Lenient):
    """What a sidecar posts every few seconds (docs/sidecar.md, "Heartbeat protocol")."""

    job_id: Annotated[str | None, Field(max_length=64)] = None
    generation: Count | None = None
    gpus: GpuIds = []
    state: SidecarState | None = None
    progress: ProgressRecord | None = None
    throughput: Speeds = {}
    resize_cost_s: Seconds | None = None
    sidecar_pid: Pid | None = None
    trainer_pid: Pid | None = None
    restarts: Count = 0
    error: ErrorInfo | None = None
    exit_code: Annotated[int | None, Field(ge=-256, le=256)] = None
    model_path: Annotated[str | None, Field(max_length=4096)] = None


class LaunchRequest(_Model):
    """Everything needed to start one sidecar; a user's server gets it in shared mode."""

    job_id: str
    job_dir: str
    spec: SubmitRequest
    gpus: GpuIds
    generation: Count
    simulated: bool
    heartbeat_url: str
    heartbeat_interval: Seconds
    secret: str
    mechanism: Mechanism = Mechanism.SIDECAR
    checkpoint_interval: Seconds


# -- responses --------------------------------------------------------------------------------


class ErrorBody(_Model):
    message: str
    reason: str | None = None


class Whoami(_Model):
    user: str
    admin: bool
    mode: Literal["embedded", "daemon"]


class LeaseView(_Model):
    """The lease a sidecar is told to run on (its answer to a heartbeat)."""

    generation: Count
    gpus: list[str]
    action: LeaseAction


class JobProgress(_Model):
    """The job's last progress record, condensed."""

    epoch: int | None = None
    epochs: int | None = None
    step: int | None = None
    steps_per_epoch: int | None = None
    global_step: int | None = None
    samples: float | None = None
    replicas: int | None = None
    loss: float | None = None
    metrics: dict[str, float | None] = {}
    samples_per_s: float | None = None
    fraction: float | None = None


class LeaseChange(_Model):
    t: float
    gpus: list[str]
    why: str


class JobView(_Model):
    """A job as its owner (or an admin) sees it."""

    id: str
    name: str
    user: str
    state: JobState
    kind: JobKind
    gpus: list[str]
    generation: int
    min_gpus: int
    max_gpus: int
    requested_gpus: int
    reason: str
    position: int | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    progress: JobProgress | None
    eta_s: float | None
    throughput: dict[str, float]
    resize_cost_s: float | None
    resizes: int
    history: list[LeaseChange]
    restarts: int
    error: ErrorInfo | None
    exit_code: int | None
    model_path: str | None
    job_dir: str
    epochs: int | None
    batch_policy: BatchPolicy
    priority: float
    notes: list[str] = Field(
        [], description="what the scheduler changed in the request (counts above the server's)"
    )


class PublicJob(_Model):
    """Another user's job, as everyone may see it: owner, size and state."""

    id: str
    user: str
    state: JobState
    gpus: list[str]
    min_gpus: int
    max_gpus: int
    position: int | None


class JobList(_Model):
    jobs: list[JobView | PublicJob]


class QueueEntry(_Model):
    """An open job in queue order; ``name`` only for the caller's own jobs."""

    id: str
    user: str
    state: JobState
    gpus: list[str]
    min_gpus: int
    max_gpus: int
    position: int | None
    reason: str
    name: str | None = None


class Queue(_Model):
    queue: list[QueueEntry]


class StatusProgress(_Model):
    epoch: int | None = None
    step: int | None = None
    replicas: int | None = None


class StatusJob(_Model):
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


class StatusGpu(_Model):
    id: str
    holder: str | None


class Status(_Model):
    """Open jobs (and the caller's finished ones) and the GPUs with their holders."""

    gpus: list[StatusGpu]
    jobs: list[StatusJob]


class GpuProcessView(_Model):
    pid: int
    user: str | None
    memory_mb: float | None
    command: str | None


class GpuView(_Model):
    id: str
    index: int
    node: str
    name: str
    uuid: str | None
    memory_total_mb: float | None
    memory_used_mb: float | None
    utilization: float | None
    holder: str | None
    holder_user: str | None
    holder_name: str | None
    external_processes: list[GpuProcessView]
    healthy: bool


class Gpus(_Model):
    source: Literal["nvml", "simulated"]
    gpus: list[GpuView]


class Event(_Model):
    seq: int
    job_id: str | None
    t: float
    kind: EventKind
    message: str
    data: dict[str, Any] | None


class Events(_Model):
    events: list[Event]


class ProgressList(_Model):
    progress: list[ProgressRecord]


class Logs(_Model):
    trainer: str
    sidecar: str


class Updates(_Model):
    version: int


class Launches(_Model):
    launches: list[LaunchRequest]
