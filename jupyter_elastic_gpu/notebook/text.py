"""Plain-text views of jobs: the CLI, terminals, and the text of a job's notebook output, which
nbconvert, consoles and front ends without the lab extension show instead of its card."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_gpu_sidecar.protocol import FINAL_JOB_STATES, MODEL_CKPT, JobState, epoch_shown

from ..core.reason_text import gpu_range, plural

FINAL = frozenset(s.value for s in FINAL_JOB_STATES)
#: What a notebook says of an undefined name: the most common surprise of a cell run as a job.
#: Only notebook views say it (the trainer's own hint speaks of scripts, which the CLI shows).
CELL_HINT = (
    "the cell runs in its own process, not in your notebook kernel: variables from the "
    "notebook are not defined there; pass them with --pass NAME,... (or define or load them "
    "in the cell)"
)


def error_hint(error: Mapping[str, Any]) -> str | None:
    """The hint a notebook shows with a failed job's error."""
    if error.get("type") == "NameError":
        return CELL_HINT
    return error.get("hint")


#: What the text says of a running job's end while the API says ``estimating`` (its pace has
#: not settled: ``core/eta.py``); the card says the same.
ESTIMATING = "ETA estimating…"


def eta_text(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    seconds = int(seconds)
    if seconds >= 3600:
        return f"ETA {seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"ETA {seconds // 60} min {seconds % 60:02d} s"
    return f"ETA {seconds} s"


def epoch_text(progress: Mapping[str, Any] | None, state: str | None = None) -> str | None:
    """The only way an epoch is shown (the CLI, the text view; the card's ``epochText`` says
    the same): "epoch N/M", 1-based as Keras' own log counts, N never above M; "epoch N"
    while the total is unknown; None before anything is known. ``progress`` is a job's (``epoch``: the 0-based epoch in
    progress; ``epochs``: the total). The count is ``protocol.epoch_shown``'s."""
    p = progress or {}
    total = p.get("epochs")
    n = epoch_shown(p.get("epoch"), total, state == JobState.DONE)
    if n is None:
        return None
    return f"epoch {n}/{total}" if total else f"epoch {n}"


def cancel_text(job: Mapping[str, Any]) -> str:
    """What a cancel did, for the CLI and the job handle: a job cancelled before it started
    never had GPUs, one that runs checkpoints first."""
    state, started = job.get("state"), job.get("started_at") is not None
    if state == JobState.CANCELLED:
        if not started:
            return f"cancelled {job['id']} before it started (it never had GPUs)"
        return f"cancelled {job['id']}"
    if state in FINAL:
        return f"{job['id']} had already ended: {state}"
    return f"cancelling {job['id']}: it saves a checkpoint at its next step and stops"


def no_log_text(job: Mapping[str, Any]) -> str:
    """Why a job's log is empty, for the CLI and the job handle."""
    state = job.get("state")
    if state == JobState.QUEUED and job.get("started_at") is None:
        return "no log yet: the job is queued (it has not started)"
    if state == JobState.STARTING:
        return "no log yet: the job is starting (its trainer has not written anything)"
    if state == JobState.CANCELLED and job.get("started_at") is None:
        return "no log: the job was cancelled before it started"
    return f"the log is empty (the job is {state})"


def framework_text(job: Mapping[str, Any]) -> str | None:
    """The framework that trains a job and whether it is elastic, as the text view and the
    card say it: "framework lightning", "framework torchrun, not elastic: 2 GPUs throughout";
    None for a job without one (synthetic, a kernel's lease)."""
    framework = job.get("framework")
    if not framework:
        return None
    if job.get("elastic") is False:
        return f"framework {framework}, not elastic: {plural(job['max_gpus'], 'GPU')} throughout"
    return f"framework {framework}"


def noise_text(job: Mapping[str, Any]) -> str | None:
    """What the gradient noise scale says of the job's batch (``--measure-noise``): a batch of
    B samples makes phi / (phi + B) of the use of each sample that a small batch makes, so a
    batch well below phi uses its samples fully and one above it wastes more than half; None
    for a job that does not measure it."""
    if not job.get("measure_noise"):
        return None
    p = job.get("progress") or {}
    scale, steps, batch = p.get("noise_scale"), p.get("noise_steps"), p.get("batch_size")
    if scale is None:
        if steps:
            return (
                f"gradient noise scale: not measurable yet ({plural(steps, 'step pair')}: "
                "the gradient's signal reads as zero under its noise)"
            )
        return None if job["state"] in FINAL else "gradient noise scale: measuring"
    text = f"gradient noise scale {scale:,.0f} samples (from {plural(steps or 0, 'step pair')})"
    if batch:
        text += f": batch {batch:,} makes {scale / (scale + batch):.0%} of the use of each sample"
        text += " that a small batch makes"
    return text


def describe_job(job: dict[str, Any]) -> str:
    """A few lines: what the job is doing now, and the GPU counts it has had."""
    p = job.get("progress") or {}
    head = f"{job['name']} ({job['id']}): {job['state']}"
    if job.get("position"):
        head += f", #{job['position']} in the queue"
    parts = []
    if job.get("gpus"):
        parts.append(f"GPUs {','.join(job['gpus'])}")
    epoch = epoch_text(p, job["state"])
    if epoch:
        parts.append(epoch)
    if p.get("steps_per_epoch") and job["state"] != JobState.DONE:
        parts.append(f"step {p.get('step') or 0}/{p['steps_per_epoch']}")
    if p.get("loss") is not None:
        parts.append(f"loss {p['loss']:.4g}")
    if p.get("samples_per_s") and job["state"] not in FINAL:
        parts.append(f"{p['samples_per_s']:,.0f} samples/s")
    eta = (
        (ESTIMATING if job.get("estimating") else eta_text(job.get("eta_s")))
        if job["state"] in (JobState.RUNNING, JobState.RESIZING)
        else None
    )
    if eta:
        parts.append(eta)
    lines = [head + (" | " + ", ".join(parts) if parts else "")]
    framework = framework_text(job)
    if framework:
        lines.append(framework)
    noise = noise_text(job)
    if noise:
        lines.append(noise)
    if p.get("note") and job["state"] not in FINAL:
        lines.append(f"trainer: {p['note']}")
    counts = [len(h["gpus"]) for h in job.get("history") or []]
    if len(counts) > 1:  # resized: the story a saved notebook keeps
        lines.append("GPU counts so far: " + " → ".join(map(str, counts)))
    if job["state"] == JobState.DONE and job.get("model_path"):
        call = "job.load_model(MyModule)" if job["model_path"].endswith(MODEL_CKPT) else ""
        lines.append(f"model: {job['model_path']} (load it: model = {call or 'job.load_model()'})")
    elif job["state"] == JobState.FAILED and job.get("error"):
        err = job["error"]
        lines.append(f"{err.get('type')}: {err.get('message')}\n{error_hint(err) or ''}".rstrip())
    elif job.get("reason") and job["state"] not in FINAL:
        lines.append(job["reason"])
    return "\n".join(lines)


def jobs_table(jobs: list[dict[str, Any]]) -> str:
    """The table `%elastic_jobs` prints."""
    rows = [["id", "name", "user", "state", "GPUs", "range", "progress", "reason"]]
    for j in jobs:
        p = j.get("progress") or {}
        prog = epoch_text(p, j["state"]) or ""
        if not prog and p.get("fraction") is not None:
            prog = f"{p['fraction']:.0%}"
        rows.append(
            [
                j["id"],
                j.get("name") or "",
                j["user"],
                j["state"],
                ",".join(j.get("gpus") or []) or "-",
                j.get("mig") or gpu_range(j["min_gpus"], j["max_gpus"]),  # a MIG slice's profile
                prog,
                (j.get("reason") or "")[:70],
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
