"""Launchers start a job's sidecar; the scheduler never touches trainers itself.

``LocalLauncher`` starts ``python -m elastic_gpu_sidecar run`` on this machine in a session of
its own, so that the sidecar (and its trainer) outlives a restart of JupyterLab or of the
scheduler: the restarted scheduler re-adopts it from its heartbeats. The per-job secret goes in
the environment, never on a command line other users can read.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("jupyter_elastic_gpu")


@dataclass
class LaunchRequest:
    """Everything needed to start one sidecar, also sent to a user's server in shared mode."""

    job_id: str
    job_dir: str
    kind: str
    spec: dict[str, Any]
    gpus: list[str]
    generation: int
    simulated: bool
    heartbeat_url: str
    heartbeat_s: float
    secret: str
    mechanism: str = "sidecar"
    checkpoint_every_s: float = 60.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Launcher(Protocol):
    async def launch(self, request: LaunchRequest) -> dict[str, Any]:
        """Start the sidecar; returns what the launcher wants remembered (e.g. its pid)."""

    def alive(self, record: dict[str, Any]) -> bool | None:
        """Whether the sidecar recorded by ``launch`` still runs (None: cannot tell)."""


def prepare_job_dir(request: LaunchRequest) -> Path:
    """Write the script into the job dir (idempotent)."""
    job_dir = Path(request.job_dir)
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if request.kind == "script":
        _write(job_dir / "script.py", request.spec["script"].encode())
    return job_dir


def write_inputs(job_dir: str, inputs: dict[str, str]) -> None:
    """Keep the variables passed with a job (base64 pickles) in its dir, not in the database:
    they can be large, and only the trainer reads them."""
    path = Path(job_dir)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write(path / "inputs.json", json.dumps(inputs).encode())
    os.chmod(path / "inputs.json", 0o600)


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sidecar_command(request: LaunchRequest, python: str) -> list[str]:
    spec = request.spec
    cmd = [
        python,
        "-m",
        "elastic_gpu_sidecar",
        "run",
        "--job-dir",
        request.job_dir,
        "--gpus",
        ",".join(request.gpus),
        "--generation",
        str(request.generation),
        "--scheduler-url",
        request.heartbeat_url,
        "--job-id",
        request.job_id,
        "--heartbeat",
        f"{request.heartbeat_s:g}",
        "--mechanism",
        request.mechanism,
        "--checkpoint-every",
        f"{request.checkpoint_every_s:g}",
        "--quiet",
    ]
    if request.simulated:
        cmd.append("--simulated-gpus")
    if request.kind == "synthetic":
        syn = spec["synthetic"]
        profile = ",".join(
            f"{g}:{x:g}" for g, x in sorted((int(k), v) for k, v in syn["throughput"].items())
        )
        cmd += [
            "--synthetic",
            "--profile",
            profile,
            "--work",
            str(int(syn["work"])),
            "--time-scale",
            f"{syn.get('time_scale', 1.0):g}",
            "--batch",
            str(syn.get("batch", 32)),
        ]
        return cmd
    if spec.get("epochs"):
        cmd += ["--epochs", str(spec["epochs"])]
    cmd += ["--batch-policy", spec.get("batch_policy", "keep-global")]
    return [*cmd, "--", os.path.join(request.job_dir, "script.py"), *spec.get("args", [])]


class LocalLauncher:
    """Start sidecars as child processes of this server, in their own session."""

    def __init__(self, python: str | None = None, extra_env: dict[str, str] | None = None):
        self.python = python or sys.executable
        self.extra_env = extra_env or {}
        self._procs: dict[int, subprocess.Popen] = {}

    async def launch(self, request: LaunchRequest) -> dict[str, Any]:
        job_dir = prepare_job_dir(request)
        env = {**os.environ, **self.extra_env, "ELASTIC_GPU_JOB_SECRET": request.secret}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's start-up notices drown the user's log
        env.pop("ELASTIC_GPU_TOKEN", None)  # the trainer needs no access to the API
        cwd = request.spec.get("cwd") or str(job_dir)
        if not os.path.isdir(cwd):
            cwd = str(job_dir)
        out = open(job_dir / "sidecar.out", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                sidecar_command(request, self.python),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            out.close()
        self._procs[proc.pid] = proc
        log.info(
            "job %s: sidecar started (pid %s) on GPUs %s",
            request.job_id,
            proc.pid,
            ",".join(request.gpus),
        )
        return {"pid": proc.pid, "host": os.uname().nodename}

    def alive(self, record: dict[str, Any]) -> bool | None:
        pid = record.get("pid")
        if not pid or record.get("host") not in (None, os.uname().nodename):
            return None
        proc = self._procs.get(pid)
        if proc is not None:
            return proc.poll() is None  # reaps our own children
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
