"""The snapshot the live service gives the policy: its jobs and GPUs as ``core`` sees them,
and the policy's reasons as the service's jobs show them.

Everything a decision depends on is turned into ``core`` values here, and nowhere else: a
job's size and progress, its speed model, its resize cost, and which GPUs are usable. The
simulator builds the same values from a trace, so a policy means the same in both.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from elastic_gpu_sidecar.protocol import JobKind, JobState

from ..core.kinds import fleet_ratios, relative_speeds
from ..core.model import Gpu, Job, Snapshot
from ..core.placement import groups, mixed
from ..core.reason_kinds import ReasonKind
from ..core.reasons import Reason, Told
from ..core.speed import SpeedModel
from .jobs import JobRecord

#: A job that has not reported its size yet (a trainer reports it with its first steps) is
#: assumed short, five minutes at its minimum, so that it starts, measures itself, and is then
#: ranked by what it measured: the usual remedy for unknown sizes (new jobs first, as LAS does).
UNKNOWN_JOB_S = 300.0


def speed_model(job: JobRecord) -> SpeedModel:
    """What the job's speed is at each GPU count, from what it measured.

    A synthetic job's profile is its prior. A script job on *simulated* GPUs (logical CPU
    devices sharing the same cores) measures no speed-up from more replicas, whatever real
    GPUs would give; so only its speed at the fewest replicas it ran on is taken, and the
    default sub-linear curve says the rest, as it would for a job not measured yet.
    """
    measured = {g: x for g, x in job.throughput.items() if x > 0}
    prior = None
    if job.kind == JobKind.SYNTHETIC:  # the profile, in samples per real second
        syn = job.spec.synthetic
        prior = {g: x * syn.time_scale for g, x in syn.throughput.items()}
    elif job.spec.simulated and measured:
        fewest = min(measured)
        measured = {fewest: measured[fewest]}
    return SpeedModel(measured, prior)


def core_job(job: JobRecord, default_resize_cost_s: float) -> Job:
    speed = speed_model(job)
    total, done = job.total_work, job.work_done
    if total is None:
        total = UNKNOWN_JOB_S * speed.throughput(job.min_gpus) + done
    return Job(
        id=job.id,
        submit_time=job.submitted_at,
        total_work=max(total, done),
        work_done=done,
        min_gpus=job.min_gpus,
        max_gpus=job.max_gpus,
        requested_gpus=job.requested_gpus,
        user=job.user,
        weight=job.spec.priority,
        speed=speed,
        resize_cost=job.resize_cost_s or default_resize_cost_s,
        gpus=tuple(job.held_gpus),
        started=job.started_at is not None,
        attained_gpu_s=job.attained_gpu_s,
        queued_s=job.queued_s,
        resizes=job.resizes,
        last_change=job.last_change,
        pinned=job.state in (JobState.STARTING, JobState.RESIZING, JobState.STOPPING)
        or (job.kind == JobKind.INTERACTIVE and job.state.active),  # a lease is never resized
    )


def account(jobs: Iterable[JobRecord], dt: float) -> None:
    """Count ``dt`` more seconds: GPU-seconds attained by the jobs that hold GPUs, waiting time
    of the queued ones (what LAS policies and aging decide on). A held job does not wait for
    GPUs, it is kept from them: its hold does not age it ahead of the others."""
    for job in jobs:
        if job.state.active:
            job.attained_gpu_s += dt * len(job.held_gpus)
        elif job.state == JobState.QUEUED and not job.held:
            job.queued_s += dt


def build(
    jobs: Iterable[JobRecord],
    infos: Sequence[Any],
    external: Mapping[str, Sequence[Any]],
    default_resize_cost_s: float,
    user_gpu_cap: int = 0,
    drained: Collection[str] = (),
) -> Snapshot:
    """The open jobs and every GPU, under the per-user cap.

    A GPU busy with a process we did not start, ``drained`` by an admin, or in MIG mode (CUDA
    sees its instances, not one GPU) is not usable: jobs on it move off through the policy's
    usual resize. A job held by a person (suspended
    until resumed) is not offered to the policy while it waits; while it still stops, it is,
    as every stopping job is (its grant kept until the checkpoint is written)."""
    gpus = tuple(
        Gpu(
            g.id,
            g.node,
            healthy=not external.get(g.id) and g.id not in drained and g.mig is None,
            kind=g.kind,
        )
        for g in infos
    )
    # a job runs on one node, and on one kind of GPU where kinds are mixed: no wider than one
    per_node = Counter(groups(gpus).values())
    widest = max(per_node.values(), default=0)
    known = {g.id for g in gpus}
    usable = {g.id for g in gpus if g.healthy}
    everyone = list(jobs)
    records = [
        j
        for j in everyone
        if not j.final
        and j.spec.mig is None  # a job on a MIG instance is the slice pool's
        and not (j.held and j.state == JobState.QUEUED)
    ]
    promised = {
        g
        for j in records
        if j.state.active and j.state != JobState.STOPPING
        for g in j.desired.gpus
    }
    jobs = tuple(
        _within(
            _holding(
                core_job(j, default_resize_cost_s),
                usable - promised if j.state == JobState.STOPPING else known,
            ),
            widest,
        )
        for j in records
    )
    return Snapshot(gpus, jobs, user_gpu_cap, kind_speed=kind_speeds(everyone, records, gpus))


def kind_speeds(
    everyone: Sequence[JobRecord], records: Sequence[JobRecord], gpus: Sequence[Gpu]
) -> dict[str, dict[str, float]]:
    """Where the GPUs are of several kinds, each open job's speed on each kind
    (``core/kinds.py``): what it measured there, its prior (a synthetic job's
    ``kind_speed``), else what every job that ran on two kinds says of them."""
    if not mixed(gpus):
        return {}
    kinds = {g.kind for g in gpus}
    fleet = fleet_ratios(j.kind_throughput for j in everyone)
    out = {}
    for job in records:
        syn = job.spec.synthetic
        prior = syn.kind_speed if syn is not None else None
        if job.kind_throughput or prior or fleet:
            out[job.id] = relative_speeds(kinds, job.kind_throughput, prior, fleet)
    return out


def _holding(job: Job, counted: Collection[str]) -> Job:
    """``job`` holding only the GPUs of ``counted`` that it holds.

    A GPU that left the inventory (its node lost, the device gone) is held by nobody: a grant
    mid-change on a lost node (a job asked to stop, say) would otherwise be kept at its size
    on the GPUs that remain, and push the job running there off them until its silent sidecar
    is declared lost. A stopping job is never moved, so it counts only the usable GPUs it
    holds: a busy or drained one under it is out of everyone's reach anyway; nor those
    already promised to another job (one starting or growing there waits for them): counted
    for both, the policy saw more GPUs held than there are and moved jobs to make up for it
    (a running job suspended, the job the GPUs were freed for placed elsewhere)."""
    if all(g in counted for g in job.gpus):
        return job
    return dataclasses.replace(job, gpus=tuple(g for g in job.gpus if g in counted))


def _within(job: Job, widest: int) -> Job:
    """``job`` asking for no more GPUs than one node has (but never below its minimum)."""
    top = max(widest, job.min_gpus)
    if job.max_gpus <= top:
        return job
    return dataclasses.replace(job, max_gpus=top, requested_gpus=min(job.requested_gpus, top))


def held_reason(job: JobRecord, stopping: bool | None = None) -> Told:
    """What a job suspended by a person says: who, and who may resume it (an admin's hold
    is lifted by an admin; the owner's own, by the owner or an admin). ``stopping``: whether
    it still checkpoints (default: whether it holds GPUs)."""
    by = job.held_by
    if job.state.active if stopping is None else stopping:
        return Told(ReasonKind.HELD, {"by": by, "stopping": True})
    if by == job.user:
        return Told(ReasonKind.HELD, {"by": by, "job_id": job.id})
    return Told(ReasonKind.HELD, {"by": by, "admin": True})


def shown_reason(job: JobRecord, why: Reason) -> Reason | None:
    """The reason ``job`` shows after a decision whose policy said ``why``.

    ``core`` sees a job starting, resizing or stopping only as a grant mid-change, which it
    keeps as it is ("kept as is because its resize is in progress"); only the service knows
    which change is under way, so the job's state says it instead. A stopping job keeps the
    reason of the cancel or suspension that stops it (None: it says what it says); a held
    one says who holds it.
    """
    if job.held and job.state == JobState.QUEUED:
        return held_reason(job)
    n: dict[str, Any] = {"gpus": len(job.desired.gpus)}
    if job.spec.mig is not None:
        n["profile"] = job.spec.mig
    if job.state == JobState.STARTING:
        if job.started_at is not None:
            return Told(ReasonKind.RESUMING, n)
        return Told(ReasonKind.STARTING, n)
    if job.state == JobState.RESIZING:
        return Told(ReasonKind.RESIZING, n)
    if job.state == JobState.STOPPING:
        return None
    return why
