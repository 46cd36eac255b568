"""The job directory: atomic JSON files, append-only logs, and tailing.

Every file another process reads while we write it is replaced atomically (temp file, fsync,
rename, fsync of the directory), so a reader sees either the old or the new document and a
crash never leaves a half-written one behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path

from . import protocol as P


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def save_atomically(dest: Path, write: Callable[[Path], object]) -> None:
    """Have ``write(tmp)`` make ``dest`` (a file, or a folder such as a Hugging Face model) at
    a hidden name beside it, make it durable, then put it in place: a reader finds the previous
    one or the whole new one, never half of one. The hidden name keeps ``dest``'s suffixes
    (``.keras``, ``.weights.h5``): the frameworks' savers go by them. An old folder is removed
    just before (a folder cannot replace another in one rename)."""
    dest = Path(dest)
    base, dot, suffixes = dest.name.partition(".")
    tmp = dest.with_name(f".{base}-tmp-{os.getpid()}-{time.monotonic_ns()}{dot}{suffixes}")
    try:
        write(tmp)
        files = [tmp] if tmp.is_file() else [p for p in tmp.rglob("*") if p.is_file()]
        for path in files:
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        if tmp.is_dir():
            for folder in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
                fsync_dir(folder)
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    fsync_dir(dest.parent)


def atomic_write_json(path: Path, obj: object) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode())


def read_json(path: Path, default: object = None) -> object:
    """Read a JSON document; ``default`` when it is missing, ValueError when it is corrupt."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def now_iso(t: float | None = None, ms: bool = False) -> str:
    t = time.time() if t is None else t
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    return f"{text}.{int(t * 1000) % 1000:03d}" if ms else text


class JobDir:
    """Paths of one job and the small helpers every process of the job shares."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).resolve()

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def create(self) -> None:
        (self.path / P.CHECKPOINTS).mkdir(parents=True, exist_ok=True)

    def log(self, message: str, *, echo: bool = False) -> None:
        """Append one human-readable event to sidecar.log (O_APPEND: safe across processes)."""
        line = f"{now_iso(ms=True)} {message}\n"
        with open(self.path / P.SIDECAR_LOG, "a", encoding="utf-8") as f:
            f.write(line)
        if echo:
            import sys

            sys.stderr.write(f"[elastic-gpu] {message}\n")
            sys.stderr.flush()

    def read_grant(self) -> P.Grant | None:
        """The desired grant, or None before the first one; ValueError when it is invalid.
        A job directory an older sidecar started may hold only ``P.LEGACY_GRANT``."""
        obj = read_json(self.path / P.GRANT)
        if obj is None:
            obj = read_json(self.path / P.LEGACY_GRANT)
        return None if obj is None else P.Grant.from_json(obj)

    def write_grant(self, grant: P.Grant) -> None:
        """Publish the desired grant; stamped with the time this side learned of it. Also
        to ``P.LEGACY_GRANT`` where that file is there: an older sidecar may be reading it."""
        if grant.requested_at is None:
            grant = P.Grant(grant.generation, list(grant.gpus), grant.action, time.time())
        atomic_write_json(self.path / P.GRANT, grant.to_json())
        if (self.path / P.LEGACY_GRANT).exists():
            atomic_write_json(self.path / P.LEGACY_GRANT, grant.to_json())

    def read_status(self) -> dict | None:
        obj = read_json(self.path / P.STATUS)
        return obj if isinstance(obj, dict) else None

    def claim(self):
        """Lock the job dir for this sidecar and record its pid; returns the open pid file,
        which holds the lock until it is closed. SystemExit when another sidecar runs it."""
        other = self.sidecar_pid()
        if other is not None and other != os.getpid():
            raise SystemExit(f"another sidecar (pid {other}) already runs this job dir")
        pidfile = open(self.path / P.PIDFILE, "a+")  # noqa: SIM115 - kept open: it is the lock
        try:
            fcntl.flock(pidfile, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pidfile.close()
            raise SystemExit("another sidecar already runs this job dir") from None
        pidfile.seek(0)
        pidfile.truncate()
        pidfile.write(f"{os.getpid()}\n")
        pidfile.flush()
        return pidfile

    def sidecar_pid(self) -> int | None:
        """The pid of a live sidecar of this job, or None (stale pid files are ignored)."""
        try:
            pid = int((self.path / P.PIDFILE).read_text().strip())
        except (OSError, ValueError):
            return None
        if not pid_alive(pid):
            return None
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists():
            try:
                if b"elastic_gpu_sidecar" not in cmdline.read_bytes():
                    return None  # the pid was reused by an unrelated process
            except OSError:
                return None
        return pid


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProgressTail:
    """Read the complete lines appended to progress.jsonl since the last call."""

    def __init__(self, path: Path, *, from_end: bool = False):
        self.path = Path(path)
        self.offset = 0
        if from_end:
            with contextlib.suppress(OSError):
                self.offset = self.path.stat().st_size

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        records = []
        for line in data[: end + 1].splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict):
                    records.append(rec)
        return records


LIVE_FORMAT = "<qqd"  # generation, global step, wall time of that step
LIVE_SIZE = struct.calcsize(LIVE_FORMAT)


def read_live(path: Path) -> tuple[int, int, float] | None:
    """The trainer's last completed step, exact even if it was SIGKILLed a moment later."""
    try:
        with open(path, "rb") as f:
            data = f.read(LIVE_SIZE)
    except OSError:
        return None
    if len(data) != LIVE_SIZE:
        return None
    return struct.unpack(LIVE_FORMAT, data)
