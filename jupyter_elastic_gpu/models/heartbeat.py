"""What a sidecar reports: its heartbeat, and the progress records and the error in it.

A sidecar and its trainer are the user's processes (docs/security.md): what they send is
validated like any request, bounded, and fields this version does not know are dropped rather
than refused (``Lenient``), since a sidecar may be a version ahead of the scheduler.
"""

from __future__ import annotations

from typing import Annotated

from elastic_gpu_sidecar.protocol import MAX_PROGRESS_BACKLOG, SidecarState
from pydantic import BeforeValidator, Field

from .base import (
    Amount,
    Count,
    Generation,
    GpuCount,
    GpuIds,
    Lenient,
    Pid,
    Seconds,
    Speeds,
    Text,
    Value,
    at_most,
)


class ErrorInfo(Lenient):
    """Why a job failed: the exception, its traceback, and what to do."""

    type: Annotated[str, Field(max_length=200)] = Field(
        description="Exception type, or e.g. `TrainerCrashed`, `SidecarLost`."
    )
    message: Text = ""
    traceback: Text | None = None
    hint: Annotated[str | None, Field(max_length=2000)] = Field(
        None, description="What to do about it."
    )


#: The most of a trainer's note kept (it is the user's process: a longer one is cut, not refused,
#: so that its progress still counts).
MAX_NOTE_CHARS = 2000


def _clipped_note(value: object) -> str | None:
    return value[:MAX_NOTE_CHARS] if isinstance(value, str) else None


class ProgressRecord(Lenient):
    """One line of a job's ``progress.jsonl``, written by its trainer (docs/sidecar.md)."""

    t: Seconds = Field(description="Epoch seconds.")
    generation: Count | None = None
    replicas: GpuCount | None = None
    epoch: Count | None = Field(None, description="0-based epoch in progress.")
    epochs: Count | None = None
    step_in_epoch: Count | None = None
    steps_per_epoch: Count | None = None
    global_step: Count | None = None
    samples: Amount | None = Field(None, description="Cumulative over the job.")
    loss: Value | None = None
    metrics: Annotated[
        dict[Annotated[str, Field(max_length=200)], Value | None],
        Field(max_length=100),
        at_most(100),
    ] = Field(default_factory=dict)
    samples_per_s: Amount | None = None
    batch_size: Count | None = Field(None, description="The global batch.")
    grad_sqr: Value | None = Field(
        None, description="|G|^2, the true gradient's squared norm (estimated; --measure-noise)."
    )
    grad_var: Amount | None = Field(
        None, description="tr(Sigma), the per-sample gradient variance (estimated)."
    )
    noise_scale: Amount | None = Field(
        None, description="The gradient noise scale tr(Sigma) / |G|^2, in samples."
    )
    noise_steps: Count | None = Field(
        None, description="The pairs of steps measured that the noise scale is from."
    )
    first: bool | None = Field(None, description="First step of a trainer process.")
    pid: Pid | None = None
    resumed_from: Count | None = Field(None, description="Global step restored.")
    replayed: Count | None = Field(
        None, description="Steps replayed because the input cannot be skipped."
    )
    ready_at: Seconds | None = Field(
        None,
        description="Unix time the trainer process had its framework imported (first step only).",
    )
    epoch_end: bool | None = None
    stopped: bool | None = Field(None, description="Written just before a stop.")
    note: Annotated[str | None, BeforeValidator(_clipped_note)] = Field(
        None,
        description="What the framework's adapter says of this run: a setting of the script's "
        "that the grant overrides, or a batch policy it cannot honour as asked.",
    )

    def total_samples(self) -> float | None:
        """Samples the whole training needs (None until epochs, steps and batch are known)."""
        if not (self.epochs and self.steps_per_epoch and self.batch_size):
            return None
        return float(self.epochs) * float(self.steps_per_epoch) * float(self.batch_size)


class Heartbeat(Lenient):
    """What a sidecar posts every few seconds (docs/sidecar.md, "Heartbeat protocol")."""

    job_id: Annotated[str | None, Field(max_length=64)] = None
    generation: Generation | None = Field(
        None, description="Generation of the grant the current (or last) trainer runs on."
    )
    gpus: GpuIds = Field(default_factory=list)
    state: SidecarState | None = None
    progress: ProgressRecord | None = None
    backlog: Annotated[
        list[ProgressRecord],
        Field(max_length=MAX_PROGRESS_BACKLOG),
        at_most(MAX_PROGRESS_BACKLOG),
    ] = Field(
        default_factory=list,
        description="records before ``progress`` not acknowledged yet, oldest first",
    )
    throughput: Speeds = Field(
        default_factory=dict,
        description="Samples/s per replica count, the median of the last 10 measurements.",
    )
    resize_cost_s: Seconds | None = Field(None, description="Mean measured resize pause.")
    sidecar_pid: Pid | None = None
    trainer_pid: Pid | None = None
    restarts: Count = 0
    error: ErrorInfo | None = None
    exit_code: Annotated[int | None, Field(ge=-256, le=256)] = None
    model_path: Annotated[str | None, Field(max_length=4096)] = Field(
        None, description="The saved model"
    )
    idle_s: Seconds | None = Field(
        None,
        description="interactive leases: seconds since the kernel last ran code (null: not "
        "known, never reclaimed for idleness)",
    )

    def records(self) -> list[dict]:
        """Every progress record it carries, oldest first, as the store keeps them."""
        both = [*self.backlog, *([self.progress] if self.progress is not None else [])]
        return [r.model_dump(exclude_none=True) for r in both]
