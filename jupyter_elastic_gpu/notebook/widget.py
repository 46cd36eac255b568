"""The live view of one job: an ipywidgets panel kept up to date from a background thread.

It shows the state (queued with its reason and position, running, resizing, done, failed,
cancelled), the GPUs held and the history of resizes, progress over epochs and steps, a loss
curve, samples/s and an ETA, the tail of the log, and buttons to cancel and to show the whole
log. The display also carries a text summary that the thread keeps current, which is what a
front end without widgets (nbconvert, a notebook saved to disk) shows instead.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

import ipywidgets as w
from elastic_gpu_sidecar.protocol import JobState
from IPython.display import display, update_display

from .text import FINAL, STATE_COLOURS, describe_job, epoch_text, eta_text, reason_after_state

LOSS_POINTS = 400


#: TensorFlow start-up notices every trainer prints; the tail hides them (the full log keeps them).
_NOISE = ("All log messages before absl::InitializeLog", "oneDNN custom operations are on")


def quiet(text: str, lines: int) -> str:
    """The last ``lines`` lines of a log, without TensorFlow's start-up notices."""
    kept = [line for line in text.splitlines() if not any(n in line for n in _NOISE)]
    return "\n".join(kept[-lines:])


def sparkline(values: list[float], width: int = 320, height: int = 60) -> str:
    """An inline SVG line of the loss: no plotting library, redrawn cheaply every second."""
    points = [v for v in values if v is not None][-LOSS_POINTS:]
    if len(points) < 2:
        return "<div style='color:#888;font-size:12px'>loss curve: waiting for progress</div>"
    lo, hi = min(points), max(points)
    span = (hi - lo) or 1.0
    step = width / (len(points) - 1)
    coords = " ".join(
        f"{i * step:.1f},{height - 4 - (v - lo) / span * (height - 8):.1f}"
        for i, v in enumerate(points)
    )
    return (
        f"<div style='font-size:12px;color:#555'>loss {points[-1]:.4g} "
        f"(min {lo:.4g}, max {hi:.4g})</div>"
        f"<svg width='{width}' height='{height}' style='background:#fafafa;border:1px solid #eee'>"
        f"<polyline fill='none' stroke='#1f77b4' stroke-width='1.5' points='{coords}'/></svg>"
    )


class JobView(w.VBox):
    """The panel. ``start()`` begins following the job; it stops by itself once the job ends."""

    def __init__(self, handle: Any, interval_s: float = 1.0) -> None:
        self.handle = handle
        self.interval_s = interval_s
        self.title = w.HTML()
        self.state = w.HTML()
        self.gpus = w.HTML()
        self.epoch_bar = w.IntProgress(min=0, max=1, description="epoch", layout={"width": "60%"})
        self.epoch_label = w.Label()
        self.step_bar = w.IntProgress(min=0, max=1, description="step", layout={"width": "60%"})
        self.step_label = w.Label()
        self.stats = w.HTML()
        self.curve = w.HTML(sparkline([]))
        self.log_tail = w.HTML()
        self.result = w.HTML()
        self.cancel_button = w.Button(description="Cancel", button_style="warning", icon="stop")
        self.log_button = w.ToggleButton(description="Show full log", icon="file-text-o")
        self.full_log = w.Textarea(layout={"width": "100%", "height": "300px", "display": "none"})
        self.cancel_button.on_click(lambda _: self._cancel())
        self.log_button.observe(self._toggle_log, names="value")
        super().__init__(
            [
                self.title,
                self.state,
                self.gpus,
                w.HBox([self.epoch_bar, self.epoch_label]),
                w.HBox([self.step_bar, self.step_label]),
                self.stats,
                self.curve,
                self.log_tail,
                w.HBox([self.cancel_button, self.log_button]),
                self.full_log,
                self.result,
            ],
            layout={"border": "1px solid #ddd", "padding": "6px", "width": "100%"},
        )
        self._losses: list[float] = []
        self._since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._display_id: str | None = None
        self._shown_mark: tuple | None = None
        self._last_speed: float | None = None
        self.job: dict[str, Any] = {}

    # -- showing ------------------------------------------------------------------------------
    def show(self) -> None:
        """Display the panel with a text summary for front ends without widgets."""
        self._display_id = f"elastic-gpu-{self.handle.id}-{id(self)}"
        display(self._bundle(), raw=True, display_id=self._display_id)

    def _bundle(self) -> dict[str, Any]:
        data = self._repr_mimebundle_()
        return {**data, "text/plain": describe_job(self.job) if self.job else repr(self.handle)}

    def start(self) -> JobView:
        if self.handle.submitted and not self.job:
            self.job = self.handle.submitted  # as submitted (usually queued), then live
            self._render(self.job)
        self.refresh()
        if not self.final:
            self._thread = threading.Thread(
                target=self._follow, daemon=True, name=f"elastic-gpu-{self.handle.id}"
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def final(self) -> bool:
        return self.job.get("state") in FINAL

    def _follow(self) -> None:
        last_log = 0.0
        while not self._stop.is_set():
            try:
                with_log = time.monotonic() - last_log > 3.0
                self.refresh(with_log=with_log)
                if with_log:
                    last_log = time.monotonic()
            except Exception as e:  # the scheduler went away: say so, keep trying
                self.stats.value = f"<span style='color:#b00'>cannot reach the scheduler: {html.escape(str(e))}</span>"
            if self.final:
                self.refresh(with_log=True)
                break
            self._stop.wait(self.interval_s)

    # -- updating -----------------------------------------------------------------------------
    def refresh(self, with_log: bool = True) -> None:
        job = self.handle.status()
        records = self.handle.client.progress(self.handle.id, since=self._since)["progress"]
        if records:
            self._since = records[-1].get("t", self._since)
            self._losses.extend(r.get("loss") for r in records if r.get("loss") is not None)
        self.job = job
        self._render(job)
        if with_log:
            tail = self.handle.client.logs(self.handle.id, tail=40)
            text = quiet(tail.get("trainer") or tail.get("sidecar") or "", lines=12)
            self.log_tail.value = (
                "<pre style='font-size:11px;max-height:12em;overflow:auto;margin:0;"
                f"background:#f7f7f7'>{html.escape(text) or '(no output yet)'}</pre>"
            )
        # The text fallback is refreshed when the state or the GPUs change, not every second:
        # each update re-renders the output, which a widget front end would show as flicker.
        mark = (job["state"], tuple(job.get("gpus") or ()))
        if self._display_id and mark != self._shown_mark:
            self._shown_mark = mark
            update_display(self._bundle(), raw=True, display_id=self._display_id)

    def _render(self, job: dict[str, Any]) -> None:
        state = job["state"]
        colour = STATE_COLOURS.get(state, "#555")
        self.title.value = (
            f"<b>{html.escape(job['name'])}</b> <span style='color:#888'>{job['id']} · "
            f"{html.escape(job['user'])}</span>"
        )
        where = f" · #{job['position']} in the queue" if job.get("position") else ""
        reason = html.escape(reason_after_state(state, job.get("reason")))
        self.state.value = (
            f"<span style='background:{colour};color:white;padding:1px 6px;border-radius:3px'>"
            f"{state}</span>{where} <span style='color:#555'>{reason}</span>"
        )
        held = job.get("gpus") or []
        sizes = [len(h["gpus"]) for h in job.get("history") or []]
        trail = " → ".join(str(n) for n in sizes) if sizes else "none yet"
        self.gpus.value = (
            f"GPUs: <b>{', '.join(held) or '—'}</b> ({len(held)} of {job['min_gpus']}–"
            f"{job['max_gpus']}) · GPU counts so far: {trail} · resizes: {job.get('resizes', 0)}"
        )
        p = job.get("progress") or {}
        epochs = p.get("epochs") or job.get("epochs") or 0
        if epochs:  # the bar: epochs completed; the label: the epoch under way
            self.epoch_bar.max = epochs
            self.epoch_bar.value = min(
                int(p.get("epoch") or 0) + (1 if state == JobState.DONE else 0), epochs
            )
            self.epoch_label.value = epoch_text({**p, "epochs": epochs}, state) or ""
        steps = p.get("steps_per_epoch")
        if steps:
            self.step_bar.max = steps
            self.step_bar.value = (
                steps if state == JobState.DONE else min(int(p.get("step") or 0), steps)
            )
            self.step_label.value = f"{self.step_bar.value} / {steps}"
        elif p.get("fraction") is not None:
            self.step_bar.max = 1000
            self.step_bar.value = int(1000 * p["fraction"])
            self.step_label.value = f"{p['fraction']:.0%}"
        # The first record after a (re)start has no speed yet: keep showing the last one.
        speed = p.get("samples_per_s") or self._last_speed
        self._last_speed = speed
        bits = [
            f"replicas {p['replicas']}" if p.get("replicas") else None,
            f"{speed:,.0f} samples/s" if speed else None,
            f"loss {p['loss']:.4g}" if p.get("loss") is not None else None,
            eta_text(job.get("eta_s")) if state in (JobState.RUNNING, JobState.RESIZING) else None,
        ]
        self.stats.value = " · ".join(b for b in bits if b)
        self.curve.value = sparkline(self._losses)
        self.cancel_button.disabled = state in FINAL
        if state == JobState.DONE:
            path = job.get("model_path")
            self.result.value = (
                f"<div style='color:#2a7'>Done. Model: <code>{html.escape(path or 'not saved')}</code>"
                + ("<br>Load it: <code>model = job.load_model()</code>" if path else "")
                + "</div>"
            )
        elif state == JobState.FAILED:
            err = job.get("error") or {}
            self.result.value = (
                f"<div style='color:#b00'><b>{html.escape(err.get('type', 'failed'))}</b>: "
                f"{html.escape(err.get('message', ''))}<br>{html.escape(err.get('hint') or '')}"
                f"<pre style='font-size:11px'>{html.escape(err.get('traceback') or '')}</pre></div>"
            )
        elif state == JobState.CANCELLED:
            self.result.value = "<div style='color:#555'>Cancelled.</div>"

    # -- buttons ------------------------------------------------------------------------------
    def _cancel(self) -> None:
        self.cancel_button.disabled = True
        self.handle.cancel()
        self.refresh(with_log=False)

    def _toggle_log(self, change: dict) -> None:
        if change["new"]:
            logs = self.handle.client.logs(self.handle.id, tail=5000)
            self.full_log.value = (
                logs.get("trainer", "") + "\n--- sidecar ---\n" + logs.get("sidecar", "")
            )
            self.full_log.layout.display = ""
            self.log_button.description = "Hide full log"
        else:
            self.full_log.layout.display = "none"
            self.log_button.description = "Show full log"
