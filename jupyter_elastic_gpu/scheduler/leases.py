"""Leases and heartbeats: which GPUs each job holds, and what a sidecar's report changes.

The service publishes a desired lease per job; a sidecar reports what it runs on and how it
is doing. The rules here keep two trainers off one GPU: a new lease is handed out only once
the GPUs in it are no longer in use by the job leaving them (``published``), and what a
sidecar claims to hold counts as busy until it says otherwise (``busy_elsewhere``).
"""

from __future__ import annotations

from collections.abc import Iterable

from elastic_gpu_sidecar.protocol import JobKind, JobState, LeaseAction

from ..models import Heartbeat, LeaseView
from .jobs import JobRecord


def holders(jobs: Iterable[JobRecord]) -> dict[str, str]:
    """{GPU id: id of the job holding it}."""
    return {g: j.id for j in jobs for g in j.held_gpus}


def busy_elsewhere(job: JobRecord, jobs: Iterable[JobRecord]) -> set[str]:
    """GPUs another job's trainer may still be running on."""
    busy: set[str] = set()
    for other in jobs:
        if other.id == job.id or not other.state.active:
            continue
        if other.launched_at is not None:  # a sidecar runs: it may be on these
            busy.update(other.reported.gpus)
        if other.state != JobState.STOPPING:
            busy.update(other.desired.gpus)
    return busy


def published(job: JobRecord, jobs: Iterable[JobRecord]) -> LeaseView:
    """The lease to answer a heartbeat with: the desired one, or the current one until the
    desired GPUs are free."""
    desired = job.desired
    if job.final:  # nothing left to change: confirm what the sidecar reports
        gpus = job.reported.gpus
        return LeaseView(
            generation=job.reported.generation or desired.generation,
            gpus=gpus,
            action=LeaseAction.RUN if gpus else LeaseAction.CANCEL,
        )
    if desired.action == LeaseAction.RUN and not busy_elsewhere(job, jobs).isdisjoint(desired.gpus):
        return LeaseView(
            generation=job.reported.generation or 0,
            gpus=job.reported.gpus,
            action=LeaseAction.RUN,
        )
    return LeaseView(generation=desired.generation, gpus=desired.gpus, action=desired.action)


def absorb(job: JobRecord, beat: Heartbeat, fresh: bool) -> bool:
    """Take the measurements of a validated heartbeat, whose progress record is new when
    ``fresh``; True when a decision may change."""
    material = False
    job.reported = beat.model_copy(update={"progress": None, "throughput": {}})
    for gpus, speed in beat.throughput.items():
        if gpus not in job.throughput:
            material = True
        job.throughput[gpus] = speed
    if beat.resize_cost_s is not None:
        job.resize_cost_s = beat.resize_cost_s
    job.restarts = beat.restarts
    record = beat.progress
    if fresh and record is not None:
        material = material or job.progress is None
        job.progress = record
        job.work_done = record.samples or 0.0
        if job.kind == JobKind.SCRIPT:
            total = record.total_samples()
            if total is not None:
                material = material or job.total_work is None
                job.total_work = total
    return material


def our_pids(jobs: Iterable[JobRecord]) -> set[int]:
    """Pids of the sidecars and trainers of active jobs (their processes are ours on a GPU)."""
    pids: set[int] = set()
    for job in jobs:
        if job.state.active:
            pids.update(p for p in (job.reported.sidecar_pid, job.reported.trainer_pid) if p)
            if isinstance(job.launch.get("pid"), int):
                pids.add(job.launch["pid"])
    return pids
