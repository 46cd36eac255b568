"""Placement: turn GPU counts per job into GPU ids.

Policies decide *how many* GPUs each job gets; this module decides *which*, the same way for
every policy: a job keeps the GPUs it has (a shrink keeps the ones on its fullest node), a grow
adds GPUs on the nodes it is already on, and a new job goes to the single node that fits it most
tightly (best fit keeps whole nodes free for large jobs), spilling over the emptiest nodes only
when no node can hold it.

Where the GPUs are of several kinds, a "node" here is the GPUs of one kind on one node: a job
stays on one kind as it stays on one node (data parallel across kinds runs at the slower
kind's pace), and spills over kinds only when no group of one kind can hold it. Which kind a
new job gets is weighed by value where its speed on each kind is known (``kinds.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from .kinds import gain
from .model import Gpu


def mixed(gpus: Iterable[Gpu]) -> bool:
    """The GPUs are of more than one kind."""
    return len({g.kind for g in gpus}) > 1


def held_kind(gpus: Iterable[str], kind_of: Mapping[str, str]) -> str | None:
    """The one kind a grant is on (None: no GPUs, or GPUs of several kinds)."""
    kinds = {kind_of.get(g) for g in gpus}
    return kinds.pop() if len(kinds) == 1 else None


def group_of(gpu: Gpu) -> str:
    """The GPU's group where kinds are mixed: its kind on its node (a job keeps to one)."""
    return f"{gpu.node}/{gpu.kind}"


def widest_kind(gpus: Sequence[Gpu]) -> tuple[int, str] | None:
    """Where kinds are mixed, the most GPUs of one kind on one node (no job can have more) and
    the GPUs by kind (``2 A100-80GB, 2 T4``); None where they are all of one kind."""
    if not mixed(gpus):
        return None
    sizes = Counter(groups(gpus).values())
    return max(sizes.values()), describe_kinds(g.kind for g in gpus)


def describe_kinds(kinds: Iterable[str]) -> str:
    """``2 A100-80GB, 2 T4``: GPUs by kind, in the order the kinds come."""
    return ", ".join(f"{n} {kind}" for kind, n in Counter(kinds).items())


def groups(gpus: Sequence[Gpu]) -> dict[str, str]:
    """{GPU id: the group a job keeps to}: its node, or its kind on its node where kinds are
    mixed (anything with ``id``, ``node`` and ``kind``: the inventory's GPUs too)."""
    if mixed(gpus):
        return {g.id: group_of(g) for g in gpus}
    return {g.id: g.node for g in gpus}


class PlacementError(RuntimeError):
    """The counts asked for more GPUs than are usable (a policy bug, never user input)."""


def _by_node(gpu_ids: Iterable[str], node_of: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for gid in gpu_ids:
        out.setdefault(node_of[gid], []).append(gid)
    return out


class _Layout:
    """What placement reads of a GPU list: the usable GPUs' order, nodes and nodes' order."""

    __slots__ = ("gpus", "kind_of", "mixed", "node_of", "node_rank", "rank", "usable")

    def __init__(self, gpus: tuple[Gpu, ...]) -> None:
        self.gpus = gpus
        usable = [g for g in gpus if g.healthy]
        self.usable = len(usable)
        group = groups(gpus)
        self.mixed = mixed(gpus)
        self.kind_of = {group[g.id]: g.kind for g in usable}  # each group's kind
        self.node_of = {g.id: group[g.id] for g in usable}
        self.rank = {g.id: i for i, g in enumerate(usable)}
        self.node_rank: dict[str, int] = {}
        for g in usable:
            self.node_rank.setdefault(group[g.id], len(self.node_rank))


#: The last layout made: a driver asks about the same GPUs decision after decision.
_last_layout: list[_Layout] = []


def _layout(gpus: Sequence[Gpu]) -> _Layout:
    key = tuple(gpus)
    last = _last_layout[-1] if _last_layout else None
    if last is not None and last.gpus == key:  # the same objects: compared by identity
        # Equal GPUs made anew (a new simulation run of the same cluster): keep the caller's,
        # or every later call compares them field by field (a twentieth of a long replay).
        last.gpus = key
        return last
    layout = _Layout(key)
    _last_layout[:] = [layout]
    return layout


def _unchanged(
    rank: Mapping[str, int], current: Mapping[str, Sequence[str]], counts: Mapping[str, int]
) -> dict[str, tuple[str, ...]] | None:
    """Every job keeps its healthy grant (the common case at a tick): no work to do."""
    grants = {}
    held = 0
    for job_id, count in counts.items():
        grant = tuple(current.get(job_id, ()))
        if len(grant) != count:
            return None
        grants[job_id] = grant
        held += count
    taken = {gid for grant in grants.values() for gid in grant}
    if len(taken) != held or not taken.issubset(rank):
        return None
    for job_id, grant in grants.items():
        if len(grant) > 1:
            ranks = [rank[gid] for gid in grant]
            if ranks != sorted(ranks):
                grants[job_id] = tuple(sorted(grant, key=rank.__getitem__))
    return grants


def place(
    gpus: Sequence[Gpu],
    current: Mapping[str, Sequence[str]],
    counts: Mapping[str, int],
    order: Sequence[str] | None = None,
    value: Mapping[str, Mapping[str, float]] | None = None,
    least: Mapping[str, int] | None = None,
    chosen: Mapping[str, str] | None = None,
) -> dict[str, tuple[str, ...]]:
    """GPU ids for every job in ``counts``.

    ``current`` is each job's present grant; ``order`` breaks ties between new jobs (earlier
    first). Only healthy GPUs are handed out; a job keeps a GPU it holds only while it is healthy.
    ``value``: where kinds are mixed, each job's speed on each kind (``kinds.py``): the jobs
    that gain most from their fastest kind are placed first, each on the fastest kind that
    holds it (placement by value: the fast GPUs go to the jobs that gain most from them); a
    job without one is placed by fit alone. Where kinds are mixed a job gets GPUs of one
    kind only, fewer than its count where that kind has fewer free (``least``: each job's
    minimum, below which it spans kinds after all). ``chosen``: the kind the policy chose for
    each job (its count is what that kind has room for): a job moves there from another kind,
    and no job is moved or placed by value otherwise.
    """
    layout = _layout(gpus)
    node_of, rank, node_rank = layout.node_of, layout.rank, layout.node_rank
    unchanged = _unchanged(rank, current, counts)
    if unchanged is not None and not (layout.mixed and (value or chosen)):  # (it may move kinds)
        return unchanged
    if sum(counts.values()) > layout.usable:
        raise PlacementError(f"{sum(counts.values())} GPUs asked for, {layout.usable} usable")

    free = set(node_of)
    result: dict[str, list[str]] = {}
    # 1. Keep what each job holds, trimmed to its new count (fullest node first).
    for job_id, count in counts.items():
        grant = current.get(job_id)
        if count <= 0 or not grant:
            result[job_id] = []
            continue
        held = [gid for gid in grant if gid in free]
        if (
            chosen
            and job_id in chosen
            and any(layout.kind_of[node_of[gid]] != chosen[job_id] for gid in held)
        ):
            held = []  # it moves to the kind chosen for it
        if not held:
            result[job_id] = []
            continue
        if count >= len(held):  # keeps all it holds
            result[job_id] = held
            free.difference_update(held)
            continue
        groups = _by_node(held, node_of)
        nodes = sorted(groups, key=lambda n: (-len(groups[n]), node_rank[n]))
        keep = [gid for n in nodes for gid in sorted(groups[n], key=rank.__getitem__)][:count]
        result[job_id] = keep
        free.difference_update(keep)

    position = {job_id: i for i, job_id in enumerate(order or ())}
    worth = _worth(layout, value)
    if layout.mixed and value and chosen is None:
        _move_to_faster_kinds(layout, result, counts, free, worth)

    # 2. Grow jobs that already run, then start new jobs, largest first (packs better).

    def priority(job_id: str) -> tuple:
        growing = bool(result[job_id])
        gains = 0.0 if growing else -worth(job_id, None)
        return (not growing, gains, -counts[job_id], position.get(job_id, len(position)), job_id)

    for job_id in sorted((j for j in counts if counts[j] > len(result[j])), key=priority):
        need = counts[job_id] - len(result[job_id])
        free_by_node = _by_node(sorted(free, key=rank.__getitem__), node_of)
        own = {node_of[gid] for gid in result[job_id]}
        if layout.mixed:
            # One kind per job (data parallel across kinds goes at the slower kind's pace):
            # the kind it runs on, or the one worth most to it that has room; cut to what
            # that kind has free, unless that leaves it below its minimum.
            if chosen and job_id in chosen:
                kind = chosen[job_id]
                room = _free_by_kind(layout, free_by_node).get(kind, 0)
            else:
                kind, room = _kind_for(layout, own, free_by_node, need, job_id, worth)
            if need <= room or len(result[job_id]) + room >= (least or {}).get(job_id, 1):
                need = min(need, room)
                free_by_node = {
                    n: ids for n, ids in free_by_node.items() if layout.kind_of[n] == kind
                }
        chosen: list[str] = []
        # Nodes the job is already on, fullest of free GPUs first.
        for node in sorted(
            own & free_by_node.keys(), key=lambda n: (-len(free_by_node[n]), node_rank[n])
        ):
            take = free_by_node[node][: need - len(chosen)]
            chosen.extend(take)
            free_by_node[node] = free_by_node[node][len(take) :]
        remaining = need - len(chosen)
        if remaining > 0:
            fits = [n for n, ids in free_by_node.items() if len(ids) >= remaining]
            if fits:
                node = min(
                    fits,
                    key=lambda n: (-worth(job_id, n), len(free_by_node[n]), node_rank[n]),
                )
                chosen.extend(free_by_node[node][:remaining])
            else:
                for node in sorted(
                    free_by_node, key=lambda n: (-len(free_by_node[n]), node_rank[n])
                ):
                    take = free_by_node[node][: need - len(chosen)]
                    chosen.extend(take)
                    if len(chosen) == need:
                        break
        if len(chosen) < need:
            raise PlacementError(f"job {job_id}: {need} more GPUs needed, {len(chosen)} free")
        result[job_id].extend(chosen)
        free.difference_update(chosen)
    return {
        job_id: tuple(sorted(ids, key=rank.__getitem__)) if ids else ()
        for job_id, ids in result.items()
    }


def _free_by_kind(layout: _Layout, free_by_node: Mapping[str, list[str]]) -> dict[str, int]:
    """Free GPUs per kind."""
    out: dict[str, int] = {}
    for n, ids in free_by_node.items():
        out[layout.kind_of[n]] = out.get(layout.kind_of[n], 0) + len(ids)
    return out


#: Where kinds are mixed, a running job moves to another kind (a checkpoint and a restart)
#: only where it is at least this many times as fast there: a move costs a restart, and a
#: speed known only from the fleet's ratio or a prior is an estimate.
MOVE_GAIN = 1.5


def _move_to_faster_kinds(
    layout: _Layout,
    result: dict[str, list[str]],
    counts: Mapping[str, int],
    free: set[str],
    worth: Callable[[str, str | None], float],
) -> None:
    """Running jobs move, those that gain most first, to a kind ``MOVE_GAIN`` times as fast
    for them with room for their whole count free (the GPUs idle otherwise: the fast kind
    freed up after they started). Updates ``result`` and ``free``."""
    node_of, rank = layout.node_of, layout.rank
    moving = []
    for job_id, held in result.items():
        kinds = {layout.kind_of[node_of[g]] for g in held}
        if held and len(kinds) == 1 and counts[job_id] > 0:
            moving.append((-worth(job_id, None), job_id, node_of[held[0]]))
    for _, job_id, group in sorted(moving):
        here = worth(job_id, group)
        free_by_node = _by_node(sorted(free, key=rank.__getitem__), node_of)
        room = _free_by_kind(layout, free_by_node)
        best = None
        for n in free_by_node:
            kind = layout.kind_of[n]
            gain = worth(job_id, n) / here if here > 0 else 1.0
            if (
                room[kind] >= counts[job_id]
                and gain >= MOVE_GAIN
                and (best is None or gain > best[0])
            ):
                best = (gain, kind)
        if best is None:
            continue
        nodes = [n for n in free_by_node if layout.kind_of[n] == best[1]]
        nodes.sort(key=lambda n: (-len(free_by_node[n]), layout.node_rank[n]))
        fits = [n for n in nodes if len(free_by_node[n]) >= counts[job_id]]
        if fits:  # on one node where one holds it, the tightest
            nodes = [min(fits, key=lambda n: (len(free_by_node[n]), layout.node_rank[n]))]
        chosen: list[str] = []
        for n in nodes:
            chosen.extend(free_by_node[n][: counts[job_id] - len(chosen)])
        free.update(result[job_id])
        free.difference_update(chosen)
        result[job_id] = chosen


def _kind_for(
    layout: _Layout,
    own: set[str],
    free_by_node: Mapping[str, list[str]],
    need: int,
    job_id: str,
    worth: Callable[[str, str | None], float],
) -> tuple[str, int]:
    """Where kinds are mixed, the kind a job that needs ``need`` more GPUs takes them from,
    and how many it has free: the kind it holds; else of the kinds with ``need`` free, the
    one worth most to it, then the tightest, then the first; else the one where its free GPUs
    are worth most to it (their number times its speed there)."""
    free_of = _free_by_kind(layout, free_by_node)
    first: dict[str, str] = {}
    for n in free_by_node:
        first.setdefault(layout.kind_of[n], n)
    held = {layout.kind_of[n] for n in own}
    if held:
        kind = min(held)  # (one, unless a grant came from before the kinds were known)
        return kind, free_of.get(kind, 0)
    enough = [k for k, n in free_of.items() if n >= need]
    if enough:
        rank = layout.node_rank
        kind = max(enough, key=lambda k: (worth(job_id, first[k]), -free_of[k], -rank[first[k]]))
    else:
        # the most it can do on one kind: GPUs free times its speed there
        kind = max(
            free_of,
            key=lambda k: (worth(job_id, first[k]) * free_of[k], -layout.node_rank[first[k]]),
            default="",
        )
    return kind, free_of.get(kind, 0)


def _worth(
    layout: _Layout, value: Mapping[str, Mapping[str, float]] | None
) -> Callable[[str, str | None], float]:
    """``worth(job, group)``: the job's speed on that group's kind; ``worth(job, None)``: how
    much it gains from its fastest kind here over its slowest. 1.0 for every job where
    kinds are not mixed or nothing is known of it."""
    if not value or not layout.mixed:
        return lambda job_id, group: 1.0
    kinds = set(layout.kind_of.values())

    def worth(job_id: str, group: str | None) -> float:
        speeds = value.get(job_id)
        if not speeds:
            return 1.0
        if group is None:
            return gain({k: speeds.get(k, 1.0) for k in kinds})
        return speeds.get(layout.kind_of[group], 1.0)

    return worth


def nodes_spanned(gpu_ids: Iterable[str], gpus: Sequence[Gpu]) -> tuple[int, ...]:
    """GPUs per node for a grant, largest first: the placement shape speed can depend on."""
    node_of = {g.id: g.node for g in gpus}
    groups = _by_node(gpu_ids, node_of)
    return tuple(sorted((len(v) for v in groups.values()), reverse=True))
