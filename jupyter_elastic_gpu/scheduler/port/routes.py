"""The route table: every operation of the REST API, spelled once.

Each ``Route`` says its HTTP method, its path under the API root (path parameters in braces),
the ``Backend`` operation it calls (whose declared access and models it takes from
``backend.OPERATIONS``), the model of its query, the status of its success and the errors it
may answer, and the words the API document shows. The server's handler table, the relaying
``RemoteBackend``, the REST client (``notebook/client.py``) and the OpenAPI document
(``openapi.py``) are made from it or checked against it, so a new route is added here and in
its handler.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from elastic_gpu_sidecar.protocol import MAX_GPU_ID_CHARS
from pydantic import BaseModel

from ...models import JobFilter, KernelLease, KernelLeaseRequest
from ...models.queries import LogsQuery, ProgressQuery, UpdatesQuery
from .backend import OPERATIONS, Access, signature

#: Where the API lives under a server's base_url (the embedded and the shared scheduler alike).
API_PREFIX = "elastic-gpu/api"
#: The websocket's path under the API root (not an HTTP operation: ``server/updates_socket.py``).
SOCKET_PATH = "ws"


@dataclass(frozen=True)
class PathParameter:
    """A path parameter: what the route matches (a regular expression) and what it is.
    ``checked``: the pattern is the whole check (else the backend checks further)."""

    pattern: str
    description: str
    checked: bool = True


PATH_PARAMETERS: Mapping[str, PathParameter] = MappingProxyType(
    {
        "job_id": PathParameter(
            r"[A-Za-z0-9_\-]{1,64}", "A job id as returned by `POST jobs` (e.g. `j-7f3a09c1d2`)."
        ),
        "gpu_id": PathParameter(
            rf"[A-Za-z0-9_\-:.]{{1,{MAX_GPU_ID_CHARS}}}",
            "A GPU id as `GET gpus` lists it (e.g. `0`).",
        ),
        "kernel_id": PathParameter(
            r"[A-Za-z0-9\-]{1,64}", "A kernel id of this Jupyter server (`GET /api/kernels`)."
        ),
        "group": PathParameter(
            r"[^/]{1,1024}",
            "A group name (JupyterHub's), 1 to 255 printable characters, URL-encoded.",
            checked=False,
        ),
    }
)
_PARAMETER = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Route:
    """One operation of the API. ``name`` is the ``Backend`` operation it calls (or, for a
    route the user's own server answers itself, its own name, with its models given here)."""

    name: str
    method: str
    path: str
    status: int
    answer: str  # what the success answer holds
    tag: str
    summary: str
    errors: tuple[int, ...]
    description: str = ""
    query: type[BaseModel] | None = None
    #: Errors this route describes in its own words (the others: ``openapi.ERRORS``).
    notes: Mapping[int, str] = field(default_factory=dict)
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    access: Access = Access.CHANGE

    def __post_init__(self) -> None:
        op = OPERATIONS.get(self.name)
        if op is not None:  # a Backend operation: its models and access as it declares them
            object.__setattr__(self, "request", op.request)
            object.__setattr__(self, "response", op.response)
            object.__setattr__(self, "access", op.access)
        elif self.response is None:
            raise ValueError(f"route {self.name} calls no Backend operation and has no models")

    @property
    def parameters(self) -> list[str]:
        """The path parameters, in the order of the path."""
        return _PARAMETER.findall(self.path)

    @property
    def body_optional(self) -> bool:
        """The body may be left out (its Backend operation defaults it)."""
        if self.name not in OPERATIONS:
            return False
        body = signature(self.name).parameters.get("body")
        return body is not None and body.default is None

    def url(self, **params: Any) -> str:
        """The path with each parameter filled in, encoded as one segment."""
        return self.path.format(**{k: quote(str(v), safe="") for k, v in params.items()})

    def pattern(self) -> str:
        """The path as a regular expression with a named group per parameter (tornado's)."""
        return _PARAMETER.sub(
            lambda m: f"(?P<{m.group(1)}>{PATH_PARAMETERS[m.group(1)].pattern})", self.path
        )


READ = (401, 403, 413)
WRITE = (400, 401, 403, 413, 503, 507)
JOB = (401, 403, 404, 413)
JOB_WRITE = (400, 401, 403, 404, 413, 503, 507)

ROUTE_TABLE: tuple[Route, ...] = (
    Route(
        "whoami", "GET", "whoami", 200, "The caller.", "cluster",
        "Who the credentials belong to, and which kind of scheduler answers.", READ,
    ),
    Route(
        "gpus", "GET", "gpus", 200, "Every GPU of the box.", "cluster",
        "The GPU inventory, with who holds each GPU and processes the scheduler did not start.",
        READ,
    ),
    Route(
        "jobs", "GET", "jobs", 200, "The jobs.", "jobs",
        "Open jobs and recently finished ones, oldest first; the caller's own in full, other "
        "users' as owner, size and state.",
        (400, *READ),
        description="""\
Without `all` or `since`, finished jobs are listed up to
`c.SchedulerService.recent_jobs` per user (default 50), the most recently finished; a
job finished while nobody looked (the lab closed) is listed like any other. Older ones
stay in the database (until the retention, `c.SchedulerService.job_retention_days`)
and answer `GET jobs/{job_id}`; `hidden` counts those left out. `all`, `state`, `user`
and `since` choose otherwise (the CLI's `status` and `%elastic_jobs` send them).
""",
        query=JobFilter,
    ),
    Route(
        "submit", "POST", "jobs", 201, "The job as stored.", "jobs",
        "Submit a job; it is queued and started when the policy grants it GPUs.",
        (400, 401, 403, 409, 413, 429, 503, 507),
        notes={
            409: "The job's directory cannot be written safely (`reason: conflict`): it exists "
            "already, or a folder on the way belongs to another user or is writable by others "
            "(docs/security.md); the message says which and what to do. Nothing was changed (a "
            "user's server cancels the job the shared scheduler had accepted).",
            507: "The disk holding the scheduler's database is full (`reason: storage-full`), "
            "or the caller's jobs take as much of it as one user may (`reason: "
            "over-storage-budget`: `c.SchedulerService.max_stored_bytes`, the message gives "
            "the figures); nothing was changed.",
        },
    ),
    Route(
        "open_lease", "POST", "leases", 201, "The lease, and its secret (shown this once).",
        "jobs",
        "Lease GPUs for a notebook kernel (docs/interactive-gpus.md): a job of kind "
        "`interactive` of exactly `gpus` GPUs, or of one MIG instance (`mig`).",
        (400, 401, 403, 409, 413, 503, 507),
        description="""\
Asked by a kernel's provisioner as the kernel's user. The lease is admitted like a
non-elastic job of its size (queued with its reason and estimated start, under the
per-user cap and fair share) and is never resized or checkpointed. Its provisioner
heartbeats to `heartbeat_url` with `secret` from the start (`POST sidecar/{job_id}/heartbeat`):
the answer has no GPUs while it waits, its GPUs once they are free, and `cancel` when it
is over (cancelled, released from an idle kernel). A provisioner silent past the
heartbeat timeout ends it.
""",
        notes={
            409: "Past the most GPUs (or MIG slices) one user's kernels may hold or wait for "
            "(`c.InteractiveLeases.user_gpu_cap`), or a scheduler over several servers, which "
            "leases no GPUs to kernels yet.",
        },
    ),
    Route(
        "lease_kernel", "POST", "kernels/{kernel_id}/lease", 202,
        "The kernel restarts with these GPUs.", "jobs",
        "Give one of this Jupyter server's running kernels a lease of `gpus` GPUs (0: none) "
        "and restart it with it (`%gpu_lease`).",
        (400, 401, 403, 404, 409, 413, 503),
        description="""\
Served by a user's own Jupyter server (where its kernels run). The lease is asked for
and waited on first; only once it is held is the kernel restarted (after the cell
that asked finishes). When it cannot be had the kernel is left as it is.
""",
        notes={
            409: "No lease: the kernel was not started by the elastic-gpu provisioner (`reason: "
            "conflict`), or its lease was not admitted within the admission timeout (`reason: "
            "lease-not-granted`; the message gives the reason and estimated start). The kernel "
            "is unchanged."
        },
        request=KernelLeaseRequest,
        response=KernelLease,
    ),
    Route(
        "job", "GET", "jobs/{job_id}", 200, "The job.", "jobs",
        "One job in full (403 for another user's job unless the caller is an admin).", JOB,
    ),
    Route(
        "cancel", "POST", "jobs/{job_id}/cancel", 202, "The job, `cancelled` or `stopping`.",
        "jobs",
        "Cancel a job. A queued job is cancelled at once; a running one checkpoints and stops.",
        JOB_WRITE,
        description="""\
The body is optional. `{"force": true}` ends a running job's processes at once instead
of waiting for its checkpoint (a sidecar that does not stop within its release deadline
is ended so anyway). Cancelling a finished job returns it unchanged.
""",
    ),
    Route(
        "logs", "GET", "jobs/{job_id}/logs", 200,
        "Both logs (empty strings before the sidecar started).", "jobs",
        "The last lines of the trainer's and the sidecar's logs.",
        (400, 401, 403, 404, 409, 413),
        query=LogsQuery,
        notes={
            409: "Shared scheduler only (`reason: read-by-owner`): it never opens job files; "
            "the logs are read as their owner, through the owner's own Jupyter server (which "
            "answers this route) or `jupyter elastic-gpu logs`."
        },
    ),
    Route(
        "events", "GET", "jobs/{job_id}/events", 200, "The event log of the job.", "jobs",
        "Every state change of the job with its reason, oldest first (the last 1000).",
        (*JOB, 503),
    ),
    Route(
        "progress", "GET", "jobs/{job_id}/progress", 200,
        "Progress records as the trainer wrote them.", "jobs",
        "The progress records the sidecar reported, oldest first (bounded history).",
        (400, *JOB, 503),
        query=ProgressQuery,
    ),
    Route(
        "queue", "GET", "queue", 200, "The queue.", "cluster",
        "Waiting and running jobs in priority order, each with the reason for its place.", READ,
    ),
    Route(
        "status", "GET", "status", 200, "The status document.", "cluster",
        "GPUs with their holders and the open jobs (what `status --json` prints).",
        (400, *READ),
        description="""\
The jobs are chosen as `GET jobs` chooses them (the same parameters), among the open
jobs and the caller's own finished ones (an admin's: everyone's).
""",
        query=JobFilter,
    ),
    Route(
        "wait_updates", "GET", "updates", 200,
        "The current version (equal to `since` when the timeout passed first).", "cluster",
        "Long poll; answers as soon as the state version passes `since`, or at the timeout.",
        (400, *READ),
        query=UpdatesQuery,
    ),
    Route(
        "launches", "GET", "launches", 200,
        "Launches to carry out, and job directories to remove.", "sidecar",
        "Shared mode: the caller's jobs whose sidecar the caller's own server must start.",
        READ,
        description="""\
Each user's Jupyter server polls this on the daemon and starts the listed sidecars, so
that trainers run as the user who submitted them. An entry carries the job's secret and
is listed until its sidecar's first heartbeat. The embedded scheduler starts sidecars
itself and always answers empty lists. `expired` lists the caller's jobs past the
retention whose directories the caller's server removes (the shared scheduler opens no
job file), then says so with `POST launches/removed`. `ended` lists the caller's jobs
whose claim on GPUs was voided (a release deadline passed, or a forced cancel): the
caller's server ends every process it started for them (docs/security.md).
""",
    ),
    Route(
        "removed", "POST", "launches/removed", 200, "The jobs named.", "sidecar",
        "Shared mode: the caller's server removed these expired jobs' directories.", WRITE,
        description="The listed entries of `GET launches` `expired` that belong to the caller "
        "are no longer listed.",
    ),
    Route(
        "heartbeat", "POST", "sidecar/{job_id}/heartbeat", 200, "The desired grant.", "sidecar",
        "A sidecar reports its state and progress; the answer is the grant the scheduler wants.",
        (400, 401, 404, 413, 503, 507),
        description="""\
Level-triggered (docs/sidecar.md, "Heartbeat protocol"): the sidecar posts every
`heartbeat_interval` seconds and a final time when its job ends; when the answered
grant has a greater generation than the one it runs, or another action, it reconciles
toward it. Authenticated with the job's secret only: Jupyter tokens, cookies and XSRF
do not apply. On a user's server in shared mode this route answers 404 (sidecars
heartbeat to the daemon).
""",
        notes={401: "No `Authorization: Bearer` header, an unknown job, or the wrong secret."},
    ),
    Route(
        "suspend", "POST", "jobs/{job_id}/suspend", 202,
        "The job, `held`; `stopping` while it checkpoints, then `queued`.", "admin",
        "Suspend a job (its owner or an admin) until it is resumed.",
        (401, 403, 404, 409, 413, 503, 507),
        description="""\
A running job checkpoints at its next step and stops; a queued one simply waits. Either
way it is `held`: it gets no GPUs until `POST jobs/{job_id}/resume`, across restarts of
the scheduler, and its reason says who suspended it. The body is ignored. Suspending a
held job returns it unchanged. A job an admin suspended is resumed by an admin only.
""",
    ),
    Route(
        "resume", "POST", "jobs/{job_id}/resume", 200, "The job, no longer `held`.", "admin",
        "Lift a suspension; the job waits in the queue again and resumes from its checkpoint.",
        (401, 403, 404, 413, 503, 507),
        description="""\
Its owner or an admin; only an admin when an admin suspended it. The body is ignored. A
job that is not held is returned unchanged.
""",
    ),
    Route(
        "set_priority", "POST", "jobs/{job_id}/priority", 200, "The job with its new priority.",
        "admin", "Change an open job's priority (admins); the scheduler decides again at once.",
        (400, 401, 403, 404, 409, 413, 503, 507),
        description="The job's event log records who changed it, from what to what.",
    ),
    Route(
        "keep", "POST", "jobs/{job_id}/keep", 200, "The job, with `kept` as asked.", "jobs",
        "Keep a job past the retention (its owner or an admin), or let it expire again.",
        JOB_WRITE,
        description="""\
Finished jobs are removed, with their job directories (logs, checkpoints, the saved
model), `c.SchedulerService.job_retention_days` after they ended (default 30; 0 keeps
every job). A kept job never is. The job's event log records who changed it.
""",
    ),
    Route(
        "drain", "POST", "gpus/{gpu_id}/drain", 200, "The GPU.", "admin",
        "Drain a GPU for maintenance, or put it back (admins).", JOB_WRITE,
        description="""\
A drained GPU is given to no job, and jobs on it move off through the usual resize
(to other GPUs, or smaller, or suspended when nothing else is free). It stays drained
across restarts of the scheduler, until `{"drained": false}`. An unknown id answers
404 with the server's GPU ids.
""",
    ),
    Route(
        "shares", "GET", "admin/shares", 200, "The fair-share report.", "admin",
        "Fair share between users and groups (admins and readers of every job).", (*READ, 503),
        description="""\
Each user's weight (the largest of their groups' weights, 1 without any), the share of
the GPUs due to them now, the GPUs they hold, and their usage (GPU-seconds decayed with
`half_life_s`) against their share: `ratio` 3.0 means three times their share. The
same per group. docs/policies.md (Fair share) explains the rules.
""",
    ),
    Route(
        "set_group_weight", "PUT", "admin/groups/{group}/weight", 200,
        "The fair-share report after the change.", "admin",
        "Set a group's fair-share weight (admins only); kept across restarts.", WRITE,
        description="""\
Overrides `SchedulerService.group_weights` for this group; the next decision uses it.
Groups never set weigh 1.
""",
    ),
)  # fmt: skip

#: Every route by its name.
ROUTES_BY_NAME: Mapping[str, Route] = MappingProxyType({r.name: r for r in ROUTE_TABLE})


def route(name: str) -> Route:
    """The route named ``name`` (a ``Backend`` operation's name, or a server-only route's)."""
    return ROUTES_BY_NAME[name]


def paths() -> dict[str, list[Route]]:
    """The routes by path, in the table's order."""
    found: dict[str, list[Route]] = {}
    for r in ROUTE_TABLE:
        found.setdefault(r.path, []).append(r)
    return found
