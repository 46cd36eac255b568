"""Fair share between users: how many GPUs each user is due now, from weights and past usage.

The idea is Slurm's fair-share factor: what a user is due depends on their weight against the
weights of the others, and who goes first when not everyone can be served depends on how much
each has used lately (GPU-seconds, decayed with a half-life) against their share.

* **Entitlement** (``entitlements``): the usable GPUs are water-filled over the users with
  demand, in proportion to their weights; a user never gets more than they can use (their
  demand: what their open jobs can hold, bounded by the GPUs), and what they cannot use goes to
  the others. That is what makes it work-conserving: an idle user's share is lent to the
  others, and taken back (through the per-user caps of ``core.schedule``, by elastic shrink)
  as soon as its owner has demand again.
* **Whole GPUs.** Fractions are settled by priority: a user who has used less than their share
  (a lower ``ratio``, usage fraction over weight fraction) gets the odd GPU first. So does a
  user whose smallest job needs more than their share: it may take GPUs from users of a worse
  priority, so that a large job runs in turns instead of never.
* **Hysteresis.** A user who holds more than the floor of their share now keeps the advantage
  until their ratio exceeds the other's by ``hysteresis``: GPUs do not change hands at every
  decision as usage creeps up (a resize costs seconds; a swap every tick would cost minutes).

Everything here is pure: usage is decayed by the driver with ``decayed`` (exactly, for any
time step), and handed in with the snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .reason_kinds import ReasonFigures, ShareFigures
from .reason_text import format_days

#: Usage counts half as much after this many seconds (Slurm's PriorityDecayHalfLife default).
DEFAULT_HALF_LIFE_S = 7 * 86400.0
#: A holder keeps its odd GPU until its ratio exceeds the contender's by this fraction.
DEFAULT_HYSTERESIS = 0.05
#: A reason names a user's usage once it is this many times their share (10% over: less is
#: the noise of whole GPUs and recent changes, not a reason anyone acts on).
SAY_OVER = 1.1
#: The weight of a user (or group) nobody set one for.
DEFAULT_WEIGHT = 1.0
_EPS = 1e-9


@dataclass(frozen=True)
class FairShare:
    """The fair-share rules of one decision: weights per user (missing: 1) and each user's
    decayed usage in GPU-seconds."""

    weights: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[str, float] = field(default_factory=dict)
    half_life_s: float = DEFAULT_HALF_LIFE_S
    hysteresis: float = DEFAULT_HYSTERESIS

    def __post_init__(self) -> None:
        if not (math.isfinite(self.half_life_s) and self.half_life_s > 0):
            raise ValueError(f"the half-life must be a positive time, got {self.half_life_s!r}")
        if not 0 <= self.hysteresis < 1:
            raise ValueError(f"hysteresis must lie in [0, 1), got {self.hysteresis!r}")
        for user, w in self.weights.items():
            if not (math.isfinite(w) and w > 0):
                raise ValueError(f"the weight of {user} must be a positive number, got {w!r}")
        for user, u in self.usage.items():
            if not (math.isfinite(u) and u >= 0):
                raise ValueError(f"the usage of {user} must be a number >= 0, got {u!r}")

    def weight(self, user: str) -> float:
        return self.weights.get(user, DEFAULT_WEIGHT)

    def ratios(self, users: Iterable[str]) -> dict[str, float]:
        """{user: usage fraction / weight fraction} among ``users`` and everyone with usage:
        1.0 is exactly the share, 3.0 three times it, 0.0 nothing used (or nobody used any)."""
        everyone = set(users) | {u for u, x in self.usage.items() if x > 0}
        used = sum(self.usage.get(u, 0.0) for u in everyone)
        weight = sum(self.weight(u) for u in everyone)
        if used <= 0:
            return dict.fromkeys(everyone, 0.0)
        return {u: (self.usage.get(u, 0.0) / used) / (self.weight(u) / weight) for u in everyone}


def decayed(usage: float, held: float, dt: float, half_life_s: float) -> float:
    """Usage after ``dt`` seconds of holding ``held`` GPUs: the old usage decays by
    2^(-dt/h) and what was held meanwhile is added, each instant decayed from its own time
    (the exact integral, so the result does not depend on how often it is called)."""
    if dt <= 0:
        return usage
    k = math.log(2) / half_life_s
    keep = math.exp(-k * dt)
    return usage * keep + held * (1.0 - keep) / k


@dataclass(frozen=True)
class Entitlement:
    """What fair share gives each user with demand in one decision."""

    gpus: dict[str, int]  # whole GPUs due to each user now
    share: dict[str, float]  # the exact (fractional) water-filled share
    ratios: dict[str, float]  # usage fraction / weight fraction (see FairShare.ratios)
    order: tuple[str, ...]  # priority, first served first (hysteresis included)
    total: int  # usable GPUs


def entitlements(
    fair: FairShare,
    total: int,
    demand: Mapping[str, int],
    smallest: Mapping[str, int],
    holding: Mapping[str, int],
) -> Entitlement:
    """Whole GPUs due to each user of ``demand`` (GPUs their jobs could use), out of ``total``.

    ``smallest`` is the fewest GPUs any of a user's jobs can run on; ``holding`` the GPUs each
    user's jobs hold now (for the hysteresis).
    """
    users = sorted(u for u, d in demand.items() if d > 0)
    ratios = fair.ratios(demand)
    share = _water_fill(total, {u: min(demand[u], total) for u in users}, fair)
    floor = {u: math.floor(share[u] + _EPS) for u in users}

    def key(u: str) -> tuple[float, float, str]:
        r = ratios.get(u, 0.0)
        if holding.get(u, 0) > floor[u]:
            r *= 1.0 - fair.hysteresis
        return r, -fair.weight(u), u

    order = tuple(sorted(users, key=key))
    gpus = dict(floor)
    spare = min(total, sum(min(demand[u], total) for u in users)) - sum(gpus.values())
    for u in order:  # the odd GPUs: one each to those with a fraction left, best first
        if spare <= 0:
            break
        if share[u] - floor[u] > _EPS:
            gpus[u] += 1
            spare -= 1
    for i, u in enumerate(order):  # a job larger than the share runs in turns, best first
        need = min(smallest.get(u, 1), total) - gpus[u]
        if need <= 0:
            continue
        donors = [v for v in reversed(order[i + 1 :]) if gpus[v] > 0]
        if sum(gpus[v] for v in donors) < need:
            continue
        for v in donors:
            give = min(need, gpus[v])
            gpus[v] -= give
            gpus[u] += give
            need -= give
            if not need:
                break
    return Entitlement(gpus, share, ratios, order, total)


def _water_fill(total: int, demand: Mapping[str, int], fair: FairShare) -> dict[str, float]:
    """Weighted max-min fair shares of ``total``: nobody above their demand, the rest in
    proportion to the weights."""
    share = dict.fromkeys(demand, 0.0)
    left, open_ = float(total), set(demand)
    while open_ and left > _EPS:
        level = left / sum(fair.weight(u) for u in open_)
        full = {u for u in open_ if demand[u] <= fair.weight(u) * level + _EPS}
        if not full:
            for u in open_:
                share[u] = fair.weight(u) * level
            break
        for u in full:
            share[u] = float(demand[u])
            left -= demand[u]
        open_ -= full
    return share


def share_reason(
    job_user: str, fair: FairShare, ent: Entitlement, holders: Iterable[str]
) -> ReasonFigures:
    """Why fair share holds a user's jobs where they are, as a ``Limited`` reason's figures:
    their share now, and who has used more than theirs ("bob has used 3.0x their share over
    the last 7 days"): the user themself when they have, else the other user with demand who
    has used the most. "The last 7 days" is the half-life: older usage counts, but less."""
    weights = sum(fair.weight(u) for u in ent.gpus)
    share: ShareFigures = {
        "user": job_user,
        "due": ent.gpus.get(job_user, 0),
        "total": ent.total,
        "weight": fair.weight(job_user),
        "weights": weights,
    }
    mine = ent.ratios.get(job_user, 0.0)
    others = [(ent.ratios.get(u, 0.0), u) for u in set(holders) if u != job_user]
    who, ratio = (job_user, mine) if mine >= SAY_OVER or not others else max(others)[::-1]
    if ratio >= SAY_OVER:
        share.update(over=who, ratio=ratio, half_life_s=fair.half_life_s)
    return {"share": share}


__all__ = [
    "DEFAULT_HALF_LIFE_S",
    "DEFAULT_WEIGHT",
    "Entitlement",
    "FairShare",
    "decayed",
    "entitlements",
    "format_days",
    "share_reason",
]
