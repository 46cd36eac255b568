"""Reader for the Pollux/AdaptDL workloads and their measured application traces.

A workload row (``name,time,application,num_replicas,batch_size``) names an application whose
folder holds real measurements (Qiao et al., "Pollux", OSDI 2021):

* ``placements.csv`` / ``scalability.csv``: step time and all-reduce time per placement (GPUs
  per node, e.g. ``22`` = 2 nodes x 2 GPUs) and per-GPU batch size;
* ``validation-<batch>.csv``: per epoch, the training progress (in steps of the smallest batch)
  and the gradient noise statistics, at each batch size measured.

(Any of these files, and the workload, may be gzip-compressed as ``<name>.csv.gz``.)

From them a job gets what our simulator needs, at the job's fixed batch size:

* **work** = the steps it needs to finish all the measured epochs. Each epoch adds a fixed
  amount of progress; one step at batch B yields (var + sqr) / (var / s + sqr) of it, s = B /
  smallest batch (the statistical efficiency Pollux measured), so work is the sum over epochs
  of progress / efficiency;
* **speed** (steps per second) = 1 / (step time + accumulation steps x compute time), with the
  per-GPU batch and gradient accumulation derived from B and the GPU count as in Pollux, the
  times interpolated in the per-GPU batch for a measured placement and in (nodes, GPUs, batch)
  otherwise.

Elastic bounds (our rule, the same for every trace): min 1 GPU; max twice the requested
count, no more than leaves each GPU the smallest measured per-GPU batch.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..workload import BATCH_POLICIES, JobSpec, TraceError, Workload
from .csvutil import csv_stem, read_rows
from .goodput import GoodputBatching

WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")

#: Per-GPU batch limits the Pollux artifact sets beyond what its placement traces show
#: (YOLOv3 runs out of GPU memory above 8 images per GPU).
APPLICATION_LIMITS: dict[str, dict[str, int]] = {"yolov3": {"max_local_bsz": 8}}


@dataclass
class _Validation:
    progress: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


class Application:
    """The measurements of one application, and the step rate and work derived from them."""

    def __init__(self, folder: str, max_local_bsz: int | None = None) -> None:
        self.name = os.path.basename(os.path.normpath(folder))
        self.folder = folder
        self.validation: dict[int, _Validation] = {}
        for entry in sorted(os.listdir(folder)):
            if entry.startswith("validation-") and entry.endswith((".csv", ".csv.gz")):
                path = os.path.join(folder, entry)
                try:
                    bsz = int(csv_stem(entry)[len("validation-") :])
                except ValueError:
                    raise TraceError(
                        path, "file name must be validation-<batch size>.csv"
                    ) from None
                if bsz in self.validation:
                    raise TraceError(path, f"a second validation file for batch size {bsz}")
                rows = read_rows(path, ("progress", "grad_sqr", "grad_var"))
                if not rows:
                    raise TraceError(path, "no epochs in the file")
                self.validation[bsz] = _Validation(
                    np.array([r.get_nonnegative("progress") for r in rows]),
                    np.array([r.get_float("grad_sqr") for r in rows]),
                    np.array([r.get_float("grad_var") for r in rows]),
                )
        if not self.validation:
            raise TraceError(folder, "no validation-<batch>.csv files: not an application folder")
        self.batch_sizes = sorted(self.validation)
        self.init_batch_size = self.batch_sizes[0]
        self.max_batch_size = self.batch_sizes[-1]
        self.epochs = min(len(v.progress) for v in self.validation.values())

        placements = _table(folder, "placements")
        self._by_placement: dict[str, list[tuple[float, float, float]]] = {}
        points: dict[tuple[int, int, float], list[tuple[float, float]]] = {}
        for r in read_rows(placements, ("placement", "local_bsz", "step_time", "sync_time")):
            pid = r.get_str("placement")
            if not pid.isdigit():
                raise r.error(f"expected GPUs per node as digits, got {pid!r}", "placement")
            bsz = r.get_float("local_bsz", positive=True)
            step, sync = r.get_float("step_time", positive=True), r.get_nonnegative("sync_time")
            self._by_placement.setdefault(pid, []).append((bsz, step, sync))
            key = (len(pid), sum(map(int, pid)), bsz)
            points.setdefault(key, []).append((step, sync))
        if not self._by_placement:
            raise TraceError(placements, "no measurements")
        for rows in self._by_placement.values():
            rows.sort()
        local = [b for rows in self._by_placement.values() for b, _, _ in rows]
        self.min_local_bsz = int(min(local))
        self.max_local_bsz = int(max_local_bsz or max(local))
        xs = [list(k) for k in points]
        ys = [np.mean(v, axis=0) for v in points.values()]
        scal = _table(folder, "scalability")
        if os.path.exists(scal):
            for r in read_rows(
                scal, ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
            ):
                xs.append(
                    [r.get_int("num_nodes"), r.get_int("num_replicas"), r.get_float("local_bsz")]
                )
                ys.append([r.get_float("step_time"), r.get_float("sync_time")])
        self._scatter_x = np.array(xs, dtype=float)
        self._scatter_y = np.array(ys, dtype=float)

    # -- statistics -----------------------------------------------------------------------
    def _bracket(self, batch_size: float) -> tuple[int, int]:
        lo = max((b for b in self.batch_sizes if b <= batch_size), default=self.batch_sizes[0])
        hi = min((b for b in self.batch_sizes if b >= batch_size), default=self.batch_sizes[-1])
        return lo, hi

    def _interp_batch(self, batch_size: float, field: str, epoch: int) -> float:
        lo, hi = self._bracket(batch_size)
        a = getattr(self.validation[lo], field)[epoch]
        b = getattr(self.validation[hi], field)[epoch]
        if lo == hi:
            return float(a)
        return float(((batch_size - lo) * b + (hi - batch_size) * a) / (hi - lo))

    def progress_at(self, epoch: int) -> float:
        """Progress (steps of the smallest batch) at the end of ``epoch`` epochs."""
        if epoch == 0:
            return 0.0
        return float(min(v.progress[epoch - 1] for v in self.validation.values()))

    def efficiency(self, batch_size: float, epoch: int) -> float:
        """Progress one step at ``batch_size`` makes in ``epoch`` (1 at the smallest batch)."""
        sqr = self._interp_batch(batch_size, "grad_sqr", epoch)
        var = self._interp_batch(batch_size, "grad_var", epoch)
        scale = batch_size / self.init_batch_size
        return (var + sqr) / (var / scale + sqr)

    @functools.cache  # noqa: B019 - one Application per trace folder
    def work(self, batch_size: int) -> float:
        """Steps at ``batch_size`` to finish every measured epoch."""
        total = 0.0
        for epoch in range(self.epochs):
            delta = self.progress_at(epoch + 1) - self.progress_at(epoch)
            total += delta / self.efficiency(batch_size, epoch)
        return total

    # -- speed ----------------------------------------------------------------------------
    def batch_layout(self, batch_size: int, replicas: int) -> tuple[int, int]:
        """(per-GPU micro-batch, accumulation steps) for a global batch over ``replicas``."""
        local = math.ceil(batch_size / replicas - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and batch_size > self.init_batch_size:
            accum = max(1, accum)  # the artifact's single-GPU large-batch model
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        atomic = min(atomic, int(self.max_batch_size / (replicas * (accum + 1))))
        return atomic, accum

    def max_replicas(self, batch_size: int) -> int:
        """Most GPUs that still leave each the smallest measured per-GPU batch."""
        return max(1, batch_size // self.min_local_bsz)

    @functools.cache  # noqa: B019
    def step_times(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """(step time, all-reduce time) for GPUs per node ``placement`` at ``local_bsz``."""
        placement = tuple(p for p in placement if p)
        rotation = min(placement[i:] + placement[:i] for i in range(len(placement)))
        pid = "".join(map(str, rotation))
        rows = self._by_placement.get(pid)
        if rows is not None:
            bsz = [r[0] for r in rows]
            x = min(max(local_bsz, bsz[0]), bsz[-1])
            return float(np.interp(x, bsz, [r[1] for r in rows])), float(
                np.interp(x, bsz, [r[2] for r in rows])
            )
        return self._scattered(min(len(placement), 16), sum(placement), local_bsz)

    def _scattered(self, nodes: int, replicas: int, local_bsz: float) -> tuple[float, float]:
        from scipy.interpolate import LinearNDInterpolator  # only traces beyond 4 nodes need it

        if not hasattr(self, "_nd"):
            self._nd = LinearNDInterpolator(self._scatter_x, self._scatter_y)
        value = self._nd([nodes, replicas, local_bsz])[0]
        if not np.all(np.isfinite(value)):
            raise TraceError(
                self.folder,
                f"no measurement near {replicas} GPUs on {nodes} nodes at per-GPU "
                f"batch {local_bsz:g}: outside the traces",
            )
        return float(value[0]), float(value[1])

    @property
    def node_size(self) -> int:
        """GPUs per node in the measured placements (4 in the Pollux traces)."""
        return max(int(d) for pid in self._by_placement for d in pid)

    def steps_per_second(self, placement: Sequence[int], batch_size: int) -> float:
        """Steps per second on GPUs spread as ``placement``. A node larger than the measured
        ones counts as several measured nodes (a conservative guess: no NVLink bonus)."""
        size = self.node_size
        split = [c for p in placement if p for c in compact(p, size)]
        placement = tuple(sorted(split, reverse=True))
        atomic, accum = self.batch_layout(batch_size, sum(placement))
        step, sync = self.step_times(placement, atomic)
        return 1.0 / (step + accum * (step - sync))


def _table(folder: str, name: str) -> str:
    """``folder/name.csv``, or ``name.csv.gz`` where only that exists."""
    path = os.path.join(folder, name + ".csv")
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        return path + ".gz"
    return path


def compact(gpus: int, per_node: int) -> tuple[int, ...]:
    """GPUs per node when ``gpus`` are packed onto as few nodes as possible."""
    full, rest = divmod(gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def load_applications(
    app_traces: str, limits: Mapping[str, Mapping[str, int]] | None = None
) -> dict[str, Application]:
    """Every application folder in ``app_traces``; ``limits``: per application, limits
    beyond what its traces show (None: the Pollux artifact's, ``APPLICATION_LIMITS``)."""
    if not os.path.isdir(app_traces):
        raise TraceError(app_traces, "not a folder (expected one sub-folder per application)")
    limits = APPLICATION_LIMITS if limits is None else limits
    apps = {}
    for entry in sorted(os.listdir(app_traces)):
        folder = os.path.join(app_traces, entry)
        if os.path.isdir(folder) and os.path.exists(_table(folder, "placements")):
            apps[entry] = Application(folder, **limits.get(entry, {}))
    if not apps:
        raise TraceError(app_traces, "no application folders with placements.csv inside")
    return apps


def read_pollux(
    workload_path: str,
    app_traces: str | Mapping[str, str],
    gpus_per_node: int = 4,
    max_gpus: int | None = None,
    name: str | None = None,
    batch_policy: str = "fixed",
    limits: Mapping[str, Mapping[str, int]] | None = None,
    restart_s: Mapping[str, float] | None = None,
) -> Workload:
    """Read a Pollux workload; ``max_gpus`` caps elastic bounds (the cluster size);
    ``limits``: as ``load_applications``'s (the Pollux artifact's by default);
    ``restart_s``: seconds a (re)start of each application's jobs takes (``JobSpec.restart_s``;
    an application not in it: the run's cost).

    ``batch_policy``: ``fixed`` runs each job at its row's batch size; ``goodput`` lets it
    train at any measured batch, chosen at each (re)start (``traces.goodput``), and its elastic
    range is then every count some batch gives the smallest measured per-GPU batch.

    ``app_traces``: the applications' folder, or {kind of GPU: its folder} where the GPUs are
    of several kinds (Sia's per-kind measurements): each job then goes at each kind's measured
    speed (``JobSpec.kind_speed``), profiled on one GPU of each (``kind_prior``); its work and
    the policy's prior are its first kind's (``gpus_per_node`` is that kind's), and its
    elastic range is what every kind measured.
    """
    if batch_policy not in BATCH_POLICIES:
        raise ValueError(
            f"batch policy {batch_policy!r}: expected one of {', '.join(BATCH_POLICIES)}"
        )
    folders = {"": app_traces} if isinstance(app_traces, str) else dict(app_traces)
    if not folders:
        raise ValueError("no application traces: give a folder, or one per kind of GPU")
    by_kind = {kind: load_applications(folder, limits) for kind, folder in folders.items()}
    first = next(iter(by_kind))
    batchings: dict[tuple[str, str], GoodputBatching] = {}
    jobs = []
    seen: set[str] = set()
    for row in read_rows(workload_path, WORKLOAD_COLUMNS):
        job_id = row.get_str("name")
        if job_id in seen:
            raise row.error(f"job name {job_id!r} appears twice", "name")
        seen.add(job_id)
        app_name = row.get_str("application")
        for kind, apps in by_kind.items():
            if app_name not in apps:
                where = folders[kind] + (f" (kind {kind})" if kind else "")
                raise row.error(
                    f"no traces for application {app_name!r} in {where} (have: {', '.join(apps)})",
                    "application",
                )
        kind_apps = {kind: apps[app_name] for kind, apps in by_kind.items()}
        app = kind_apps[first]
        batch = row.get_int("batch_size", minimum=1)
        if not app.init_batch_size <= batch <= app.max_batch_size:
            raise row.error(
                f"batch size {batch} is outside the measured {app.init_batch_size}.."
                f"{app.max_batch_size} of {app_name}",
                "batch_size",
            )
        requested = row.get_int("num_replicas", minimum=1)
        limit = min(a.max_replicas(batch) for a in kind_apps.values())
        if requested > limit:
            raise row.error(
                f"{requested} GPUs would give each fewer than {app.min_local_bsz} samples of the "
                f"batch {batch}; at most {limit}",
                "num_replicas",
            )
        kind_batching: dict[str, GoodputBatching] = {}
        if batch_policy == "goodput":
            for kind, a in kind_apps.items():
                if (kind, app_name) not in batchings:  # the same tables for every job
                    batchings[kind, app_name] = GoodputBatching(a)
                kind_batching[kind] = batchings[kind, app_name]
            batching = kind_batching[first]
            limit = min(b.max_gpus() for b in kind_batching.values())
            top = min(limit, max_gpus or limit)
            speeds = {kind: b.speed for kind, b in kind_batching.items()}
        else:
            batching = None
            top = min(2 * requested, limit, max_gpus or limit)
            speeds = {
                kind: functools.partial(a.steps_per_second, batch_size=batch)
                for kind, a in kind_apps.items()
            }
        speed = speeds[first]
        requested = min(requested, top)
        if batching is None:
            profile = {}
            for g in range(1, top + 1):
                try:
                    for a in kind_apps.values():  # every kind measured this far out
                        a.steps_per_second(compact(g, a.node_size), batch)
                    profile[g] = speed(compact(g, gpus_per_node))
                except TraceError:
                    if g <= requested:
                        raise
                    break  # no measurement this far out: the job's elastic range ends here
        else:
            average = batching.average(0.0, gpus_per_node, top)
            profile = {}
            for g in range(1, top + 1):
                if g not in average:
                    break  # no batch runs on so many GPUs within the measurements
                profile[g] = average[g]
        top = max(profile)
        mixed = len(speeds) > 1
        jobs.append(
            JobSpec(
                job_id=job_id,
                submit_time=row.get_nonnegative("time"),
                work=app.work(batch) if batching is None else batching.work,
                profile=profile,
                min_gpus=1,
                max_gpus=top,
                requested_gpus=requested,
                profile_name=f"{app_name}@{batch if batching is None else 'goodput'}",
                placement_speed=functools.lru_cache(maxsize=None)(speed),
                batching=batching,
                kind_speed={
                    k: functools.lru_cache(maxsize=None)(_within(f, kind_apps[k].node_size))
                    for k, f in speeds.items()
                }
                if mixed
                else {},
                kind_batching=kind_batching if mixed else {},
                kind_prior={k: f((1,)) for k, f in speeds.items()} if mixed else {},
                restart_s=(restart_s or {}).get(app_name),
            )
        )
    if not jobs:
        raise TraceError(workload_path, "no jobs in the workload")
    return Workload(name or csv_stem(workload_path), jobs)


def _within(speed: Callable[[tuple[int, ...]], float], node_size: int):
    """``speed`` on a placement, or where its kind's measurements do not reach it (more of
    its nodes than were measured: a job spread over kinds counts every GPU as its slowest
    kind's), on the same count packed onto that kind's nodes; 0 where neither was measured."""

    def on(placement: tuple[int, ...]) -> float:
        try:
            return speed(placement)
        except TraceError:
            try:
                return speed(compact(sum(placement), node_size))
            except TraceError:
                return 0.0

    return on


def scaling_curves(
    app_traces: str, gpus_per_node: int = 4, max_gpus: int = 16
) -> dict[str, dict[int, float]]:
    """Measured speed-up curves {application: {GPUs: speed relative to 1 GPU}}.

    Each curve is taken at the application's middle measured batch size, GPUs packed onto as
    few nodes as possible; it stops where the batch no longer gives each GPU the smallest
    measured per-GPU batch. This is what gives Philly jobs measured profiles.
    """
    curves = {}
    for name, app in load_applications(app_traces).items():
        batch = app.batch_sizes[len(app.batch_sizes) // 2]
        top = min(max_gpus, app.max_replicas(batch))
        one = app.steps_per_second((1,), batch)
        curve = {}
        for g in range(1, top + 1):
            try:
                curve[g] = app.steps_per_second(compact(g, gpus_per_node), batch) / one
            except TraceError:
                break  # beyond the measurements: the curve (and the job's range) ends here
        curves[name] = curve
    return curves
