"""Start and end child processes so that none outlives the sidecar.

A trainer holding GPUs after its sidecar is gone is the worst failure of a shared box: the
child asks the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``), runs in its
own process group so the whole group can be killed, and the sidecar kills the group on every
normal exit path too, then waits until no process of the group is left: a SIGKILLed process
still holds its memory (a GPU's too) until it is gone, so a restart on the same GPUs, or the
scheduler's next job on them after the sidecar ended, would otherwise race it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
#: How long the sidecar waits for a killed group to be gone before it goes on (a process in
#: uninterruptible sleep, a driver call, can take that long; it is said in the log).
GROUP_GONE_S = 10.0


def die_with_parent(expected_parent: int | None) -> None:
    """Called first thing in a child: SIGKILL me when my parent dies.

    Set in the child itself (not via ``preexec_fn``, which is unsafe in a threaded parent);
    the parent check closes the window where the parent died before the call.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except OSError:
            pass
    if expected_parent and os.getppid() != expected_parent:
        os._exit(137)


def spawn(argv: list[str], *, env: dict, log_path, cwd: str | None, stdin=None) -> subprocess.Popen:
    """Start a child in its own process group with stdout+stderr appended to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the child's whole process group (it is the group leader)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def reap_group(proc: subprocess.Popen) -> list[int]:
    """After the leader exited, kill whatever it left in its group (user subprocesses) and
    wait for it to be gone; the pids still there after ``GROUP_GONE_S`` (none, normally)."""
    kill_group(proc, signal.SIGKILL)
    return wait_group_gone(proc.pid)


def end_group(proc: subprocess.Popen) -> list[int]:
    """Kill the child's whole group now, reap the child, and wait for the group to be gone;
    the pids still there after ``GROUP_GONE_S``."""
    kill_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(GROUP_GONE_S)
    return wait_group_gone(proc.pid)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies hold nothing: left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(int(entry.name))
    return found


def wait_group_gone(pgid: int, timeout: float = GROUP_GONE_S) -> list[int]:
    """Wait until group ``pgid`` has no live process (after a SIGKILL); what is left then."""
    if not sys.platform.startswith("linux"):
        return []
    deadline = time.monotonic() + timeout
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"
