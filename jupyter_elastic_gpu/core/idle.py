"""When an interactive GPU lease is warned, and when it is released.

A notebook kernel holds its GPUs for as long as its user keeps it, used or not, and nothing
can shrink it. The rules here give them back: a kernel idle (no code run, and its GPUs not
busy where NVML can tell) for ``timeout_s`` loses its lease; ``warning_s`` before that its
lease says so. While training jobs wait for GPUs the idle kernel is costing them time, so the
shorter ``contended_timeout_s`` applies. And a lease, busy or not, is bounded while others
wait (``lease_verdict``): after ``hold_limit_s`` of holding GPUs, or once its owner has been
above their fair share for ``warning_s`` while another user waits. Pure: the driver measures
idleness, holding times, shares and the queue; this decides and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .reasons import plural

#: What every release adds: what happens to the kernel and the notebook.
RESTARTS = "; the kernel restarts without GPUs, its notebook keeps its outputs"


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
    hold_limit_s: float = 0.0  # while others wait, the longest a lease holds GPUs (0: no limit)

    def __post_init__(self) -> None:
        for name in ("timeout_s", "contended_timeout_s", "warning_s", "hold_limit_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be a number of seconds, 0 or more; got {value!r}")


@dataclass(frozen=True)
class IdleVerdict:
    action: IdleAction
    reason: str
    release_in_s: float | None = None  # seconds left before the release (WARN only)
    idle_s: float | None = None  # how long the kernel has run nothing (the idle rule's WARN)


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
            f"released: {why} (limit {_minutes(timeout)}){RESTARTS}",
        )
    left = timeout - idle_s
    if left <= rule.warning_s:
        return IdleVerdict(
            IdleAction.WARN,
            f"idle: {why}; its GPUs are released in {_minutes(left)} unless it runs code",
            release_in_s=left,
            idle_s=idle_s,
        )
    return IdleVerdict(IdleAction.KEEP, "")


def lease_verdict(
    rule: IdleRule,
    idle_s: float | None,
    gpus_busy: bool,
    waiting_gpus: int,
    held_s: float,
    over_share_s: float | None = None,
    waiting_users: int = 0,
) -> IdleVerdict:
    """``idle_verdict``, then the bounds that hold even for a busy kernel while others wait:
    it has held its GPUs ``held_s`` seconds (limit ``hold_limit_s``), and its owner has been
    above their fair share for ``over_share_s`` seconds (None: not above it) while
    ``waiting_users`` other users wait. The first rule that releases (or else warns) wins."""
    idle = idle_verdict(rule, idle_s, gpus_busy, waiting_gpus)
    if idle.action == IdleAction.RELEASE or waiting_gpus <= 0:
        return idle
    verdicts = [idle]
    if rule.hold_limit_s > 0:
        why = (
            f"it has held its GPUs for {_minutes(held_s)} while jobs wait for "
            f"{plural(waiting_gpus, 'GPU')} (limit {_minutes(rule.hold_limit_s)})"
        )
        verdicts.append(_bound(why, rule.hold_limit_s - held_s, rule.warning_s))
    if over_share_s is not None and waiting_users > 0:
        why = (
            f"its owner holds more than their fair share while "
            f"{plural(waiting_users, 'other user')} wait{'s' if waiting_users == 1 else ''}"
        )
        verdicts.append(_bound(why, rule.warning_s - over_share_s, rule.warning_s))
    for action in (IdleAction.RELEASE, IdleAction.WARN):
        found = [v for v in verdicts if v.action == action]
        if found:
            return min(found, key=lambda v: v.release_in_s or 0.0)
    return idle


def _bound(why: str, left_s: float, warning_s: float) -> IdleVerdict:
    """Released once ``left_s`` is spent, warned within ``warning_s`` of it."""
    if left_s <= 0:
        return IdleVerdict(IdleAction.RELEASE, f"released: {why}{RESTARTS}")
    if left_s <= warning_s:
        text = f"{why}: its GPUs are released in {_minutes(left_s)}"
        return IdleVerdict(IdleAction.WARN, text, release_in_s=left_s)
    return IdleVerdict(IdleAction.KEEP, "")
