"""A job as a simulation run holds it (``SimJob``: its progress, grant, pause and what it has
measured), and the ``core`` snapshot of a run's jobs that its policy decides on, built the way
the live scheduler builds its own. A long run builds hundreds of thousands of them, so a snapshot
passes each ``Job`` by position (``core.model.JOB_FIELDS``) and through ``Job``'s checks only
the first time (``core.model.trusted_job``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.kinds import fleet_ratios, relative_speeds
from ..core.model import Gpu, Job, Snapshot, trusted_job
from ..core.speed import SpeedModel
from .config import SimConfig
from .traces.goodput import Segment
from .workload import JobSpec


@dataclass(slots=True)
class SimJob:
    spec: JobSpec
    work_done: float = 0.0
    gpus: tuple[str, ...] = ()
    speed: float = 0.0  # true throughput on the current GPUs
    pause_until: float = 0.0
    started: bool = False
    start: float | None = None
    finish: float | None = None
    attained_gpu_s: float = 0.0
    queued_s: float = 0.0
    resizes: int = 0
    last_change: float | None = None
    lost_gpu_s: float = 0.0
    measured: dict[int, float] = field(default_factory=dict)
    model: SpeedModel | None = None
    #: Its first snapshot went through ``Job``'s checks; later ones take ``trusted_job`` (the
    #: spec does not change, and the engine keeps the values it adds valid).
    checked: bool = False
    #: Its run at one batch since its last (re)start, where its batch is chosen by goodput.
    segment: Segment | None = None
    batches: list[int] = field(default_factory=list)  # each batch it trained at, in order
    #: The epoch (and kind) its goodput (``model``) was taken at.
    prior_epoch: tuple[int, str | None] | None = None
    #: Where kinds are mixed: the kind its grant goes at (``JobSpec.pace``), and its speed
    #: at each count on each kind it has run on, as its progress records would file it.
    kind: str | None = None
    by_kind: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def remaining(self) -> float:
        return max(self.spec.work - self.work_done, 0.0)

    def speed_model(self) -> SpeedModel:
        if self.model is None:
            self.model = SpeedModel(self.measured, self.spec.profile)
        return self.model

    def finish_time(self, now: float) -> float:
        if not self.gpus or self.speed <= 0 or self.finish is not None:
            return math.inf
        return max(now, self.pause_until) + self.remaining / self.speed


def snapshot(
    active: list[SimJob],
    gpus: tuple[Gpu, ...],
    cost: float,
    now: float,
    cfg: SimConfig,
    usage: Mapping[str, float],
    own_costs: Mapping[str, float] | None = None,
) -> Snapshot:
    """What a policy sees of the run at ``now``: the ``active`` jobs not finished, each as
    the live scheduler would show it (``cost``: the resize cost the mechanism tells the
    policy, ``own_costs`` that of the jobs whose restarts take a time of their own), under the
    run's rules (``usage``: decayed GPU-seconds per user)."""
    jobs = []
    for j in active:
        if j.finish is not None:
            continue
        s = j.spec
        held = len(j.gpus)
        if s.batching is not None:
            # Goodput: the job's worth at each count moves as training goes on (larger batches
            # gain); the policy is told the epoch's goodput, as a live scheduler would work it
            # out from the throughput and the gradient noise its sidecar reports.
            # (on the kind it runs on, where kinds are mixed: its goodput there)
            batching = s.kind_batching.get(j.kind or "", s.batching)
            epoch = s.batching.epoch(j.work_done)
            if (epoch, j.kind) != j.prior_epoch:
                j.prior_epoch = (epoch, j.kind)
                per_node = cfg.per_node(j.kind)
                now_worth = batching.goodput(j.work_done, per_node, s.max_gpus)
                j.model = SpeedModel({}, now_worth)
        elif held and now >= j.pause_until and j.measured.get(held) != j.speed:
            j.measured[held] = j.speed  # what a live sidecar would report by now
            j.model = None
        if j.kind is not None and held and now >= j.pause_until and j.speed > 0:
            j.by_kind.setdefault(j.kind, {})[held] = j.speed
        jobs.append(
            (trusted_job if j.checked else Job)(  # by position (JOB_FIELDS); weight 1
                s.job_id,
                s.submit_time,
                s.work,
                s.min_gpus,
                s.max_gpus,
                s.requested_gpus,
                j.work_done,
                s.user,
                1.0,
                j.model or j.speed_model(),
                own_costs.get(s.job_id, cost) if own_costs else cost,
                j.gpus,
                j.started,
                j.attained_gpu_s,
                j.queued_s,
                j.resizes,
                j.last_change,
                bool(held) and now < j.pause_until,
            )
        )
        j.checked = True
    value = kind_speeds(active, cfg) if cfg.mixed else {}
    return Snapshot(gpus, tuple(jobs), cfg.user_gpu_cap, cfg.fair_rules(usage), value)


def kind_speeds(active: list[SimJob], cfg: SimConfig) -> dict[str, dict[str, float]]:
    """Each job's speed on each kind (``core.kinds``), as the live scheduler works it out:
    what it measured on each, else its profile (``JobSpec.kind_prior``), else the ratios of
    the jobs that ran on two kinds."""
    kinds = [kind for kind, _, _ in cfg.kinds]
    fleet = fleet_ratios(j.by_kind for j in active)
    return {
        j.spec.job_id: relative_speeds(kinds, j.by_kind, j.spec.kind_prior, fleet)
        for j in active
        if j.finish is None
    }


__all__ = ["SimJob", "snapshot"]
