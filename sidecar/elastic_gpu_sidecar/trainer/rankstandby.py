"""Standby ranks: interpreters with the framework imported, ready to become the next ranks.

The sidecar's standby interpreter spares a restart the start of the trainer process, but
where the adapter runs one process per device (PyTorch DDP) that process only leads: every
rank is a new interpreter that imports torch and the framework, which is most of a resize's
pause. So a standby leader pre-starts standby ranks: each imports the framework (the
adapter's ``import_framework``, which touches no device) and waits on its stdin for the full
environment of its rank; when the grant comes, ``RankGroup.start`` hands rank r to the
standby started for rank r (``take``), starts fresh ranks for any missing and ends the extras
(``drop``).

How many: as many as the devices of the grant the job runs on when the standby leader starts
(the sidecar passes the count in ``P.ENV_STANDBY_RANKS``), at most ``MAX_STANDBY_RANKS``. Any
shrink, and a restart on the same count, then finds every rank ready; a grow pays the import
of its new ranks only. Keeping more would hold memory, all the time, for devices the job may
never be granted. Memory: each holds what importing its framework takes (about 0.3 GB with
torch alone, 0.45-0.5 GB with transformers or Lightning, no device memory: CUDA is not
initialised before the grant), so a job holds at most ``MAX_STANDBY_RANKS`` of them besides
its ranks; ``P.ENV_STANDBY_RANKS`` = 0 (in the sidecar's environment) turns them off.

Lifetime: standby ranks are children of the standby leader in its process group (the
sidecar's kill of the standby ends them) and die with it (parent-death signal), and one whose
stdin closes without an environment exits at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

from .. import protocol as P
from .tlog import log

#: The most standby ranks a standby leader keeps ready (a bound on their memory).
MAX_STANDBY_RANKS = 8

#: Argument of a standby rank's command line.
FLAG = "--standby-rank"

_ready: dict[int, subprocess.Popen] = {}  # by the rank each was started for


def wanted(config: dict) -> int:
    """How many standby ranks to start: the devices of the last grant (``P.ENV_STANDBY_RANKS``)
    as the adapter would use them, at most ``MAX_STANDBY_RANKS``."""
    try:
        n = int(os.environ.get(P.ENV_STANDBY_RANKS, "0"))
    except ValueError:
        return 0
    from .adapter import adapter_for

    ranks_for = getattr(adapter_for(config), "ranks_for", None)
    if ranks_for is not None and n > 0:
        n = max(1, min(n, int(ranks_for(config, n))))
    return max(0, min(n, MAX_STANDBY_RANKS))


def start(n: int) -> None:
    """In the standby leader: start standby ranks 0..n-1 (they inherit its stdout, the log).
    Each knows its rank from the start (``RANK``, ``LOCAL_RANK``): a framework may read it
    when imported (Lightning's ``rank_zero_only`` does)."""
    argv = [sys.executable, "-m", "elastic_gpu_sidecar.trainer", FLAG]
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r))
        env[P.ENV_SIDECAR_PID] = str(os.getpid())  # a rank dies with its leader
        env.setdefault("OMP_NUM_THREADS", "1")  # as a rank's (read when torch is imported)
        _ready[r] = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE)


def take(r: int, env: dict) -> subprocess.Popen | None:
    """The standby rank started for rank ``r``, given ``env`` (the rank's whole environment),
    or None when there is none (or it has exited)."""
    proc = _ready.pop(r, None)
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            proc.stdin.write((json.dumps({"env": env}) + "\n").encode())
            proc.stdin.close()
            return proc
        except OSError:
            pass
    log(f"standby rank {r} exited before it was needed: starting a new one")
    _end(proc)
    return None


def drop() -> None:
    """End the standby ranks not taken (more than the grant needs)."""
    if _ready:
        log(f"ending {len(_ready)} standby rank(s) not needed")
    for r in sorted(_ready):
        _end(_ready.pop(r))


def _end(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        proc.stdin.close()
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    proc.wait()


def wait_for_env(import_framework) -> None:
    """In a standby rank: import the framework, then take the rank's environment from stdin
    (exit at once when stdin closes without it: the leader dropped it or went away)."""
    t0 = time.monotonic()
    import_framework()
    print(
        f"[elastic] standby rank {os.getpid()} ready (framework imported in "
        f"{time.monotonic() - t0:.1f} s)",
        flush=True,
    )
    imported_at = time.time()
    line = sys.stdin.readline()
    if not line:
        os._exit(0)
    env = json.loads(line)["env"]
    from .ranks import ENV_LEADER_READY_AT

    # ``ready_at``: when the leader handed the rank over, or later, when this one was still
    # importing then (a wait the pause owes to a standby not ready yet, as the leader's own)
    with contextlib.suppress(KeyError, ValueError):
        if imported_at > float(env[ENV_LEADER_READY_AT]):
            env[ENV_LEADER_READY_AT] = str(round(imported_at, 3))
    os.environ.clear()
    os.environ.update(env)
