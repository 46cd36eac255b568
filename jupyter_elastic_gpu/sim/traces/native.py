"""The native workload format: a jobs CSV plus a speed-profiles CSV (docs/workload-formats.md).

Two files rather than one because a lab's jobs share a handful of speed curves: a profile is
written once and referenced by name, so a user can edit one curve and rerun every job using it.
The reader is strict (one bad cell stops it with file, row and column) because a silently
skipped job changes every number a simulation reports.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping

from ..workload import JobSpec, TraceError, Workload
from .csvutil import PathLike, csv_stem, open_csv

__all__ = [
    "JOB_COLUMNS",
    "PROFILE_COLUMNS",
    "RESTART_COLUMN",
    "read_native",
    "read_profiles",
    "write_native",
]

#: Column order written by :func:`write_native`; ``user``, ``min_gpus`` and ``max_gpus`` may be
#: left out (or empty) when reading: user ``default``, both bounds equal to ``requested_gpus``.
JOB_COLUMNS = (
    "job_id",
    "submit_time",
    "user",
    "profile",
    "requested_gpus",
    "min_gpus",
    "max_gpus",
    "work",
)
REQUIRED_JOB_COLUMNS = ("job_id", "submit_time", "profile", "requested_gpus", "work")
#: Optional, after those: seconds each start and restart of the job takes (``JobSpec.restart_s``);
#: empty or absent, the run's costs. Written only where some job has one.
RESTART_COLUMN = "restart_s"
PROFILE_COLUMNS = ("profile", "gpus", "throughput")


def read_profiles(path: PathLike) -> dict[str, dict[int, float]]:
    """Profiles CSV -> {profile name: {GPU count: throughput}} (throughput > 0, counts >= 1)."""
    profiles: dict[str, dict[int, float]] = {}
    first_row: dict[tuple[str, int], int] = {}
    with open_csv(path, PROFILE_COLUMNS) as reader:
        for row in reader:
            name = row.get_str("profile")
            gpus = row.get_int("gpus", minimum=1)
            throughput = row.get_float("throughput", positive=True)
            key = (name, gpus)
            if key in first_row:
                raise row.error(
                    f"profile {name!r} already lists {gpus} GPUs (row {first_row[key]})", "gpus"
                )
            first_row[key] = row.number
            profiles.setdefault(name, {})[gpus] = throughput
    if not profiles:
        raise TraceError(str(path), "no profiles (the file has a header but no rows)")
    return {name: dict(sorted(table.items())) for name, table in profiles.items()}


def read_native(jobs_path: PathLike, profiles_path: PathLike, name: str | None = None) -> Workload:
    """Read a native workload; raises TraceError (file, row, column) on any bad value.

    A job may use at most the largest GPU count its profile lists: ``max_gpus`` is capped there,
    and a ``min_gpus`` or ``requested_gpus`` above it is an error.
    """
    profiles = read_profiles(profiles_path)
    jobs: list[JobSpec] = []
    first_row: dict[str, int] = {}
    with open_csv(jobs_path, REQUIRED_JOB_COLUMNS) as reader:
        for row in reader:
            job_id = row.get_str("job_id")
            if job_id in first_row:
                raise row.error(
                    f"duplicate job_id {job_id!r} (first at row {first_row[job_id]})", "job_id"
                )
            first_row[job_id] = row.number
            submit_time = row.get_nonnegative("submit_time")
            user = row.get_str("user", default="default")
            profile_name = row.get_str("profile")
            profile = profiles.get(profile_name)
            if profile is None:
                known = ", ".join(sorted(profiles))
                raise row.error(
                    f"unknown profile {profile_name!r} (the profiles file defines: {known})",
                    "profile",
                )
            requested = row.get_int("requested_gpus")
            min_gpus = row.get_int("min_gpus", default=requested)
            max_gpus = row.get_int("max_gpus", default=requested)
            work = row.get_nonnegative("work")
            restart = row.get_nonnegative(RESTART_COLUMN) if row.has(RESTART_COLUMN) else None

            top = max(profile)
            if min_gpus < 1:
                raise row.error(f"must be at least 1, got {min_gpus}", "min_gpus")
            if min_gpus > max_gpus:
                raise row.error(f"min_gpus ({min_gpus}) is above max_gpus ({max_gpus})", "min_gpus")
            if min_gpus > top:
                raise row.error(
                    f"min_gpus ({min_gpus}) is above {top}, the largest GPU count listed for "
                    f"profile {profile_name!r}",
                    "min_gpus",
                )
            max_gpus = min(max_gpus, top)
            if not min_gpus <= requested <= max_gpus:
                capped = f", capped at {top} by profile {profile_name!r}" if max_gpus == top else ""
                raise row.error(
                    f"requested_gpus ({requested}) must lie between min_gpus ({min_gpus}) and "
                    f"max_gpus ({max_gpus}{capped})",
                    "requested_gpus",
                )
            jobs.append(
                JobSpec(
                    job_id=job_id,
                    submit_time=submit_time,
                    work=work,
                    profile=profile,
                    min_gpus=min_gpus,
                    max_gpus=max_gpus,
                    requested_gpus=requested,
                    user=user,
                    profile_name=profile_name,
                    restart_s=restart,
                )
            )
    if not jobs:
        raise TraceError(str(jobs_path), "no jobs (the file has a header but no rows)")
    if name is None:
        name = csv_stem(jobs_path)
    return Workload(name, jobs)


def _number(x: float) -> str:
    """Shortest text that reads back as exactly ``x`` (whole numbers without '.0')."""
    x = float(x)
    if x.is_integer() and abs(x) < 2**53:
        return str(int(x))
    return repr(x)


def _profile_names(workload: Workload) -> list[str]:
    """A profile name for each job (in ``workload.jobs`` order), unique per distinct table.

    Jobs keep their ``profile_name`` where it names one table; a name shared by different
    tables gets ``-2``, ``-3``... for the later ones; an empty name becomes ``profile-N``.
    """
    by_content: dict[tuple[str, tuple[tuple[int, float], ...]], str] = {}
    used: set[str] = set()
    names: list[str] = []
    for job in workload.jobs:
        table = tuple(sorted((int(g), float(x)) for g, x in job.profile.items()))
        key = (job.profile_name, table)
        name = by_content.get(key)
        if name is None:
            base = job.profile_name or "profile"
            name, k = (base, 1) if job.profile_name else ("profile-1", 1)
            while name in used:
                k += 1
                name = f"{base}-{k}"
            used.add(name)
            by_content[key] = name
        names.append(name)
    return names


def write_native(workload: Workload, jobs_path: PathLike, profiles_path: PathLike) -> None:
    """Write ``workload`` so that :func:`read_native` gives the same jobs back.

    Placement-specific speeds (``JobSpec.placement_speed``) have no place in this format and are
    not written; each job's profile table is.
    """
    names = _profile_names(workload)
    tables: dict[str, Mapping[int, float]] = {}
    for job, name in zip(workload.jobs, names):
        if not job.profile:
            raise ValueError(f"job {job.job_id}: an empty profile cannot be written")
        bad = [g for g, x in job.profile.items() if not (int(g) >= 1 and float(x) > 0)]
        if bad:
            raise ValueError(
                f"job {job.job_id}: profile has a non-positive GPU count or throughput at {bad}"
            )
        tables.setdefault(name, job.profile)
    with open(profiles_path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(PROFILE_COLUMNS)
        for name, table in tables.items():
            for gpus in sorted(table):
                out.writerow((name, int(gpus), _number(table[gpus])))
    own = any(job.restart_s is not None for job in workload.jobs)
    with open(jobs_path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow((*JOB_COLUMNS, RESTART_COLUMN) if own else JOB_COLUMNS)
        for job, name in zip(workload.jobs, names):
            restart = ("" if job.restart_s is None else _number(job.restart_s),) if own else ()
            out.writerow(
                (
                    job.job_id,
                    _number(job.submit_time),
                    job.user or "default",
                    name,
                    job.requested_gpus,
                    job.min_gpus,
                    job.max_gpus,
                    _number(job.work),
                    *restart,
                )
            )
