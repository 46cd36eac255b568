"""When an interactive GPU lease whose kernel sits idle is warned, and when it is released.

A notebook kernel holds its GPUs for as long as its user keeps it, used or not. The rule here
gives them back: a kernel idle (no code run, and its GPUs not busy where NVML can tell) for
``timeout_s`` loses its lease; ``warning_s`` before that its lease says so. While training jobs
wait for GPUs the idle kernel is costing them time, so the shorter ``contended_timeout_s``
applies. Pure: the driver measures idleness and the queue, this decides and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .reasons import plural


class IdleAction(str, Enum):
    KEEP = "keep"
    WARN = "warn"
    RELEASE = "release"


@dataclass(frozen=True)
class IdleRule:
    """``timeout_s`` 0 turns reclaim off. ``contended_timeout_s`` (0: same as ``timeout_s``)
    applies while other jobs wait for GPUs; ``warning_s`` is how long before the release the
    lease warns."""

    timeout_s: float = 3600.0
    contended_timeout_s: float = 900.0
    warning_s: float = 300.0

    def __post_init__(self) -> None:
        for name in ("timeout_s", "contended_timeout_s", "warning_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be a number of seconds, 0 or more; got {value!r}")


@dataclass(frozen=True)
class IdleVerdict:
    action: IdleAction
    reason: str
    release_in_s: float | None = None  # seconds left before the release (WARN only)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return plural(round(seconds), "second")
    return plural(round(seconds / 60), "minute")


def idle_verdict(
    rule: IdleRule,
    idle_s: float | None,
    gpus_busy: bool,
    waiting_gpus: int,
) -> IdleVerdict:
    """What to do with a lease whose kernel has been idle ``idle_s`` seconds (None: not known,
    e.g. a kernel started outside a Jupyter server: never reclaimed), whose GPUs are busy
    (``gpus_busy``: NVML saw them work, which counts as use), while queued jobs wait for
    ``waiting_gpus`` GPUs in all."""
    if rule.timeout_s <= 0 or idle_s is None or gpus_busy:
        return IdleVerdict(IdleAction.KEEP, "")
    timeout = rule.timeout_s
    why = f"its kernel has run nothing for {_minutes(idle_s)}"
    if waiting_gpus > 0 and 0 < rule.contended_timeout_s < timeout:
        timeout = rule.contended_timeout_s
        why += f" while jobs wait for {plural(waiting_gpus, 'GPU')}"
    if idle_s >= timeout:
        return IdleVerdict(
            IdleAction.RELEASE,
            f"released: {why} (limit {_minutes(timeout)}); the kernel restarts without GPUs, "
            "its notebook keeps its outputs",
        )
    left = timeout - idle_s
    if left <= rule.warning_s:
        return IdleVerdict(
            IdleAction.WARN,
            f"idle: {why}; its GPUs are released in {_minutes(left)} unless it runs code",
            release_in_s=left,
        )
    return IdleVerdict(IdleAction.KEEP, "")
