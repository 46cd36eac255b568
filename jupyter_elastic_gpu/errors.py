"""The errors a request can end in, each with its HTTP status: one error map for every route.

Raise the one that says what happened; the routes answer ``{"message", "reason"}`` with its
status (``server/handlers.py``), the CLI prints the message and the magic shows it. Messages
are one sentence that says what to do: they end up in a notebook cell or a terminal.
"""

from __future__ import annotations

from enum import IntEnum


class ElasticGPUError(Exception):
    """A request that could not be honoured; ``status`` and ``reason`` go to the client."""

    status = 500
    reason = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ElasticGPUError, ValueError):
    """A request that cannot be honoured as sent; nothing was changed."""

    status, reason = 400, "bad-request"


class Unauthorized(ElasticGPUError, PermissionError):
    """No valid credentials (a sidecar without its job's secret, an unknown token)."""

    status, reason = 401, "unauthorized"


class Forbidden(ElasticGPUError, PermissionError):
    """The caller may not see or change this job."""

    status, reason = 403, "forbidden"


class NotFound(ElasticGPUError, LookupError):
    status, reason = 404, "not-found"


class TooLarge(BadRequest):
    """A request body larger than its route takes; refused before it is parsed."""

    status, reason = 413, "too-large"


class TooManyJobs(ElasticGPUError):
    """The caller has as many open jobs as one user may have (``max_open_jobs``); nothing was
    changed."""

    status, reason = 429, "too-many-jobs"


class OverStorageBudget(ElasticGPUError):
    """The caller's jobs take as much of the scheduler's database as one user may
    (``max_stored_bytes``); nothing was changed."""

    status, reason = 507, "over-storage-budget"


class Unavailable(ElasticGPUError):
    """The scheduler (or the shared scheduler a server forwards to) cannot answer now."""

    status, reason = 503, "unavailable"


class StorageUnavailable(Unavailable):
    """The scheduler's database cannot be used now (locked, read-only, failing, damaged, or
    held by another scheduler); nothing was changed (``scheduler/storage/dbfile.py``)."""

    reason = "storage-unavailable"


class StorageFull(StorageUnavailable):
    """The disk holding the scheduler's database is full; nothing was changed."""

    status, reason = 507, "storage-full"


class Relayed(ElasticGPUError):
    """An error answered by the shared scheduler, passed on with its status and message."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason or "error"


class Conflict(ElasticGPUError):
    """A valid request this side cannot carry out as things stand (a job dir in a folder
    another user controls); nothing was changed."""

    status, reason = 409, "conflict"


class ReadByOwner(Conflict):
    """Job files (logs) are read by the job owner's side, never by the shared scheduler."""

    reason = "read-by-owner"


class ExitCode(IntEnum):
    """The exit status of every ``jupyter-elastic-gpu`` client command (``submit``, ``status``,
    ``logs``, ``cancel``, ``suspend``, ``resume``, ``keep``): the one place it is spelled. The
    CLI's ``--help`` and the README list it from ``EXIT_CODE_HELP``."""

    OK = 0
    REFUSED = 1
    USAGE = 2
    NOT_FOUND = 3
    FORBIDDEN = 4
    UNREACHABLE = 5
    INTERRUPTED = 130

    @classmethod
    def of_status(cls, status: int | None, reason: str | None = None) -> ExitCode:
        """The exit status for a request that ended in HTTP ``status`` (None: no answer) with
        ``reason``: a user's storage budget is a refusal, a full disk is not."""
        if reason == OverStorageBudget.reason:
            return cls.REFUSED
        if status is None or status in (Unavailable.status, StorageFull.status, 502, 504):
            return cls.UNREACHABLE
        if status in (Unauthorized.status, Forbidden.status):
            return cls.FORBIDDEN
        if status == NotFound.status:
            return cls.NOT_FOUND
        if status in (BadRequest.status, TooLarge.status, 422):
            return cls.USAGE
        return cls.REFUSED


#: What each exit status means, for ``--help`` and the docs.
EXIT_CODE_HELP = {
    ExitCode.OK: "success",
    ExitCode.REFUSED: "the scheduler refused (a conflict, an error on its side)",
    ExitCode.USAGE: "bad usage or input: nothing was done",
    ExitCode.NOT_FOUND: "no such job",
    ExitCode.FORBIDDEN: "forbidden: a wrong or missing token (ELASTIC_GPU_TOKEN), or not yours",
    ExitCode.UNREACHABLE: "no scheduler found, reachable or able to answer now",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_codes_text() -> str:
    """The exit statuses as the CLI's ``--help`` epilog lists them."""
    return "exit status:\n" + "\n".join(
        f"  {int(code):<3}  {meaning}" for code, meaning in EXIT_CODE_HELP.items()
    )
