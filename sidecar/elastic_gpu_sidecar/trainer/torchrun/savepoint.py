"""Where the script's own last checkpoint stands: the step of its last ``torch.save``.

A torchrun script resumes itself, from a file the adapter never reads. What the adapter can
know is when the script saved: rank 0 notes the global step (and the samples and epoch) of
each ``torch.save`` in a small file in the job dir, and the next generation starts counting
from there. Its first progress record then says ``resumed_from`` = that step, and the
sidecar, which knows the step the stopped process reached, reports the steps trained since
the script's last checkpoint as lost: they are trained again.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ...jobdir import JobDir, atomic_write_json, read_json

#: In the job dir, rewritten by rank 0 after each ``torch.save`` of the script.
SAVEPOINT = "torchrun-save.json"


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
        data = read_json(job / SAVEPOINT, None)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("step"), int):
        return None
    fields = Savepoint.__dataclass_fields__
    return Savepoint(**{k: v for k, v in data.items() if k in fields})


def write(job: JobDir, point: Savepoint) -> Savepoint:
    point = Savepoint(**dict(asdict(point), time=round(time.time(), 3)))
    atomic_write_json(job / SAVEPOINT, asdict(point))
    return point
