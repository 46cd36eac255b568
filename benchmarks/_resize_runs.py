"""A sidecar job of ``resize_overhead.py`` run through its resizes, and a floor process timed.

The job runs a workload script under ``elastic_gpu_sidecar run`` on simulated GPUs; it is
resized between two grants once each generation has trained for ``settle`` seconds, then
cancelled; what the sidecar recorded of each resize (pause, lost steps) is the result.
"""

from __future__ import annotations

import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import progress_records, sidecar_env
from elastic_gpu_sidecar.jobdir import read_json
from elastic_gpu_sidecar.protocol import STATUS


def sh(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def wait_running(job: Path, generation: int) -> dict:
    def first():
        return next(
            (r for r in progress_records(job) if r["generation"] == generation and r.get("first")),
            None,
        )

    return wait(first, 300, f"generation {generation} to train")


def _cli(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "elastic_gpu_sidecar", *args],
        env=sidecar_env(3),
        check=True,
        capture_output=True,
    )


def measure_resizes(
    job: Path,
    script: list[str],
    extra: list[str],
    resizes: int,
    settle: float,
    every: float,
    grants: tuple[str, str] = ("0,1,2,3", "0,1"),
) -> list[dict]:
    """Start on ``grants[1]``, resize ``resizes`` times alternating to ``grants[0]`` and back;
    the sidecar's record of each resize, with the replicas and the step time before it."""
    cmd = [
        *(sys.executable, "-m", "elastic_gpu_sidecar", "run", "--job-dir", str(job)),
        *("--gpus", grants[1], "--simulated", "--checkpoint-interval", str(every), "--quiet"),
        *extra,
        "--",
        *script,
    ]
    proc = subprocess.Popen(
        cmd,
        env=sidecar_env(3),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        for i in range(resizes):
            wait_running(job, i + 1)
            time.sleep(settle)
            _cli("resize", "--job-dir", str(job), "--gpus", grants[i % 2])
        wait_running(job, resizes + 1)
        time.sleep(1.0)
        _cli("cancel", "--job-dir", str(job), "--wait")
        proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    recs = progress_records(job)
    out = []
    for r in read_json(job / STATUS, {}).get("resizes", []):
        gen = r["generation"]
        steps = [
            (x.get("batch_size") or 64) / x["samples_per_s"]
            for x in recs
            if x["generation"] == gen - 1 and x.get("samples_per_s")
        ]
        step_s = statistics.median(steps) if steps else None
        out.append(dict(r, replicas=len(r["to_gpus"]), step_s=step_s))
    return out


def measure_floor(code: str, args: list[str]) -> float:
    """Seconds from starting ``python -c code *args`` to its line "restored"."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=sidecar_env(3),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    elapsed = time.monotonic() - t0
    _, err = proc.communicate()
    if line.strip() != "restored":
        raise SystemExit(f"floor measurement failed:\n{err[-3000:]}")
    return elapsed
