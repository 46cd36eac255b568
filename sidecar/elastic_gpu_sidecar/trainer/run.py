"""``python -m elastic_gpu_sidecar.trainer``: run the user's script under its framework's adapter.

Started by the sidecar in its own process group with the grant in the environment. The
order matters: the stop handler and the parent-death signal come first (a resize may arrive
while TensorFlow is still importing), then the devices are configured before any
TensorFlow op, then the script runs as ``__main__`` exactly as ``python script.py`` would.

``--standby`` starts an interpreter that imports TensorFlow and then waits on stdin for the
grant of the next generation, so a resize does not pay for the import. Where the adapter runs
one process per device (PyTorch DDP), this process leads the ranks (``ranks.py``), each of
which runs the script as below; a standby leader keeps standby ranks with the framework
imported (``rankstandby.py``, ``--standby-rank``).

Exit codes: 0 done, 65 the script raised (not retried), 70 infrastructure error (retried),
75 stopped at the sidecar's request after a checkpoint.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback

from .. import protocol as P
from ..errors import JobSetupError, describe
from ..jobdir import JobDir, atomic_write_json, read_json
from ..procs import die_with_parent
from . import ranks, rankstandby, tlog
from .adapter import FrameworkAdapter, TrainerContext, adapter_for
from .stopsignal import StopRequest, exit_now

HERE = os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))
)  # the package: its frames are ours


def _log(message: str) -> None:
    print(f"[elastic] {message}", flush=True)


def _standby_wait(adapter: FrameworkAdapter, config: dict) -> None:
    t0 = time.monotonic()
    if adapter.process_per_device:  # a leader imports no framework itself; its ranks do
        rankstandby.start(rankstandby.wanted(config))
    else:
        adapter.import_framework()
    _log(
        f"standby interpreter {os.getpid()} ready ({adapter.name} imported in "
        f"{time.monotonic() - t0:.1f} s)"
    )
    line = sys.stdin.readline()
    if not line:
        os._exit(0)  # the sidecar went away or dropped the standby
    os.environ.update(json.loads(line)["env"])


def _fail(job: JobDir, exc: BaseException, code: int, cwd: str) -> int:
    info = describe(exc, skip_files=(os.path.join(HERE, ""),), cwd=cwd)
    if code == P.TRAINER_INFRA_ERROR:
        info["kind"] = "infrastructure"
    traceback.print_exception(exc)
    if info["hint"]:
        print(f"hint: {info['hint']}", file=sys.stderr)
    atomic_write_json(ranks.error_path(job), info)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main(argv: list[str] | None = None) -> int:
    stop = StopRequest()
    stop.install()
    argv = sys.argv[1:] if argv is None else argv
    parent = os.environ.get(P.ENV_SIDECAR_PID)
    die_with_parent(int(parent) if parent else None)
    env = os.environ
    job = JobDir(env[P.ENV_JOB_DIR])
    config = read_json(job / P.JOB, {}) or {}
    adapter = adapter_for(config)
    if "--standby" in argv:
        _standby_wait(adapter, config)
        tlog.T0 = time.monotonic()  # the log's stamps: since it left standby
    elif rankstandby.FLAG in argv:
        rankstandby.wait_for_env(adapter.import_framework)
    generation = int(env.get(P.ENV_GENERATION, "1"))
    gpus = P.parse_gpus(env.get(P.ENV_GPUS, "0"))
    simulated = env.get(P.ENV_SIMULATED) == "1"
    cwd = config.get("cwd") or os.getcwd()

    def idle_stop() -> None:
        if stop.busy == 0:
            _log("stop requested before training started: exiting at once")
            exit_now(P.TRAINER_STOPPED)

    if adapter.process_per_device and ranks.rank() is None:
        return ranks.lead(job, len(gpus), stop)
    stop.on_signal = idle_stop
    if stop.requested:
        idle_stop()
    t0 = time.monotonic()
    try:
        tlog.T0 = t0
        rt = adapter.start(TrainerContext(job, config, generation, gpus, simulated, stop))
        stop.on_signal = rt.on_stop_signal
    except JobSetupError as e:
        return _fail(job, e, P.TRAINER_USER_ERROR, cwd)
    except Exception as e:
        return _fail(job, e, P.TRAINER_INFRA_ERROR, cwd)

    script = config["script"]
    sys.argv = [script, *config.get("args", [])]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            err = RuntimeError(f"the script called sys.exit({e.code!r})")
            return _fail(job, err, P.TRAINER_USER_ERROR, cwd)
    except BaseException as e:
        from ..errors import is_infrastructure

        code = P.TRAINER_INFRA_ERROR if is_infrastructure(e) else P.TRAINER_USER_ERROR
        return _fail(job, e, code, cwd)
    stop.busy += 1  # the stop handler must not exit while the model is being written
    try:
        rt.finalize()
    except Exception as e:
        return _fail(job, e, P.TRAINER_INFRA_ERROR, cwd)
    rt.wait_background()
    return P.TRAINER_DONE


if __name__ == "__main__":
    sys.exit(main())
