"""Grants and heartbeats: which GPUs each job holds, and what a sidecar's report changes.

The service publishes a desired grant per job; a sidecar reports what it runs on and how it
is doing. The rules here keep two trainers off one GPU: a new grant is handed out only once
the GPUs in it are no longer in use by the job leaving them (``published``), and what a
sidecar claims to hold counts as busy until it says otherwise (``busy_elsewhere``). A claim
is believed only within what the job was granted: the GPUs of the grant generation the
sidecar reports, among this server's GPUs (``absorb``); a sidecar may still run on an older
generation's GPUs until it reports the newer one, which drops the older grants.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from elastic_gpu_sidecar.protocol import GrantAction, JobKind, JobState

from ..core.placement import describe_kinds
from ..core.reasons import Apart
from ..models import GrantView, Heartbeat
from .execution.inventory import parent_pid, process_owner
from .jobs import JobRecord


def holders(jobs: Iterable[JobRecord]) -> dict[str, str]:
    """{GPU id: id of the job holding it}."""
    return {g: j.id for j in jobs for g in j.held_gpus}


def on_one_node(
    target: list[str], current: Collection[str], node: dict[str, str], min_gpus: int
) -> list[str]:
    """``target`` cut to one node: a sidecar and its trainer run on one server (``node``:
    each GPU's node, or its kind on its node where kinds are mixed: ``placement.groups``).

    The policy already keeps a job on one node when one can hold it; a grant that still spans
    nodes (no node had enough free GPUs) keeps its part on the job's current node, else its
    largest part, or nothing when that part is below ``min_gpus``. A running job whose grant
    moves to another node gets nothing this round: it checkpoints, stops, and starts again
    there like any queued job.
    """
    groups: dict[str, list[str]] = {}
    for g in target:
        groups.setdefault(node.get(g, ""), []).append(g)
    here = {node.get(g, "") for g in current}
    if len(groups) <= 1 and (not here or not groups or here == set(groups)):
        return list(target)
    best = max(groups, key=lambda n: (n in here, len(groups[n])))
    if here and best not in here:
        return []
    return groups[best] if len(groups[best]) >= min_gpus else []


def spread(
    wanted: Collection[str],
    group: Mapping[str, str],
    kind: Mapping[str, str] | None,
    job: JobRecord,
) -> Apart:
    """Why a queued job the policy gave ``wanted`` gets nothing after ``on_one_node``: those
    GPUs are not together (``group``: each GPU's node, or kind on its node; ``kind``: each
    GPU's kind where kinds are mixed, else None)."""
    sizes = Counter(group.get(g, "") for g in wanted)
    return Apart(
        job.min_gpus,
        len(wanted),
        max(sizes.values()),
        describe_kinds(kind.get(g, "") for g in wanted) if kind is not None else "",
        job.started_at is not None,
    )


def busy_elsewhere(job: JobRecord, jobs: Iterable[JobRecord]) -> set[str]:
    """GPUs another job's trainer may still be running on."""
    busy: set[str] = set()
    for other in jobs:
        if other.id == job.id or not other.state.active:
            continue
        if other.launched_at is not None:
            # A sidecar runs: it may be on what it reports, or on any grant published since its
            # last report (one cancelled before its first report still starts on its first).
            busy.update(other.reported.gpus)
            for gpus in other.granted.values():
                busy.update(gpus)
        if other.state != JobState.STOPPING:
            busy.update(other.desired.gpus)
    return busy


def published(job: JobRecord, jobs: Iterable[JobRecord]) -> GrantView:
    """The grant to answer a heartbeat with: the desired one, or the current one until the
    desired GPUs are free."""
    desired = job.desired
    if job.final:  # nothing left to change: confirm what the sidecar reports
        gpus = job.reported.gpus
        return GrantView(
            generation=job.reported.generation or desired.generation,
            gpus=gpus,
            action=GrantAction.RUN if gpus else GrantAction.CANCEL,
        )
    if desired.action == GrantAction.RUN and not busy_elsewhere(job, jobs).isdisjoint(desired.gpus):
        return GrantView(
            generation=job.reported.generation or 0,
            gpus=job.reported.gpus,
            action=GrantAction.RUN,
        )
    return GrantView(generation=desired.generation, gpus=desired.gpus, action=desired.action)


def absorb(
    job: JobRecord,
    beat: Heartbeat,
    fresh: bool,
    known: Collection[str],
    kind_of: Mapping[str, str] | None = None,
) -> bool:
    """Take the measurements of a validated heartbeat, whose progress record is new when
    ``fresh``; True when a decision may change. The GPUs it reports are clipped to the grant
    of the generation it reports and to the ``known`` GPU ids; reporting a granted
    generation confirms it, and drops the older grants. ``kind_of``: each GPU's kind where
    kinds are mixed, so that the speed a record reports is kept for the kind it ran on."""
    material = False
    granted = job.granted.get(beat.generation) if beat.generation is not None else None
    allowed = set(granted or ()) & set(known)
    gpus = list(dict.fromkeys(g for g in beat.gpus if g in allowed))
    if granted is not None:
        for older in [g for g in job.granted if g < beat.generation]:
            del job.granted[older]
    job.reported = beat.model_copy(update={"progress": None, "throughput": {}, "gpus": gpus})
    for count, speed in beat.throughput.items():
        if count not in job.throughput:
            material = True
        job.throughput[count] = speed
    if beat.resize_cost_s is not None:
        job.resize_cost_s = beat.resize_cost_s
    job.restarts = beat.restarts
    record = beat.progress
    if fresh and record is not None:
        material = material or job.progress is None
        job.progress = record
        if kind_of and record.samples_per_s and gpus and len(gpus) == (record.replicas or 0):
            kinds = {kind_of.get(g) for g in gpus}
            if len(kinds) == 1 and None not in kinds:
                (kind,) = kinds
                speeds = job.kind_throughput.setdefault(str(kind), {})
                material = material or len(gpus) not in speeds
                speeds[len(gpus)] = record.samples_per_s
        job.work_done = record.samples or 0.0
        if job.kind == JobKind.SCRIPT:
            total = record.total_samples()
            if total is not None:
                material = material or job.total_work is None
                job.total_work = total
        job.note_progress([*beat.backlog, record])
    return material


def our_pids(jobs: Iterable[JobRecord]) -> set[int]:
    """Pids of the sidecars and trainers of active jobs (their processes are ours on a GPU).

    The pid the launcher started is; a pid a heartbeat reports is only when it is that
    sidecar or one of its descendants, or, where the launch record has no pid (another side
    started it), a process of the job's own user: a sidecar cannot make another process's
    GPU look free by naming it."""
    pids: set[int] = set()
    here = os.uname().nodename
    for job in jobs:
        if not job.state.active:
            continue
        launched = job.launch.get("pid")
        if not isinstance(launched, int) or job.launch.get("host") not in (None, here):
            launched = None
        if launched is not None:
            pids.add(launched)
        for pid in (job.reported.sidecar_pid, job.reported.trainer_pid):
            if not pid:
                continue
            if launched is not None:
                if _descends_from(pid, launched):
                    pids.add(pid)
            elif process_owner(pid) == job.user:
                pids.add(pid)
    return pids


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(256):
        if pid == ancestor:
            return True
        parent = parent_pid(pid)
        if not parent or parent <= 1:
            return False
        pid = parent
    return False
