"""The scheduler's database as a file: who holds it, who may read it, what its faults mean.

* One scheduler per database: ``DatabaseLock`` holds an exclusive ``flock`` on ``PATH.lock``
  for the scheduler's life (the kernel drops it when the process ends, SIGKILL included). A
  second server or daemon on the same path is refused, with the pid holding it, instead of
  both overwriting each other's writes.
* The file, its WAL and SHM are mode 0600 (SQLite gives the WAL and SHM the database's mode),
  and its folder 0700 when it is created here: job records hold users' code and the hashes of
  job secrets.
* ``storage_error`` turns an ``sqlite3.Error`` into the answer a client gets: 507 when the disk
  is full, 503 otherwise, each saying what happened and what to do. Nothing a failed write
  touched is kept (``store.Store.transaction``, ``atomic.atomically``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import stat
from typing import Any

from ...errors import StorageFull, StorageUnavailable

LOCK_SUFFIX = ".lock"
#: The files SQLite keeps beside a database in WAL mode.
COMPANIONS = ("-wal", "-shm")


def lock_path(db_path: str) -> str:
    return db_path + LOCK_SUFFIX


class DatabaseLock:
    """An exclusive ``flock`` on ``PATH.lock``, which holds the holder's pid."""

    def __init__(self, path: str, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def acquire(cls, db_path: str) -> DatabaseLock:
        path = lock_path(db_path)
        try:
            # os.open's descriptors are not inherited: sidecars started later (which outlive
            # the server) never hold the lock.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise os_error(e, db_path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise StorageUnavailable(in_use_message(db_path, holder(db_path))) from None
            raise os_error(e, db_path) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _restrict(path)
        return cls(path, fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the lock goes with the descriptor; the file stays (no race)
            self.fd = -1


def holder(db_path: str) -> int | None:
    """The pid of the scheduler holding ``db_path`` (0 when it cannot be told), or None."""
    try:
        fd = os.open(lock_path(db_path), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            with contextlib.suppress(OSError, ValueError):
                return int(os.read(fd, 64).split()[0])
            return 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def in_use_message(db_path: str, pid: int | None) -> str:
    who = f"pid {pid}" if pid else "a process that did not say its pid"
    return (
        f"the scheduler database {db_path} is in use by another scheduler ({who}, holding "
        f"{lock_path(db_path)}): two schedulers on one database overwrite each other's writes, "
        "so this one does not start; stop the other one, or give this one a database of its "
        "own (c.ElasticGPUApp.db_path, or --db for `jupyter elastic-gpu scheduler`)"
    )


def prepare(db_path: str) -> None:
    """Create the folder (0700) and the database file (0600) if missing; make the file and
    its WAL and SHM 0600. StorageUnavailable when the file cannot be written."""
    folder = os.path.dirname(os.path.abspath(db_path))
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)  # makedirs' mode is filtered by the umask
        os.close(os.open(db_path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as e:
        raise os_error(e, db_path) from None
    for suffix in ("", *COMPANIONS):
        _restrict(db_path + suffix)


def _restrict(path: str) -> None:
    """Mode 0600 for a file of this account that others could read (an older version made
    them 0644); a file of another account is left alone."""
    with contextlib.suppress(OSError):
        st = os.stat(path)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, 0o600)


def os_error(e: OSError, db_path: str) -> StorageUnavailable:
    """An error of the file system under the database (before SQLite is involved)."""
    if e.errno == errno.ENOSPC:
        return _full(db_path, e.strerror)
    return StorageUnavailable(
        f"the scheduler database {db_path} cannot be opened for writing ({e.strerror})"
        f"{_why_not_writable(db_path)}; nothing was changed"
    )


def storage_error(e: sqlite3.Error, db_path: str, busy_timeout_s: float) -> StorageUnavailable:
    """The answer for an SQLite error: what happened to the database, and what to do."""
    name = getattr(e, "sqlite_errorname", "") or ""  # Python >= 3.11; the text otherwise
    text = " ".join(str(e).split())
    said = f"(SQLite: {text})"
    where = f"the scheduler database {db_path}"
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return _full(db_path, text)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "is locked" in text:
        return StorageUnavailable(
            f"{where} stayed locked by another process for longer than the busy timeout "
            f"({busy_timeout_s:g} s) {said}: find it with `fuser {db_path}` and end its "
            "transaction; nothing was changed, retry"
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return StorageUnavailable(
            f"{where} cannot be written {said}{_why_not_writable(db_path)}: make it and its "
            "folder writable by this account again; nothing was changed, and the scheduler "
            "carries on by itself once it can write"
        )
    if name.startswith("SQLITE_IOERR") or "I/O error" in text:
        return StorageUnavailable(
            f"the disk holding {where} failed a read or a write {said}: check the disk "
            "(`dmesg`), its free space and the server's file size limit (`ulimit -f`); nothing "
            "was changed, and the scheduler retries by itself"
        )
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or (
        "malformed" in text or "not a database" in text
    ):
        return StorageUnavailable(
            f"{where} is damaged {said}: with this scheduler stopped, run `jupyter elastic-gpu "
            f"doctor --db {db_path} --repair` (it keeps a copy of the damaged file and recovers "
            "what SQLite can still read)"
        )
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return StorageUnavailable(
            f"{where} cannot be opened {said}{_why_not_writable(db_path)}: SQLite needs to "
            "write the file and to create its -wal and -shm files beside it"
        )
    return StorageUnavailable(f"{where} answered an error {said}: see the server's log")


def _full(db_path: str, text: str) -> StorageFull:
    return StorageFull(
        f"the disk holding the scheduler database {db_path} is full ({text}): free space on "
        "it; nothing was changed, and the scheduler carries on by itself once there is room"
    )


def _why_not_writable(db_path: str) -> str:
    folder = os.path.dirname(os.path.abspath(db_path))
    with contextlib.suppress(OSError):
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"; {folder} is on a read-only file system"
    if os.path.exists(db_path) and not os.access(db_path, os.W_OK):
        return "; the file is not writable by this account"
    if not os.access(folder, os.W_OK):
        return f"; {folder} is not writable by this account"
    return ""


class FaultLog:
    """One line in the log when the database starts failing (or fails another way) and one
    when it answers again, rather than a traceback every round of the scheduler's loop."""

    def __init__(self, log: Any) -> None:
        self.log, self.last = log, None

    def failed(self, e: StorageUnavailable) -> None:
        if e.message != self.last:
            self.log.error("elastic-gpu: the scheduler's round failed: %s", e.message)
        self.last = e.message

    def answered(self) -> None:
        if self.last is not None:
            self.log.warning("elastic-gpu: the scheduler database answers again")
            self.last = None
