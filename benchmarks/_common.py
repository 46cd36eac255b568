"""Shared by the benchmark scripts: which measured traces to use, how to say so, how their
options are checked and their results written, and how to run and read a sidecar job from a
checkout."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIDECAR = REPO / "sidecar"
if str(SIDECAR) not in sys.path:  # the sidecar package, also from a checkout not installed
    sys.path.insert(0, str(SIDECAR))


def trace_data(explicit: str | None = None) -> Path:
    """The folder with pollux/ and philly/: the data shipped in the package, or the folder
    given with ``--data`` or $ELASTIC_GPU_TRACE_DATA instead (see benchmarks/README.md)."""
    from jupyter_elastic_gpu.sim import data  # not at the top: the sidecar scripts do without

    try:
        return data.trace_data(explicit)
    except FileNotFoundError as e:
        sys.exit(f"benchmark: {e}")


def command_line() -> str:
    return "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]]
    )


def add_adaptive_option(ap) -> None:
    """``--adaptive NAME=VALUE`` (repeatable): a parameter of ``adaptive`` for every run of it."""
    ap.add_argument(
        "--adaptive",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter of adaptive (AdaptiveParams), e.g. protect_critical=false",
    )


def adaptive_params(ap, items: list[str]) -> dict:
    """The ``--adaptive`` items as keyword arguments of ``AdaptivePolicy``, checked as
    ``jupyter-elastic-gpu simulate --adaptive`` checks them (a usage error when one is bad)."""
    from jupyter_elastic_gpu.sim.commands import parse_adaptive

    try:
        return parse_adaptive(items)
    except ValueError as e:
        ap.error(str(e))


def whole(minimum: int = 1):
    """An argparse type: a whole number of at least ``minimum`` (runs, jobs, repeats ...)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of at least {minimum}, got {text!r}"
            )
        return value

    return parse


def positive(text: str) -> float:
    """An argparse type: a finite number above 0 (seconds, a scale factor)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text!r}")
    return value


def output_file(ap: argparse.ArgumentParser, path: str | None, flag: str, plot: bool = False):
    """``path`` (None: not asked for) checked as a file to write before any work, as
    ``jupyter-elastic-gpu simulate`` checks its ``--json`` and ``--plot`` (a usage error if
    not); ``plot``: a figure, whose suffix says its format."""
    from jupyter_elastic_gpu.sim.output import output_file as checked
    from jupyter_elastic_gpu.sim.output import plot_formats

    if path is None:
        return None
    try:
        return checked(path, flag, plot_formats() if plot else None)
    except ValueError as e:
        ap.error(str(e))


def output_folder(ap: argparse.ArgumentParser, path: str | None, flag: str):
    """``path`` (None: not asked for) as a folder to write into, made if missing."""
    from jupyter_elastic_gpu.sim.output import output_folder as checked

    if path is None:
        return None
    try:
        return checked(path, flag)
    except ValueError as e:
        ap.error(str(e))


def write_json(path, data) -> None:
    """``data`` as indented JSON at ``path``, written whole (never half a file)."""
    from jupyter_elastic_gpu.sim.output import write_json as whole_json

    whole_json(path, data)


def sidecar_env(tf_log_level: int = 2) -> dict[str, str]:
    """Environment for sidecar subprocesses: the checkout's sidecar on the path, quiet
    TensorFlow, progress records often enough to time a resize."""
    env = dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL=str(tf_log_level),
        ELASTIC_GPU_PROGRESS_INTERVAL="0.25",
    )
    env["PYTHONPATH"] = str(SIDECAR) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def wait_first(job: Path, generation: int, proc, timeout: float = 300) -> None:
    """Until the trainer of ``generation`` has reported its first step (``proc``: the sidecar;
    its end before that is an error with its last words)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r["generation"] == generation and r.get("first") for r in progress_records(job)):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the job ended early:\n{proc.stderr.read()[-3000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"generation {generation} did not start training in {timeout} s")


def progress_records(job: Path) -> list[dict]:
    """Every complete progress record a job directory holds so far."""
    from elastic_gpu_sidecar.jobdir import ProgressTail
    from elastic_gpu_sidecar.protocol import PROGRESS

    return ProgressTail(job / PROGRESS).read()
