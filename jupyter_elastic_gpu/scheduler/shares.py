"""Fair share in the live service: weights from groups, usage accounted and kept.

``core.fairshare`` decides from weights per user and decayed usage; this module supplies them.

* **Weights.** A user's weight is the largest weight of their groups (JupyterHub groups, from
  the ``Principal`` at submit; the latest submit wins), 1 when none of them has one. A group's
  weight is the one an admin set (``PUT admin/groups/{group}/weight``, kept in the store's
  ``group_weights`` setting), else the configured ``SchedulerService.group_weights``, else 1.
* **Usage.** Every round of the service adds the GPUs each user holds, decayed exactly over the
  time since the last round (``core.fairshare.decayed``). It is written to the store at most
  once per ``SAVE_EVERY_S`` and when the service stops (a write per heartbeat would slow every
  heartbeat), and read back, decayed to now, when it starts: a restart loses at most that much.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..core.fairshare import DEFAULT_WEIGHT, FairShare, decayed
from ..core.model import Snapshot
from ..core.policies import Policy
from ..core.schedule import entitlement
from ..errors import BadRequest
from .jobs import JobRecord
from .storage.store import Store

#: The store setting that holds the weights admins set: {group: weight}.
GROUP_WEIGHTS = "group_weights"
#: Seconds between two writes of the usage to the store.
SAVE_EVERY_S = 60.0
#: The largest weight a group may get (and the smallest is above 0).
MAX_WEIGHT = 1000.0
#: Longest group name the API takes (JupyterHub's own limit is 255).
MAX_GROUP_CHARS = 255


def check_group(group: str) -> str:
    """A group name as JupyterHub allows it, or BadRequest."""
    if not group.strip() or len(group) > MAX_GROUP_CHARS or not group.isprintable():
        raise BadRequest(
            f"a group name is 1 to {MAX_GROUP_CHARS} printable characters, got {group[:50]!r}"
        )
    return group


def check_weight(weight: object) -> float:
    """A group weight, or ValueError saying what is allowed."""
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ValueError(f"a weight is a number, got {weight!r}")
    w = float(weight)
    if not (math.isfinite(w) and 0 < w <= MAX_WEIGHT):
        raise ValueError(f"a weight must be above 0 and at most {MAX_WEIGHT:g}, got {weight!r}")
    return w


class ShareLedger:
    """Weights and decayed usage per user, for the decisions and for ``GET admin/shares``."""

    def __init__(
        self,
        store: Store,
        half_life_s: float,
        group_weights: Mapping[str, float],
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.half_life_s = half_life_s
        self.enabled = enabled
        self.configured = {g: check_weight(w) for g, w in group_weights.items()}
        self.admin_weights: dict[str, float] = {}  # set through the API; override config
        self.groups: dict[str, tuple[str, ...]] = {}  # each user's groups at their last submit
        self.usage: dict[str, float] = {}  # decayed GPU-seconds as of self.at
        self.at: float | None = None
        self._saved_at = -math.inf

    # -- state ----------------------------------------------------------------------------
    async def load(self, jobs: Iterable[JobRecord], now: float) -> None:
        """Groups from the jobs, admins' weights and the usage (decayed to ``now``) from the
        store."""
        for job in sorted(jobs, key=lambda j: j.submitted_at):
            self.note_groups(job.user, job.groups)
        stored = (await self.store.settings()).get(GROUP_WEIGHTS)
        if isinstance(stored, dict):
            for group, w in stored.items():
                try:
                    self.admin_weights[str(group)] = check_weight(w)
                except ValueError:
                    continue  # a value no API call could have written: ignored
        for user, (gpu_s, at) in (await self.store.usage()).items():
            self.usage[user] = decayed(max(gpu_s, 0.0), 0.0, now - at, self.half_life_s)
        self.at = now
        self._saved_at = now

    def note_groups(self, user: str, groups: Iterable[str]) -> None:
        self.groups[user] = tuple(sorted(set(groups)))

    def account(self, jobs: Iterable[JobRecord], now: float) -> None:
        """Add the GPUs each user holds since the last call, decayed."""
        if self.at is None or now <= self.at:
            self.at = now if self.at is None else self.at
            return
        held: dict[str, int] = dict.fromkeys(self.usage, 0)
        for job in jobs:
            if job.state.active:
                held[job.user] = held.get(job.user, 0) + len(job.held_gpus)
        dt = now - self.at
        self.usage = {
            u: decayed(self.usage.get(u, 0.0), n, dt, self.half_life_s) for u, n in held.items()
        }
        self.at = now

    async def save_if_due(self, now: float) -> None:
        if now - self._saved_at >= SAVE_EVERY_S:
            await self.save(now)

    async def save(self, now: float) -> None:
        if self.usage and self.at is not None:
            await self.store.save_usage(dict(self.usage), self.at)
        self._saved_at = now

    # -- weights ----------------------------------------------------------------------------
    def group_weight(self, group: str) -> float:
        return self.admin_weights.get(group, self.configured.get(group, DEFAULT_WEIGHT))

    def weight(self, user: str) -> float:
        """The largest weight of the user's groups; 1 when none has one."""
        ws = [self.group_weight(g) for g in self.groups.get(user, ())]
        return max(ws, default=DEFAULT_WEIGHT)

    async def set_group_weight(self, group: str, weight: object, by: str) -> None:
        """Persist an admin's weight for ``group`` (ValueError when it is not one)."""
        w = check_weight(weight)
        weights = {**self.admin_weights, group: w}
        await self.store.set_setting(GROUP_WEIGHTS, weights, by=by)
        self.admin_weights = weights

    def rules(self, users: Iterable[str] = ()) -> FairShare:
        """The core's fair-share rules for these users (and everyone with usage)."""
        everyone = set(users) | set(self.usage)
        weights = {u: self.weight(u) for u in everyone}
        return FairShare(weights, dict(self.usage), self.half_life_s)

    def for_decision(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the fair-share rules, when fair share is on."""
        if not self.enabled:
            return snapshot
        return replace(snapshot, fair_share=self.rules(j.user for j in snapshot.jobs))

    # -- the admin view ---------------------------------------------------------------------
    def report(self, policy: Policy, snapshot: Snapshot) -> dict[str, Any]:
        """The ``GET admin/shares`` document: each user's weight, share due now, GPUs held and
        decayed usage against their share; the same per group."""
        holding: dict[str, int] = {}
        for job in snapshot.jobs:
            holding[job.user] = holding.get(job.user, 0) + len(job.gpus)
        users = sorted(set(holding) | set(self.usage) | set(self.groups))
        fair = self.rules(users)
        ent = entitlement(policy, snapshot, fair) if snapshot.jobs else None
        total = len(snapshot.usable_gpus)
        ratios = fair.ratios(users)
        used = sum(self.usage.values())
        rows = []
        for u in users:
            share = ent.share.get(u, 0.0) if ent else 0.0
            rows.append(
                {
                    "user": u,
                    "groups": list(self.groups.get(u, ())),
                    "weight": fair.weight(u),
                    "share": share / total if total else 0.0,
                    "entitled_gpus": ent.gpus.get(u, 0) if ent else 0,
                    "gpus": holding.get(u, 0),
                    "usage_gpu_s": self.usage.get(u, 0.0),
                    "usage_fraction": self.usage.get(u, 0.0) / used if used > 0 else 0.0,
                    "ratio": ratios.get(u, 0.0),
                }
            )
        names = set(self.configured) | set(self.admin_weights)
        for gs in self.groups.values():
            names |= set(gs)
        groups = []
        for g in sorted(names):
            members = [r for r in rows if g in r["groups"]]
            groups.append(
                {
                    "group": g,
                    "weight": self.group_weight(g),
                    "users": [r["user"] for r in members],
                    "gpus": sum(r["gpus"] for r in members),
                    "usage_fraction": sum(r["usage_fraction"] for r in members),
                }
            )
        return {"half_life_s": self.half_life_s, "gpus": total, "users": rows, "groups": groups}


__all__ = [
    "GROUP_WEIGHTS",
    "MAX_WEIGHT",
    "SAVE_EVERY_S",
    "ShareLedger",
    "check_group",
    "check_weight",
]
