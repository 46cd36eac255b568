"""What a sidecar measures for the scheduler: speed per replica count, and what each resize cost.

The scheduler decides from these (docs/api.md, the heartbeat): the median samples/s the trainer
reported at each replica count, and the mean pause of the resizes so far (request to first
step on the new GPUs). Each resize is also kept whole in ``status.json`` for people.
"""

from __future__ import annotations

import statistics
from collections import deque

#: Progress records per replica count the speed is the median of.
SPEED_WINDOW = 10


class Measurements:
    def __init__(self, resizes: list[dict] | None = None) -> None:
        self.throughput: dict[int, deque] = {}
        self.resizes: list[dict] = list(resizes or [])
        self.pending: dict | None = None  # the resize waiting for its first step

    def add_progress(self, record: dict) -> None:
        rate, replicas = record.get("samples_per_s"), record.get("replicas")
        if isinstance(rate, (int, float)) and isinstance(replicas, int) and rate > 0:
            self.throughput.setdefault(replicas, deque(maxlen=SPEED_WINDOW)).append(rate)

    def speed(self) -> dict[str, float]:
        """{replicas: median samples/s}, as the heartbeat sends it."""
        return {str(r): round(statistics.median(v), 3) for r, v in self.throughput.items() if v}

    def resize_cost(self) -> float | None:
        """What the next resize is expected to pause the job: the mean of those so far, seconds.

        With the standby interpreter on, a resize that came before the standby was ready (it
        starts after a trainer's first step) waited for the framework's import, which the next
        resize will not: such a pause counts without its ``import_wait_s``. Otherwise one early
        resize would make the job look seconds dearer to resize than it is, for its whole life.
        """
        pauses = [
            r["pause_s"] - (r.get("import_wait_s") or 0.0)
            for r in self.resizes
            if r.get("pause_s") is not None
        ]
        return round(statistics.fmean(pauses), 3) if pauses else None

    def resize_requested(
        self, generation: int, from_gpus: list[str], to_gpus: list[str], at: float, how: str
    ) -> dict:
        entry = {
            "generation": generation,
            "from_gpus": list(from_gpus),
            "to_gpus": list(to_gpus),
            "requested_at": at,
            "stopped_at": None,
            "first_step_at": None,
            "pause_s": None,
            "lost_steps": None,
            "replayed_steps": None,
            "mechanism": how,
        }
        self.resizes.append(entry)
        return entry

    def first_step(
        self,
        record: dict,
        reached: int | None,
        gpus: list[str],
        *,
        handed_at: float | None = None,
        standby: bool = False,
    ) -> str:
        """Close the pending resize (if any) on the trainer's first step; the line to log.

        ``handed_at`` is when the sidecar started the trainer (or handed the standby its
        grant); ``standby`` whether this job keeps a standby interpreter. The record's
        ``ready_at`` then tells how long the pause waited for the framework's import.
        """
        resumed = record.get("resumed_from")
        replayed = record.get("replayed") or 0
        lost = None
        if reached is not None and isinstance(resumed, int):
            # steps trained again: those after the checkpoint, plus an epoch start replayed
            # because the input cannot be skipped
            lost = max(0, reached - resumed) + replayed
        entry, self.pending = self.pending, None
        where = f"gpus {','.join(gpus)}"
        if entry is not None:
            entry["first_step_at"] = record["t"]
            entry["pause_s"] = round(record["t"] - entry["requested_at"], 3)
            entry["lost_steps"] = lost
            entry["replayed_steps"] = replayed
            ready = record.get("ready_at")
            waited = ""
            if standby and handed_at is not None and isinstance(ready, (int, float)):
                wait = round(min(max(0.0, ready - handed_at), entry["pause_s"]), 3)
                entry["import_wait_s"] = wait
                if wait >= 0.5:
                    waited = f"; {wait:.2f} s of it waited for the framework's import"
            return (
                f"first step on {where} ({len(gpus)} replicas) {entry['pause_s']:.2f} s after "
                f"the request; lost {lost} steps{waited}"
            )
        if lost is not None:
            return f"trainer resumed at step {resumed}; {lost} steps lost since the crash"
        return f"first step on {where}"
