"""One process per device: the trainer process as the leader of its ranks (PyTorch DDP).

PyTorch's data parallelism runs one process per device. The sidecar still sees one trainer
process, the one it started: where the job's adapter says ``process_per_device``, that
process starts one rank per device of the grant, each the same trainer under the same
adapter with the environment ``torchrun`` gives its workers (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` ...), forwards a stop request to every rank,
and exits with one code for the group. The ranks stay in the leader's process group, so the
sidecar's kill of the group ends them all, and each dies with the leader.

Simulated GPUs are CPU processes (``CUDA_VISIBLE_DEVICES`` empty; adapters use gloo); real
ones are ``cuda:LOCAL_RANK`` of the grant's ``CUDA_VISIBLE_DEVICES`` (adapters use NCCL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

from .. import protocol as P
from ..errors import describe
from ..jobdir import JobDir, atomic_write_json
from ..procs import describe_exit
from .stopsignal import StopRequest
from .tlog import log

#: After one rank fails, how long the others get to end by themselves (they are usually
#: blocked in a collective with the dead rank and never will) before they are killed.
RANK_FAILURE_GRACE_S = 10.0


def rank() -> int | None:
    """This process's rank when it is one of a leader's ranks, else None."""
    value = os.environ.get(P.ENV_RANK)
    return None if value is None else int(value)


def is_leader_rank() -> bool:
    """Whether this process writes the job's files (progress, checkpoints, the model): the only
    process of a one-process adapter, or rank 0."""
    return rank() in (None, 0)


def trainer_pid() -> int:
    """The pid of the trainer process the sidecar started (a rank's leader): progress records
    carry it, so the sidecar knows the first step of the trainer it is waiting for."""
    return int(os.environ[P.ENV_SIDECAR_PID]) if rank() is not None else os.getpid()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(r: int, world: int, port: int) -> dict:
    """What ``torchrun`` sets for worker ``r`` of ``world`` on one node."""
    return {
        P.ENV_RANK: str(r),
        P.ENV_SIDECAR_PID: str(os.getpid()),  # a rank dies with its leader
        "RANK": str(r),
        "LOCAL_RANK": str(r),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(r),
        "NODE_RANK": "0",
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def combined_exit(codes: dict[int, int], stop_requested: bool) -> int:
    """One exit code for the group: a script error in any rank is the script's error; a
    stop that every rank honoured (or that ended ranks we killed after one honoured it) is a
    stop; all done is done; anything else is an infrastructure failure (retried)."""
    values = set(codes.values())
    if values == {P.TRAINER_DONE}:
        return P.TRAINER_DONE
    if P.TRAINER_USER_ERROR in values:
        return P.TRAINER_USER_ERROR
    if (
        stop_requested
        and values <= {P.TRAINER_STOPPED, -signal.SIGKILL, -signal.SIGUSR1}
        and (P.TRAINER_STOPPED in values)
    ):
        return P.TRAINER_STOPPED
    return P.TRAINER_INFRA_ERROR


class RankGroup:
    """The ranks of one generation, started and watched by the trainer process."""

    def __init__(self, job: JobDir, world: int, stop: StopRequest):
        self.job = job
        self.world = world
        self.stop = stop
        self.procs: dict[int, subprocess.Popen] = {}
        self._lock = threading.Lock()

    def forward_stop(self) -> None:
        """Runs in the stop-signal thread: every rank checkpoints at the same next step (the
        adapter agrees on which with a collective) and exits 75."""
        with self._lock:
            procs = list(self.procs.values())
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGUSR1)

    def start(self) -> None:
        port = _free_port()
        argv = [sys.executable, "-m", "elastic_gpu_sidecar.trainer"]
        for r in range(self.world):
            env = dict(os.environ, **rank_env(r, self.world, port))
            with self._lock:
                self.procs[r] = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        log(f"started {self.world} ranks (one per device; rendezvous 127.0.0.1:{port})")
        if self.stop.requested:
            self.forward_stop()

    def _kill_rest(self) -> None:
        for r, proc in self.procs.items():
            if proc.poll() is None:
                log(f"rank {r} did not end after another rank failed: killing it")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()

    def wait(self) -> int:
        """Wait for every rank; one code for the group (``combined_exit``)."""
        by_pid = {proc.pid: r for r, proc in self.procs.items()}
        codes: dict[int, int] = {}
        timer: threading.Timer | None = None
        while len(codes) < len(by_pid):
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            r = by_pid.get(pid)
            if r is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            self.procs[r].returncode = code
            codes[r] = code
            if code != P.TRAINER_DONE and timer is None and len(codes) < len(by_pid):
                if code != P.TRAINER_STOPPED:
                    log(f"rank {r} ended ({describe_exit(code)}): ending the other ranks")
                timer = threading.Timer(RANK_FAILURE_GRACE_S, self._kill_rest)
                timer.daemon = True
                timer.start()
        if timer is not None:
            timer.cancel()
        for r, proc in self.procs.items():  # ranks not waited for above (none expected)
            codes.setdefault(r, proc.wait())
        result = combined_exit(codes, self.stop.requested)
        if result == P.TRAINER_INFRA_ERROR and not (self.job / P.TRAINER_ERROR).exists():
            failed = {r: describe_exit(c) for r, c in sorted(codes.items()) if c != 0}
            message = "a rank ended without a reason: " + ", ".join(
                f"rank {r} {how}" for r, how in failed.items()
            )
            info = dict(describe(RuntimeError(message)), kind="infrastructure", traceback=None)
            atomic_write_json(self.job / P.TRAINER_ERROR, info)
        return result


def lead(job: JobDir, world: int, stop: StopRequest) -> int:
    """Run the script as ``world`` ranks and return the group's exit code."""
    group = RankGroup(job, world, stop)
    stop.on_signal = group.forward_stop
    group.start()
    return group.wait()
