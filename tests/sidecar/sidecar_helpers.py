"""Drive real sidecars from tests: start jobs, read their files, resize them on cue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from elastic_gpu_sidecar.jobdir import read_live

SCRIPTS = Path(__file__).resolve().parent / "scripts"
ENV = dict(
    os.environ,
    ELASTIC_GPU_PROGRESS_INTERVAL="0.2",
    TF_CPP_MIN_LOG_LEVEL="3",
    PYTHONUNBUFFERED="1",
)


def start(job: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    """``python -m elastic_gpu_sidecar run --job-dir JOB ARGS`` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "elastic_gpu_sidecar", "run", "--job-dir", str(job), *args],
        env=env or ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "elastic_gpu_sidecar", *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )


def progress(job: Path) -> list[dict]:
    try:
        text = (job / "progress.jsonl").read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def status(job: Path) -> dict:
    return json.loads((job / "status.json").read_text())


def wait_for(pred, *, timeout: float, proc: subprocess.Popen | None = None, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            value = pred()
            if value:
                return value
            _, err = proc.communicate()
            raise AssertionError(
                f"sidecar exited ({proc.returncode}) before {what}:\n{err[-4000:]}"
            )
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def checkpoint_step(job: Path) -> int | None:
    """The global step of the job's newest complete checkpoint (None before the first)."""
    ckpts = job / "checkpoints"
    try:
        newest = (ckpts / "latest").read_text().strip()
        return int(json.loads((ckpts / newest / "meta.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError):
        return None


def children(pid: int) -> list[int]:
    """Pids of the direct children of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def wait_step(job: Path, generation: int, step: int, proc, timeout: float = 120) -> dict:
    def seen():
        recs = [
            r for r in progress(job) if r["generation"] == generation and r["global_step"] >= step
        ]
        return recs[0] if recs else None

    return wait_for(
        seen, timeout=timeout, proc=proc, what=f"step {step} of generation {generation}"
    )


def finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"sidecar did not finish in {timeout} s:\n{err[-4000:]}") from None
    return proc.returncode, out, err


def live_step(job: Path) -> tuple[int, int]:
    """(generation, global step) of the trainer's last step, exact (``live.step``)."""
    live = read_live(job / "live.step")
    return (live[0], live[1]) if live else (0, 0)


def standbys_ready(job: Path) -> int:
    """How many standby interpreters have said they are ready in the job's trainer log."""
    log = job / "trainer.log"
    if not log.exists():
        return 0
    return sum(
        "] standby interpreter " in line and " ready (" in line
        for line in log.read_text().splitlines()
    )


def run_resized(
    job: Path,
    script: str,
    script_args=(),
    *,
    plan,
    extra=(),
    env: dict | None = None,
    hold_for_standby: bool = False,
) -> tuple[int, str]:
    """Run a script on the GPUs of ``plan[0]``, then move to each next ``(gpus, steps)`` grant
    once the running generation has trained that many steps since it started (``env``: the
    sidecar's environment, ``ENV`` by default).

    The trainer trains on until the next generation's standby interpreter is ready, so a short
    script can end before a resize takes effect where the standby's import is slow (a loaded
    machine). ``hold_for_standby`` stops the trainer (SIGSTOP) from the resize's step until
    that standby is ready, then lets it go on: the resize then always lands mid-training."""
    proc = start(
        job,
        "--gpus",
        plan[0][0],
        "--simulated",
        *extra,
        "--",
        str(SCRIPTS / script),
        *script_args,
        env=env,
    )
    for generation, (gpus, steps) in enumerate(plan[1:], start=1):
        first = wait_for(
            lambda g=generation: next(
                (r for r in progress(job) if r["generation"] == g and r.get("first")), None
            ),
            timeout=120,
            proc=proc,
            what=f"the first step of generation {generation}",
        )
        target = (generation, first["resumed_from"] + steps)
        wait_for(lambda t=target: live_step(job) >= t, timeout=120, proc=proc, what=str(target))
        held = status(job)["trainer_pid"] if hold_for_standby else None
        if held:
            os.kill(held, signal.SIGSTOP)
            wait_for(
                lambda g=generation: standbys_ready(job) >= g,
                timeout=180,
                proc=proc,
                what=f"the standby interpreter of generation {generation + 1}",
            )
        res = cli("resize", "--job-dir", str(job), "--gpus", gpus)
        if held:
            os.kill(held, signal.SIGCONT)
        assert res.returncode == 0, res.stderr
        wait_for(
            lambda g=generation: status(job)["generation"] == g + 1,
            timeout=60,
            proc=proc,
            what=f"generation {generation + 1}",
        )
    code, _, err = finish(proc)
    return code, err


def trainer_pids_alive(pids) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split()[2] == "Z":
            continue
        alive.append(pid)
    return alive
