"""The one entry point every driver calls: a policy's decision under the rules all policies
share, and the queue order people see.

The simulator and the live scheduler call ``decide(policy, snapshot, now)``, never
``policy.decide`` directly, so that both run exactly the same rules.

**Per-user GPU cap** (``Snapshot.user_gpu_cap``, 0: none). With a cap, no user's jobs hold more
than the cap in a decision; only a grant mid-change (``Job.pinned``), which no policy touches,
can keep a user above it (when the cap was lowered under it). The GPUs the cap keeps from a
user go to other jobs in the same decision, by the policy's own rules:

1. Ask the policy. If no user holds more than the cap, that is the decision.
2. For each user over the cap, walk their jobs: first grants mid-change that the decision keeps
   (they cannot be cut), then, under a non-preemptive policy, running jobs kept at their size
   (the policy's promise to them holds against the user's newer jobs too), then the rest in the
   policy's order (``Decision.order``). A job keeps what the decision gives it while that fits
   in what is left of the cap; the first one that does not fit is bounded to what is left
   (its maximum, and its requested size, lowered) if that reaches its minimum, and otherwise
   waits, as does every later job whose minimum no longer fits.
   A job whose grant the policy keeps whatever its bound (adaptive's "about to finish", a
   running job under a non-preemptive policy) is shrunk by the cap itself, on GPUs it holds,
   and from then on counts as mid-change (pinned), which every policy leaves as it is.
3. Ask the policy again on the jobs with those bounds, without the jobs that wait. Repeat from
   2 until no user is over.
4. A job made to wait in an earlier round whose user has room for its minimum again (the
   user's other jobs got less since) competes again, once, bounded to that room: back to 3.
5. GPUs still idle go to jobs the cap made wait whose user has room for them now, in the
   policy's order, without moving any running job (the cap shares GPUs; it never idles them).

Bounds only go down between two such second chances, a job is pinned by the cap at most once
and let back at most once, so this ends: after one to a few more decisions in practice.

A job the cap keeps waiting, or holds at its bound, says so: "queued: alice may hold at most
4 GPUs at a time", "running on 2 of up to 4 GPUs: alice may hold at most 4 GPUs at a time"; so
does a waiting job whose user has no room left for its minimum. Without a cap the policy's
decision is returned as it is (the same object).

**Fair share** (``Snapshot.fair_share``, None: off; ``core.fairshare``). With two users or more,
each user's cap is the whole GPUs fair share gives them now (the smaller of it and
``user_gpu_cap`` when both are set), and the rules above bring every user down to it in the
same decision: by shrinking their elastic jobs, so a share lent while its owner was idle is
taken back at the first decision after they submit. Under a non-preemptive policy a user's
running jobs are kept (the cap is at least what they hold): the share bounds admission. GPUs
the decision leaves idle while a user's cap keeps their jobs from them are lent: those caps
are raised, in fair-share priority order, and the policy decides again (``LEND_ROUNDS`` at
most). A job held back or kept small by its share says so ("queued: fair share: alice's share
now is 2 of 4 GPUs (weight 1 of 2); bob has used 3.0x their share over the last 7 days").

**Queue order.** ``queue_positions(decision)`` numbers the jobs that get no GPUs 1, 2, ... in
the policy's priority order (``Decision.order``): the order in which the policy will serve them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import NamedTuple

from .fairshare import Entitlement, FairShare, entitlements, share_reason
from .model import Decision, Job, Snapshot
from .placement import PlacementError, place
from .policies.base import Policy
from .reason_kinds import ReasonFigures
from .reasons import AtMaximum, Cause, Idle, Limited, Reason, ResizeWouldNotPay, user_cap


def decide(policy: Policy, snapshot: Snapshot, now: float) -> Decision:
    """The decision every driver carries out: ``policy``'s, within the snapshot's per-user cap
    and fair share.

    Without either (``snapshot.user_gpu_cap == 0``, ``snapshot.fair_share is None``) this is
    ``policy.decide(snapshot, now)`` itself. ``Decision.order`` is always the policy's order of
    every job in the snapshot. ``Decision.holds_until`` is the policy's only where its decision
    is returned as it is (a fixed cap keeps a decision the policy keeps); under fair share it is
    None: usage decays as time passes, and the shares move with it.
    """
    decision = policy.decide(snapshot, now)
    cap = snapshot.user_gpu_cap
    if not cap and snapshot.fair_share is None:
        return decision
    users = {job.user for job in snapshot.jobs}
    if snapshot.fair_share is not None and len(users) > 1:
        shared = _fair(policy, snapshot, now, decision, snapshot.fair_share)
        return replace(shared, holds_until=None) if shared.holds_until is not None else shared
    if not cap:
        return decision
    caps = dict.fromkeys(users, cap)
    return _within_caps(
        policy, snapshot, now, decision, caps, lambda job, n, top: cap_reason(job, cap, n, top)
    )


class Together(NamedTuple):
    """``decide_together``'s answer."""

    #: The decision to carry out.
    decision: Decision
    #: Each job given GPUs it could not start on, with what it was given.
    apart: dict[str, tuple[str, ...]]
    #: The first decision, every job in it (those apart too): the order to rank the queue by.
    ranked: Decision


def decide_together(
    policy: Policy, snapshot: Snapshot, now: float, group: Mapping[str, str]
) -> Together:
    """``decide``, where a job runs on one group of GPUs (``group``: each GPU's node, or its
    kind on its node where kinds are mixed: ``placement.groups``).

    The policies count GPUs; a job not running yet that they give GPUs of which no group holds
    its minimum cannot start on them. It gets none, and the others are decided again without
    it, so that those GPUs go to a job that can use them rather than stay idle. Returns the
    decision and each such job with what it was given (its reason says why it waits: the
    driver's ``spread``). Where every GPU is in one group nothing changes.
    """
    decision = decide(policy, snapshot, now)
    if len(set(group.values())) <= 1:
        return Together(decision, {}, decision)
    given = decision.allocations
    apart = {
        job.id: tuple(given[job.id])
        for job in snapshot.jobs
        if not job.gpus and given.get(job.id) and not together(given[job.id], group, job.min_gpus)
    }
    if not apart:
        return Together(decision, {}, decision)
    rest = tuple(j for j in snapshot.jobs if j.id not in apart)
    return Together(decide(policy, replace(snapshot, jobs=rest), now), apart, decision)


def together(gpus: Collection[str], group: Mapping[str, str], least: int) -> bool:
    """Whether ``least`` of ``gpus`` are in one group (the rest of a grant is cut off)."""
    sizes: dict[str, int] = {}
    for g in gpus:
        sizes[group.get(g, "")] = sizes.get(group.get(g, ""), 0) + 1
    return max(sizes.values(), default=0) >= least


#: Lending rounds at most: GPUs the shares leave idle go to users who can use them, and the
#: policy decides again (one round lends all it can; a second catches what the first moved).
LEND_ROUNDS = 3


def entitlement(policy: Policy, snapshot: Snapshot, fair: FairShare) -> Entitlement:
    """The GPUs fair share gives each user with open jobs in ``snapshot`` under ``policy``
    (what a user's jobs can use: their maxima under an elastic policy, else their requests)."""
    demand: dict[str, int] = {}
    smallest: dict[str, int] = {}
    holding: dict[str, int] = {}
    for job in snapshot.jobs:
        u = job.user
        demand[u] = demand.get(u, 0) + _top(policy, job)
        smallest[u] = min(smallest.get(u, job.min_gpus), job.min_gpus)
        holding[u] = holding.get(u, 0) + len(job.gpus)
    return entitlements(fair, len(snapshot.usable_gpus), demand, smallest, holding)


def _fair(
    policy: Policy, snapshot: Snapshot, now: float, first: Decision, fair: FairShare
) -> Decision:
    """``first`` within each user's fair share (and the cap), the idle part of a share lent."""
    ent = entitlement(policy, snapshot, fair)
    cap = snapshot.user_gpu_cap
    caps = dict(ent.gpus)
    if not policy.preemptive:  # its promise to running jobs holds: the share bounds admission
        running: dict[str, int] = {}
        for job in snapshot.jobs:
            running[job.user] = running.get(job.user, 0) + len(job.gpus)
        caps = {u: max(n, running[u]) for u, n in caps.items()}
    if cap:
        caps = {u: min(n, cap) for u, n in caps.items()}

    def why(job: Job, n: int, top: int) -> Reason:
        if cap and cap <= ent.gpus[job.user]:
            return cap_reason(job, cap, n, top)
        return held_reason(job, share_reason(job.user, fair, ent, ent.gpus), n, top)

    decision = _within_caps(policy, snapshot, now, first, caps, why)
    for _ in range(LEND_ROUNDS):
        if not _lend(policy, snapshot, decision, caps, ent.order):
            break
        decision = _within_caps(policy, snapshot, now, first, caps, why)
    return _say_share(policy, snapshot, decision, caps, why)


def _say_share(
    policy: Policy,
    snapshot: Snapshot,
    decision: Decision,
    caps: Mapping[str, int],
    why: Callable[[Job, int, int], Reason],
) -> Decision:
    """``decision`` with the share as the reason of every running job below its top whose user
    holds all their share: what keeps it small is the share, whatever the policy says."""
    held: dict[str, int] = {}
    for job in snapshot.jobs:
        held[job.user] = held.get(job.user, 0) + len(decision.allocations.get(job.id, ()))
    reasons = dict(decision.reasons)
    for job in snapshot.jobs:
        n, top = len(decision.allocations.get(job.id, ())), _top(policy, job)
        if 0 < n < top and held[job.user] >= caps[job.user] and not job.pinned:
            reasons[job.id] = why(job, n, top)
    if reasons == decision.reasons:
        return decision
    return Decision(decision.allocations, reasons, decision.order)


def _top(policy: Policy, job: Job) -> int:
    """The most GPUs the policy would give ``job``."""
    return job.max_gpus if policy.elastic else job.requested_gpus


def _lend(
    policy: Policy,
    snapshot: Snapshot,
    decision: Decision,
    caps: dict[str, int],
    order: tuple[str, ...],
) -> bool:
    """Raise the caps of users whose cap keeps them from GPUs that ``decision`` leaves idle,
    in fair-share priority order; True if any was raised (decide again)."""
    taken = {g for grant in decision.allocations.values() for g in grant}
    free = sum(1 for g in snapshot.usable_gpus if g.id not in taken)
    if free <= 0:
        return False
    held: dict[str, int] = {}
    wants: dict[str, int] = {}  # GPUs the user's jobs could still take
    step: dict[str, int] = {}  # the fewest more GPUs that would let one of them take any
    for job in snapshot.jobs:
        u, n = job.user, len(decision.allocations.get(job.id, ()))
        held[u] = held.get(u, 0) + n
        more = max(_top(policy, job) - n, 0)
        wants[u] = wants.get(u, 0) + more
        if more:
            need = 1 if n else job.min_gpus
            step[u] = min(step.get(u, need), need)
    cap = snapshot.user_gpu_cap
    lent = False
    for user in order:
        if user not in step or held[user] + step[user] <= caps[user]:
            continue  # not the cap that keeps this user's jobs from the idle GPUs
        limit = cap or held[user] + wants[user]
        give = min(free, held[user] + wants[user] - caps[user], limit - caps[user])
        if give > 0:
            caps[user] += give
            free -= give
            lent = True
    return lent


def queue_positions(decision: Decision, among: Collection[str] | None = None) -> dict[str, int]:
    """{job id: 1-based place in the queue} for the jobs ``decision`` gives no GPUs.

    Places follow the policy's order (``Decision.order``; jobs missing from it come last, in the
    order of ``decision.allocations``). ``among`` limits the numbering to those job ids (e.g.
    only the jobs a service still has queued, not those being suspended); jobs outside it are
    skipped, not counted.
    """
    allocations = decision.allocations
    ids = list(decision.order)
    if len(ids) < len(allocations):
        listed = set(ids)
        ids += [job_id for job_id in allocations if job_id not in listed]
    positions: dict[str, int] = {}
    for job_id in ids:
        if job_id in positions or job_id not in allocations or allocations[job_id]:
            continue
        if among is None or job_id in among:
            positions[job_id] = len(positions) + 1
    return positions


def idle_reason(snapshot: Snapshot, decision: Decision, at: float | None = None) -> Idle | None:
    """Why the usable GPUs ``decision`` (made at ``at``) gives no job stay idle (None: there
    are none).

    It names at most two jobs: the first waiting job in the policy's order that cannot take
    them (it needs more, or its user's limit keeps it out), and the running job closest to
    taking them (the resize that would save the most, else the first that says why it
    does not grow); none when no job can use more."""
    taken = {g for grant in decision.allocations.values() for g in grant}
    free = sum(1 for g in snapshot.usable_gpus if g.id not in taken)
    if free <= 0 or not snapshot.jobs:  # no job at all: nothing to explain
        return None
    jobs = {job.id: job for job in snapshot.jobs}
    ids = [i for i in decision.order if i in jobs] or list(jobs)
    waiting: Cause | None = None
    running: list[Cause] = []
    for job_id in ids:
        reason = decision.reasons.get(job_id)
        if reason is None or reason.cause(job_id) is None:
            continue
        if len(decision.allocations.get(job_id, ())) >= jobs[job_id].max_gpus:
            continue  # at its maximum: whatever keeps it so, it could not use more
        cause = Cause(job_id, jobs[job_id].user, reason)
        if decision.allocations.get(job_id):
            running.append(cause)
        elif waiting is None:
            waiting = cause
    unpaid = [c for c in running if isinstance(c.reason, ResizeWouldNotPay)]
    if unpaid:
        running = [max(unpaid, key=lambda c: c.reason.gain_s)]  # type: ignore[attr-defined]
    return Idle(free, (*((waiting,) if waiting else ()), *running[:1]), at)


def cap_reason(job: Job, cap: int, gpus: int = 0, top: int = 0) -> Limited:
    """What a job the cap holds back reads: waiting (``gpus`` 0) or running on ``gpus`` of up
    to ``top``."""
    return held_reason(job, user_cap(job.user, cap), gpus, top)


def held_reason(job: Job, why: ReasonFigures, gpus: int = 0, top: int = 0) -> Limited:
    """What a job a per-user limit holds back reads, ``why`` being the limit's figures."""
    return Limited(why, gpus, top if gpus else 0, suspended=job.started and not gpus)


def _within_caps(
    policy: Policy,
    snapshot: Snapshot,
    now: float,
    first: Decision,
    caps: Mapping[str, int],
    why: Callable[[Job, int, int], Reason],
) -> Decision:
    """``first`` with no user above ``caps[user]`` (the module's steps 2-4); ``why(job, gpus,
    top)`` is the reason of a job a cap holds back (``gpus`` 0: waiting)."""
    # Each job as the policy is asked about it: as given, or held back by the cap.
    seen = {job.id: job for job in snapshot.jobs}
    by_user: dict[str, list[str]] = {}
    for job in snapshot.jobs:
        by_user.setdefault(job.user, []).append(job.id)
    waiting: set[str] = set()  # jobs the cap keeps from any GPU
    let_back: set[str] = set()  # waiting jobs given a second chance (once each)
    decision = first
    while True:
        while _hold_back(policy, snapshot, decision, by_user, seen, waiting, caps):
            decision = _decide_bounded(policy, snapshot, now, seen, waiting)
        if not _let_back(snapshot, first, decision, seen, waiting, let_back, caps):
            break
        decision = _decide_bounded(policy, snapshot, now, seen, waiting)

    final = decision.allocations
    allocations = {  # in the order of the policy's own decision
        job_id: () if job_id in waiting else final.get(job_id, ()) for job_id in first.allocations
    }
    filled = _backfill(policy, snapshot, first.order, allocations, waiting, caps)
    held: dict[str, int] = {}
    for job in snapshot.jobs:
        held[job.user] = held.get(job.user, 0) + len(allocations.get(job.id, ()))
    reasons = {job_id: decision.reasons.get(job_id, why) for job_id, why in first.reasons.items()}
    for job in snapshot.jobs:
        n = len(allocations.get(job.id, ()))
        if not n:
            # Kept out by the cap, or no room left under it whatever else happens.
            if job.id in waiting or caps[job.user] - held[job.user] < job.min_gpus:
                reasons[job.id] = why(job, 0, 0)
            continue
        top = job.max_gpus if policy.elastic else job.requested_gpus
        asked = seen[job.id]
        if asked.pinned and not job.pinned:  # shrunk by the cap itself
            reasons[job.id] = why(job, n, max(top, len(job.gpus)))
        elif n == asked.max_gpus < top:
            reasons[job.id] = why(job, n, top)
    for job_id, (n, top) in filled.items():
        reasons[job_id] = why(seen[job_id], n, top) if n < top else AtMaximum(n)
    if decision is first and reasons == first.reasons and not filled:
        return first
    return Decision(allocations, reasons, first.order)


def _backfill(
    policy: Policy,
    snapshot: Snapshot,
    order: tuple[str, ...],
    allocations: dict[str, tuple[str, ...]],
    waiting: set[str],
    caps: Mapping[str, int],
) -> dict[str, tuple[int, int]]:
    """Step 5: GPUs the rounds leave idle go to jobs the cap made wait whose user has room for
    them after all, in the policy's order, each at its top within the room and the free GPUs.

    The rounds can end that way: a job let back once is held back again while another of its
    user's jobs takes the room, and a later round gives that one's GPUs to someone else. The
    cap exists to share GPUs, never to leave them idle. Updates ``allocations``; returns {job
    id: (GPUs given, its top)}."""
    filled: dict[str, tuple[int, int]] = {}
    if not waiting:
        return filled
    jobs = {job.id: job for job in snapshot.jobs}
    least = {job.id: job.min_gpus for job in snapshot.jobs}
    taken = {g for grant in allocations.values() for g in grant}
    free = sum(1 for g in snapshot.usable_gpus if g.id not in taken)
    held: dict[str, int] = {}
    for job in snapshot.jobs:
        held[job.user] = held.get(job.user, 0) + len(allocations.get(job.id, ()))
    ids = [i for i in order if i in jobs] + [i for i in jobs if i not in order]
    for job_id in ids:
        job = jobs[job_id]
        if job_id not in waiting or job.pinned or free <= 0:
            continue
        top = _top(policy, job)
        fit = min(caps[job.user] - held[job.user], free)
        size = min(top, fit) if policy.elastic else top
        if size < job.min_gpus or size > fit:
            continue
        counts = {i: len(grant) for i, grant in allocations.items()}
        counts[job_id] = size
        try:
            placed = place(snapshot.gpus, allocations, counts, order, snapshot.kind_speed, least)
        except PlacementError:
            continue
        if any(placed[i] != grant for i, grant in allocations.items() if grant):
            continue  # it would move a running job: not worth an idle GPU
        allocations[job_id] = placed[job_id]
        size = len(placed[job_id])  # (fewer where kinds are mixed and one has fewer free)
        waiting.discard(job_id)
        held[job.user] += size
        free -= size
        filled[job_id] = (size, top)
    return filled


def _decide_bounded(
    policy: Policy, snapshot: Snapshot, now: float, seen: dict[str, Job], waiting: set[str]
) -> Decision:
    jobs = tuple(seen[job.id] for job in snapshot.jobs if job.id not in waiting)
    return policy.decide(replace(snapshot, jobs=jobs), now)


def _let_back(
    snapshot: Snapshot,
    first: Decision,
    decision: Decision,
    seen: dict[str, Job],
    waiting: set[str],
    let_back: set[str],
    caps: Mapping[str, int],
) -> bool:
    """Step 4: a job the cap made wait in an earlier round, whose user has room for it again
    in this one (the user's other jobs got less since), competes again, once, bounded to that
    room; True if any does."""
    if not waiting:
        return False
    room: dict[str, int] = {}
    for job in snapshot.jobs:
        if job.id not in waiting:
            n = len(decision.allocations.get(job.id, ()))
            room[job.user] = room.get(job.user, caps[job.user]) - n
    rank = {job_id: i for i, job_id in enumerate(first.order)}
    back = False
    for job in sorted(snapshot.jobs, key=lambda j: rank.get(j.id, len(rank))):
        if job.id not in waiting or job.id in let_back:
            continue
        left = room.get(job.user, caps[job.user])
        if left >= job.min_gpus:
            waiting.discard(job.id)
            let_back.add(job.id)
            bound = min(left, job.max_gpus)
            seen[job.id] = replace(
                job, max_gpus=bound, requested_gpus=min(job.requested_gpus, bound)
            )
            room[job.user] = left - job.min_gpus
            back = True
    return back


def _hold_back(
    policy: Policy,
    snapshot: Snapshot,
    decision: Decision,
    by_user: dict[str, list[str]],
    seen: dict[str, Job],
    waiting: set[str],
    caps: Mapping[str, int],
) -> bool:
    """Hold back the jobs of every user ``decision`` puts over their cap (step 2 of the
    module's docstring), updating ``seen`` and ``waiting``; True if the policy must decide
    again."""
    allocations = decision.allocations
    rank: dict[str, int] | None = None
    changed = False
    for user, ids in by_user.items():
        cap = caps[user]
        counts = {i: len(allocations.get(i, ())) for i in ids if i not in waiting}
        if sum(counts.values()) <= cap:
            continue
        if rank is None:
            rank = {job_id: i for i, job_id in enumerate(decision.order)}

        def walk_key(job_id: str, counts=counts, rank=rank) -> tuple[int, int]:
            job, n = seen[job_id], counts[job_id]
            kept = n > 0 and n == len(job.gpus)
            tier = 0 if kept and job.pinned else 1 if kept and not policy.preemptive else 2
            return tier, rank.get(job_id, len(rank))

        room = cap
        for job_id in sorted(counts, key=walk_key):
            job, n = seen[job_id], counts[job_id]
            if job.pinned and n and n == len(job.gpus):
                room -= n  # mid-change: it keeps its GPUs whatever the cap says
                continue
            if n <= room:
                room -= n
                if n == 0 and room < job.min_gpus:
                    waiting.add(job_id)  # would only push its user over next time
                    changed = True
                continue
            changed = True
            if room < job.min_gpus or (n > job.max_gpus and job.pinned):
                waiting.add(job_id)  # no room for it, or a grant it cannot be held to
                continue
            if n > job.max_gpus:
                # The policy keeps this grant whatever its bound (e.g. a job about to finish):
                # the cap shrinks it on the GPUs it keeps, as if mid-change, and the policy
                # hands out the rest.
                size = min(room, job.max_gpus)
                grant = place(snapshot.gpus, {job_id: allocations[job_id]}, {job_id: size})
                seen[job_id] = replace(
                    job,
                    gpus=grant[job_id],
                    pinned=True,
                    max_gpus=size,
                    requested_gpus=min(job.requested_gpus, size),
                )
            else:
                size = room
                seen[job_id] = replace(
                    job, max_gpus=size, requested_gpus=min(job.requested_gpus, size)
                )
            room -= size
    return changed


__all__ = [
    "cap_reason",
    "decide",
    "entitlement",
    "held_reason",
    "idle_reason",
    "queue_positions",
]
