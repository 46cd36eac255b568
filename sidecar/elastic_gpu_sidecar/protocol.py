"""Names and numbers that cross a process boundary, defined once.

The sidecar, the trainer, the synthetic workload, the CLI commands and the live scheduler
all meet in the job directory and in exit codes; keeping every file name, code, state and
environment variable here means the two sides of each contract cannot drift apart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# --- files in the job directory -------------------------------------------------------------
CONTROL = "control.json"  # desired lease, written by resize/cancel/suspend or the scheduler client
STATUS = "status.json"  # what the sidecar is doing, rewritten atomically on every change
PROGRESS = "progress.jsonl"  # one record a line, appended by the trainer
TRAINER_LOG = "trainer.log"  # trainer stdout+stderr, all generations
SIDECAR_LOG = "sidecar.log"  # human-readable sidecar events
CHECKPOINTS = "checkpoints"  # atomic checkpoints + the ``latest`` pointer
MODEL = "model.keras"  # final model, saved by the bootstrap after the script ends
MODEL_WEIGHTS = "model.weights.h5"  # fallback when the model cannot be serialised whole
RESULT = "result.json"  # written once when the job ends
PIDFILE = "sidecar.pid"  # pid of the running sidecar, for resize/cancel nudges
JOB = "job.json"  # static job configuration (script, options), so a later run can resume
TRAINER_ERROR = "trainer-error.json"  # the trainer's last error (type, message, traceback, hint)
LIVE = "live.step"  # 24 bytes the trainer updates every step: generation, global step, time

# --- trainer exit codes (the trainer process, seen by the sidecar) -------------------------
TRAINER_DONE = 0
TRAINER_USER_ERROR = 65  # the script raised: not retried
TRAINER_INFRA_ERROR = 70  # device/runtime failure or a bootstrap bug: retried like a crash
TRAINER_STOPPED = 75  # stopped at the sidecar's request after writing a checkpoint

# --- sidecar exit codes (``python -m elastic_gpu_sidecar run``) ----------------------------
EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SUSPENDED = 3
EXIT_CANCELLED = 4

STATES = (
    "starting",
    "running",
    "resizing",
    "restarting",
    "suspended",
    "done",
    "failed",
    "cancelled",
)
FINAL_STATES = ("suspended", "done", "failed", "cancelled")
ACTIONS = ("run", "stop", "cancel")

# --- environment handed to the trainer ------------------------------------------------------
ENV_JOB_DIR = "ELASTIC_GPU_JOB_DIR"
ENV_GENERATION = "ELASTIC_GPU_GENERATION"
ENV_GPUS = "ELASTIC_GPU_GPUS"  # comma-separated GPU ids of the lease (labels when simulated)
ENV_SIMULATED = "ELASTIC_GPU_SIMULATED"  # "1": give the trainer len(gpus) logical CPU devices
ENV_SIDECAR_PID = "ELASTIC_GPU_SIDECAR_PID"  # the trainer exits if its parent is not this pid
ENV_PROGRESS_INTERVAL = "ELASTIC_GPU_PROGRESS_INTERVAL"  # seconds between progress records
ENV_LOGICAL_MEMORY_MB = "ELASTIC_GPU_LOGICAL_MEMORY_MB"  # per logical GPU when an id repeats
ENV_SECRET = "ELASTIC_GPU_JOB_SECRET"  # per-job secret for the scheduler, never on argv


def parse_gpus(text: str) -> list[str]:
    """Parse ``"0,1,2"`` into ``["0", "1", "2"]``; an empty string means no GPUs."""
    gpus = [g.strip() for g in text.split(",") if g.strip()]
    for g in gpus:
        if not all(c.isalnum() or c in "-_:." for c in g):
            raise ValueError(f"invalid GPU id {g!r}")
    return gpus


@dataclass
class Control:
    """The desired lease: what the sidecar reconciles toward (level-triggered)."""

    generation: int
    gpus: list[str]
    action: str = "run"
    requested_at: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        return {
            "generation": self.generation,
            "gpus": list(self.gpus),
            "action": self.action,
            "requested_at": self.requested_at,
        }

    @classmethod
    def from_json(cls, obj: object) -> Control:
        """Validate a control document (from the file or a scheduler response)."""
        if not isinstance(obj, dict):
            raise ValueError("control must be a JSON object")
        gen = obj.get("generation")
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            raise ValueError(f"generation must be a non-negative integer, got {gen!r}")
        gpus = obj.get("gpus")
        if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
            raise ValueError(f"gpus must be a list of strings, got {gpus!r}")
        parse_gpus(",".join(gpus))
        action = obj.get("action", "run")
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        if action == "run" and not gpus:
            raise ValueError("action 'run' needs at least one GPU")
        req = obj.get("requested_at")
        if not isinstance(req, (int, float)) or isinstance(req, bool):
            req = time.time()
        return cls(gen, list(gpus), action, float(req))
