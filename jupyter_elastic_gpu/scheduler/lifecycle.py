"""How a job moves between states: every change to its record, with the event that tells it.

The service decides *when* a job starts, is resized, suspended, lost or ends; this module is
the one place that says what each of those moves changes (state, desired grant, history) and
how it reads in the job's event log, and that saves the record afterwards. Each move is
``atomic``: its writes are committed together, or the job is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable

from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.protocol import Grant, GrantAction, JobState

from ..core.reason_kinds import ReasonKind
from ..core.reasons import Reason, Told
from ..models import ErrorInfo, EventKind, Heartbeat
from .jobs import JobRecord
from .storage import jobdirs
from .storage.atomic import atomic
from .storage.store import Store

#: A job whose sidecar is lost this many times fails instead of being queued again.
MAX_LOST = 3


class Lifecycle:
    """``reads_job_dirs``: this side may read job directories (it starts the sidecars)."""

    def __init__(self, store: Store, poke: Callable[[], None], reads_job_dirs: bool) -> None:
        self.store, self.poke, self.reads_job_dirs = store, poke, reads_job_dirs

    async def save(self, job: JobRecord) -> None:
        await self.store.save_job(job.to_dict())

    @atomic
    async def cancel(self, job: JobRecord, by: str, now: float) -> None:
        """At once when no sidecar runs yet; otherwise it checkpoints and stops first."""
        job.desired = Grant(job.desired.generation + 1, [], GrantAction.CANCEL)
        if job.state == JobState.QUEUED or (
            job.state == JobState.STARTING and job.launched_at is None
        ):
            job.state, job.finished_at = JobState.CANCELLED, now
            job.tell(Told(ReasonKind.CANCELLED, {"by": by}))
        else:
            job.state = JobState.STOPPING
            job.tell(Told(ReasonKind.CANCELLING, {"by": by}))
        await self.save(job)
        await self.store.add_event(job.id, EventKind.CANCEL, f"{by} cancelled {job.name}")

    @atomic
    async def lost(self, job: JobRecord, now: float, silent: float) -> None:
        """Its sidecar stopped answering: queued again to resume from its last checkpoint, or
        failed after ``MAX_LOST`` losses (cancelled, if it was being cancelled)."""
        job.lost += 1
        if job.state == JobState.STOPPING and job.desired.action == GrantAction.CANCEL:
            await self.finish(job, JobState.CANCELLED, Heartbeat(), now)
        elif job.lost > MAX_LOST:
            error = ErrorInfo(
                type="SidecarLost",
                message=f"its sidecar was lost {job.lost} times",
                hint=f"see {P.SIDECAR_LOG} and {P.SIDECAR_OUT} in the job dir",
            )
            await self.finish(job, JobState.FAILED, Heartbeat(error=error), now)
        else:
            why = Told(ReasonKind.REQUEUED, {"silent_s": silent})
            await self.requeue(job, why, now, kind=EventKind.LOST)

    @atomic
    async def confirm_running(self, job: JobRecord, now: float) -> None:
        resized = job.state == JobState.RESIZING
        job.state = JobState.RUNNING
        job.started_at = job.started_at or now
        gpus = job.desired.gpus
        await self.store.add_event(
            job.id,
            EventKind.RUNNING,
            f"running on {_gpus(gpus)} ({','.join(gpus)})"
            + (" after the resize" if resized else ""),
            {"gpus": gpus, "generation": job.desired.generation},
        )

    @atomic
    async def start(self, job: JobRecord, gpus: list[str], now: float) -> None:
        resumed = job.started_at is not None
        job.desired = Grant(job.desired.generation + 1, gpus, GrantAction.RUN)
        job.granted[job.desired.generation] = list(gpus)
        job.state, job.launched_at, job.position = JobState.STARTING, None, None
        job.last_change = now
        job.grant_change(now, gpus)
        await self.store.add_event(
            job.id,
            EventKind.RESUMED if resumed else EventKind.ADMITTED,
            f"{'resumes' if resumed else 'starts'} on {_gpus(gpus)} ({','.join(gpus)}): "
            f"{job.reason}",
            {"gpus": gpus, "generation": job.desired.generation},
        )

    @atomic
    async def change(self, job: JobRecord, gpus: list[str], now: float) -> None:
        before = job.desired.gpus
        if job.state == JobState.STARTING and job.launched_at is None:
            job.desired = Grant(job.desired.generation, gpus, GrantAction.RUN)
            job.granted[job.desired.generation] = list(gpus)  # no sidecar saw the old one
            if not gpus:
                job.state = JobState.QUEUED
                job.granted.clear()
            return
        job.last_change = now
        if not gpus:
            job.desired = Grant(job.desired.generation + 1, [], GrantAction.STOP)
            job.state = JobState.STOPPING
            kind, message = EventKind.SUSPEND, f"suspended (checkpoint, then stop): {job.reason}"
        else:
            job.desired = Grant(job.desired.generation + 1, gpus, GrantAction.RUN)
            job.granted[job.desired.generation] = list(gpus)
            if job.state == JobState.RUNNING:
                job.state = JobState.RESIZING
            job.resizes += 1
            kind = EventKind.RESIZE
            message = (
                f"resized from {len(before)} to {len(gpus)} GPUs ({','.join(gpus)}): {job.reason}"
            )
        job.grant_change(now, gpus)
        await self.store.add_event(
            job.id,
            kind,
            message,
            {"from": before, "to": gpus, "generation": job.desired.generation},
        )

    @atomic
    async def requeue(self, job: JobRecord, reason: Reason, now: float, kind: EventKind) -> None:
        job.state = JobState.QUEUED
        job.tell(reason)
        job.desired = Grant(job.desired.generation, [], GrantAction.STOP)
        job.reported = Heartbeat()  # its old sidecar holds nothing any more
        job.granted.clear()
        job.launched_at = None
        job.last_change = now
        job.grant_change(now, [])
        await self.store.add_event(job.id, kind, job.reason)
        await self.save(job)
        self.poke()

    @atomic
    async def finish(
        self,
        job: JobRecord,
        state: JobState,
        report: Heartbeat,
        now: float,
        reason: Reason | None = None,
    ) -> None:
        """End ``job`` in ``state``, saying ``reason`` (default: its state's own). The reason
        is told with the state, before any await: a reader of the job in between (a request
        served while the event is written) never sees an ending it does not keep."""
        if job.final:
            return
        job.state, job.finished_at = state, now
        if report.exit_code is not None:
            job.exit_code = report.exit_code
        job.error = report.error or job.error
        action = GrantAction.CANCEL if state == JobState.CANCELLED else GrantAction.RUN
        job.desired = Grant(job.desired.generation, [], action)
        if state == JobState.DONE:
            job.model_path = self._model_path(job, report.model_path)
        if reason is not None:
            job.tell(reason)
        elif state == JobState.DONE:
            job.tell(Told(ReasonKind.DONE))
        elif state == JobState.FAILED:
            err = job.error
            detail = f"{err.type}: {err.message}".rstrip(": ") if err else "error"
            job.tell(Told(ReasonKind.FAILED, {"detail": detail}))
        else:
            job.tell(Told(ReasonKind.CANCELLED))
        await self.store.add_event(
            job.id, EventKind(state.value), job.reason, {"exit_code": job.exit_code}
        )
        await self.save(job)
        self.poke()

    def _model_path(self, job: JobRecord, reported: str | None) -> str | None:
        """The saved model: looked up where this side can read the job dir, else the sidecar's
        word for it, when that names a model file of this very job dir."""
        if self.reads_job_dirs:
            return jobdirs.saved_model(job.job_dir)
        allowed = {f"{job.job_dir}/{name}" for name in P.MODELS}
        return reported if reported in allowed else None


def _gpus(gpus: list[str]) -> str:
    return f"{len(gpus)} GPU{'' if len(gpus) == 1 else 's'}"
