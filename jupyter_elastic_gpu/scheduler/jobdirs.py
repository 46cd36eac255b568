"""Job directories: where they live, and the few files the scheduler's side writes or reads.

A job directory belongs to the job's owner: its sidecar and trainer write everything in it
(file names in ``elastic_gpu_sidecar.protocol``). Whoever launches the sidecar writes the
script and the passed variables first; the service reads back the logs, the final status and
the model path of the jobs it runs itself.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from elastic_gpu_sidecar import protocol as P

from ..models import Heartbeat

#: The most of a log the API reads back (the end of it).
MAX_LOG_BYTES = 256 * 1024


def safe_name(user: str) -> str:
    """A user name as a single path component."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in user).strip(".") or "user"


def job_root(pattern: str, user: str) -> Path:
    """The folder of a user's job dirs: ``pattern`` with ``{user}`` replaced; a pattern without
    it gets the user as a sub-folder. A ``~user`` that is no account here falls back to the
    temp dir."""
    safe = safe_name(user)
    if "{user}" not in pattern:
        return Path(pattern) / safe
    path = os.path.expanduser(pattern.replace("{user}", safe))
    if path.startswith("~"):
        return Path(tempfile.gettempdir()) / "jupyter-elastic-gpu" / "jobs" / safe
    return Path(path)


def write_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``path`` whole or not at all (temp file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def make_job_dir(job_dir: str) -> Path:
    path = Path(job_dir)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_script(job_dir: str, script: str) -> Path:
    """The training code, where the sidecar runs it from (idempotent)."""
    path = make_job_dir(job_dir) / P.SCRIPT
    write_file(path, script.encode())
    return path


def write_inputs(job_dir: str, inputs: dict[str, str]) -> None:
    """Keep the variables passed with a job (base64 pickles) in its dir, not in the database:
    they can be large, and only the trainer reads them."""
    write_file(make_job_dir(job_dir) / P.INPUTS, json.dumps(inputs).encode())


def tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log (all of its last 256 KiB when ``lines`` <= 0)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(size - MAX_LOG_BYTES, 0))
            data = f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:]) if lines > 0 else data


def logs(job_dir: str, lines: int) -> dict[str, str]:
    """The end of each of the job's logs, by name (``trainer``, ``sidecar``)."""
    return {name: tail(Path(job_dir) / file, lines) for name, file in P.LOGS.items()}


def final_report(job_dir: str) -> Heartbeat | None:
    """The sidecar's last status when it ended (done, failed, cancelled or suspended), read as
    a report; None when it has not ended or the file is unreadable."""
    try:
        status = Heartbeat.model_validate_json((Path(job_dir) / P.STATUS).read_bytes())
    except (OSError, ValueError):
        return None
    return status if status.state is not None and status.state.ended else None


def saved_model(job_dir: str) -> str | None:
    """The trained model the bootstrap saved, if it did."""
    path = Path(job_dir) / P.MODEL
    return str(path) if path.exists() else None
