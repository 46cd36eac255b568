"""Plain-text views of jobs, for terminals, nbconvert and the widget's fallback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_gpu_sidecar.protocol import FINAL_JOB_STATES, JobState

FINAL = frozenset(s.value for s in FINAL_JOB_STATES)
STATE_COLOURS = {
    JobState.QUEUED: "#888",
    JobState.STARTING: "#1f77b4",
    JobState.RUNNING: "#2ca02c",
    JobState.RESIZING: "#ff7f0e",
    JobState.STOPPING: "#9467bd",
    JobState.DONE: "#17becf",
    JobState.FAILED: "#d62728",
    JobState.CANCELLED: "#7f7f7f",
}


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
    """The only way an epoch is shown (the CLI, the text view, the widget): "epoch N/M",
    1-based as Keras' own log counts, N never above M; "epoch N" while the total is unknown;
    None before anything is known. ``progress`` is a job's (``epoch``: the 0-based epoch in
    progress; ``epochs``: the total)."""
    p = progress or {}
    epoch, total = p.get("epoch"), p.get("epochs")
    if total:
        n = total if state == JobState.DONE else (epoch or 0) + 1
        return f"epoch {min(max(n, 1), total)}/{total}"
    return None if epoch is None else f"epoch {epoch + 1}"


def reason_after_state(state: str, reason: str | None) -> str:
    """A reason shown right after its state: a reason is a sentence of its own that opens
    with the state ("queued: needs 2 GPUs", "done"), which said twice reads "done done"."""
    text = (reason or "").strip()
    for sep in (": ", " "):
        if text.startswith(state + sep):
            return text[len(state) + len(sep) :]
    return "" if text == state else text


def describe_job(job: dict[str, Any]) -> str:
    """One or two lines: what the job is doing now."""
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
    if p.get("samples_per_s"):
        parts.append(f"{p['samples_per_s']:,.0f} samples/s")
    eta = (
        eta_text(job.get("eta_s"))
        if job["state"] in (JobState.RUNNING, JobState.RESIZING)
        else None
    )
    if eta:
        parts.append(eta)
    line = head + (" | " + ", ".join(parts) if parts else "")
    if job["state"] == JobState.DONE and job.get("model_path"):
        return line + f"\nmodel: {job['model_path']} (load it: model = job.load_model())"
    if job["state"] == JobState.FAILED and job.get("error"):
        err = job["error"]
        return line + f"\n{err.get('type')}: {err.get('message')}\n{err.get('hint') or ''}".rstrip()
    reason = job.get("reason")
    return line + (f"\n{reason}" if reason and job["state"] not in FINAL else "")


def jobs_table(jobs: list[dict[str, Any]]) -> str:
    """The table `%elastic_jobs` prints."""
    rows = [["id", "name", "user", "state", "GPUs", "min-max", "progress", "reason"]]
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
                f"{j['min_gpus']}-{j['max_gpus']}",
                prog,
                (j.get("reason") or "")[:70],
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
