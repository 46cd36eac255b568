"""Start and end child processes so that none outlives the sidecar.

A trainer holding GPUs after its sidecar is gone is the worst failure of a shared box: the
child asks the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``), runs in its
own process group so the whole group can be killed, and the sidecar kills the group on every
normal exit path too.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


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


def reap_group(proc: subprocess.Popen) -> None:
    """After the leader exited, kill whatever it left in its group (user subprocesses)."""
    kill_group(proc, signal.SIGKILL)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"
