"""The vocabulary that crosses a process boundary, defined once.

The sidecar, the trainer, the synthetic workload, the CLI, the live scheduler and its REST API
all meet here: job and sidecar states, grant actions, batch policies, resize mechanisms, the
grant itself, every file name in the job directory, every environment variable handed to a
sidecar or a trainer, and exit codes. The scheduler imports this module (the sidecar imports
nothing of the scheduler), so the two sides of each contract cannot drift apart.
Standard library only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum


class Vocabulary(str, Enum):
    """A string enum: equal to its value, written to JSON and printed as it."""

    __str__ = str.__str__
    __format__ = str.__format__

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)


class JobState(Vocabulary):
    """A job as the scheduler sees it (docs/api.md)."""

    QUEUED = "queued"  # waiting for GPUs (never started, or suspended: see its reason)
    STARTING = "starting"  # GPUs granted, sidecar starting
    RUNNING = "running"
    RESIZING = "resizing"  # checkpointing to restart on another GPU count
    STOPPING = "stopping"  # checkpointing to stop (suspend or cancel)
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in FINAL_JOB_STATES

    @property
    def active(self) -> bool:
        """Holds, or is about to hold, GPUs."""
        return self in ACTIVE_JOB_STATES


FINAL_JOB_STATES = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})
ACTIVE_JOB_STATES = frozenset(
    {JobState.STARTING, JobState.RUNNING, JobState.RESIZING, JobState.STOPPING}
)


class SidecarState(Vocabulary):
    """What a sidecar reports about its trainer (``status.json`` and heartbeats)."""

    STARTING = "starting"
    RUNNING = "running"
    RESIZING = "resizing"
    RESTARTING = "restarting"  # after a crash, from the last checkpoint
    SUSPENDED = "suspended"  # stopped after a checkpoint; resumable
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """The sidecar has exited (or is about to) in this state."""
        return self in ENDED_SIDECAR_STATES


ENDED_SIDECAR_STATES = frozenset(
    {SidecarState.SUSPENDED, SidecarState.DONE, SidecarState.FAILED, SidecarState.CANCELLED}
)


class GrantAction(Vocabulary):
    RUN = "run"  # run on the grant's GPUs
    STOP = "stop"  # checkpoint and stop, resumable (suspend)
    CANCEL = "cancel"  # checkpoint and stop for good


class BatchPolicy(Vocabulary):
    """What a resize keeps constant (docs/sidecar.md)."""

    KEEP_GLOBAL = "keep-global"  # the global batch: the per-replica batch changes
    KEEP_PER_REPLICA = "keep-per-replica"  # the per-replica batch: the learning rate scales


class Mechanism(Vocabulary):
    """How a running job changes GPUs."""

    SIDECAR = "sidecar"  # checkpoint at the next step, restart: no work lost
    TERMINATION = "termination"  # kill, restart from the last periodic checkpoint


class Framework(Vocabulary):
    """Which framework adapter runs a script job (docs/frameworks.md); ``auto``: read from the
    script's imports (``frameworks.detect``)."""

    AUTO = "auto"
    KERAS = "keras"  # keras.Model.fit, Keras 3 on TensorFlow (or KERAS_BACKEND jax / torch)
    LIGHTNING = "lightning"  # lightning.Trainer.fit (or pytorch_lightning)
    TRANSFORMERS = "transformers"  # Hugging Face transformers.Trainer.train
    TORCHRUN = "torchrun"  # a script for torchrun: restarted with the new world size


class JobKind(Vocabulary):
    SCRIPT = "script"  # a training script, run by its framework's adapter
    SYNTHETIC = "synthetic"  # no TensorFlow: steps timed from a speed profile
    INTERACTIVE = "interactive"  # a notebook kernel's GPU lease: its provisioner heartbeats


# --- files in the job directory -------------------------------------------------------------
SCRIPT = "script.py"  # the training code, written by whoever launches the sidecar
INPUTS = "inputs.json"  # notebook variables passed with the job (base64 pickles), mode 0600
GRANT = "grant.json"  # the desired grant, written by the scheduler client or the CLI
#: GRANT's name before it was called a grant (the legacy lease.json), for one upgrade: a
#: reader takes GRANT, else this file; a writer writes GRANT, and this file too where one
#: is there (a job directory an older sidecar started: it may still run, reading only this
#: one). So an older sidecar sees what a newer CLI or scheduler client asks, and a newer
#: sidecar adopts an older job directory. The document itself, the heartbeat's answer and
#: the store kept their keys (generation, gpus, action, requested_at).
LEGACY_GRANT = "lease.json"
STATUS = "status.json"  # what the sidecar is doing, rewritten atomically on every change
PROGRESS = "progress.jsonl"  # one record a line, appended by the trainer
TRAINER_LOG = "trainer.log"  # trainer stdout+stderr, all generations
SIDECAR_LOG = "sidecar.log"  # human-readable sidecar events
SIDECAR_OUT = "sidecar.out"  # the sidecar process's own stdout+stderr (crashes of the sidecar)
LOGS = {"trainer": TRAINER_LOG, "sidecar": SIDECAR_LOG}  # what ``logs`` shows, by name
CHECKPOINTS = "checkpoints"  # atomic checkpoints + the ``latest`` pointer
MODEL = "model.keras"  # final model, saved by the bootstrap after the script ends
MODEL_WEIGHTS = "model.weights.h5"  # fallback when the model cannot be serialised whole
MODEL_CKPT = "model.ckpt"  # a Lightning job's final checkpoint (load_from_checkpoint reads it)
MODEL_DIR = "model"  # a Hugging Face job's final model, a folder (from_pretrained reads it)
#: Where a finished job's model may be, in the order looked for (one per framework).
MODELS = (MODEL, MODEL_WEIGHTS, MODEL_CKPT, MODEL_DIR)
RESULT = "result.json"  # written once when the job ends
PIDFILE = "sidecar.pid"  # pid of the running sidecar, for resize/cancel nudges
JOB = "job.json"  # static job configuration (script, options), so a later run can resume
TRAINER_ERROR = "trainer-error.json"  # the trainer's last error (type, message, traceback, hint)
LIVE = "live.step"  # 24 bytes the trainer updates every step: generation, global step, time

# --- defaults shared by the scheduler and the sidecar ---------------------------------------
DEFAULT_CHECKPOINT_INTERVAL_S = 60.0  # periodic checkpoints bound the work lost on a crash
DEFAULT_HEARTBEAT_INTERVAL_S = 2.0  # sidecar -> scheduler
#: Progress records a heartbeat carries besides the latest (``backlog``): those not acknowledged
#: yet, oldest first, so that what a trainer wrote while the scheduler was down reaches it.
MAX_PROGRESS_BACKLOG = 500
#: A heartbeat body stays under this many bytes (older backlog records are dropped to fit).
MAX_HEARTBEAT_BYTES = 512 * 1024
#: How long an ended sidecar keeps sending its last heartbeat while the scheduler does not
#: answer (a server being restarted): its end and the progress written meanwhile reach it.
FINAL_HEARTBEAT_LINGER_S = 60.0
#: Refusals in a row (after acceptance) that void a sidecar's claim: one odd answer does not.
VOIDED_AFTER_REFUSALS = 2

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
#: The scheduler refused the credentials it had accepted: the job's claim was voided (it was
#: started again elsewhere after this sidecar was given up on, or missed a release deadline).
#: The trainer is killed and nothing is written to the job dir, which its new sidecar may use.
EXIT_VOIDED = 5

# --- environment handed to the sidecar (by a launcher) and to the trainer (by the sidecar) ---
ENV_SECRET = "ELASTIC_GPU_JOB_SECRET"  # per-job secret for the scheduler, never on argv
ENV_JOB_DIR = "ELASTIC_GPU_JOB_DIR"
ENV_GENERATION = "ELASTIC_GPU_GENERATION"
ENV_GPUS = "ELASTIC_GPU_GPUS"  # comma-separated GPU ids of the grant (labels when simulated)
ENV_SIMULATED = "ELASTIC_GPU_SIMULATED"  # "1": give the trainer len(gpus) logical CPU devices
ENV_SIDECAR_PID = "ELASTIC_GPU_SIDECAR_PID"  # the trainer exits if its parent is not this pid
ENV_PROGRESS_INTERVAL = "ELASTIC_GPU_PROGRESS_INTERVAL"  # seconds between progress records
ENV_RANK = "ELASTIC_GPU_RANK"  # set in each rank of a one-process-per-device trainer
ENV_STANDBY_RANKS = "ELASTIC_GPU_STANDBY_RANKS"  # ranks a standby leader keeps ready
ENV_LOGICAL_MEMORY_MB = "ELASTIC_GPU_LOGICAL_MEMORY_MB"  # per logical GPU when an id repeats

#: Longest GPU id accepted anywhere (NVML indices and UUIDs are far shorter).
MAX_GPU_ID_CHARS = 64


def device_index(gpu: str) -> str:
    """The CUDA ordinal of a GPU id on its own node: ``NODE:INDEX`` (a GPU of a cluster of
    servers) is GPU INDEX of NODE; a plain id is the ordinal itself."""
    return gpu.rsplit(":", 1)[-1]


def check_gpu_id(gpu: str) -> str:
    """A GPU id as used in grants: letters, digits and ``-_:.``; ValueError otherwise."""
    if not gpu or len(gpu) > MAX_GPU_ID_CHARS or not all(c.isalnum() or c in "-_:." for c in gpu):
        raise ValueError(f"invalid GPU id {gpu!r}")
    return gpu


def parse_gpus(text: str) -> list[str]:
    """Parse ``"0,1,2"`` into ``["0", "1", "2"]``; an empty string means no GPUs."""
    return [check_gpu_id(g.strip()) for g in text.split(",") if g.strip()]


def epoch_shown(epoch: int | None, epochs: int | None, done: bool = False) -> int | None:
    """The one way an epoch is counted for people: the epoch *running*, 1-based, as Keras
    prints it ("Epoch 3/20" while the third runs), never above the total; the total once the
    job is done. The data (progress records, ``job.history``, checkpoints) keeps Keras'
    callback index, ``epoch``: 0-based, of the epoch in progress. None when nothing is known."""
    if epochs:
        n = epochs if done else (epoch or 0) + 1
        return min(max(n, 1), epochs)
    return None if epoch is None else epoch + 1


@dataclass
class Grant:
    """The GPUs a job may run on, and what to do with them.

    The scheduler publishes the grant it wants; the sidecar reconciles its trainer toward it
    (level-triggered: a lost message changes nothing, the next one converges). ``generation``
    only grows. ``requested_at`` is when the sidecar's side learned of the grant: the resize
    pause is timed from it; the scheduler leaves it unset.
    """

    generation: int = 0
    gpus: list[str] = field(default_factory=list)
    action: GrantAction = GrantAction.RUN
    requested_at: float | None = None

    def __post_init__(self) -> None:
        self.action = GrantAction(self.action)

    def to_json(self) -> dict:
        out: dict = {
            "generation": self.generation,
            "gpus": list(self.gpus),
            "action": self.action.value,
        }
        if self.requested_at is not None:
            out["requested_at"] = self.requested_at
        return out

    @classmethod
    def from_json(cls, obj: object) -> Grant:
        """Validate a grant document (the grant file or a scheduler's answer); ValueError."""
        if not isinstance(obj, dict):
            raise ValueError("a grant must be a JSON object")
        gen = obj.get("generation")
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            raise ValueError(f"generation must be a non-negative integer, got {gen!r}")
        gpus = obj.get("gpus")
        if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
            raise ValueError(f"gpus must be a list of strings, got {gpus!r}")
        for gpu in gpus:
            check_gpu_id(gpu)
        action = obj.get("action", GrantAction.RUN.value)
        if action not in GrantAction.values():
            raise ValueError(f"action must be one of {GrantAction.values()}, got {action!r}")
        if action == GrantAction.RUN and not gpus:
            raise ValueError("action 'run' needs at least one GPU")
        req = obj.get("requested_at")
        if not isinstance(req, (int, float)) or isinstance(req, bool):
            req = time.time()
        return cls(gen, list(gpus), GrantAction(action), float(req))
