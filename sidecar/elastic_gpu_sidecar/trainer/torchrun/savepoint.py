"""Where the script's own last checkpoint stands: the step of its last ``torch.save``.

A torchrun script resumes itself, from a file the adapter never reads. What the adapter can
know is when the script saved: rank 0 notes the global step (and the samples and epoch) of
each ``torch.save`` in a small file with the job's checkpoints (which ``--fresh``
discards with them; the checkpoint store reads only its own ``ckpt-*``), and the next generation starts counting
from there. Its first progress record then says ``resumed_from`` = that step, and the
sidecar, which knows the step the stopped process reached, reports the steps trained since
the script's last checkpoint as lost: they are trained again.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ... import protocol as P
from ...jobdir import JobDir, atomic_write_json, read_json

#: In the job's checkpoints directory, rewritten by rank 0 after each ``torch.save``.
SAVEPOINT = "torchrun-save.json"


def _path(job: JobDir) -> Path:
    return job / P.CHECKPOINTS / SAVEPOINT


@dataclass(frozen=True)
class Savepoint:
    step: int = 0
    samples: int | None = 0
    epoch: int | None = None
    generation: int | None = None
    time: float | None = None


def read(job: JobDir) -> Savepoint | None:
    """The last save noted in the job, None before any (or when the file is unreadable)."""
    try:
        data = read_json(_path(job), None)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("step"), int):
        return None
    fields = Savepoint.__dataclass_fields__
    return Savepoint(**{k: v for k, v in data.items() if k in fields})


def write(job: JobDir, point: Savepoint) -> Savepoint:
    point = Savepoint(**dict(asdict(point), time=round(time.time(), 3)))
    _path(job).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(_path(job), asdict(point))
    return point
