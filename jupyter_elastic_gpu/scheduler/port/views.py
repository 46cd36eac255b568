"""What each caller may see: the read views of jobs, the queue, the status and the GPUs.

Pure functions of the service's state and the caller. An owner (or an admin) sees a job in
full; everyone else sees owner, size and state (``PublicJob``): never another user's job name,
reason, code, logs or command lines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from elastic_gpu_sidecar.protocol import JobState

from ...core.reason_kinds import ReasonKind
from ...core.reason_text import named, say
from ...errors import Forbidden
from ...models import (
    GpuProcessView,
    Gpus,
    GpuView,
    JobFilter,
    JobList,
    JobProgress,
    JobView,
    MigSliceView,
    PublicJob,
    Queue,
    QueueEntry,
    Status,
    StatusGpu,
    StatusJob,
    StatusProgress,
    StatusSlice,
)
from ...sim.forecast import Forecast
from .. import estimates as expect
from ..jobs import JobRecord, NameOf
from ..principal import Principal

#: Grant changes a job view carries (the newest).
HISTORY_SHOWN = 50
#: A list's query when none is given: open jobs and the most recent finished ones.
NO_FILTER = JobFilter()


def progress_view(job: JobRecord) -> JobProgress | None:
    p = job.progress
    if p is None:
        return None
    fraction = min(job.work_done / job.total_work, 1.0) if job.total_work else None
    return JobProgress(
        epoch=p.epoch,
        epochs=p.epochs,
        step=p.step_in_epoch,
        steps_per_epoch=p.steps_per_epoch,
        global_step=p.global_step,
        samples=p.samples,
        replicas=p.replicas,
        loss=p.loss,
        metrics=p.metrics,
        samples_per_s=p.samples_per_s,
        batch_size=p.batch_size,
        noise_scale=p.noise_scale,
        noise_steps=p.noise_steps,
        fraction=fraction,
        note=p.note,
    )


def job_view(job: JobRecord) -> JobView:
    """Everything the owner (or an admin) may see."""
    return JobView(
        id=job.id,
        name=job.name,
        user=job.user,
        state=job.state,
        kind=job.kind,
        gpus=job.held_gpus,
        generation=job.desired.generation,
        min_gpus=job.min_gpus,
        max_gpus=job.max_gpus,
        requested_gpus=job.requested_gpus,
        reason=job.reason,
        reason_kind=job.reason_kind,
        reason_figures=job.reason_figures,
        position=job.position,
        submitted_at=job.submitted_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        progress=progress_view(job),
        eta_s=job.eta_s(),
        estimating=job.estimating,
        throughput={str(k): v for k, v in sorted(job.throughput.items())},
        throughput_by_kind={
            kind: {str(k): v for k, v in sorted(speeds.items())}
            for kind, speeds in sorted(job.kind_throughput.items())
        },
        resize_cost_s=job.resize_cost_s,
        resizes=job.resizes,
        history=job.history[-HISTORY_SHOWN:],
        restarts=job.restarts,
        error=job.error,
        exit_code=job.exit_code,
        model_path=job.model_path,
        job_dir=job.job_dir,
        epochs=job.spec.epochs,
        batch_policy=job.spec.batch_policy,
        measure_noise=job.spec.measure_noise,
        mig=job.spec.mig,
        framework=job.framework,
        elastic=job.elastic,
        priority=job.spec.priority,
        held=job.held,
        notes=job.notes,
        notebook=job.spec.notebook,
        kept=job.kept,
    )


def public_job(job: JobRecord) -> PublicJob:
    """What other users see: owner, size and state."""
    return PublicJob(
        id=job.id,
        user=job.user,
        state=job.state,
        gpus=job.held_gpus,
        min_gpus=job.min_gpus,
        max_gpus=job.max_gpus,
        position=job.position,
    )


def _by_submission(jobs: Iterable[JobRecord]) -> list[JobRecord]:
    return sorted(jobs, key=lambda j: (j.submitted_at, j.id))


def recent(jobs: Iterable[JobRecord], finished_per_user: int) -> list[JobRecord]:
    """The open jobs, and the ``finished_per_user`` most recently finished of each user."""
    kept, finished = [], []
    for job in jobs:
        (finished if job.final else kept).append(job)
    count: dict[str, int] = {}
    for job in sorted(finished, key=lambda j: (j.finished_at or 0.0, j.id), reverse=True):
        count[job.user] = count.get(job.user, 0) + 1
        if count[job.user] <= finished_per_user:
            kept.append(job)
    return kept


def select(
    jobs: Iterable[JobRecord], who: Principal, query: JobFilter, finished_per_user: int
) -> tuple[list[JobRecord], int]:
    """The jobs ``query`` lists (``models.JobFilter``), oldest submission first, and how many
    more finished ones match it but lie outside its time window; Forbidden when ``who`` names
    another user without the right to see their jobs."""
    if query.user is not None and query.user != who.user and not (who.admin or who.reads_all):
        raise Forbidden(
            f"only admins may list the jobs of another user ({query.user}): you may list your "
            "own; everyone's open jobs are in the queue"
        )
    matching = [
        j
        for j in jobs
        if (query.state is None or j.state in query.state)
        and (query.user is None or j.user == query.user)
    ]
    if query.all:
        listed = matching
    elif query.since is not None:
        listed = [j for j in matching if not j.final or (j.finished_at or 0.0) >= query.since]
    else:
        listed = recent(matching, finished_per_user)
    return _by_submission(listed), len(matching) - len(listed)


def job_list(
    jobs: Iterable[JobRecord],
    who: Principal,
    finished_per_user: int,
    query: JobFilter = NO_FILTER,
) -> JobList:
    """The jobs ``query`` selects (``select``): in full where ``who`` may see them."""
    listed, hidden = select(jobs, who, query, finished_per_user)
    return JobList(
        jobs=[job_view(j) if who.may_see(j) else public_job(j) for j in listed], hidden=hidden
    )


#: A reason as a view carries it: its text, kind and figures.
Said = tuple[str, ReasonKind, dict[str, Any]]


def _public_reason(job: JobRecord) -> Said:
    figures: dict[str, Any] = {"state": job.state.value, "gpus": len(job.held_gpus)}
    return say(ReasonKind.PUBLIC, figures), ReasonKind.PUBLIC, figures


def _when(t: float | None) -> float | None:
    """An estimate to the second: finer would only churn the panel's updates."""
    return None if t is None else float(round(t))


def _reason(job: JobRecord, forecast: Forecast | None, now: float | None, name_of: NameOf) -> Said:
    """The owner's reason, with when a queued job starts and whose end it waits for."""
    said = job.reason, job.reason_kind, job.reason_figures
    if forecast is None or job.state != JobState.QUEUED or job.held:
        return said
    start = expect.start(job.id, forecast, forecast.at if now is None else now)
    if start is None:
        return said
    figures = {**job.reason_figures, **named(start.figures(), name_of)}
    return say(job.reason_kind, figures), job.reason_kind, figures


def _idle(
    forecast: Forecast | None, who: Principal, jobs: Mapping[str, JobRecord]
) -> dict[str, Any]:
    """Why GPUs stay idle (the fields ``idle``, ``idle_kind``, ``idle_figures``), naming the
    jobs ``who`` may see by their names, and those they may not without their figures."""
    idle = getattr(forecast, "idle", None)
    if idle is None:
        return {}
    figures = named(
        idle.figures(lambda user: who.may_see(SimpleNamespace(user=user))), _names(jobs, who)
    )
    return {"idle": say(idle.kind, figures), "idle_kind": idle.kind, "idle_figures": figures}


def _names(jobs: Mapping[str, JobRecord], who: Principal) -> NameOf:
    """The names of the jobs ``who`` may see, by id."""

    def name_of(job_id: str) -> str | None:
        job = jobs.get(job_id)
        return job.name if job is not None and who.may_see(job) and job.name else None

    return name_of


def queue(
    jobs: Iterable[JobRecord],
    who: Principal,
    forecast: Forecast | None = None,
    now: float | None = None,
) -> Queue:
    """Open jobs in the policy's order (the last decision's), new ones last, with the
    estimates of ``forecast`` (made at ``now``, default its own time) for the caller's own."""
    waiting = sorted(
        (j for j in jobs if not j.final),
        key=lambda j: (j.rank is None, j.rank or 0, j.submitted_at, j.id),
    )
    estimates = forecast.estimates if forecast else {}
    name_of = _names({j.id: j for j in waiting}, who)
    entries = []
    for j in waiting:
        mine = who.may_see(j)
        guess = estimates.get(j.id) if mine else None
        reason, kind, figures = _reason(j, forecast, now, name_of) if mine else _public_reason(j)
        entries.append(
            QueueEntry(
                id=j.id,
                user=j.user,
                state=j.state,
                gpus=j.held_gpus,
                min_gpus=j.min_gpus,
                max_gpus=j.max_gpus,
                position=j.position,
                reason=reason,
                reason_kind=kind,
                reason_figures=figures,
                name=j.name if mine else None,
                estimated_start=_when(guess.start) if guess else None,
                estimated_end=_when(guess.end) if guess and not j.estimating else None,
                estimating=mine and j.estimating,
            )
        )
    return Queue(queue=entries)


def status(
    jobs: Iterable[JobRecord],
    gpu_infos: Sequence[Any],
    holders: Mapping[str, str],
    who: Principal,
    finished_per_user: int,
    query: JobFilter = NO_FILTER,
    forecast: Forecast | None = None,
    now: float | None = None,
) -> Status:
    """What ``jupyter elastic-gpu status`` shows: GPUs and their holders, the jobs ``query``
    selects among the open ones and the caller's finished ones, and why GPUs stay idle;
    ``forecast`` as for ``queue``."""
    visible = [j for j in jobs if not j.final or who.may_see(j)]
    listed, hidden = select(visible, who, query, finished_per_user)
    every = {j.id: j for j in visible}
    name_of = _names(every, who)
    summaries = []
    for j in listed:
        mine = who.may_see(j)
        reason, kind, figures = _reason(j, forecast, now, name_of) if mine else (None, None, None)
        p = j.progress
        summaries.append(
            StatusJob(
                id=j.id,
                name=j.name if mine else None,
                user=j.user,
                state=j.state,
                gpus=j.held_gpus,
                min_gpus=j.min_gpus,
                max_gpus=j.max_gpus,
                progress=StatusProgress(
                    epoch=p.epoch if p else None,
                    epochs=p.epochs if p else None,
                    step=p.step_in_epoch if p else None,
                    replicas=p.replicas if p else None,
                ),
                reason=reason,
                reason_kind=kind,
                reason_figures=figures,
            )
        )
    return Status(
        gpus=[
            StatusGpu(
                id=g.id,
                kind=g.kind,
                holder=holders.get(g.id),
                mig=None
                if g.mig is None
                else [
                    StatusSlice(uuid=s.uuid, profile=s.profile, holder=holders.get(s.uuid))
                    for s in g.mig
                ],
            )
            for g in gpu_infos
        ],
        jobs=summaries,
        hidden=hidden,
        **_idle(forecast, who, every),
    )


def _slice_view(
    mig: Any, jobs: Mapping[str, JobRecord], holders: Mapping[str, str], who: Principal
) -> MigSliceView:
    holder = holders.get(mig.uuid)
    job = jobs.get(holder) if holder else None
    return MigSliceView(
        **dataclasses.asdict(mig),
        holder=holder,
        holder_user=job.user if job else None,
        holder_name=job.name if job and who.may_see(job) else None,
    )


def gpus(
    infos: Sequence[Any],
    jobs: Mapping[str, JobRecord],
    holders: Mapping[str, str],
    external: Mapping[str, Sequence[Any]],
    source: str,
    who: Principal,
    drained: Collection[str] = (),
    forecast: Forecast | None = None,
) -> Gpus:
    """Every GPU with its holder, the processes on it the scheduler did not start, and whether
    an admin drained it; why GPUs stay idle, from ``forecast`` (``estimates.Outlook``)."""
    views = []
    for info in infos:
        holder = holders.get(info.id)
        job = jobs.get(holder) if holder else None
        others = [
            GpuProcessView(
                pid=p.pid,
                user=p.user,
                memory_mb=p.memory_mb,
                # A command line can hold secrets: only its owner and admins read it.
                command=p.command if who.admin or p.user == who.user else None,
            )
            for p in external.get(info.id, [])
        ]
        views.append(
            GpuView(
                id=info.id,
                index=info.index,
                node=info.node,
                name=info.name,
                kind=info.kind,
                uuid=info.uuid,
                memory_total_mb=info.memory_total_mb,
                memory_used_mb=info.memory_used_mb,
                utilization=info.utilization,
                holder=holder,
                holder_user=job.user if job else None,
                holder_name=job.name if job and who.may_see(job) else None,
                external_processes=others,
                healthy=not others,
                drained=info.id in drained,
                mig=None
                if info.mig is None
                else [_slice_view(s, jobs, holders, who) for s in info.mig],
            )
        )
    return Gpus(source=source, gpus=views, **_idle(forecast, who, jobs))
