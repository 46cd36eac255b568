"""What clients send: a job to submit, which jobs to list, and what a user's server needs to
start a sidecar (a sidecar's heartbeat is ``heartbeat.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, NamedTuple

from elastic_gpu_sidecar.frameworks import Detected, detect
from elastic_gpu_sidecar.protocol import (
    BatchPolicy,
    Framework,
    JobKind,
    JobState,
    Mechanism,
)
from pydantic import Field, field_validator, model_validator

from ..core.model import DEFAULT_MIN_GPUS, gpu_counts
from ..core.reason_text import plural
from ..errors import BadRequest
from .base import (
    IDENTIFIER,
    MAX_GPUS,
    MAX_INPUT_BYTES,
    MAX_NOTEBOOK_CHARS,
    MAX_SCRIPT_BYTES,
    NAME,
    Count,
    GpuCount,
    GpuIds,
    MigProfile,
    Priority,
    Seconds,
    Speeds,
    Strict,
    at_most,
    parse,
)


def check_notebook_path(path: str) -> str:
    """``path`` if it names a file under the Jupyter server's root as its file browser does
    (relative, no '..', no control characters), else ValueError saying so."""
    parts = path.replace("\\", "/").split("/")
    if (
        not path.strip()
        or path.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", path)
        or ".." in parts
        or any(ord(c) < 32 or ord(c) == 127 for c in path)
    ):
        raise ValueError(
            "must be a path relative to the Jupyter server's root, without '..' or control "
            "characters (as the file browser names it, e.g. 'projects/mnist.ipynb')"
        )
    return path


#: A speed relative to another (a kind's over the others').
SpeedFactor = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]


class SyntheticSpec(Strict):
    """A job without TensorFlow: its steps take the time its speed profile says."""

    work: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)] = Field(
        description="samples to process in total"
    )
    throughput: Speeds = Field(description="samples/s at each GPU count")
    time_scale: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] = Field(
        1.0, description="how much faster than real time"
    )
    batch: Annotated[int, Field(ge=1, le=10**7)] = 32
    save_s: Annotated[float, Field(ge=0, le=600, allow_inf_nan=False)] = Field(
        0.0,
        description="seconds each checkpoint takes to write, as saving a real model does: a "
        "stop or a resize waits for it",
    )
    kind_speed: Annotated[
        dict[Annotated[str, Field(min_length=1, max_length=40)], SpeedFactor],
        Field(max_length=64),
        at_most(64),
    ] = Field(
        default_factory=dict,
        description="how fast the job goes on each kind of GPU, relative to the others "
        '(`{"A100-80GB": 3, "T4": 1}`): the scheduler\'s prior where kinds are mixed, until the '
        "job measures itself there (simulated GPUs run it at its profile's speed on any kind)",
    )

    @model_validator(mode="after")
    def _points(self) -> SyntheticSpec:
        if not self.throughput:
            raise ValueError("throughput needs at least one GPUS: SAMPLES_PER_S point")
        for gpus, speed in self.throughput.items():
            if speed <= 0:
                raise ValueError(f"throughput at {gpus} GPUs must be above 0, got {speed}")
        return self


class SubmitRequest(Strict):
    """The body of ``POST jobs`` (docs/api.md), and a job's spec as the scheduler keeps it.

    Omitted sizes mean what ``core.model.gpu_counts`` says: ``min_gpus`` 1, ``max_gpus`` every
    GPU of the server (the scheduler shrinks the job when others need GPUs), ``requested_gpus``
    ``min_gpus``. ``fit_to(total)`` settles them, and every job the scheduler keeps is settled.
    """

    name: str | None = None
    kind: JobKind = JobKind.SCRIPT
    script: str | None = Field(None, description="The training code (cell or file source).")
    args: Annotated[list[Annotated[str, Field(max_length=10_000)]], Field(max_length=1000)] = Field(
        default_factory=list, description="Command-line arguments for the script."
    )
    cwd: Annotated[str | None, Field(max_length=4096)] = Field(
        None, description="Folder relative paths of the script resolve from."
    )
    min_gpus: GpuCount = DEFAULT_MIN_GPUS
    mig: MigProfile | None = Field(
        None,
        description="A MIG profile (`1g.10gb`): the job runs on one MIG instance of that "
        "profile instead of whole GPUs (one device: its sizes are 1), from the pool of MIG "
        "instances (docs/interactive-gpus.md). Refused where no GPU has one.",
    )
    max_gpus: GpuCount | None = Field(
        None,
        description="Default: every GPU of the server. Above the server's GPUs: lowered to them "
        "(see the job's `notes`).",
    )
    requested_gpus: GpuCount | None = Field(None, description="the count asked for")
    epochs: Annotated[int | None, Field(ge=1, le=10**6)] = Field(
        None, description="Overrides `epochs` of every fit() call."
    )
    priority: Priority = 1.0
    batch_policy: BatchPolicy = BatchPolicy.KEEP_GLOBAL
    measure_noise: bool = Field(
        False,
        description="Measure the gradient noise scale as the job trains (Keras on TensorFlow; "
        "docs/sidecar.md): the job's view says which batch sizes use each sample well. Costs "
        "one copy of the model's trainable weights in memory.",
    )
    framework: Framework = Field(
        Framework.AUTO,
        description="The framework adapter that runs the script (docs/frameworks.md): `auto` "
        "reads it from the script's imports. A script its framework cannot resize (no "
        "framework recognised, or a torchrun script without a checkpoint of its own) runs at "
        "one GPU count: `requested_gpus` (see the job's `notes`). Script jobs only.",
    )
    simulated: bool | None = Field(
        None, description="Simulated GPUs (logical CPU devices); default: whatever the box has."
    )
    inputs: Annotated[dict[str, str], Field(max_length=100), at_most(100)] = Field(
        default_factory=dict,
        description="Pickled variables handed to the script, base64, by Python identifier.",
    )
    synthetic: SyntheticSpec | None = None
    notebook: Annotated[str | None, Field(max_length=MAX_NOTEBOOK_CHARS)] = Field(
        None,
        description="the notebook that submits the job, relative to the Jupyter server's root "
        "as the file browser names it (e.g. 'projects/mnist.ipynb')",
    )

    @field_validator("notebook")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        return None if path is None else check_notebook_path(path)

    @model_validator(mode="after")
    def _consistent(self) -> SubmitRequest:
        if self.name is not None and not NAME.match(self.name):
            raise ValueError("name must be 1-80 letters, digits, spaces, '.', '_' or '-'")
        top = self.max_gpus
        if top is not None and self.min_gpus > top:
            raise ValueError(
                f"min_gpus ({self.min_gpus}) is above max_gpus ({top}): ask for a range such "
                f"as min_gpus {top}, max_gpus {self.min_gpus}"
            )
        want = self.requested_gpus
        if want is not None and not (self.min_gpus <= want <= (top or MAX_GPUS)):
            raise ValueError(
                f"requested_gpus ({want}) must lie between min_gpus ({self.min_gpus}) and "
                f"max_gpus ({top if top is not None else 'every GPU'})"
            )
        if self.kind == JobKind.SCRIPT:
            if not self.script or not self.script.strip():
                raise ValueError("a script job needs the training code in 'script'")
            if len(self.script.encode()) > MAX_SCRIPT_BYTES:
                raise ValueError(
                    "the script is larger than 1 MB: put the code in a file and import it"
                )
            if self.synthetic is not None:
                raise ValueError("'synthetic' only goes with kind 'synthetic'")
        elif self.kind == JobKind.INTERACTIVE:  # a kernel's lease (POST leases): a fixed size
            if self.script or self.synthetic is not None or self.inputs:
                raise ValueError("an interactive lease takes no script, synthetic or inputs")
            if top is not None and top != self.min_gpus:
                raise ValueError("an interactive lease has one size: min_gpus = max_gpus")
        elif self.synthetic is None:
            raise ValueError("a synthetic job needs 'synthetic': {work, throughput}")
        if self.mig is not None and (self.min_gpus != 1 or (top or 1) != 1 or (want or 1) != 1):
            raise ValueError(
                f"a job on a MIG slice ({self.mig}) runs on one device: min_gpus, max_gpus and "
                "requested_gpus are 1 (or left out)"
            )
        if self.kind != JobKind.SCRIPT and self.framework != Framework.AUTO:
            raise ValueError(f"'framework' only goes with kind 'script', not {self.kind.value!r}")
        if self.kind != JobKind.SCRIPT and self.measure_noise:
            raise ValueError(
                f"'measure_noise' only goes with kind 'script', not {self.kind.value!r}"
            )
        for name, blob in self.inputs.items():
            if not IDENTIFIER.match(name):
                raise ValueError(f"input name {name!r} is not a Python identifier")
            if len(blob) > MAX_INPUT_BYTES:
                raise ValueError(f"input {name!r} is larger than 150 MB: save it to a file instead")
        return self

    def fit_to(
        self,
        total: int,
        user_cap: int = 0,
        one_kind: tuple[int, str] | None = None,
        in_mig: int = 0,
        slices: Mapping[str, int] | None = None,
    ) -> Settled:
        """The request settled on a server with ``total`` GPUs whose users may each hold at
        most ``user_cap`` (0: no cap), with notes for the user; ``one_kind``, where the GPUs
        are of several kinds: the most GPUs of one kind on one server (a job runs on one kind)
        and the kinds there are, said as ``2 A100-80GB, 2 T4``; ``in_mig``: GPUs besides
        ``total`` that are in MIG mode (no job runs on one whole); ``slices``: how many MIG
        instances of each profile there are (a job on one asks for a profile there is).

        The one rule for counts above what can be had, wherever a job comes from: a
        ``min_gpus`` above it is refused (the job could never start); ``max_gpus`` and
        ``requested_gpus`` above it are lowered to it, and a note says so. A script job's
        framework is settled here too (``frameworks.detect``: never ``auto`` once kept), and a
        script its framework cannot resize keeps its requested count for its whole run
        (``min_gpus`` = ``max_gpus``), so no policy ever resizes it, and a note says why.
        """
        if self.mig is not None:
            return self._fit_to_slice(slices or {})
        limit, where = total, f"the {total} GPUs of this server"
        if in_mig:
            where += f" not in MIG mode ({in_mig} more are: no job runs on one whole)"
        if 0 < user_cap < total:
            limit, where = user_cap, f"the {user_cap} GPUs one user may hold (the per-user cap)"
        if one_kind is not None and one_kind[0] < limit:
            limit, where = (
                one_kind[0],
                (
                    f"the {one_kind[0]} GPUs of one kind on one server (a job runs on one kind of "
                    f"GPU; here: {one_kind[1]})"
                ),
            )
        if self.min_gpus > limit:
            raise BadRequest(
                f"min_gpus ({self.min_gpus}) is more than {where}: the job could never start"
            )
        _, top, want = gpu_counts(self.min_gpus, self.max_gpus, self.requested_gpus, limit)
        notes = []
        if self.max_gpus is not None and self.max_gpus > top:
            notes.append(f"max_gpus {self.max_gpus} lowered to {where}")
        asked = self.min_gpus if self.requested_gpus is None else self.requested_gpus
        if asked > want:
            notes.append(f"requested_gpus {asked} lowered to {want}")
        update = {"max_gpus": top, "requested_gpus": want, "inputs": {}}
        elastic = None
        if self.kind == JobKind.SCRIPT:
            found = self._framework()
            update["framework"], elastic = found.framework, found.elastic
            if not found.elastic:
                if found.one_device:
                    want = 1
                update.update(min_gpus=want, max_gpus=want, requested_gpus=want)
                notes.append(
                    f"{found.framework.value} script, not elastic: it keeps "
                    f"{plural(want, 'GPU')} for its whole run (min_gpus = max_gpus = {want}): "
                    f"{found.why}"
                )
        return Settled(self.model_copy(update=update), notes, elastic)

    def _framework(self) -> Detected:
        found = detect(self.script or "", self.framework)
        if self.measure_noise and found.framework != Framework.KERAS:
            raise BadRequest(
                "measure_noise: the gradient noise scale is measured in Keras scripts "
                f"only, and this is a {found.framework.value} script: submit it without it"
            )
        return found

    def _fit_to_slice(self, slices: Mapping[str, int]) -> Settled:
        """A job on one MIG instance: of a profile there is; one device, never resized."""
        if not slices:
            raise BadRequest(
                f"no GPU of this server is in MIG mode, so there is no {self.mig} MIG slice: "
                "ask for whole GPUs instead (leave out the MIG profile)"
            )
        if self.mig not in slices:
            there = ", ".join(f"{n} {p}" for p, n in slices.items())
            raise BadRequest(
                f"no {self.mig} MIG slice on this server; its MIG slices are: {there}. Ask "
                "for one of those profiles"
            )
        update: dict[str, Any] = {"min_gpus": 1, "max_gpus": 1, "requested_gpus": 1, "inputs": {}}
        notes, elastic = [], None
        if self.kind == JobKind.SCRIPT:
            update["framework"], elastic = self._framework().framework, False
            notes.append(f"runs on one {self.mig} MIG slice for its whole run (never resized)")
        return Settled(self.model_copy(update=update), notes, elastic)


class Settled(NamedTuple):
    """A submit request as the scheduler keeps it (``SubmitRequest.fit_to``)."""

    spec: SubmitRequest
    #: What was changed in the request, for the user.
    notes: list[str]
    #: Whether the job's GPU count may change while it runs (None: not a script job).
    elastic: bool | None


class LaunchRequest(Strict):
    """Everything needed to start one sidecar; a user's server gets it in shared mode."""

    job_id: str
    job_dir: str
    spec: SubmitRequest = Field(description="The submitted request as stored, defaults filled in.")
    gpus: GpuIds
    generation: Count
    simulated: bool
    heartbeat_url: str
    heartbeat_interval: Seconds = Field(description="Seconds between heartbeats.")
    secret: str = Field(description="The job's secret, for `ELASTIC_GPU_JOB_SECRET`.")
    mechanism: Mechanism = Mechanism.SIDECAR
    checkpoint_interval: Seconds = Field(description="Seconds between periodic checkpoints.")


def check_one_slice(mig: str | None, gpus: int) -> None:
    """A lease of a MIG slice is of one: ValueError for another count of GPUs with it."""
    if mig is not None and gpus != 1:
        raise ValueError(f"a lease of a MIG slice ({mig}) is of one slice: gpus is 1")


class LeaseRequest(Strict):
    """The body of ``POST leases``: GPUs for a notebook kernel (docs/interactive-gpus.md).

    A lease is a job of kind ``interactive`` of exactly ``gpus`` GPUs: admitted like a
    non-elastic job of that size, never resized or checkpointed, held while its kernel lives.
    """

    gpus: GpuCount | None = Field(
        None, description="The GPUs the kernel gets (required, but for `mig`: 1)."
    )
    mig: MigProfile | None = Field(
        None,
        description="A MIG profile (`1g.10gb`): the kernel gets one MIG instance of it instead "
        "of whole GPUs.",
    )
    name: str | None = Field(None, description="1-80 letters, digits, spaces, '.', '_' or '-'.")
    notebook: Annotated[str | None, Field(max_length=MAX_NOTEBOOK_CHARS)] = Field(
        None, description="The notebook the kernel runs"
    )

    @field_validator("notebook")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        return None if path is None else check_notebook_path(path)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str | None) -> str | None:
        if name is not None and not NAME.match(name):
            raise ValueError("name must be 1-80 letters, digits, spaces, '.', '_' or '-'")
        return name

    @model_validator(mode="after")
    def _one_slice(self) -> LeaseRequest:
        if self.mig is None and self.gpus is None:
            raise ValueError("gpus: the GPUs the kernel gets is required (or mig: a MIG profile)")
        check_one_slice(self.mig, self.gpus or 1)
        return self

    @property
    def size(self) -> int:
        """The GPUs it holds (a MIG slice counts as one device)."""
        return self.gpus or 1

    def submit_request(self, simulated: bool | None = None) -> SubmitRequest:
        """The job this lease is, as the scheduler keeps it."""
        return SubmitRequest(
            name=self.name,
            kind=JobKind.INTERACTIVE,
            mig=self.mig,
            min_gpus=self.size,
            max_gpus=self.size,
            requested_gpus=self.size,
            notebook=self.notebook,
            simulated=simulated,
        )


class KernelLeaseRequest(Strict):
    """The body of ``POST kernels/ID/lease`` (``%gpu_lease``): the GPUs the running kernel
    should have (0: give its lease back)."""

    gpus: Annotated[int, Field(ge=0, le=MAX_GPUS, strict=True)] = Field(
        description="GPUs the kernel should have (0: give its lease back)."
    )
    mig: MigProfile | None = Field(
        None, description="A MIG profile (`1g.10gb`): one MIG instance of it instead (gpus 1)."
    )

    @model_validator(mode="after")
    def _one_slice(self) -> KernelLeaseRequest:
        check_one_slice(self.mig, self.gpus)
        return self


class GroupWeightRequest(Strict):
    """``PUT admin/groups/{group}/weight``: a group's fair-share weight (default 1)."""

    weight: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False, strict=True)] = Field(
        description="The group's fair-share weight (groups never set weigh 1)."
    )


class PriorityChange(Strict):
    """The body of ``POST jobs/ID/priority`` (admins): the job's new priority, a number as
    ``POST jobs`` takes it (not a string or a boolean)."""

    priority: Annotated[Priority, Field(strict=True)]


class DrainChange(Strict):
    """The body of ``POST gpus/ID/drain`` (admins): true drains the GPU, false puts it back;
    ``force`` ends the jobs on it at once instead of asking them to move off."""

    drained: Annotated[bool, Field(strict=True)]
    force: Annotated[bool, Field(strict=True)] = Field(
        False, description="End the jobs on it at once instead of asking them to move off."
    )


class CancelRequest(Strict):
    """The body of ``POST jobs/ID/cancel`` (optional): ``force`` ends the job's processes at
    once instead of asking its sidecar to checkpoint and stop (its owner or an admin)."""

    force: Annotated[bool, Field(strict=True)] = Field(
        False, description="End its processes at once instead of asking for a checkpoint."
    )


class JobFilter(Strict):
    """The query of ``GET jobs`` and ``GET status``: which jobs to list (docs/api.md).

    Open jobs are always current; finished ones are listed by ``since`` (those that ended at
    or after it), ``all`` (every one the scheduler keeps), or, with neither, the most recent
    few of each user (``SchedulerService.recent_jobs``). ``state`` and ``user`` narrow any of
    these. Another user's jobs may be asked for by name only by admins and readers of every
    job (``Principal``): everyone else sees others' open jobs in the queue, as owner, size and
    state.
    """

    all: bool = Field(
        False,
        description="true: every job the scheduler keeps, however long ago it finished (not "
        "with `since`).",
    )
    state: Annotated[list[JobState], Field(min_length=1, max_length=len(JobState))] | None = Field(
        None, description="Only jobs in these states, comma-separated (e.g. `running,queued`)."
    )
    user: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        None,
        description="Only this user's jobs. Another user's: admins and readers of every job "
        "only (403 otherwise); everyone sees others' open jobs in the queue.",
    )
    since: Seconds | None = Field(
        None,
        description="Finished jobs that ended at or after this time (epoch seconds); open jobs "
        "are always listed.",
    )

    @model_validator(mode="after")
    def _one_window(self) -> JobFilter:
        if self.all and self.since is not None:
            raise ValueError(
                "'all' (every job) and 'since' (jobs finished since a time) do not go together: "
                "give one of them"
            )
        return self

    @classmethod
    def from_query(cls, get: Callable[[str], str | None]) -> JobFilter:
        """The filter of a query string (``get(name)``: a parameter's value or None), or
        BadRequest: ``all=true``, ``state=running,done``, ``user=NAME``, ``since=SECONDS``."""
        fields: dict = {}
        raw_all = get("all")
        if raw_all is not None:
            if raw_all.lower() not in ("", "1", "true", "0", "false"):
                raise BadRequest(f"all: expected true or false, got {raw_all[:40]!r}")
            fields["all"] = raw_all.lower() in ("", "1", "true")
        raw_state = get("state")
        if raw_state is not None:
            states = [s.strip() for s in raw_state.split(",") if s.strip()]
            unknown = [s for s in states if s not in JobState.values()]
            if unknown or not states:
                raise BadRequest(
                    f"state: unknown state {(unknown or [raw_state])[0][:40]!r}: choose among "
                    f"{', '.join(JobState.values())} (comma-separated)"
                )
            fields["state"] = sorted(set(states), key=JobState.values().index)
        if get("user") is not None:
            fields["user"] = get("user")
        raw_since = get("since")
        if raw_since is not None:
            try:
                fields["since"] = float(raw_since)
            except ValueError:
                raise BadRequest(
                    f"since: expected a time in epoch seconds, got {raw_since[:40]!r}"
                ) from None
        return parse(cls, fields, "job filter")

    def as_query(self) -> dict[str, str]:
        """The query string's parameters that say this filter (what ``from_query`` reads)."""
        query = {}
        if self.all:
            query["all"] = "true"
        if self.state:
            query["state"] = ",".join(s.value for s in self.state)
        if self.user is not None:
            query["user"] = self.user
        if self.since is not None:
            query["since"] = repr(self.since)
        return query


class KeepChange(Strict):
    """The body of ``POST jobs/ID/keep``: true keeps the finished job (its record and its
    files) past the retention (``SchedulerService.job_retention_days``); false lets it expire
    again."""

    kept: Annotated[bool, Field(strict=True)]


class Removed(Strict):
    """The body of ``POST launches/removed``: expired jobs of the caller whose directories
    their server has removed (``Launches.expired``)."""

    jobs: Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=10_000)]
