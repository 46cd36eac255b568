"""A job as the live scheduler keeps it.

The record is the scheduler's whole memory of a job: what was asked (``spec``, the settled
submit request), what the scheduler wants (``desired``: the protocol's grant), what the
sidecar last reported (``reported``), and the measurements the policy decides on. It
round-trips through JSON, which is how the store keeps it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from elastic_gpu_sidecar.protocol import Framework, Grant, JobKind, JobState
from pydantic import TypeAdapter, ValidationError

from ..core import eta
from ..core.model import gpu_counts
from ..core.reason_kinds import ReasonKind
from ..core.reason_text import named, say
from ..core.reasons import Reason
from ..models import ErrorInfo, Heartbeat, ProgressRecord, SubmitRequest, describe


def new_secret() -> tuple[str, str]:
    """(secret for the sidecar, hash to keep): the database never holds the secret itself."""
    secret = secrets.token_urlsafe(32)
    return secret, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, digest: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), digest)


#: The name a reader may see of a job, by id (None: name it by its id).
NameOf = Callable[[str], str | None]


def names_for(jobs: Mapping[str, JobRecord], user: str) -> NameOf:
    """The names ``user`` may read in their jobs' reasons: those of their own jobs (every
    other job is named by its id, which everyone sees)."""

    def name_of(job_id: str) -> str | None:
        job = jobs.get(job_id)
        return job.name if job is not None and job.user == user and job.name else None

    return name_of


def _first_grants(state: JobState, desired: Grant, reported: Heartbeat) -> dict[int, list[str]]:
    """The grants of a record from an older database: the desired grant and, in the middle
    of a resize, the older generation its sidecar still reports running on."""
    if not state.active:
        return {}
    grants = {desired.generation: list(desired.gpus)} if desired.gpus else {}
    if reported.generation is not None and reported.gpus:
        grants.setdefault(reported.generation, list(reported.gpus))
    return grants


@dataclass
class JobRecord:
    id: str
    user: str
    name: str
    spec: SubmitRequest
    job_dir: str
    secret_hash: str = ""
    state: JobState = JobState.QUEUED
    # Why the job has what it has: the text (``core.reason_text.say``) of its kind and
    # figures, set together by ``tell``.
    reason: str = say(ReasonKind.NEW)
    reason_kind: ReasonKind = ReasonKind.NEW
    reason_figures: dict[str, Any] = field(default_factory=dict)
    position: int | None = None  # place in the queue while waiting (1: served next)
    rank: int | None = None  # place in the policy's order among all open jobs
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    desired: Grant = field(default_factory=Grant)
    # {generation: GPUs} of each grant published to the job since the one its sidecar last
    # confirmed: what a sidecar may report holding (grants.absorb).
    granted: dict[int, list[str]] = field(default_factory=dict)
    reported: Heartbeat = field(default_factory=Heartbeat)  # without progress: kept below
    progress: ProgressRecord | None = None
    throughput: dict[int, float] = field(default_factory=dict)  # measured samples/s per count
    # The same per kind of GPU, where kinds are mixed: {kind: {count: samples/s}} (``grants.py``)
    kind_throughput: dict[str, dict[int, float]] = field(default_factory=dict)
    # The ends its recent progress records predicted (``core/eta.py``: when one is trusted).
    end_guesses: list[tuple[float, float]] = field(default_factory=list)
    resize_cost_s: float | None = None
    total_work: float | None = None
    work_done: float = 0.0
    attained_gpu_s: float = 0.0
    queued_s: float = 0.0
    resizes: int = 0
    last_change: float | None = None
    last_heartbeat: float | None = None
    launched_at: float | None = None
    launch: dict[str, Any] = field(default_factory=dict)  # launcher's own record (pid, host)
    lost: int = 0
    restarts: int = 0
    exit_code: int | None = None
    error: ErrorInfo | None = None
    model_path: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)  # grant changes, for the UI
    notes: list[str] = field(default_factory=list)  # what the scheduler changed in the request
    # Whether its GPU count may change while it runs, as its framework says (settled at
    # submission: ``SubmitRequest.fit_to``); None for a job without a framework, or one kept
    # before frameworks were told.
    elastic: bool | None = None
    groups: list[str] = field(default_factory=list)  # the owner's groups at submit (fair share)
    # Who suspended the job (its owner or an admin) and holds it: no GPUs until resumed
    # (``admin.py``). In the record, so a restarted scheduler keeps it held.
    held_by: str | None = None
    # Kept past the retention by its owner (or an admin): once finished it never expires
    # (``retention.py``).
    kept: bool = False
    # When its holder must have confirmed the release it was asked for (``releases.py``),
    # and when its claim was voided for not doing so (the owner's server ends its processes).
    release_due: float | None = None
    voided_at: float | None = None

    # -- its reason -------------------------------------------------------------------------
    def tell(self, reason: Reason, name_of: NameOf | None = None) -> bool:
        """Say ``reason``, naming the jobs it mentions by ``name_of`` (their id where it
        gives None); whether its text changed. Kind, figures and text change together, so the
        figures always make the text a front end shows."""
        if not self.says_other(reason, name_of):
            return False
        figures = reason.figures()
        if name_of is not None:
            figures = named(figures, name_of)
        self.reason, self.reason_kind = say(reason.kind, figures), reason.kind
        self.reason_figures = dict(figures)
        return True

    def says_other(self, reason: Reason, name_of: NameOf | None = None) -> bool:
        """Whether ``tell(reason, name_of)`` changes what the job says."""
        figures = reason.figures()
        if name_of is not None:
            figures = named(figures, name_of)
        return (say(reason.kind, figures), reason.kind) != (self.reason, self.reason_kind)

    def grant_change(self, now: float, gpus: list[str]) -> None:
        """Record a new grant in ``history``, with the reason it was given for."""
        self.history.append(
            {
                "t": now,
                "gpus": gpus,
                "why": self.reason,
                "why_kind": self.reason_kind,
                "why_figures": self.reason_figures,
            }
        )

    # -- facts ------------------------------------------------------------------------------
    @property
    def kind(self) -> JobKind:
        return self.spec.kind

    @property
    def framework(self) -> Framework | None:
        """The adapter that runs it (settled at submission); None for a job without one."""
        said = self.spec.framework
        return said if self.kind == JobKind.SCRIPT and said != Framework.AUTO else None

    @property
    def min_gpus(self) -> int:
        return self.spec.min_gpus

    @property
    def max_gpus(self) -> int:
        return self._counts[1]

    @property
    def requested_gpus(self) -> int:
        return self._counts[2]

    @property
    def _counts(self) -> tuple[int, int, int]:
        """The spec's counts; settled at submission (``SubmitRequest.fit_to``), so the rule
        for omitted ones only speaks for a record that never was (it holds its minimum)."""
        s = self.spec
        return gpu_counts(s.min_gpus, s.max_gpus, s.requested_gpus, s.max_gpus or s.min_gpus)

    @property
    def final(self) -> bool:
        return self.state.final

    @property
    def held(self) -> bool:
        """Suspended by a person: the policy is not offered it until it is resumed."""
        return self.held_by is not None

    @property
    def held_gpus(self) -> list[str]:
        """GPUs the job holds now: the desired grant, or while it stops, what it still runs on."""
        if self.state == JobState.STOPPING:
            return list(self.reported.gpus or self.desired.gpus)
        if self.state.active:
            return list(self.desired.gpus)
        return []

    @property
    def estimating(self) -> bool:
        """Whether its end is still being estimated: an open job (not a kernel's lease, which
        ends when its kernel does) whose pace has not settled by ``core/eta.py``'s rule. Its
        ``eta_s`` and forecast end are not told meanwhile."""
        if self.final or self.kind == JobKind.INTERACTIVE:
            return False
        return not eta.trusted(self.end_guesses)

    def note_progress(self, records: list[ProgressRecord]) -> None:
        """Remember the ends that new progress ``records`` (oldest first) predict."""
        for r in records:
            total = r.total_samples() if self.kind == JobKind.SCRIPT else self.total_work
            end = eta.predicted_end(r.t, r.samples or 0.0, total, r.samples_per_s)
            if end is not None:
                self.end_guesses = eta.remember(self.end_guesses, (r.t, end))

    def eta_s(self) -> float | None:
        """Seconds to finish at the current speed, when total work and speed are known (None
        too when a speed of almost nothing would put it past any finite number), and only once
        the estimate is trusted (``estimating``)."""
        if self.total_work is None or self.progress is None or self.estimating:
            return None
        rate = self.progress.samples_per_s
        if not rate:
            return None
        eta = max(self.total_work - self.work_done, 0.0) / rate
        return eta if math.isfinite(eta) else None

    # -- (de)serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # json.dumps copies
        data.update(
            spec=self.spec.model_dump(mode="json"),
            state=self.state.value,
            desired=self.desired.to_json(),
            reported=self.reported.model_dump(mode="json", exclude_none=True),
            progress=None if self.progress is None else self.progress.model_dump(exclude_none=True),
            error=None if self.error is None else self.error.model_dump(mode="json"),
            throughput={str(k): v for k, v in self.throughput.items()},
            kind_throughput={
                kind: {str(k): v for k, v in speeds.items()}
                for kind, speeds in self.kind_throughput.items()
            },
            granted={str(k): list(v) for k, v in self.granted.items()},
            reason_kind=self.reason_kind.value,
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRecord:
        """A record from the store; ValueError (pydantic's included) when it is not one."""
        data = dict(data)
        data["spec"] = SubmitRequest.model_validate(data["spec"])
        data["state"] = JobState(data.get("state", JobState.QUEUED))
        desired = data.get("desired") or {}
        data["desired"] = Grant(
            int(desired.get("generation", 0)),
            list(desired.get("gpus", [])),
            desired.get("action", "run"),
        )
        data["reported"] = Heartbeat.model_validate(data.get("reported") or {})
        if "granted" in data:
            data["granted"] = {int(k): [str(g) for g in v] for k, v in data["granted"].items()}
        else:  # saved before grants were kept: what it was last given, and what it runs on
            data["granted"] = _first_grants(data["state"], data["desired"], data["reported"])
        if data.get("progress") is not None:
            data["progress"] = ProgressRecord.model_validate(data["progress"])
        if data.get("error") is not None:
            data["error"] = ErrorInfo.model_validate(data["error"])
        data["throughput"] = {int(k): float(v) for k, v in (data.get("throughput") or {}).items()}
        data["kind_throughput"] = {
            str(kind): {int(k): float(v) for k, v in speeds.items()}
            for kind, speeds in (data.get("kind_throughput") or {}).items()
        }
        if "reason_kind" not in data:  # saved before reasons had kinds: its state's, if final
            final = {s.value: s.value for s in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)}
            data["reason_kind"] = final.get(data["state"].value, ReasonKind.NEW)
        known = cls.__dataclass_fields__
        try:  # every field against its type: a record that loads is one every view can show
            return _RECORD.validate_python({k: v for k, v in data.items() if k in known})
        except ValidationError as e:
            raise ValueError(f"job record: {describe(e)}") from None


_RECORD = TypeAdapter(JobRecord)
