"""A job as the live scheduler keeps it, and what each viewer may see of it.

The record is the scheduler's whole memory of a job: what was asked (``spec``), what the
scheduler wants (``desired``: the lease, a generation number and an action), what the sidecar
last reported (``reported``), and the measurements the policy decides on. It round-trips
through JSON, which is how the store keeps it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

#: States in which a job holds (or is about to hold) GPUs.
ACTIVE = ("starting", "running", "resizing", "stopping")
FINAL = ("done", "failed", "cancelled")


def new_secret() -> tuple[str, str]:
    """(secret for the sidecar, hash to keep): the database never holds the secret itself."""
    secret = secrets.token_urlsafe(32)
    return secret, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, digest: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), digest)


@dataclass
class Lease:
    generation: int = 0
    gpus: list[str] = field(default_factory=list)
    action: str = "run"  # run | stop | cancel

    def to_dict(self) -> dict[str, Any]:
        return {"generation": self.generation, "gpus": list(self.gpus), "action": self.action}


@dataclass
class JobRecord:
    id: str
    user: str
    name: str
    kind: str  # script | synthetic
    spec: dict[str, Any]
    job_dir: str
    secret_hash: str = ""
    state: str = "queued"
    reason: str = "queued: waiting for the first decision"
    position: int | None = None
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    desired: Lease = field(default_factory=Lease)
    reported: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] | None = None
    throughput: dict[str, float] = field(default_factory=dict)
    resize_cost_s: float | None = None
    total_work: float | None = None
    work_done: float = 0.0
    attained_gpu_s: float = 0.0
    queued_s: float = 0.0
    resizes: int = 0
    last_change: float | None = None
    last_heartbeat: float | None = None
    launched_at: float | None = None
    launch: dict[str, Any] = field(default_factory=dict)  # launcher's own record (pid, host)
    lost: int = 0
    restarts: int = 0
    exit_code: int | None = None
    error: dict[str, Any] | None = None
    model_path: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)  # lease changes, for the UI

    # -- facts ------------------------------------------------------------------------------
    @property
    def min_gpus(self) -> int:
        return int(self.spec["min_gpus"])

    @property
    def max_gpus(self) -> int:
        return int(self.spec["max_gpus"])

    @property
    def requested_gpus(self) -> int:
        return int(self.spec.get("gpus") or self.spec["min_gpus"])

    @property
    def final(self) -> bool:
        return self.state in FINAL

    @property
    def held_gpus(self) -> list[str]:
        """GPUs the job holds now: the desired lease, or while it stops, what it still runs on."""
        if self.state == "stopping":
            return list(self.reported.get("gpus") or self.desired.gpus)
        if self.state in ACTIVE:
            return list(self.desired.gpus)
        return []

    def eta_s(self) -> float | None:
        """Seconds to finish at the current speed, when total work and speed are known."""
        if self.total_work is None or not self.progress:
            return None
        rate = self.progress.get("samples_per_s")
        if not rate:
            return None
        return max(self.total_work - self.work_done, 0.0) / rate

    # -- (de)serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["desired"] = self.desired.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRecord:
        data = dict(data)
        data["desired"] = Lease(**data.get("desired", {}))
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def progress_view(job: JobRecord) -> dict[str, Any] | None:
    p = job.progress
    if not p:
        return None
    fraction = None
    if job.total_work:
        fraction = min(job.work_done / job.total_work, 1.0)
    return {
        "epoch": p.get("epoch"),
        "epochs": p.get("epochs"),
        "step": p.get("step_in_epoch"),
        "steps_per_epoch": p.get("steps_per_epoch"),
        "global_step": p.get("global_step"),
        "samples": p.get("samples"),
        "replicas": p.get("replicas"),
        "loss": p.get("loss"),
        "metrics": p.get("metrics") or {},
        "samples_per_s": p.get("samples_per_s"),
        "fraction": fraction,
    }


def full_view(job: JobRecord) -> dict[str, Any]:
    """Everything the owner (or an admin) may see."""
    return {
        "id": job.id,
        "name": job.name,
        "user": job.user,
        "state": job.state,
        "kind": job.kind,
        "gpus": job.held_gpus,
        "generation": job.desired.generation,
        "min_gpus": job.min_gpus,
        "max_gpus": job.max_gpus,
        "requested_gpus": job.requested_gpus,
        "reason": job.reason,
        "position": job.position,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "progress": progress_view(job),
        "eta_s": job.eta_s(),
        "throughput": job.throughput,
        "resize_cost_s": job.resize_cost_s,
        "resizes": job.resizes,
        "history": job.history[-50:],
        "restarts": job.restarts,
        "error": job.error,
        "exit_code": job.exit_code,
        "model_path": job.model_path,
        "job_dir": job.job_dir,
        "epochs": job.spec.get("epochs"),
        "batch_policy": job.spec.get("batch_policy"),
        "priority": job.spec.get("priority", 1.0),
    }


def public_view(job: JobRecord) -> dict[str, Any]:
    """What other users see: owner, size and state."""
    return {
        "id": job.id,
        "user": job.user,
        "state": job.state,
        "gpus": job.held_gpus,
        "min_gpus": job.min_gpus,
        "max_gpus": job.max_gpus,
        "position": job.position,
    }


def status_summary(job: JobRecord, full: bool) -> dict[str, Any]:
    """One job in the ``status`` document (what ``status --json`` prints)."""
    p = job.progress or {}
    out = {
        "id": job.id,
        "name": job.name if full else None,
        "user": job.user,
        "state": job.state,
        "gpus": job.held_gpus,
        "min_gpus": job.min_gpus,
        "max_gpus": job.max_gpus,
        "progress": {
            "epoch": p.get("epoch"),
            "step": p.get("step_in_epoch"),
            "replicas": p.get("replicas"),
        },
    }
    if full:
        out["reason"] = job.reason
    return out
