"""How a trainer process is started: command line, environment, and the standby interpreter.

The trainer gets the grant only through its environment (``CUDA_VISIBLE_DEVICES``,
``ELASTIC_GPU_*``), never the scheduler's secret. With ``--standby`` one spare interpreter
with TensorFlow already imported waits on its stdin; the next (re)start hands it the grant
instead of paying for a fresh ``import tensorflow``. Where the job runs one process per
device, the standby leads: it keeps as many standby ranks ready as the last grant had devices
(``trainer/rankstandby.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from . import protocol as P
from .jobdir import JobDir
from .procs import describe_exit, end_group, spawn

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


class TrainerSpawner:
    """Starts the trainer processes of one job (the scheduler's launchers start sidecars)."""

    def __init__(self, job: JobDir, command: dict, *, simulated: bool, python: str, log):
        self.job = job
        self.command = command
        self.simulated = simulated
        self.python = python
        self.log = log
        self.standby: subprocess.Popen | None = None
        self.devices = 0  # of the last grant: how many ranks a standby leader keeps ready

    def grant_env(self, grant: P.Grant) -> dict:
        unique = list(dict.fromkeys(grant.gpus))
        return {
            P.ENV_GENERATION: str(grant.generation),
            P.ENV_GPUS: ",".join(grant.gpus),
            P.ENV_SIMULATED: "1" if self.simulated else "0",
            "CUDA_VISIBLE_DEVICES": ""
            if self.simulated
            else ",".join(P.device_index(g) for g in unique),
        }

    def env(self, grant: P.Grant | None) -> dict:
        env = dict(os.environ)
        env.pop(P.ENV_SECRET, None)  # the scheduler secret is the sidecar's, not the script's
        if grant is not None:
            env.update(self.grant_env(grant))
        else:  # a standby learns its grant later
            for key in (P.ENV_GENERATION, P.ENV_GPUS, P.ENV_SIMULATED, "CUDA_VISIBLE_DEVICES"):
                env.pop(key, None)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # ordinals as nvidia-smi/NVML number them
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env[P.ENV_JOB_DIR] = str(self.job.path)
        env[P.ENV_SIDECAR_PID] = str(os.getpid())
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + path if path else "")
        return env

    def argv(self) -> list[str]:
        c = self.command
        if c["kind"] == P.JobKind.SYNTHETIC:
            return [
                self.python,
                "-m",
                "elastic_gpu_sidecar.trainer.synthetic",
                "--profile",
                c["profile"],
                "--work",
                str(c["work"]),
                "--time-scale",
                str(c["time_scale"]),
                "--batch",
                str(c["batch"]),
                "--checkpoint-interval",
                str(c["checkpoint_interval"]),
                "--save-seconds",
                str(c.get("save_s", 0.0)),
            ]
        return [self.python, "-m", "elastic_gpu_sidecar.trainer"]

    def start(self, grant: P.Grant) -> tuple[subprocess.Popen, bool]:
        """Start a trainer on ``grant``; True when the standby interpreter was used."""
        self.devices = len(grant.gpus)
        proc = self._activate_standby(grant)
        if proc is not None:
            return proc, True
        proc = spawn(
            self.argv(),
            env=self.env(grant),
            log_path=self.job / P.TRAINER_LOG,
            cwd=self.command.get("cwd"),
        )
        return proc, False

    def _activate_standby(self, grant: P.Grant) -> subprocess.Popen | None:
        sb, self.standby = self.standby, None
        if sb is None or sb.poll() is not None:
            return None
        try:
            sb.stdin.write((json.dumps({"env": self.grant_env(grant)}) + "\n").encode())
            sb.stdin.close()
        except OSError:
            end_group(sb)  # not left defunct for the rest of the job
            return None
        return sb

    def ensure_standby(self) -> None:
        """Keep one interpreter with TensorFlow imported ready for the next restart."""
        if self.command.get("kind") != P.JobKind.SCRIPT:
            return
        if self.standby is not None and self.standby.poll() is None:
            return
        if self.standby is not None:
            self.log(f"standby interpreter exited ({describe_exit(self.standby.returncode)})")
        env = self.env(None)
        env.setdefault(P.ENV_STANDBY_RANKS, str(self.devices))
        self.standby = spawn(
            [*self.argv(), "--standby"],
            env=env,
            log_path=self.job / P.TRAINER_LOG,
            cwd=self.command.get("cwd"),
            stdin=subprocess.PIPE,
        )

    def stop_standby(self) -> None:
        sb, self.standby = self.standby, None
        if sb is not None and sb.poll() is None:
            end_group(sb)
