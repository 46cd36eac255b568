"""Real faults for the fault suite, and the figures it records for benchmarks/audit.py.

Each fault is the real thing on a Linux machine, not a stand-in:

* a full disk: the database on a small tmpfs, filled up with a ballast file (``mount`` needs
  root: the tests that use it skip elsewhere, saying so); removing the ballast ends it;
* a failing disk: the server's file size limit (``RLIMIT_FSIZE``, set on the running server
  with ``prlimit``) lowered under the size of its WAL, so that SQLite's next write fails with
  EFBIG, which SQLite reports as a disk I/O error; raising the limit ends it;
* a locked database: another process holds SQLite's write lock (``BEGIN IMMEDIATE``) past the
  scheduler's busy timeout;
* a read-only database: a tmpfs remounted read-only before the server starts (Linux refuses to
  remount a file system read-only under a process that has a file open for writing, so a
  running server cannot be made to meet one; a database that cannot be written at start-up is
  what a user meets).

``Audit`` counts the answers a test got, the progress records acknowledged and lost, and the
jobs left stuck; with ``$ELASTIC_GPU_AUDIT_OUT`` set, each test appends them to that file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import sqlite3
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from needs import missing
from servers import call

AUDIT_ENV = "ELASTIC_GPU_AUDIT_OUT"


class Audit:
    """The figures of one test: answers by class, acknowledged progress, losses, stuck jobs."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.answers: Counter = Counter()
        self.unexplained: list[str] = []  # 5xx answers without a reason that says what to do
        self.acknowledged = self.lost = self.jobs = self.stuck = 0
        self.kills: list[str] = []  # what was SIGKILLed, and at which point of which job
        self.lock = threading.Lock()

    def answer(self, status: int, doc: dict | None = None, what: str = "") -> None:
        with self.lock:
            self.answers[f"{status // 100}xx"] += 1
            if status >= 500 and not (isinstance(doc, dict) and doc.get("reason")):
                self.unexplained.append(f"{what} {status}: {doc}")

    def call(self, method: str, url: str, token: str | None, body: dict | None = None):
        status, doc = call(method, url, token, body)
        self.answer(status, doc, f"{method} {url}")
        return status, doc

    def flush(self) -> None:
        out = os.environ.get(AUDIT_ENV)
        if not out:
            return
        doc = {
            "case": self.case,
            "answers": dict(self.answers),
            "unexplained": len(self.unexplained),
            "acknowledged": self.acknowledged,
            "lost": self.lost,
            "jobs": self.jobs,
            "stuck": self.stuck,
            "kills": self.kills,
        }
        with open(out, "a") as f:
            f.write(json.dumps(doc) + "\n")


# -- a small file system -----------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (skips the test where mounting is not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        missing(
            f"a small file system cannot be mounted: {done.stderr.strip()}",
            "mount -t tmpfs needs root",
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount(where: Path, mode: str) -> None:
    """``mode``: "ro" or "rw"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True)


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` up to the last byte; returns the ballast file."""
    ballast = folder / "ballast"
    chunk = b"\0" * 65536
    with open(ballast, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    with contextlib.suppress(OSError), open(ballast, "ab") as f:  # the last partial block
        while True:
            f.write(b"\0")
            f.flush()
    return ballast


# -- a failing disk ----------------------------------------------------------------------------


@contextlib.contextmanager
def file_size_limit(pid: int, limit: int) -> Iterator[None]:
    """The running process ``pid`` may not write past ``limit`` bytes into any file."""
    before = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, before[1]))
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            resource.prlimit(pid, resource.RLIMIT_FSIZE, before)


# -- a locked database -------------------------------------------------------------------------


@contextlib.contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """Another connection holds SQLite's write lock on ``db`` (as another process would)."""
    con = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        con.execute("BEGIN IMMEDIATE")
        yield
        con.execute("ROLLBACK")
    finally:
        con.close()


def rows(db: Path, query: str, args: tuple = ()) -> list[tuple]:
    """A read of the database as it is on disk (WAL included), beside the running server."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()
