"""Progress records and the per-step live counter, shared by every trainer kind.

Both the TensorFlow trainer and the synthetic workload report through this module, so the
sidecar and the scheduler see one format whatever runs underneath.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import time
from pathlib import Path

from .. import protocol as P
from ..jobdir import LIVE_FORMAT, LIVE_SIZE


def progress_interval() -> float:
    try:
        return max(0.05, float(os.environ.get(P.ENV_PROGRESS_INTERVAL, "1.0")))
    except ValueError:
        return 1.0


class ProgressWriter:
    """Append progress records (one JSON object a line) to progress.jsonl.

    Records are flushed, not fsynced: they are a log a person or the sidecar tails, and losing
    the last line in a power cut costs nothing (the checkpoint is what must be durable).
    """

    def __init__(self, job_dir: Path):
        self._f = open(Path(job_dir) / P.PROGRESS, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: dict) -> None:
        self._f.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def record(
    *,
    generation: int,
    replicas: int,
    epoch: int,
    epochs: int,
    step_in_epoch: int,
    steps_per_epoch: int | None,
    global_step: int,
    samples: int | None,
    loss: float | None,
    metrics: dict,
    samples_per_s: float | None,
    batch_size: int | None,
    **extra,
) -> dict:
    """Build a progress record; the field list is the documented contract."""
    rec = {
        "t": round(time.time(), 3),
        "generation": generation,
        "replicas": replicas,
        "epoch": epoch,
        "epochs": epochs,
        "step_in_epoch": step_in_epoch,
        "steps_per_epoch": steps_per_epoch,
        "global_step": global_step,
        "samples": samples,
        "loss": loss,
        "metrics": metrics,
        "samples_per_s": None if samples_per_s is None else round(samples_per_s, 3),
        "batch_size": batch_size,
    }
    rec.update(extra)
    return rec


class LiveCounter:
    """24 bytes in the job dir, rewritten in place after every step (a memory store, ~1 µs).

    Progress records come once a second; this counter lets the sidecar know the exact step a
    trainer reached even when it has just been SIGKILLed, which is how lost work is measured.
    """

    def __init__(self, job_dir: Path):
        path = Path(job_dir) / P.LIVE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < LIVE_SIZE:
                os.ftruncate(fd, LIVE_SIZE)
            self._map = mmap.mmap(fd, LIVE_SIZE)
        finally:
            os.close(fd)

    def update(self, generation: int, global_step: int) -> None:
        struct.pack_into(LIVE_FORMAT, self._map, 0, generation, global_step, time.time())
