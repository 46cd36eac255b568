"""What a sidecar says about a job that ended: the error a user reads, and ``result.json``.

Both are read by people (the job card, ``status``, the CLI) long after the processes are gone, so
each error says what happened and where to look.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from . import protocol as P
from .jobdir import JobDir, read_json
from .procs import describe_exit


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log ("" when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def trainer_error(job: JobDir, rc: int) -> dict:
    """The trainer's own error report when it wrote one, else a crash described from outside."""
    try:
        err = read_json(job / P.TRAINER_ERROR)
    except ValueError:
        err = None
    if isinstance(err, dict) and rc in (P.TRAINER_USER_ERROR, P.TRAINER_INFRA_ERROR):
        return {k: err.get(k) for k in ("type", "message", "traceback", "hint")}
    return {
        "type": "TrainerCrashed",
        "message": f"the trainer process ended unexpectedly ({describe_exit(rc)})",
        "traceback": log_tail(job / P.TRAINER_LOG),
        "hint": f"see {P.TRAINER_LOG}; a process killed by SIGKILL is often out of host memory",
    }


def result_document(
    state: P.SidecarState,
    exit_code: int,
    model_path: str | None,
    progress: dict | None,
    restarts: int,
    resizes: int,
    error: dict | None,
    started_at: float,
) -> dict:
    """``result.json``: written once, when the job is done, failed or cancelled."""
    prog = progress or {}
    now = time.time()
    return {
        "state": state.value,
        "exit_code": exit_code,
        "model_path": model_path,
        "global_step": prog.get("global_step"),
        "samples": prog.get("samples"),
        "loss": prog.get("loss"),
        "metrics": prog.get("metrics"),
        "restarts": restarts,
        "resizes": resizes,
        "error": error,
        "elapsed_s": round(now - started_at, 3),
        "finished_at": now,
    }
