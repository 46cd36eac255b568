"""Shared by the benchmark scripts: where the measured traces are, and how to say so."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def trace_data(explicit: str | None = None) -> Path:
    """The folder with pollux/ and philly/ (``--data``, $ELASTIC_GPU_TRACE_DATA, or
    ../shared/data next to the checkout). The traces are not ours, so they are not in the repo."""
    for candidate in (
        explicit,
        os.environ.get("ELASTIC_GPU_TRACE_DATA"),
        REPO.parent / "shared" / "data",
    ):
        if candidate and (Path(candidate) / "pollux").is_dir():
            return Path(candidate)
    sys.exit(
        "benchmark: no trace data found. Pass --data DIR (or set ELASTIC_GPU_TRACE_DATA) with "
        "pollux/ (the Pollux artifact's simulator/traces and workloads, petuum/adaptdl branch "
        "osdi21-artifact) and philly/philly.csv inside."
    )


def command_line() -> str:
    return "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]]
    )
