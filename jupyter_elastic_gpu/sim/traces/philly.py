"""The processed Microsoft Philly trace (``timestamp,duration,num_gpus,gpu_time,cluster``).

The trace says when jobs arrived, how many GPUs they asked for and how long they ran, but not
what they trained or how they would scale. Each job therefore gets an application
deterministically, by the rule the Pollux workload generator used (by GPU-time bucket), and
that application's speed profile: measured curves when the caller passes them
(``app_profiles``, e.g. from the Pollux tables), otherwise a synthetic family
(:mod:`jupyter_elastic_gpu.sim.profiles`). Work is chosen so that a job alone at its requested
GPU count takes exactly its trace duration. The rules are documented in docs/workload-formats.md.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timezone

from ..profiles import synthetic_profile
from ..workload import JobSpec, TraceError, Workload, profile_throughput
from .csvutil import PathLike, Row, open_csv, paused_gc

__all__ = [
    "APPLICATIONS",
    "MIN_DURATION_S",
    "SYNTHETIC_APP_FAMILIES",
    "PhillyStats",
    "application_for",
    "read_philly",
    "read_philly_with_stats",
]

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")

#: Jobs shorter than this are dropped: mostly failed launches, not training (as Pollux did).
MIN_DURATION_S = 60.0

#: The applications a job can be given (the ones the Pollux data has measurements for).
APPLICATIONS = ("cifar10", "ncf", "deepspeech2", "bert", "yolov3", "imagenet")

#: Synthetic family standing in for each application when no measured profiles are given;
#: chosen to resemble the shape of the Pollux measurements, but synthetic.
SYNTHETIC_APP_FAMILIES = {
    "cifar10": "moderate",
    "ncf": "poor",
    "deepspeech2": "moderate",
    "bert": "moderate",
    "yolov3": "poor",
    "imagenet": "linear-ish",
}

_EPOCH = datetime(1970, 1, 1)
_INF = float("inf")


@dataclass
class PhillyStats:
    """What the reader did with the trace's rows (for the CLI to report)."""

    rows: int = 0  #: data rows in the file
    matched: int = 0  #: rows in the chosen cluster at or after ``start``
    considered: int = 0  #: matched rows examined, in submit order, until ``limit`` jobs were kept
    dropped_short: int = 0  #: dropped: duration under MIN_DURATION_S
    dropped_no_gpus: int = 0  #: dropped: num_gpus < 1
    clamped: int = 0  #: kept with num_gpus reduced to the largest count allowed
    kept: int = 0  #: jobs in the workload
    applications: dict[str, int] = field(default_factory=dict)  #: kept jobs per application

    def summary(self) -> str:
        """One line, e.g. 'philly: kept 100 of 112 jobs (12 under 60 s dropped; ...)'."""
        notes = []
        if self.dropped_short:
            notes.append(f"{self.dropped_short} under {MIN_DURATION_S:g} s dropped")
        if self.dropped_no_gpus:
            notes.append(f"{self.dropped_no_gpus} without GPUs dropped")
        if self.clamped:
            notes.append(f"{self.clamped} clamped to the GPU cap")
        apps = ", ".join(f"{n} {a}" for a, n in sorted(self.applications.items()))
        text = f"philly: kept {self.kept} of {self.considered} jobs"
        if notes:
            text += f" ({'; '.join(notes)})"
        return text + (f"; {apps}" if apps else "")


def application_for(gpu_time_s: float, key: str, seed: int = 0) -> str:
    """The application for a job of ``gpu_time_s`` GPU-seconds (Pollux's bucket rule).

    Under 1 GPU-hour: cifar10 or ncf; under 10: deepspeech2 or bert; under 100: yolov3;
    otherwise imagenet. The coin between two is a stable hash of ``key`` (the row's text) and
    ``seed``, so it does not depend on Python's per-process ``hash()`` or on row order.
    """
    hours = gpu_time_s / 3600.0
    if hours >= 100:
        return "imagenet"
    if hours >= 10:
        return "yolov3"
    digest = hashlib.blake2b(f"{seed}|{key}".encode(), digest_size=8).digest()
    coin = digest[0] & 1
    if hours < 1:
        return ("cifar10", "ncf")[coin]
    return ("deepspeech2", "bert")[coin]


def _seconds(moment: datetime) -> float:
    """Seconds since 1970 for a naive (taken as UTC) or aware datetime, whatever the local TZ."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return (moment - _EPOCH).total_seconds()


def _parse_start(start: str | datetime | date) -> float:
    if isinstance(start, datetime):
        return _seconds(start)
    if isinstance(start, date):
        return _seconds(datetime(start.year, start.month, start.day))
    try:
        return _seconds(datetime.fromisoformat(str(start).strip()))
    except ValueError:
        raise ValueError(
            f"start: expected a timestamp like '2017-10-09 07:00:00' or a date like "
            f"'2017-10-09', got {start!r}"
        ) from None


def _check_app_profiles(
    app_profiles: Mapping[str, Mapping[int, float]],
) -> dict[str, dict[int, float]]:
    missing = [a for a in APPLICATIONS if a not in app_profiles]
    if missing:
        raise ValueError(f"app_profiles has no profile for {', '.join(missing)}")
    tables = {}
    for app in APPLICATIONS:
        table = {int(g): float(x) for g, x in app_profiles[app].items()}
        if not table or any(g < 1 or not x > 0 for g, x in table.items()):
            raise ValueError(
                f"app_profiles[{app!r}] must map GPU counts >= 1 to positive throughputs"
            )
        tables[app] = dict(sorted(table.items()))
    return tables


def read_philly_with_stats(
    path: PathLike,
    *,
    cluster: str | None = None,
    start: str | datetime | date | None = None,
    limit: int | None = None,
    max_gpus_per_job: int = 16,
    app_profiles: Mapping[str, Mapping[int, float]] | None = None,
    seed: int = 0,
) -> tuple[Workload, PhillyStats]:
    """Like :func:`read_philly`, also returning what was dropped and clamped."""
    with paused_gc():
        return _read_philly(path, cluster, start, limit, max_gpus_per_job, app_profiles, seed)


def _read_philly(
    path: PathLike,
    cluster: str | None,
    start: str | datetime | date | None,
    limit: int | None,
    max_gpus_per_job: int,
    app_profiles: Mapping[str, Mapping[int, float]] | None,
    seed: int,
) -> tuple[Workload, PhillyStats]:
    if max_gpus_per_job < 1:
        raise ValueError(f"max_gpus_per_job must be at least 1, got {max_gpus_per_job}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if app_profiles is None:
        profiles = {
            app: synthetic_profile(family, max_gpus_per_job)
            for app, family in SYNTHETIC_APP_FAMILIES.items()
        }
    else:
        profiles = _check_app_profiles(app_profiles)
    caps = {app: min(max_gpus_per_job, max(table)) for app, table in profiles.items()}
    speed = {
        (app, g): profile_throughput(table, g)
        for app, table in profiles.items()
        for g in range(1, caps[app] + 1)
    }
    start_s = None if start is None else _parse_start(start)
    path_text = str(path)
    stats = PhillyStats()

    # Pass 1: select by cluster and start. Only the timestamp is checked here, so a limited
    # read does not pay for (or fail on) rows it never uses.
    selected: list[tuple[float, int, Row]] = []
    clusters: set[str] = set()
    in_cluster = 0
    parse_time = datetime.fromisoformat
    with open_csv(path, PHILLY_COLUMNS) as reader:
        i_time, i_cluster = reader.index["timestamp"], reader.index["cluster"]
        for row in reader:
            stats.rows += 1
            cells = row.cells
            if cluster is not None and cells[i_cluster] != cluster:
                clusters.add(cells[i_cluster])
                continue
            in_cluster += 1
            try:
                moment = parse_time(cells[i_time])
            except ValueError:
                text = cells[i_time]
                why = f"expected a timestamp like '2017-10-09 07:01:55', got {text!r}"
                raise row.error(why if text else "missing value", "timestamp") from None
            if moment.tzinfo is None:  # the common case, inlined: 82k rows
                seconds = (moment - _EPOCH).total_seconds()
            else:
                seconds = _seconds(moment)
            if start_s is not None and seconds < start_s:
                continue
            selected.append((seconds, row.number, row))
        key_columns = [reader.index[c] for c in PHILLY_COLUMNS]
        i_duration, i_gpus, i_gpu_time = (reader.index[c] for c in PHILLY_COLUMNS[1:4])
    stats.matched = len(selected)
    if not stats.rows:
        raise TraceError(path_text, "no jobs (the file has a header but no rows)")
    if not selected:
        if cluster is not None and in_cluster == 0:
            known = ", ".join(sorted(c for c in clusters if c))
            raise TraceError(
                path_text, f"no jobs in cluster {cluster!r} (clusters: {known})", None, "cluster"
            )
        raise TraceError(path_text, f"no jobs at or after {start}", None, "timestamp")
    selected.sort()  # (time, row number) is unique, so rows themselves are never compared

    # Pass 2: in submit order, check each row and keep it, drop it or clamp it.
    jobs: list[JobSpec] = []
    apps: Counter[str] = Counter()
    origin: float | None = None
    for submit, _, row in selected:
        if limit is not None and len(jobs) >= limit:
            break
        stats.considered += 1
        cells = row.cells
        try:  # fast path for well-formed rows; the accessors below say what is wrong
            duration = float(cells[i_duration])
            num_gpus = int(cells[i_gpus])
            gpu_time = float(cells[i_gpu_time])
            ok = 0 <= duration < _INF and 0 <= gpu_time < _INF and num_gpus >= 0
        except ValueError:
            ok = False
        if not ok:
            duration = row.get_nonnegative("duration")
            num_gpus = row.get_int("num_gpus", minimum=0)
            gpu_time = row.get_nonnegative("gpu_time")
        if duration < MIN_DURATION_S:
            stats.dropped_short += 1
            continue
        if num_gpus < 1:
            stats.dropped_no_gpus += 1
            continue
        key = ",".join([cells[i] for i in key_columns]) if gpu_time < 36000 else ""
        app = application_for(gpu_time, key, seed)
        profile, cap = profiles[app], caps[app]
        if num_gpus > cap:
            stats.clamped += 1
        requested = min(num_gpus, cap)
        if origin is None:
            origin = submit
        apps[app] += 1
        jobs.append(
            JobSpec(
                job_id=f"philly-{row.number}",
                submit_time=submit - origin,
                work=duration * speed[app, requested],
                profile=profile,
                min_gpus=1,
                max_gpus=min(2 * requested, cap),
                requested_gpus=requested,
                user=row.raw("cluster") or "default",
                profile_name=app,
            )
        )
    stats.kept = len(jobs)
    stats.applications = dict(sorted(apps.items()))
    if not jobs:
        raise TraceError(
            path_text,
            f"all {stats.considered} selected jobs were dropped ({stats.dropped_short} under "
            f"{MIN_DURATION_S:g} s, {stats.dropped_no_gpus} without GPUs)",
        )
    name = "philly" if cluster is None else f"philly-{cluster}"
    return Workload(name, jobs), stats


def read_philly(
    path: PathLike,
    *,
    cluster: str | None = None,
    start: str | datetime | date | None = None,
    limit: int | None = None,
    max_gpus_per_job: int = 16,
    app_profiles: Mapping[str, Mapping[int, float]] | None = None,
    seed: int = 0,
) -> Workload:
    """Read the Philly trace into a workload (rules in docs/workload-formats.md).

    ``cluster`` keeps one virtual cluster; ``start`` (timestamp or date) skips earlier jobs;
    ``limit`` keeps the first N jobs from there in submit order, counted after drops. Submit
    times are seconds after the first kept job. ``app_profiles`` maps each application in
    :data:`APPLICATIONS` to {GPU count: relative throughput}; None uses synthetic families.
    """
    workload, _ = read_philly_with_stats(
        path,
        cluster=cluster,
        start=start,
        limit=limit,
        max_gpus_per_job=max_gpus_per_job,
        app_profiles=app_profiles,
        seed=seed,
    )
    return workload
