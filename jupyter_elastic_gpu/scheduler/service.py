"""The live scheduler: jobs in, desired leases out, level-triggered.

``SchedulerService`` keeps every job in memory and in SQLite. On every event (a submission, a
cancel, a heartbeat that changes something, a sidecar lost) and on a periodic tick it builds a
``core`` snapshot, asks the policy for a decision and publishes each job's desired lease (GPU
ids + generation + action). Sidecars heartbeat their progress and get the desired lease back;
they converge on it whatever was lost on the way. A lease is handed out only once the GPUs in it
are no longer in use by the job leaving them, so two trainers never share a GPU.

A restarted service rebuilds its state from the database and re-adopts sidecars that are still
alive from their next heartbeat; a sidecar silent past ``heartbeat_timeout_s`` (with its process
gone) is declared lost and its job queued again, to resume from its last checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_gpu_sidecar.protocol import STATES as SIDECAR_STATES

from ..core.model import Gpu, Job, Snapshot
from ..core.policies import make_policy
from ..core.speed import SpeedModel
from .jobs import (
    ACTIVE,
    FINAL,
    JobRecord,
    Lease,
    full_view,
    new_secret,
    public_view,
    secret_matches,
    status_summary,
)
from .launcher import Launcher, LaunchRequest, write_inputs
from .requests import BadRequest, SubmitRequest
from .store import Store

log = logging.getLogger("jupyter_elastic_gpu")

#: A job that has not reported its size yet (a trainer reports it with its first steps) is
#: assumed short, five minutes at its minimum, so that it starts, measures itself, and is then
#: ranked by what it measured: the usual remedy for unknown sizes (new jobs first, as LAS does).
UNKNOWN_JOB_S = 300.0
#: A job whose sidecar is lost this many times fails instead of being queued again.
MAX_LOST = 3


class Forbidden(PermissionError):
    """The caller may not see or change this job (HTTP 403)."""


class NotFound(LookupError):
    """No such job (HTTP 404)."""


class Unauthorized(PermissionError):
    """A sidecar without the right secret (HTTP 401)."""


@dataclass(frozen=True)
class Principal:
    """Who is asking: a user name, and whether they may see and change everything."""

    user: str
    admin: bool = False

    def may_see(self, job: JobRecord) -> bool:
        return self.admin or job.user == self.user


@dataclass
class ServiceConfig:
    policy: str = "adaptive"
    policy_params: dict[str, Any] | None = None
    tick_s: float = 60.0
    heartbeat_s: float = 2.0
    heartbeat_timeout_s: float = 30.0
    job_root: str = "elastic-gpu-jobs"
    user_gpu_cap: int = 0
    default_resize_cost_s: float = 6.0
    mechanism: str = "sidecar"
    checkpoint_every_s: float = 60.0
    simulated: bool = True
    #: The daemon: each user's server writes passed variables into the job dir itself.
    remote_inputs: bool = False


class SchedulerService:
    def __init__(
        self,
        store: Store,
        inventory: Any,
        launcher: Launcher,
        heartbeat_url: Callable[[str], str],
        config: ServiceConfig | None = None,
    ) -> None:
        self.store, self.inventory, self.launcher = store, inventory, launcher
        self.heartbeat_url = heartbeat_url
        self.config = config or ServiceConfig()
        self.policy = make_policy(self.config.policy, **(self.config.policy_params or {}))
        self.jobs: dict[str, JobRecord] = {}
        self.version = 0
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._last_account = time.time()
        self._secrets: dict[str, str] = {}  # job id -> secret for a launch not yet handed out
        self._gpu_cache: list[Any] = []
        self._gpu_cache_t = 0.0

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        now = time.time()
        for data in await self.store.load_jobs():
            job = JobRecord.from_dict(data)
            if job.state in ACTIVE:
                # Give a sidecar that survived our restart one timeout to heartbeat again.
                job.last_heartbeat = now
            self.jobs[job.id] = job
        active = sum(1 for j in self.jobs.values() if j.state in ACTIVE)
        if self.jobs:
            await self.store.add_event(
                None,
                "restart",
                f"scheduler started with {len(self.jobs)} jobs known, "
                f"{active} to re-adopt from their heartbeats",
            )
        self._last_account = now
        self._task = asyncio.create_task(self._loop(), name="elastic-gpu-scheduler")

    async def stop(self) -> None:
        """Stop deciding. Sidecars keep running: a restarted service re-adopts them."""
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def poke(self) -> None:
        """Something changed: decide again soon."""
        self._wake.set()

    async def _loop(self) -> None:
        last_decision = 0.0
        while True:
            woken = self._wake.is_set()
            self._wake.clear()
            now = time.time()
            decide = woken or now - last_decision >= self.config.tick_s
            try:
                await self.step(now, decide)
            except Exception:  # one bad round must not stop the scheduler
                log.exception("scheduler step failed")
            if decide:
                last_decision = now
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)
            await asyncio.sleep(0.05)  # let events that arrive together share one decision

    async def step(self, now: float | None = None, decide: bool = True) -> None:
        """One round: account time, find lost sidecars, decide, start what may start."""
        now = time.time() if now is None else now
        await self._refresh_gpus(now)
        self._account(now)
        await self._find_lost(now)
        if decide:
            await self._decide(now)
        await self._launch_ready(now)

    # -- users' requests ----------------------------------------------------------------------
    async def submit(self, who: Principal, req: SubmitRequest) -> JobRecord:
        total = len(self.gpu_infos())
        if req.min_gpus > total:
            raise BadRequest(
                f"min_gpus ({req.min_gpus}) is more than the {total} GPUs of this server"
            )
        spec = req.model_dump(mode="json")
        inputs = spec.pop("inputs", None)
        spec["max_gpus"] = min(req.max_gpus or req.min_gpus, total)
        spec["gpus"] = min(req.gpus or req.min_gpus, spec["max_gpus"])
        if req.simulated is None:
            spec["simulated"] = self.config.simulated
        job_id = "j-" + uuid.uuid4().hex[:10]
        job = JobRecord(
            id=job_id,
            user=who.user,
            name=req.name or (f"synthetic-{job_id[2:6]}" if req.kind == "synthetic" else job_id),
            kind=req.kind,
            spec=spec,
            job_dir=str(job_root(self.config.job_root, who.user) / job_id),
        )
        if req.kind == "synthetic":
            job.total_work = float(req.synthetic.work)
        if inputs and not self.config.remote_inputs:
            write_inputs(job.job_dir, inputs)
        await self._save(job)
        await self.store.add_event(
            job_id,
            "submitted",
            f"{who.user} submitted {job.name}: {job.min_gpus}-{job.max_gpus} GPUs",
        )
        self.jobs[job_id] = job  # only now can a decision see it: 'submitted' comes first
        await self._changed_now()
        self.poke()
        return job

    async def cancel(self, who: Principal, job_id: str) -> JobRecord:
        job = self.get(who, job_id)
        if job.final:
            return job
        if job.state == "queued" or (job.state == "starting" and job.launched_at is None):
            job.state, job.finished_at = "cancelled", time.time()
            job.reason = f"cancelled by {who.user}"
            job.desired = Lease(job.desired.generation + 1, [], "cancel")
        else:
            job.desired = Lease(job.desired.generation + 1, [], "cancel")
            job.state, job.reason = (
                "stopping",
                f"cancelling at {who.user}'s request: checkpoint, then stop",
            )
        await self._save(job)
        await self.store.add_event(job_id, "cancel", f"{who.user} cancelled {job.name}")
        await self._changed_now()
        self.poke()
        return job

    def get(self, who: Principal, job_id: str) -> JobRecord:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        if not who.may_see(job):
            raise Forbidden(
                f"job {job_id} belongs to {job.user}: you can see its size and state in the queue only"
            )
        return job

    def job_views(self, who: Principal) -> list[dict[str, Any]]:
        return [
            full_view(j) if who.may_see(j) else public_view(j)
            for j in sorted(self.jobs.values(), key=lambda j: j.submitted_at)
        ]

    def status_view(self, who: Principal) -> dict[str, Any]:
        holders = self._holders()
        gpus = [{"id": g.id, "holder": holders.get(g.id)} for g in self.gpu_infos()]
        jobs = [
            status_summary(j, who.may_see(j))
            for j in sorted(self.jobs.values(), key=lambda j: j.submitted_at)
            if not j.final or who.may_see(j)
        ]
        return {"gpus": gpus, "jobs": jobs}

    def queue_view(self, who: Principal) -> list[dict[str, Any]]:
        waiting = [j for j in self.jobs.values() if not j.final]
        waiting.sort(key=lambda j: (j.position is None, j.position or 0, j.submitted_at))
        out = []
        for j in waiting:
            entry = public_view(j)
            if who.may_see(j):
                entry.update(name=j.name, reason=j.reason)
            else:
                entry["reason"] = _public_reason(j)
            out.append(entry)
        return out

    def gpu_view(self, who: Principal) -> dict[str, Any]:
        holders = self._holders()
        external = self._external()
        gpus = []
        for info in self.gpu_infos():
            holder = holders.get(info.id)
            job = self.jobs.get(holder) if holder else None
            others = [
                # A command line can hold secrets: only its owner and admins read it.
                {**p.__dict__, "command": p.command if who.admin or p.user == who.user else None}
                for p in external.get(info.id, [])
            ]
            gpus.append(
                {
                    "id": info.id,
                    "index": info.index,
                    "node": info.node,
                    "name": info.name,
                    "uuid": info.uuid,
                    "memory_total_mb": info.memory_total_mb,
                    "memory_used_mb": info.memory_used_mb,
                    "utilization": info.utilization,
                    "holder": holder,
                    "holder_user": job.user if job else None,
                    "holder_name": job.name if job and who.may_see(job) else None,
                    "external_processes": others,
                    "healthy": not others,
                }
            )
        return {"source": getattr(self.inventory, "source", "simulated"), "gpus": gpus}

    async def events(self, who: Principal, job_id: str) -> list[dict[str, Any]]:
        self.get(who, job_id)
        return await self.store.events(job_id)

    async def progress(self, who: Principal, job_id: str, since: float | None) -> list[dict]:
        self.get(who, job_id)
        return await self.store.progress(job_id, since)

    def logs(self, who: Principal, job_id: str, tail: int = 200) -> dict[str, str]:
        job = self.get(who, job_id)
        return {
            name: _tail(Path(job.job_dir) / f"{name}.log", tail) for name in ("trainer", "sidecar")
        }

    async def wait_updates(self, since: int, timeout: float) -> int:
        """Return as soon as the state version passes ``since`` (or at the timeout)."""
        async with self._changed:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.version > since), timeout
                )
            return self.version

    def pending_launches(self, who: Principal) -> list[dict[str, Any]]:
        """Shared mode: launches of ``who``'s jobs that their own server must carry out."""
        out = []
        for job_id, secret in list(self._secrets.items()):
            job = self.jobs.get(job_id)
            if job and job.user == who.user and job.launch.get("via") == "agent":
                out.append(self._launch_request(job, secret).to_dict())
        return out

    # -- the sidecar protocol ---------------------------------------------------------------
    async def heartbeat(self, job_id: str, secret: str, body: dict[str, Any]) -> dict[str, Any]:
        job = self.jobs.get(job_id)
        if job is None or not job.secret_hash or not secret_matches(secret, job.secret_hash):
            raise Unauthorized(f"job {job_id}: unknown job or wrong secret")
        body = parse_heartbeat(body)
        now = time.time()
        job.last_heartbeat = now
        self._secrets.pop(job_id, None)  # the sidecar is up: nothing left to hand out
        if job.state == "queued":
            # A sidecar we had given up on: have it checkpoint and stop; the job starts again
            # through the scheduler like any queued job.
            top = max(job.desired.generation, int(body.get("generation") or 0)) + 1
            return {"generation": top, "gpus": [], "action": "stop"}
        record = body.get("progress")
        fresh = bool(record) and record != job.progress
        if fresh:
            # Stored first: if the write fails, the sidecar's next heartbeat brings it again.
            await self.store.add_progress(job.id, [record])
        changed = self._absorb(job, body, fresh)
        reported_state = body.get("state")
        if reported_state in ("done", "failed", "cancelled"):
            await self._finish(job, reported_state, body, now)
            changed = True
        elif reported_state == "suspended" and not job.final:
            await self._requeue(
                job,
                "suspended: its GPUs went to jobs that need them more; it "
                "resumes from its checkpoint",
                now,
                kind="suspended",
            )
            changed = True
        elif (
            job.state in ("starting", "resizing")
            and reported_state == "running"
            and (body.get("generation") == job.desired.generation)
        ):
            before = job.state
            job.state = "running"
            job.started_at = job.started_at or now
            n = len(job.desired.gpus)
            await self.store.add_event(
                job_id,
                "running",
                f"running on {n} GPU{'s' if n != 1 else ''} ({','.join(job.desired.gpus)})"
                + (" after the resize" if before == "resizing" else ""),
                {"gpus": job.desired.gpus, "generation": job.desired.generation},
            )
            changed = True
        if changed:
            await self._save(job)
            await self._changed_now()
        elif fresh:  # new progress only: watchers of /updates and the websocket see it now
            await self._changed_now()
            self.poke()
        return self._published(job)

    def _absorb(self, job: JobRecord, body: dict[str, Any], fresh: bool) -> bool:
        """Take the measurements of a (validated) heartbeat, whose progress record is new when
        ``fresh``; True when a decision may change."""
        material = False
        job.reported = {
            k: body.get(k)
            for k in (
                "generation",
                "gpus",
                "state",
                "sidecar_pid",
                "trainer_pid",
                "restarts",
                "exit_code",
            )
        }
        for k, v in (body.get("throughput") or {}).items():
            if k not in job.throughput:
                material = True
            job.throughput[str(k)] = float(v)
        if body.get("resize_cost_s") is not None:
            job.resize_cost_s = float(body["resize_cost_s"])
        job.restarts = int(body.get("restarts") or 0)
        record = body.get("progress")
        if fresh:
            first = job.progress is None
            job.progress = record
            job.work_done = float(record.get("samples") or 0.0)
            if job.kind == "script":
                total = _total_samples(record)
                if total is not None:
                    material = material or job.total_work is None
                    job.total_work = total
            material = material or first
        return material

    def _published(self, job: JobRecord) -> dict[str, Any]:
        """The lease to answer: the desired one, or the current one until its GPUs are free."""
        desired = job.desired
        if job.final:  # nothing left to change: confirm what the sidecar reports
            reported = job.reported
            gpus = reported.get("gpus") or []
            return {
                "generation": reported.get("generation") or desired.generation,
                "gpus": gpus,
                "action": "run" if gpus else "cancel",
            }
        if desired.action != "run":
            return desired.to_dict()
        busy = self._busy_elsewhere(job)
        if any(g in busy for g in desired.gpus):
            reported = job.reported
            return {
                "generation": reported.get("generation") or 0,
                "gpus": reported.get("gpus") or [],
                "action": "run",
            }
        return desired.to_dict()

    def _busy_elsewhere(self, job: JobRecord) -> set[str]:
        """GPUs another job's trainer may still be running on."""
        busy: set[str] = set()
        for other in self.jobs.values():
            if other.id == job.id or other.final:
                continue
            if other.state in ACTIVE:
                if other.launched_at is not None:  # a sidecar runs: it may be on these
                    busy.update(other.reported.get("gpus") or [])
                if other.state != "stopping":
                    busy.update(other.desired.gpus)
        return busy

    # -- decisions --------------------------------------------------------------------------
    def _speed(self, job: JobRecord) -> SpeedModel:
        measured = {int(k): v for k, v in job.throughput.items() if v > 0}
        prior = None
        if job.kind == "synthetic":  # the profile, in samples per real second
            syn = job.spec["synthetic"]
            scale = float(syn.get("time_scale", 1.0))
            prior = {int(k): float(v) * scale for k, v in syn["throughput"].items()}
        return SpeedModel(measured, prior)

    def _core_job(self, job: JobRecord, now: float) -> Job:
        speed = self._speed(job)
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
            weight=float(job.spec.get("priority", 1.0)),
            speed=speed,
            resize_cost=job.resize_cost_s or self.config.default_resize_cost_s,
            gpus=tuple(job.held_gpus),
            started=job.started_at is not None,
            attained_gpu_s=job.attained_gpu_s,
            queued_s=job.queued_s,
            resizes=job.resizes,
            last_change=job.last_change,
            pinned=job.state in ("starting", "resizing", "stopping"),
        )

    async def _decide(self, now: float) -> None:
        open_jobs = [j for j in self.jobs.values() if not j.final]
        if not open_jobs:
            return
        external = self._external()
        gpus = tuple(Gpu(g.id, g.node, healthy=not external.get(g.id)) for g in self.gpu_infos())
        snapshot = Snapshot(gpus, tuple(self._core_job(j, now) for j in open_jobs))
        decision = self.policy.decide(snapshot, now)
        allocations = dict(decision.allocations)
        reasons = dict(decision.reasons)
        if self.config.user_gpu_cap:
            self._apply_cap(allocations, reasons, snapshot)
        changed: set[str] = set()
        for job in open_jobs:
            target = list(allocations.get(job.id, ()))
            reason = reasons.get(job.id, job.reason)
            if reason != job.reason:
                job.reason = reason
                changed.add(job.id)
            if job.state == "queued" and target:
                await self._start(job, target, now)
                changed.add(job.id)
            elif job.state in ("starting", "running", "resizing") and set(target) != set(
                job.desired.gpus
            ):
                await self._change(job, target, now)
                changed.add(job.id)
        queued = sorted(
            (j for j in open_jobs if j.state == "queued"),
            key=lambda j: (-float(j.spec.get("priority", 1.0)), j.submitted_at),
        )
        positions = {j.id: i for i, j in enumerate(queued, 1)}
        for job in open_jobs:
            if job.position != positions.get(job.id):
                job.position = positions.get(job.id)
                changed.add(job.id)
        if changed:
            for job in open_jobs:
                if job.id in changed:
                    await self._save(job)
            await self._changed_now()

    def _apply_cap(self, allocations: dict, reasons: dict, snapshot: Snapshot) -> None:
        """Per-user GPU cap: trim each user's newest jobs until the user is within the cap."""
        cap = self.config.user_gpu_cap
        by_user: dict[str, list[Job]] = {}
        for job in snapshot.jobs:
            by_user.setdefault(job.user, []).append(job)
        for user, jobs in by_user.items():
            jobs.sort(key=lambda j: (not j.pinned, -len(j.gpus), j.submit_time))
            used = 0
            for job in jobs:
                lease = list(allocations.get(job.id, ()))
                room = cap - used
                if len(lease) > room and not job.pinned:
                    keep = lease[:room] if room >= job.min_gpus else []
                    allocations[job.id] = tuple(keep)
                    reasons[job.id] = (
                        f"{'running on ' + str(len(keep)) + ' GPUs' if keep else 'queued'}: "
                        f"{user} may hold at most {cap} GPUs at a time"
                    )
                    lease = keep
                used += len(lease)

    async def _start(self, job: JobRecord, gpus: list[str], now: float) -> None:
        resumed = job.started_at is not None
        job.desired = Lease(job.desired.generation + 1, gpus, "run")
        job.state, job.launched_at, job.position = "starting", None, None
        job.last_change = now
        job.history.append({"t": now, "gpus": gpus, "why": job.reason})
        await self.store.add_event(
            job.id,
            "resumed" if resumed else "admitted",
            f"{'resumes' if resumed else 'starts'} on {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
            f" ({','.join(gpus)}): {job.reason}",
            {"gpus": gpus, "generation": job.desired.generation},
        )

    async def _change(self, job: JobRecord, gpus: list[str], now: float) -> None:
        before = job.desired.gpus
        if job.state == "starting" and job.launched_at is None:
            job.desired = Lease(job.desired.generation, gpus, "run")
            if not gpus:
                job.state, job.desired = "queued", Lease(job.desired.generation, [], "run")
            return
        job.last_change = now
        if not gpus:
            job.desired = Lease(job.desired.generation + 1, [], "stop")
            job.state = "stopping"
            kind, message = "suspend", f"suspended (checkpoint, then stop): {job.reason}"
        else:
            job.desired = Lease(job.desired.generation + 1, gpus, "run")
            job.state = "resizing" if job.state == "running" else job.state
            job.resizes += 1
            kind = "resize"
            message = (
                f"resized from {len(before)} to {len(gpus)} GPUs ({','.join(gpus)}): {job.reason}"
            )
        job.history.append({"t": now, "gpus": gpus, "why": job.reason})
        await self.store.add_event(
            job.id,
            kind,
            message,
            {"from": before, "to": gpus, "generation": job.desired.generation},
        )

    # -- starting sidecars ----------------------------------------------------------------
    def _launch_request(self, job: JobRecord, secret: str) -> LaunchRequest:
        return LaunchRequest(
            job_id=job.id,
            job_dir=job.job_dir,
            kind=job.kind,
            spec=job.spec,
            gpus=list(job.desired.gpus),
            generation=job.desired.generation,
            simulated=bool(job.spec.get("simulated", self.config.simulated)),
            heartbeat_url=self.heartbeat_url(job.id),
            heartbeat_s=self.config.heartbeat_s,
            secret=secret,
            mechanism=self.config.mechanism,
            checkpoint_every_s=self.config.checkpoint_every_s,
        )

    async def _launch_ready(self, now: float) -> None:
        for job in list(self.jobs.values()):
            if job.state != "starting" or job.launched_at is not None:
                continue
            busy = self._busy_elsewhere(job)
            if any(g in busy for g in job.desired.gpus):
                continue  # the previous holder is still checkpointing: next round
            secret, digest = new_secret()
            job.secret_hash = digest
            job.launched_at = job.last_heartbeat = now
            self._secrets[job.id] = secret
            try:
                job.launch = await self.launcher.launch(self._launch_request(job, secret))
            except Exception as e:  # the launch itself failed: the job cannot run as sent
                log.exception("job %s: launch failed", job.id)
                self._secrets.pop(job.id, None)
                await self._finish(
                    job,
                    "failed",
                    {
                        "error": {
                            "type": type(e).__name__,
                            "message": str(e),
                            "hint": "the sidecar could not be started; check sidecar_python and the job dir",
                        }
                    },
                    now,
                )
            if job.launch.get("via") != "agent":
                self._secrets.pop(job.id, None)
            await self._save(job)
            await self._changed_now()

    # -- losses and endings ---------------------------------------------------------------
    async def _find_lost(self, now: float) -> None:
        timeout = self.config.heartbeat_timeout_s
        for job in list(self.jobs.values()):
            if job.state not in ACTIVE or job.launched_at is None:
                continue
            silent = now - (job.last_heartbeat or job.launched_at)
            alive = self.launcher.alive(job.launch) if job.launch else None
            if alive is False and silent > min(5.0, timeout):
                final = _final_status(job.job_dir)
                if final and final["state"] == "suspended":
                    await self._requeue(
                        job, "suspended: it resumes from its checkpoint", now, kind="suspended"
                    )
                    await self._changed_now()
                    continue
                if final:  # the sidecar ended but its last heartbeat did not arrive
                    await self._finish(job, final["state"], final, now)
                    await self._changed_now()
                    continue
            elif silent <= timeout or alive:
                continue
            await self._lost(job, now, silent)

    async def _lost(self, job: JobRecord, now: float, silent: float) -> None:
        job.lost += 1
        if job.state == "stopping" and job.desired.action == "cancel":
            await self._finish(job, "cancelled", {}, now)
            return
        if job.lost > MAX_LOST:
            await self._finish(
                job,
                "failed",
                {
                    "error": {
                        "type": "SidecarLost",
                        "message": f"its sidecar was lost {job.lost} times",
                        "hint": "see sidecar.log in the job dir",
                    }
                },
                now,
            )
            return
        await self._requeue(
            job,
            f"queued again: its sidecar stopped answering {silent:.0f} s ago; it resumes "
            "from its last checkpoint",
            now,
            kind="lost",
        )
        await self._changed_now()

    async def _requeue(self, job: JobRecord, reason: str, now: float, kind: str) -> None:
        job.state, job.reason = "queued", reason
        job.desired = Lease(job.desired.generation, [], "stop")
        job.reported = {}  # its old sidecar holds nothing any more
        job.launched_at = None
        job.last_change = now
        job.history.append({"t": now, "gpus": [], "why": reason})
        await self.store.add_event(job.id, kind, reason)
        await self._save(job)
        self.poke()

    async def _finish(self, job: JobRecord, state: str, body: dict[str, Any], now: float) -> None:
        if job.final:
            return
        job.state, job.finished_at = state, now
        job.exit_code = body.get("exit_code", job.exit_code)
        job.error = body.get("error") or job.error
        job.desired = Lease(job.desired.generation, [], "cancel" if state == "cancelled" else "run")
        if state == "done":
            model = Path(job.job_dir) / "model.keras"
            job.model_path = str(model) if model.exists() else body.get("model_path")
            job.reason = "done"
        elif state == "failed":
            err = job.error or {}
            job.reason = f"failed: {err.get('type', 'error')}: {err.get('message', '')}".rstrip(
                ": "
            )
        else:
            job.reason = "cancelled"
        await self.store.add_event(job.id, state, job.reason, {"exit_code": job.exit_code})
        await self._save(job)
        self.poke()

    # -- bookkeeping ------------------------------------------------------------------------
    def _account(self, now: float) -> None:
        dt = max(now - self._last_account, 0.0)
        self._last_account = now
        for job in self.jobs.values():
            if job.state in ACTIVE:
                job.attained_gpu_s += dt * len(job.held_gpus)
            elif job.state == "queued":
                job.queued_s += dt

    def gpu_infos(self) -> list[Any]:
        """The last inventory snapshot (refreshed off the event loop by ``step``: NVML can
        block for seconds on a sick GPU)."""
        if not self._gpu_cache:
            self._gpu_cache, self._gpu_cache_t = self.inventory.snapshot(), time.time()
        return self._gpu_cache

    async def _refresh_gpus(self, now: float) -> None:
        if now - self._gpu_cache_t > 2.0:
            self._gpu_cache = await asyncio.to_thread(self.inventory.snapshot)
            self._gpu_cache_t = now

    def _our_pids(self) -> set[int]:
        pids = set()
        for job in self.jobs.values():
            if job.state in ACTIVE:
                for key in ("sidecar_pid", "trainer_pid"):
                    if job.reported.get(key):
                        pids.add(int(job.reported[key]))
                if job.launch.get("pid"):
                    pids.add(int(job.launch["pid"]))
        return pids

    def _external(self) -> dict[str, list[Any]]:
        """Processes on each GPU that the scheduler did not start (they make it busy)."""
        from .inventory import external_processes

        return external_processes(self.gpu_infos(), self._our_pids(), self._holders())

    def _holders(self) -> dict[str, str]:
        return {g: j.id for j in self.jobs.values() for g in j.held_gpus}

    async def _changed_now(self) -> None:
        async with self._changed:
            self.version += 1
            self._changed.notify_all()

    async def _save(self, job: JobRecord) -> None:
        await self.store.save_job(job.to_dict())


def _safe(user: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in user) or "user"


def job_root(pattern: str, user: str) -> Path:
    """The folder of a user's job dirs: ``pattern`` with ``{user}`` replaced; a pattern without
    it gets the user as a sub-folder. A ``~user`` that is no account here falls back to the
    temp dir."""
    safe = _safe(user)
    if "{user}" not in pattern:
        return Path(pattern) / safe
    path = os.path.expanduser(pattern.replace("{user}", safe))
    if path.startswith("~"):
        import tempfile

        return Path(tempfile.gettempdir()) / "jupyter-elastic-gpu" / "jobs" / safe
    return Path(path)


def _public_reason(job: JobRecord) -> str:
    if job.state == "queued":
        return "queued"
    return f"{job.state} on {len(job.held_gpus)} GPUs"


def parse_heartbeat(body: dict[str, Any]) -> dict[str, Any]:
    """A heartbeat with every field checked (docs/sidecar.md); BadRequest otherwise, before
    anything of the job is touched."""

    def fail(field: str, what: str) -> BadRequest:
        return BadRequest(f"heartbeat field {field!r}: {what}")

    out = dict(body)
    try:
        out["generation"] = int(body.get("generation") or 0)
        out["restarts"] = int(body.get("restarts") or 0)
    except (TypeError, ValueError):
        raise fail("generation/restarts", "expected whole numbers") from None
    gpus = body.get("gpus") or []
    if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
        raise fail("gpus", "expected a list of GPU ids")
    state = body.get("state")
    if state is not None and state not in SIDECAR_STATES:
        raise fail("state", f"unknown state {state!r}")
    progress = body.get("progress")
    if progress is not None and not isinstance(progress, dict):
        raise fail("progress", "expected an object or null")
    throughput = body.get("throughput") or {}
    if not isinstance(throughput, dict):
        raise fail("throughput", "expected an object {replicas: samples/s}")
    try:
        out["throughput"] = {
            str(int(k)): float(v) for k, v in throughput.items() if math.isfinite(float(v))
        }
        cost = body.get("resize_cost_s")
        out["resize_cost_s"] = None if cost is None else float(cost)
    except (TypeError, ValueError):
        raise fail("throughput/resize_cost_s", "expected numbers") from None
    for field in ("error",):
        if body.get(field) is not None and not isinstance(body[field], dict):
            raise fail(field, "expected an object or null")
    return out


def _total_samples(record: dict[str, Any]) -> float | None:
    """Samples the whole training needs, from a progress record (None if not knowable yet)."""
    epochs, steps, batch = (record.get(k) for k in ("epochs", "steps_per_epoch", "batch_size"))
    if not (epochs and steps and batch):
        return None
    return float(epochs) * float(steps) * float(batch)


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(size - 256 * 1024, 0))
            data = f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:]) if lines > 0 else data


def _final_status(job_dir: str) -> dict[str, Any] | None:
    try:
        status = json.loads((Path(job_dir) / "status.json").read_text())
    except (OSError, ValueError):
        return None
    if status.get("state") in (*FINAL, "suspended"):
        return status
    return None


__all__ = [
    "BadRequest",
    "Forbidden",
    "NotFound",
    "Principal",
    "SchedulerService",
    "ServiceConfig",
    "Unauthorized",
]
