"""Every request and response of the scheduler's API, typed and validated once.

The routes (``server/handlers.py``), the service, the CLI, the magic and the tests all use these
models, and ``server/openapi.yaml`` describes them (``tests/scheduler/test_openapi.py`` checks
that the two agree). States, actions, policies and kinds are the protocol's enums
(``elastic_gpu_sidecar.protocol``), shared with the sidecar.

Validation happens here, at the edge: a request that passes can be honoured as sent, and one
that does not gets one readable sentence back (``BadRequest``) before anything changes. Every
number is finite and bounded, every string and list has a length limit, so nothing a client
sends can break a later decision.
"""

from .base import describe, parse
from .requests import (
    DrainChange,
    ErrorInfo,
    GroupWeightRequest,
    Heartbeat,
    KernelLeaseRequest,
    LaunchRequest,
    LeaseRequest,
    PriorityChange,
    ProgressRecord,
    SubmitRequest,
    SyntheticSpec,
)
from .responses import (
    ErrorBody,
    Event,
    EventKind,
    Events,
    GpuProcessView,
    Gpus,
    GpuView,
    JobList,
    JobProgress,
    JobView,
    KernelLease,
    Launches,
    LeaseChange,
    LeaseGrant,
    LeaseView,
    Logs,
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
    Updates,
    Whoami,
)

__all__ = [
    "DrainChange",
    "ErrorBody",
    "ErrorInfo",
    "Event",
    "EventKind",
    "Events",
    "GpuProcessView",
    "GpuView",
    "Gpus",
    "GroupWeightRequest",
    "Heartbeat",
    "JobList",
    "JobProgress",
    "JobView",
    "KernelLease",
    "KernelLeaseRequest",
    "LaunchRequest",
    "Launches",
    "LeaseChange",
    "LeaseGrant",
    "LeaseRequest",
    "LeaseView",
    "Logs",
    "PriorityChange",
    "ProgressList",
    "ProgressRecord",
    "PublicJob",
    "Queue",
    "QueueEntry",
    "ShareGroup",
    "ShareUser",
    "Shares",
    "Status",
    "StatusGpu",
    "StatusJob",
    "StatusProgress",
    "SubmitRequest",
    "SyntheticSpec",
    "Updates",
    "Whoami",
    "describe",
    "parse",
]
