"""Job directories: where they live, and the few files the scheduler's side writes or reads.

A job directory belongs to the job's owner: its sidecar and trainer write everything in it
(file names in ``elastic_gpu_sidecar.protocol``). Whoever launches the sidecar writes the
script and the passed variables first; the service reads back the logs, the final status and
the model path of the jobs it runs itself. All of it happens on the owner's side (the
personal server, or the user's own server in shared mode), through ``ownfiles``: no link
followed, no folder another user controls; the shared scheduler opens none of these files.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elastic_gpu_sidecar import protocol as P

from ...errors import Conflict, Forbidden, ReadByOwner
from ...models import Heartbeat
from . import ownfiles

#: The most of a log the API reads back (the end of it).
MAX_LOG_BYTES = ownfiles.MAX_LOG_BYTES
#: The most of ``status.json`` read back.
MAX_STATUS_BYTES = 1024 * 1024


def safe_name(user: str) -> str:
    """A user name as a single path component."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in user).strip(".") or "user"


def job_root(pattern: str, user: str) -> Path:
    """The folder of a user's job dirs: ``pattern`` with ``{user}`` replaced; a pattern without
    it gets the user as a sub-folder. A ``~user`` that is no account here falls back to a
    folder of that user's own in the temp dir (``jupyter-elastic-gpu-USER/jobs``: not a shared
    parent another user could own first)."""
    safe = safe_name(user)
    if "{user}" not in pattern:
        return Path(pattern) / safe
    path = os.path.expanduser(pattern.replace("{user}", safe))
    if path.startswith("~"):
        return Path(tempfile.gettempdir()) / f"jupyter-elastic-gpu-{safe}" / "jobs"
    return Path(path)


@contextlib.contextmanager
def job_dir_fd(job_dir: str, fresh: bool = False) -> Iterator[int]:
    """The job's directory, opened for writing its files: created here (with the folders
    above it, mode 0700) and checked on the way (``ownfiles.open_folder``). ``fresh``: a new
    job's directory, which must not exist yet. ``Conflict`` (409) says what is wrong."""
    try:
        fd = ownfiles.open_folder(job_dir, create=True, fresh=fresh)
    except ownfiles.UnsafePath as e:
        raise Conflict(f"job dir {job_dir}: {e}") from None
    try:
        yield fd
    finally:
        os.close(fd)


def write_script(job_dir: str, script: str) -> Path:
    """The training code, where the sidecar runs it from (idempotent)."""
    with job_dir_fd(job_dir) as fd:
        ownfiles.write_file(fd, P.SCRIPT, script.encode())
    return Path(job_dir) / P.SCRIPT


def write_inputs(job_dir: str, inputs: dict[str, str]) -> None:
    """Keep the variables passed with a new job (base64 pickles) in its dir, not in the
    database: they can be large, and only the trainer reads them. The dir is created here:
    one that exists already is refused (``Conflict``)."""
    with job_dir_fd(job_dir, fresh=True) as fd:
        ownfiles.write_file(fd, P.INPUTS, json.dumps(inputs).encode())


def logs(job_dir: str, lines: int) -> dict[str, str]:
    """The end of each of the job's logs, by name (``trainer``, ``sidecar``), read with this
    process's rights and never through a link; ``Forbidden`` when they are not readable."""
    try:
        return ownfiles.read_logs(job_dir, lines, P.LOGS)
    except PermissionError:
        raise Forbidden(
            f"cannot read the logs in {job_dir} as {_account()}: a job's logs are read by its "
            "owner's side (their own Jupyter server, or `jupyter elastic-gpu logs` run as them)"
        ) from None


def _account() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def job_logs(job: Any, lines: int, reads_job_dirs: bool) -> dict[str, str]:
    """``logs`` of ``job`` where this side may open job files; the shared scheduler (which
    starts no processes) never does with its own rights: ``ReadByOwner`` (docs/security.md)."""
    if not reads_job_dirs:
        raise ReadByOwner(
            f"the shared scheduler does not read job files: the logs of {job.id} are read as "
            f"their owner {job.user}, through {job.user}'s own Jupyter server or `jupyter "
            f"elastic-gpu logs {job.id}` run as {job.user}"
        )
    return logs(job.job_dir, lines)


def final_report(job_dir: str) -> Heartbeat | None:
    """The sidecar's last status when it ended (done, failed, cancelled or suspended), read as
    a report; None when it has not ended or the file is unreadable (or a link)."""
    try:
        raw = ownfiles.read_regular(job_dir, P.STATUS, MAX_STATUS_BYTES)
        status = Heartbeat.model_validate_json(raw or b"")
    except (OSError, ValueError):
        return None
    return status if status.state is not None and status.state.ended else None


def saved_model(job_dir: str) -> str | None:
    """The trained model the job's adapter saved, if it did (``P.MODELS``: a file, or the
    folder a Hugging Face model is; never a link)."""
    for name in P.MODELS:
        path = Path(job_dir) / name
        if ownfiles.is_regular(path) or ownfiles.is_folder(path):
            return str(path)
    return None


def remove_job_dir(job_dir: str, job_id: str) -> bool:
    """Remove an expired job's directory and everything in it, with this process's rights, as
    every job file is handled here: the folders above it checked (``ownfiles.open_folder``),
    nothing followed through a link (``shutil.rmtree`` works on descriptors; a link planted in
    the directory's place is removed, not what it points to). Only a directory named after
    its job is removed. False when it was gone already; ``Conflict`` when it is not this side's
    to remove."""
    path = Path(job_dir)
    if path.name != job_id or not path.is_absolute():
        raise Conflict(f"{job_dir} is not the directory of job {job_id}: not removed")
    try:
        parent = ownfiles.open_folder(path.parent)
    except FileNotFoundError:
        return False
    except ownfiles.UnsafePath as e:
        raise Conflict(f"job dir {job_dir}: {e}") from None
    try:
        try:
            st = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path.name, dir_fd=parent)
        else:
            os.unlink(path.name, dir_fd=parent)
        return True
    finally:
        os.close(parent)
