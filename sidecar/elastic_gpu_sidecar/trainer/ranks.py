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
import time

from .. import protocol as P
from ..errors import describe
from ..jobdir import JobDir, atomic_write_json, read_json
from ..procs import describe_exit
from . import rankstandby
from .adapter import adapter_for  # (an adapter's module imports no framework)
from .stopsignal import StopRequest
from .tlog import log

#: After one rank fails, how long the others get to end by themselves (they are usually
#: blocked in a collective with the dead rank and never will) before they are killed.
RANK_FAILURE_GRACE_S = 10.0

#: After a stop request, how long a rank's script gets to save and exit once told to (the
#: job's ``stop_grace_s`` overrides it): an adapter that asks the script itself to stop ends it
#: after this, and the leader gives the other ranks as long once one has stopped.
STOP_GRACE_S = 30.0


def stop_grace(config: dict) -> float:
    """The job's grace for a script to stop by itself (``STOP_GRACE_S`` unless it says)."""
    try:
        return max(0.0, float(config.get("stop_grace_s", STOP_GRACE_S)))
    except (TypeError, ValueError):
        return STOP_GRACE_S


def rank() -> int | None:
    """This process's rank when it is one of a leader's ranks, else None."""
    value = os.environ.get(P.ENV_RANK)
    return None if value is None else int(value)


def is_leader_rank() -> bool:
    """Whether this process writes the job's files (progress, checkpoints, the model): the only
    process of a one-process adapter, or rank 0."""
    return rank() in (None, 0)


#: Set in each rank: when its leader started the ranks (seconds since the epoch).
ENV_LEADER_READY_AT = "ELASTIC_GPU_LEADER_READY_AT"


def ready_at(imported_at: float) -> float:
    """What a first progress record says in ``ready_at``: when the framework was imported,
    or, in a rank, when its leader started it (or handed it to a standby rank that had
    imported the framework before): a rank's import, where it has one to do, is part of what
    each resize costs, not a wait a standby would have spared."""
    value = os.environ.get(ENV_LEADER_READY_AT) if rank() is not None else None
    try:
        return round(float(value), 3) if value else imported_at
    except ValueError:
        return imported_at


def trainer_pid() -> int:
    """The pid of the trainer process the sidecar started (a rank's leader): progress records
    carry it, so the sidecar knows the first step of the trainer it is waiting for."""
    return int(os.environ[P.ENV_SIDECAR_PID]) if rank() is not None else os.getpid()


def reserve_port() -> socket.socket:
    """A rendezvous port no other process is handed while the returned socket stays open.

    Picking a free port and closing it before rank 0's store binds it is a race: on a busy
    machine another job's store or an outgoing connection takes the number in between, and
    rank 0 fails with ``EADDRINUSE``. So the socket stays bound, with ``SO_REUSEADDR`` and not
    listening, for the group's life: Linux hands a bound port to no other automatic pick (a
    ``bind`` to port 0, a ``connect``), while rank 0's store (it sets ``SO_REUSEADDR`` too)
    may still bind and listen on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def error_path(job: JobDir):
    """Where this process writes its error: the job's ``P.TRAINER_ERROR``, or a rank's own
    file, from which the leader picks the error of the rank that failed first."""
    r = rank()
    return job / P.TRAINER_ERROR if r is None else error_path_of(job, r)


def error_path_of(job: JobDir, r: int):
    return job / f"trainer-error.rank{r}.json"


#: What torch.distributed says in a rank whose peer died: the peer's failure is the cause.
_PEER_GONE = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker crashing",
    "NCCL communicator was aborted",
)


def _peer_went_away(error: dict | None) -> bool:
    message = str((error or {}).get("message") or "")
    return any(text in message for text in _PEER_GONE)


def _ranks(n: int) -> str:
    return "1 rank" if n == 1 else f"{n} ranks"


def _read_or_none(path) -> dict | None:
    try:
        value = read_json(path, None)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def rank_env(r: int, world: int, port: int) -> dict:
    """What ``torchrun`` sets for worker ``r`` of ``world`` on one node."""
    return {
        P.ENV_RANK: str(r),
        P.ENV_SIDECAR_PID: str(os.getpid()),  # a rank dies with its leader
        ENV_LEADER_READY_AT: str(round(time.time(), 3)),
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
    """One exit code for the group; ``codes`` in the order the ranks ended.

    The first rank to fail tells why the group failed: when one rank dies, the others fail
    after it in their next collective, with errors that are consequences (a peer closed the
    connection), not causes. So: every rank done is done; else the first rank that did not end
    with 0 decides: 75 after a stop request is a stop (whatever the ranks still in a collective
    did then), 65 the script's error, anything else (a signal, 70) an infrastructure failure,
    retried."""
    first = next((code for code in codes.values() if code != P.TRAINER_DONE), None)
    if first is None:
        return P.TRAINER_DONE
    if first in (P.TRAINER_STOPPED, -signal.SIGUSR1) and stop_requested:
        return P.TRAINER_STOPPED  # (SIGUSR1 ends a rank still starting, before its handler)
    if first == P.TRAINER_USER_ERROR:
        return P.TRAINER_USER_ERROR
    return P.TRAINER_INFRA_ERROR


class RankGroup:
    """The ranks of one generation, started and watched by the trainer process."""

    def __init__(self, job: JobDir, world: int, stop: StopRequest):
        self.job = job
        self.world = world
        self.stop = stop
        self.procs: dict[int, subprocess.Popen] = {}
        self._lock = threading.Lock()
        self._port = reserve_port()  # held until the group ends (not inherited by the ranks)

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
        """One rank per device: a ready standby rank where there is one, else a new one."""
        port = self._port.getsockname()[1]
        argv = [sys.executable, "-m", "elastic_gpu_sidecar.trainer"]
        ready = 0
        for r in range(self.world):
            env = dict(os.environ, **rank_env(r, self.world, port))
            proc = rankstandby.take(r, env)
            ready += proc is not None
            if proc is None:
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
            with self._lock:
                self.procs[r] = proc
        rankstandby.drop()
        how = f"{ready} from standby ranks, " if ready else ""
        log(f"started {_ranks(self.world)} (one per device; {how}rendezvous 127.0.0.1:{port})")
        if self.stop.requested:
            self.forward_stop()

    def _kill_rest(self, why: str) -> None:
        for r, proc in self.procs.items():
            if proc.poll() is None:
                log(f"rank {r} did not end {why}: killing it")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()

    def _grace_after(self, r: int, code: int) -> threading.Timer:
        """The others' time to end by themselves once rank ``r`` ended with ``code``."""
        if code == P.TRAINER_STOPPED:
            grace = stop_grace(_read_or_none(self.job / P.JOB) or {}) + RANK_FAILURE_GRACE_S
            why = f"within {grace:g} s of rank {r}'s stop"
        else:
            log(f"rank {r} ended ({describe_exit(code)}): ending the other ranks")
            grace = RANK_FAILURE_GRACE_S
            why = f"within {grace:g} s of rank {r}'s failure"
        timer = threading.Timer(grace, self._kill_rest, args=(why,))
        timer.daemon = True
        timer.start()
        return timer

    def wait(self) -> int:
        """Wait for every rank; one code for the group (``combined_exit``)."""
        by_pid = {proc.pid: r for r, proc in self.procs.items()}
        codes: dict[int, int] = {}
        ended: dict[int, float] = {}
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
            codes[r], ended[r] = code, time.time()
            if code != P.TRAINER_DONE and timer is None and len(codes) < len(by_pid):
                timer = self._grace_after(r, code)
        if timer is not None:
            timer.cancel()
        for r, proc in self.procs.items():  # ranks not waited for above (none expected)
            if r not in codes:
                codes[r], ended[r] = proc.wait(), time.time()
        self._port.close()
        # in the order the ranks failed: a rank that raised wrote its error before its
        # interpreter's teardown closed the connections its peers then fail on; a killed
        # rank failed when it ended; an error that says a peer went away comes after
        errors: dict[int, dict | None] = {}
        when = dict(ended)
        for r in codes:
            path = error_path_of(self.job, r)
            errors[r] = _read_or_none(path)
            with contextlib.suppress(FileNotFoundError):
                when[r] = min(when[r], os.stat(path).st_mtime)
                os.unlink(path)
        order = sorted(codes, key=lambda r: (_peer_went_away(errors[r]), when[r]))
        result = combined_exit({r: codes[r] for r in order}, self.stop.requested)
        if result in (P.TRAINER_USER_ERROR, P.TRAINER_INFRA_ERROR):
            cause = next(r for r in order if codes[r] != P.TRAINER_DONE)
            self._keep_error(cause, codes[cause], errors[cause])
        return result

    def _keep_error(self, r: int, code: int, info: dict | None) -> None:
        """The job's error is the first failed rank's, not that of a rank failing after it."""
        if code < 0 or not isinstance(info, dict):
            message = f"rank {r} of {self.world} ended without a reason ({describe_exit(code)})"
            info = dict(describe(RuntimeError(message)), kind="infrastructure", traceback=None)
        atomic_write_json(self.job / P.TRAINER_ERROR, dict(info, rank=r))


def lead(job: JobDir, world: int, stop: StopRequest) -> int:
    """Run the script as ``world`` ranks (fewer where its adapter says that the script uses
    fewer: ``ranks_for(config, devices)``) and return the group's exit code."""
    config = _read_or_none(job / P.JOB) or {}
    ranks_for = getattr(adapter_for(config), "ranks_for", None)
    if ranks_for is not None:
        world = max(1, min(world, int(ranks_for(config, world))))
    if stop.requested:
        log("stop requested before the ranks started: exiting at once")
        rankstandby.drop()
        return P.TRAINER_STOPPED
    group = RankGroup(job, world, stop)
    stop.on_signal = group.forward_stop
    group.start()
    return group.wait()
