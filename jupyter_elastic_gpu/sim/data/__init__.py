"""The measured traces that ship with the package, and the one place that says where they are.

This folder holds other people's measurements, redistributed under their licences (see
``README.md`` and the ``LICENSE-*`` texts here, and ``NOTICE`` at the repository root):

* ``pollux/<application>/``: per-application throughput (``placements.csv``,
  ``scalability.csv``) and convergence (``validation-<batch>.csv``) measurements;
* ``pollux/workloads/``: the Pollux evaluation workloads ``workload-1`` .. ``workload-8`` and
  ``sc20like-16gpu-24jobs``;
* ``philly/philly.csv.gz``: the processed Microsoft Philly trace (gzip; every reader
  decompresses it transparently).

The simulator CLI, the benchmarks and the tests ask this module for paths. A folder laid out
the same way (``pollux/`` and ``philly/philly.csv`` or ``philly.csv.gz``) can stand in for the
shipped one: pass it as ``data`` or name it in ``$ELASTIC_GPU_TRACE_DATA`` (see
:func:`trace_data`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DATA_ENV",
    "philly_trace",
    "pollux_traces",
    "pollux_workload",
    "pollux_workload_names",
    "shipped",
    "trace_data",
]

#: Environment variable naming a folder to use instead of the shipped data (benchmarks).
DATA_ENV = "ELASTIC_GPU_TRACE_DATA"

_HERE = Path(__file__).resolve().parent

DataDir = str | os.PathLike | None


def shipped() -> Path:
    """The folder of the shipped data (inside the installed package)."""
    return _HERE


def trace_data(override: DataDir = None) -> Path:
    """The data folder to use: ``override``, else ``$ELASTIC_GPU_TRACE_DATA``, else the
    shipped data. A folder that is named but has no ``pollux/`` inside is an error
    (FileNotFoundError), never silently replaced by the shipped data."""
    for source, value in (
        ("the folder given", override),
        (f"${DATA_ENV}", os.environ.get(DATA_ENV)),
    ):
        if value:
            folder = Path(value)
            if not (folder / "pollux").is_dir():
                raise FileNotFoundError(
                    f"{source} ({folder}) has no pollux/ folder: expected pollux/<application>/, "
                    "pollux/workloads/ and philly/philly.csv[.gz], laid out like "
                    f"{_HERE}"
                )
            return folder
    return _HERE


def _root(data: DataDir) -> Path:
    return _HERE if data is None else Path(data)


def pollux_traces(data: DataDir = None) -> Path:
    """The folder of Pollux application measurements (one sub-folder per application)."""
    return _root(data) / "pollux"


def pollux_workload_names(data: DataDir = None) -> list[str]:
    """Names of the Pollux workloads in ``data`` (shipped: workload-1 .. workload-8 and
    sc20like-16gpu-24jobs), in natural order."""
    folder = pollux_traces(data) / "workloads"
    names = set()
    for entry in folder.iterdir() if folder.is_dir() else ():
        for suffix in (".csv", ".csv.gz"):
            if entry.name.endswith(suffix) and entry.is_file():
                names.add(entry.name[: -len(suffix)])
    return sorted(names, key=_natural)


def _natural(name: str) -> tuple:
    head, sep, tail = name.rpartition("-")
    return (head, int(tail), "") if sep and tail.isdigit() else (name, -1, name)


def pollux_workload(name: str, data: DataDir = None) -> Path:
    """The file of the Pollux workload ``name`` (``workload-6`` or ``workload-6.csv``).

    Raises FileNotFoundError listing the workloads there are."""
    folder = pollux_traces(data) / "workloads"
    stem = name[: -len(".csv")] if name.endswith(".csv") else name
    if stem and Path(stem).name == stem:
        for suffix in (".csv", ".csv.gz"):
            path = folder / (stem + suffix)
            if path.is_file():
                return path
    known = ", ".join(pollux_workload_names(data)) or "none"
    raise FileNotFoundError(f"no Pollux workload named {name!r} in {folder} (there are: {known})")


def philly_trace(data: DataDir = None) -> Path:
    """The processed Philly trace: ``philly/philly.csv.gz`` (shipped) or ``philly/philly.csv``.

    Raises FileNotFoundError when ``data`` has neither."""
    folder = _root(data) / "philly"
    for name in ("philly.csv.gz", "philly.csv"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"no philly.csv.gz or philly.csv in {folder}")
