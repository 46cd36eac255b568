"""What one sidecar is told to do: its job directory, its GPUs, what runs, how it stops and
restarts, and where its scheduler is (``cli.py`` fills it from the command line)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from . import protocol as P


@dataclass
class Options:
    job_dir: str
    gpus: list[str] | None = None
    generation: int | None = None
    simulated: bool = False
    command: dict = field(default_factory=dict)  # what runs: see job.json
    mechanism: P.Mechanism = P.Mechanism.SIDECAR
    max_restarts: int = 3
    stop_timeout: float = 120.0
    backoff: float = 1.0
    standby: bool = True
    scheduler_url: str | None = None
    job_id: str | None = None
    heartbeat: float = P.DEFAULT_HEARTBEAT_INTERVAL_S
    final_linger: float = P.FINAL_HEARTBEAT_LINGER_S
    python: str = sys.executable
    echo: bool = True
