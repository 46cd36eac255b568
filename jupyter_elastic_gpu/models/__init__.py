"""Every request and response of the scheduler's API, typed and validated once.

The routes (``server/handlers.py``), the service, the CLI, the magic and the tests all use these
models, and ``server/openapi.yaml`` and the front end's types are generated from them
(``scheduler/port/generate.py``). States, actions, policies and kinds are the protocol's enums
(``elastic_gpu_sidecar.protocol``), shared with the sidecar.

Validation happens here, at the edge: a request that passes can be honoured as sent, and one
that does not gets one readable sentence back (``BadRequest``) before anything changes. Every
number is finite and bounded, every string and list has a length limit, so nothing a client
sends can break a later decision.
"""

from .base import describe, parse
from .heartbeat import ErrorInfo, Heartbeat, ProgressRecord
from .reason_figures import ReasonFigures
from .requests import (
    CancelRequest,
    DrainChange,
    GroupWeightRequest,
    JobFilter,
    KeepChange,
    KernelLeaseRequest,
    LaunchRequest,
    LeaseRequest,
    PriorityChange,
    Removed,
    SubmitRequest,
    SyntheticSpec,
)
from .responses import (
    ErrorBody,
    Event,
    EventKind,
    Events,
    Expired,
    Forgotten,
    GpuProcessView,
    Gpus,
    GpuView,
    GrantChange,
    GrantView,
    JobList,
    JobProgress,
    JobView,
    KernelLease,
    Launches,
    LeaseGrant,
    Logs,
    MigSliceView,
    ProgressList,
    PublicJob,
    Queue,
    QueueEntry,
    ShareGroup,
    Shares,
    ShareUser,
    Status,
    StatusGpu,
    StatusJob,
    StatusProgress,
    StatusSlice,
    Updates,
    Whoami,
)

__all__ = [
    "CancelRequest",
    "DrainChange",
    "ErrorBody",
    "ErrorInfo",
    "Event",
    "EventKind",
    "Events",
    "Expired",
    "Forgotten",
    "GpuProcessView",
    "GpuView",
    "Gpus",
    "GrantChange",
    "GrantView",
    "GroupWeightRequest",
    "Heartbeat",
    "JobFilter",
    "JobList",
    "JobProgress",
    "JobView",
    "KeepChange",
    "KernelLease",
    "KernelLeaseRequest",
    "LaunchRequest",
    "Launches",
    "LeaseGrant",
    "LeaseRequest",
    "Logs",
    "MigSliceView",
    "PriorityChange",
    "ProgressList",
    "ProgressRecord",
    "PublicJob",
    "Queue",
    "QueueEntry",
    "ReasonFigures",
    "Removed",
    "ShareGroup",
    "ShareUser",
    "Shares",
    "Status",
    "StatusGpu",
    "StatusJob",
    "StatusProgress",
    "StatusSlice",
    "SubmitRequest",
    "SyntheticSpec",
    "Updates",
    "Whoami",
    "describe",
    "parse",
]
