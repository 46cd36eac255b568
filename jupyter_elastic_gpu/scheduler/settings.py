"""Every setting of the scheduler service (``c.SchedulerService.<name>``), its help and its
checks, apart from the loop that reads them: ``SchedulerService`` inherits them, so a setting
is configured and documented under the service's name as before."""

from __future__ import annotations

import math
from typing import Any

from elastic_gpu_sidecar import protocol as P
from traitlets import Bool, Dict, Enum, Float, Int, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from ..core.fairshare import DEFAULT_HALF_LIFE_S
from . import policies
from .shares import check_weight

#: The settings in seconds that must be above 0.
POSITIVE_SECONDS = (
    "tick_interval",
    "heartbeat_interval",
    "heartbeat_timeout",
    "checkpoint_interval",
    "server_timeout",
    "fair_share_half_life",
    "forecast_budget",
)


class SchedulerSettings(LoggingConfigurable):
    """The settings; the service that reads them is ``service.SchedulerService``."""

    policy = Unicode(
        "adaptive",
        config=True,
        help="Scheduling policy: adaptive (ours), static (Kubernetes-like), tiresias, optimus, "
        "elas, srtf, or one an installed package adds (entry points "
        f"'{policies.ENTRY_POINTS}').",
    )
    policy_params = Dict(
        config=True,
        help="Parameters of the policy, e.g. {'aging_s': 1800} for adaptive "
        "(docs/policies.md lists them).",
    )
    tick_interval = Float(60.0, config=True, help="Seconds between periodic decisions.")
    heartbeat_interval = Float(
        P.DEFAULT_HEARTBEAT_INTERVAL_S, config=True, help="Seconds between sidecar heartbeats."
    )
    heartbeat_timeout = Float(
        30.0,
        config=True,
        help="A sidecar silent this long (with its process gone) is declared lost and its job "
        "queued again, to resume from its last checkpoint.",
    )
    job_root = Unicode(
        config=True,
        help="Folder of the job directories (scripts, checkpoints, logs, models). '{user}' is "
        "replaced by the job's owner; without it, each user gets a sub-folder. Default: "
        "elastic-gpu/jobs in the Jupyter data dir.",
    )
    checkpoint_interval = Float(
        P.DEFAULT_CHECKPOINT_INTERVAL_S,
        config=True,
        help="Seconds between periodic checkpoints of a running job (they bound the work a "
        "crash loses; a resize checkpoints at the next step and loses none).",
    )
    release_grace = Float(
        0.0,
        config=True,
        help="Seconds a sidecar (or a kernel's provisioner) has to confirm a release it was "
        "asked for: a resize that gives GPUs up, a suspension, a cancel, a lease taken back. "
        "Past it the claim is void: its secret is revoked, its processes are ended and the job "
        "fails saying so (docs/security.md). 0: derived per job from checkpoint_interval, its "
        "measured resize cost and heartbeat_interval, at least 30 s (the job's events show it).",
    )
    user_gpu_cap = Int(
        0,
        min=0,
        config=True,
        help="Most GPUs one user's jobs may hold at a time (0: no cap). The GPUs it keeps from "
        "a user go to other users' jobs in the same decision.",
    )
    fair_share = Bool(
        True,
        config=True,
        help="Share the GPUs between users by weight and recent usage (docs/policies.md, Fair "
        "share): each user with jobs is due a share of the GPUs in proportion to their weight; "
        "what a user leaves idle is lent to others and taken back by shrinking their elastic "
        "jobs as soon as its owner submits. With one user it changes nothing.",
    )
    fair_share_half_life = Float(
        DEFAULT_HALF_LIFE_S,
        config=True,
        help="Seconds after which a user's past GPU usage counts half when fair share decides "
        "who goes first (default 7 days).",
    )
    group_weights = Dict(
        value_trait=Float(),
        config=True,
        help="Fair-share weight of each group, e.g. {'staff': 2, 'students': 1} (groups not "
        "listed: 1). A user's weight is the largest of their groups' weights (JupyterHub "
        "groups). Weights an admin sets on the admin page override these.",
    )

    @validate(*POSITIVE_SECONDS)
    def _check_seconds(self, proposal: Any) -> float:
        value = proposal["value"]
        if not value > 0:  # (NaN too: it would stop every clock; inf: never)
            raise ValueError(
                f"{proposal['trait'].name} must be a positive number of seconds, got {value}"
            )
        return value

    @validate("default_resize_cost", "release_grace")
    def _check_resize_cost(self, proposal: Any) -> float:
        value = proposal["value"]
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{proposal['trait'].name} must be 0 or more seconds, got {value}")
        return value

    @validate("group_weights")
    def _check_group_weights(self, proposal: Any) -> dict:
        for group, weight in proposal["value"].items():
            try:
                check_weight(weight)
            except ValueError as e:
                raise ValueError(f"group_weights[{group!r}]: {e}") from None
        return proposal["value"]

    default_resize_cost = Float(
        6.0,
        config=True,
        help="Seconds a resize is assumed to cost until the job has measured its own.",
    )
    recent_jobs = Int(
        50,
        min=0,
        config=True,
        help="Finished jobs of each user that GET jobs (and the JupyterLab panel) still list, the "
        "most recently finished first; older ones stay in the database and GET jobs/ID.",
    )
    job_retention_days = Float(
        30.0,
        min=0.0,
        config=True,
        help="Days a finished job (done, failed or cancelled) is kept after it ended; then its "
        "record, progress, events and job directory (logs, checkpoints, the saved model) are "
        "removed, unless its owner kept it (`jupyter elastic-gpu keep JOB`, POST jobs/ID/keep). "
        "0 keeps every job forever.",
    )
    server_timeout = Float(
        20.0,
        config=True,
        help="With a shared or JupyterHub scheduler (whose users' own Jupyter servers start "
        "their jobs): seconds without a word from a user's server after which that user's queued "
        "jobs wait for it ('waiting for your server') instead of being given GPUs nobody would "
        "start. Running jobs keep running: their sidecars need no server.",
    )
    mechanism = Enum(
        P.Mechanism.values(),
        P.Mechanism.SIDECAR.value,
        config=True,
        help="How a job changes GPUs: 'sidecar' (checkpoint at the next step, no work lost) or "
        "'termination' (kill, restart from the last periodic checkpoint: for comparisons).",
    )

    # -- budgets (budgets.py, estimates.py) -----------------------------------------------
    max_open_jobs = Int(
        200,
        min=0,
        config=True,
        help="Most open (queued or running) jobs one user may have, admins included; a "
        "submission past it is refused with 429 (0: no cap). Every open job costs each decision "
        "and forecast a little; 200 is days of work for a box of a few GPUs.",
    )
    max_stored_bytes = Int(
        256 * 2**20,
        min=0,
        config=True,
        help="Most bytes one user's jobs may take in the scheduler's database (their scripts, "
        "args, names and paths; finished jobs until they expire); a submission past it is "
        "refused with 507 (0: no cap). 256 MB: 256 scripts of the largest size (1 MB), or "
        "thousands of ordinary ones.",
    )
    forecast_budget = Float(
        1.0,
        config=True,
        help="Seconds one forecast of the queue's estimated starts and ends may take (in a "
        "worker thread): the forward run stops there, and the jobs it did not reach have no "
        "estimate. Every reader (GET queue, status, gpus, the panel) shares one run and waits "
        "for it briefly (a tenth of a second at most), then answers from the last forecast.",
    )
    forecast_jobs = Int(
        200,
        min=1,
        config=True,
        help="Most open jobs one forecast plays forward: every job that holds GPUs, then the "
        "first in queue order; the others have no estimate.",
    )

    @default("job_root")
    def _default_job_root(self) -> str:
        from jupyter_core.paths import jupyter_data_dir

        return str(jupyter_data_dir()) + "/elastic-gpu/jobs"

    @validate("policy")
    def _check_policy(self, proposal: Any) -> str:
        known = policies.available()
        if proposal["value"] not in known:
            raise ValueError(
                f"unknown policy {proposal['value']!r}: choose one of {', '.join(sorted(known))}"
            )
        return proposal["value"]
