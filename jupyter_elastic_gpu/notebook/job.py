"""``ElasticJob``: the handle a notebook keeps for a submitted job.

``job = _`` after a ``%%elastic_train`` cell (or ``--as job``) gives ``job.status()``,
``job.wait()``, ``job.logs()``, ``job.cancel()``, ``job.load_model()`` and ``job.history``.

Displaying the handle (or ``job.show()``) emits one output of the job MIME type: the lab
extension draws it as the sidebar's job card, which the page's push channel keeps current, so
the kernel does nothing to follow the job. The same output carries the job's text view for
nbconvert, consoles and front ends without the extension; ``wait()`` rewrites that text once
when the job ends, so that a saved notebook shows how it ended.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Literal

from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.protocol import JobState
from elastic_gpu_sidecar.trainer.keras.tfquiet import startup_notices_hidden

from .client import SchedulerClient, SchedulerError
from .text import FINAL, cancel_text, describe_job, error_hint, no_log_text

#: Longest a wait asks the server to hold one long poll.
LONG_POLL_S = 25.0
#: The MIME type of a job's output; its data is ``{"job_id": ...}`` (docs/notebook.md).
JOB_MIME_TYPE = "application/vnd.jupyter-elastic-gpu.job+json"


class JobFailed(RuntimeError):
    """``wait()`` on a job that failed: carries the user's traceback and the hint."""


class Logs(str):
    """Log text that prints as itself in a notebook, not as a quoted string; an empty log
    prints ``note``, why it is empty (the value stays the empty text)."""

    note = ""

    def __repr__(self) -> str:
        return str(self) or self.note


def in_kernel() -> bool:
    """True inside a Jupyter kernel (a front end keeps its outputs), False in a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class ElasticJob:
    """A job of the scheduler, asked and acted on through its REST API."""

    def __init__(self, client: SchedulerClient, job_id: str, name: str | None = None) -> None:
        self.client, self.id, self.name = client, job_id, name or job_id
        #: One display id for every output of this job, so that one update reaches them all.
        self.display_id = f"elastic-gpu-{job_id}"
        #: Whether this handle has outputs in a kernel's front end that wait() has not yet
        #: given the job's final text.
        self._shown = False
        self._skip_display = False

    # -- asking -------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The job as the scheduler sees it now (docs/api.md, 'Job')."""
        return self.client.job(self.id)

    @property
    def state(self) -> str:
        return self.status()["state"]

    @property
    def history(self) -> list[dict[str, Any]]:
        """Progress samples (epoch, step, loss, samples/s, replicas ...) as plain dicts.

        ``epoch`` is Keras' callback index, 0-based, of the epoch in progress: a sample with
        ``epoch == 2`` is shown "epoch 3/20" by the card, the CLI, the text view and the log,
        as Keras prints it (``protocol.epoch_shown``)."""
        return self.client.progress(self.id)["progress"]

    def events(self) -> list[dict[str, Any]]:
        """Every state change with its reason (admitted, resized, suspended, done ...)."""
        return self.client.events(self.id)["events"]

    def logs(self, tail: int = 200, sidecar: bool = False) -> Logs:
        """The last ``tail`` lines of the trainer's output (or of the sidecar's log)."""
        logs = self.client.logs(self.id, tail=tail)
        text = Logs(logs["sidecar" if sidecar else "trainer"] or "")
        if not text:
            text.note = no_log_text(self.status())
        return text

    # -- acting -------------------------------------------------------------------------------
    def cancel(self) -> dict[str, Any]:
        """Checkpoint and stop the job for good; says what happened (a job cancelled before
        it started never had GPUs)."""
        job = self.client.cancel(self.id)
        print(cancel_text(job))
        return job

    def suspend(self) -> dict[str, Any]:
        """Checkpoint and stop the job, and hold it (its GPUs go to others) until ``resume``."""
        return self.client.suspend(self.id)

    def resume(self) -> dict[str, Any]:
        """Let a suspended job have GPUs again: it goes on from its checkpoint."""
        return self.client.resume(self.id)

    def keep(self, kept: bool = True) -> dict[str, Any]:
        """Keep the job, its files and its saved model past the scheduler's retention (finished
        jobs are otherwise removed some days after they end); ``kept=False`` lets it go."""
        return self.client.keep(self.id, kept)

    def wait(
        self,
        timeout: float | None = None,
        progress: bool | None = None,
        until: Literal["end", "training"] = "end",
    ) -> dict[str, Any]:
        """Block until the job ends; returns its final status. Raises JobFailed if it failed.

        ``until="training"`` returns as soon as the job trains (it has reported progress)
        instead. ``progress`` prints text progress (default: on a terminal, not in a notebook
        kernel, where the job's card shows it). At the end, this job's outputs get their final
        text.
        """
        if until not in ("end", "training"):
            raise ValueError(f"until must be 'end' or 'training', got {until!r}")
        show = (not in_kernel()) if progress is None else progress
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = None
        if show:
            from tqdm import tqdm  # text, even in a kernel: no widget

            bar = tqdm(
                total=1000,
                desc=self.name,
                unit="‰",
                file=sys.stdout,
                # asked for: always; by default only on a terminal (a pipe gets no \r debris)
                disable=None if progress is None else False,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}",
            )
        version = 0
        try:
            while True:
                job = self.status()
                if bar is not None:
                    fraction = (job.get("progress") or {}).get("fraction")
                    if fraction is not None:
                        bar.n = int(1000 * fraction)
                    bar.set_postfix_str(describe_job(job).splitlines()[0][len(self.name) :][:90])
                if job["state"] in FINAL:
                    break
                if until == "training" and job.get("progress"):
                    return job
                left = LONG_POLL_S if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"job {self.id} is still {job['state']} after {timeout} s")
                # returns as soon as anything changes (progress included), at most ``left`` later
                version = self.client.wait_updates(version, min(left, LONG_POLL_S))
        finally:
            if bar is not None:
                bar.close()
        self._show_end(job)
        if job["state"] == JobState.FAILED:
            err = job.get("error") or {}
            raise JobFailed(
                f"job {self.id} failed: {err.get('type')}: {err.get('message')}\n"
                f"{err.get('traceback') or ''}{error_hint(err) or ''}"
            )
        return job

    def load_model(self, module_class: Any = None, **kwargs: Any) -> Any:
        """The trained model, loaded into this kernel as its framework saved it: a Keras
        model; a Hugging Face model (``from_pretrained`` of the class it was trained as); a
        Lightning module, given its class (``job.load_model(MyModule)``: the class is the
        script's, which this kernel may not have). ``kwargs`` go to the loading call."""
        job = self.status()
        if job["state"] != JobState.DONE:
            raise RuntimeError(
                f"job {self.id} is {job['state']}: its model is saved when it is done "
                "(call job.wait() first)"
            )
        path = job.get("model_path")
        if not path:
            raise RuntimeError(f"job {self.id} finished without saving a model (see job.logs())")
        name = Path(path).name
        if name == P.MODEL_CKPT:
            if module_class is None:
                raise TypeError(
                    f"job {self.id} saved a Lightning checkpoint ({path}): pass the "
                    "LightningModule class it trained, job.load_model(MyModule)"
                )
            return module_class.load_from_checkpoint(path, **kwargs)
        if name == P.MODEL_DIR:
            import transformers

            config = transformers.AutoConfig.from_pretrained(path)
            arch = (config.architectures or [None])[0]
            cls = module_class or getattr(transformers, arch or "", None) or transformers.AutoModel
            return cls.from_pretrained(path, **kwargs)
        # TensorFlow's start-up notices would land in the notebook, in red: dropped (errors kept)
        with startup_notices_hidden():
            import keras

            return keras.models.load_model(path, **kwargs)

    # -- showing ------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The job's output: its id for the lab extension's card, its text view for the rest.
        Nothing else: JupyterLab shows the richest type it knows, and must pick the card."""
        return self._bundle(self._text())

    def _bundle(self, text: str) -> dict[str, Any]:
        return {JOB_MIME_TYPE: {"job_id": self.id}, "text/plain": text}

    def _text(self) -> str:
        try:
            return describe_job(self.status())
        except SchedulerError as e:
            return f"{self!r}: {e.message}"

    def show(self) -> None:
        """Display the job: its card where the lab extension runs, its text view elsewhere."""
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is None:  # plain Python: nothing renders a display
            print(self._text())
            return
        # A display, not the cell's result, so that it has an id for wait() to update.
        display(self._repr_mimebundle_(), raw=True, display_id=self.display_id)
        self._shown = self._shown or in_kernel()

    def _show_end(self, job: dict[str, Any]) -> None:
        """Once the job has ended, its outputs say how in their text (the card knows already)."""
        if self._shown and job["state"] in FINAL:
            from IPython.display import update_display

            update_display(self._bundle(describe_job(job)), raw=True, display_id=self.display_id)
            self._shown = False

    def _ipython_display_(self) -> None:
        if self._skip_display:  # the magic already showed it while waiting
            self._skip_display = False
            return
        self.show()

    def __repr__(self) -> str:
        return f"<ElasticJob {self.id} {self.name!r}>"
