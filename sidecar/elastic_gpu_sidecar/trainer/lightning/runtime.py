"""What lives as long as one rank: the grant, the checkpoint store, progress, and the fit calls.

``Trainer.fit`` comes here (``install.py``). Each call gets an index; the checkpoint of an
interrupted call names its index, so a restart, which runs the script again from the top,
resumes that call (Lightning's own ``ckpt_path``: weights, optimizer, schedulers, loops),
gives the calls that had finished their trained weights back without training again, and runs
later calls normally. Only rank 0 writes the job's files; every rank takes part in each
checkpoint, as Lightning's ``save_checkpoint`` requires.
"""

from __future__ import annotations

import inspect
import shutil
import time

import torch

from ... import protocol as P
from ...jobdir import save_atomically
from .. import ranks, torchdist
from ..adapter import TrainerContext
from ..checkpoint import Checkpoint, CheckpointStore
from ..progress import LiveCounter, ProgressWriter, progress_interval, record
from ..stopsignal import exit_now
from ..tlog import log
from .fit import CKPT_FILE, FitSession

#: The final model, as Lightning's checkpoint of the last ``fit`` (``Trainer.save_checkpoint``).
MODEL_FILE = P.MODEL_CKPT


class Runtime:
    """One rank's session (``adapter.Session``)."""

    def __init__(self, context: TrainerContext):
        self.job = context.job
        self.config = context.config
        self.generation = context.generation
        self.simulated = context.simulated
        self.stop = context.stop
        self.replicas = torchdist.world_size()
        self.leader = ranks.is_leader_rank()
        #: What the job's view should say of the script's own settings (a Trainer argument the
        #: grant overrides), beside each fit's own notes, in every progress record.
        self.notes: list[str] = []
        self.pid = ranks.trainer_pid()
        interval = self.config.get("checkpoint_interval") or P.DEFAULT_CHECKPOINT_INTERVAL_S
        self.checkpoint_interval = float(interval)
        self.progress_interval = progress_interval()
        self.policy = P.BatchPolicy(self.config.get("batch_policy") or P.BatchPolicy.KEEP_GLOBAL)
        self.reference = int(self.config.get("reference_replicas") or self.replicas)
        self.epochs = self.config.get("epochs")
        self.ready_at: float | None = None
        self.store = CheckpointStore(self.job / P.CHECKPOINTS, log=log if self.leader else _quiet)
        self.writer = self.live = None
        if self.leader:
            self.store.clean_partial()
            self.writer = ProgressWriter(self.job.path)
            self.live = LiveCounter(self.job.path)
        self.fit_count = 0
        self.session: FitSession | None = None
        self._unsaved = 0  # steps the last fit trained since its last checkpoint
        self.first_step_reported = False
        self.samples = 0
        self.done_fits: dict[str, str] = {}  # fit index -> its final checkpoint
        self.model_ckpt: str | None = None  # the last fit's final checkpoint file
        self.resume: Checkpoint | None = self.store.latest()
        m = self.resume.meta if self.resume is not None else None
        if m is not None and not isinstance(m.get("fit_index"), int):
            self.say(f"{self.resume.name} holds no Lightning training position; ignoring it")
            self.resume = m = None
        if m is not None:
            self.samples = int(m.get("samples") or 0)
            self.done_fits = dict(m.get("done_fits") or {})
            self.say(
                f"resuming from {self.resume.name} ({m.get('reason')}): fit {m['fit_index']}, "
                f"epoch {m.get('epoch', 0) + 1}, batch {m.get('batch')}, global step "
                f"{m.get('global_step')}" + (" (fit finished)" if m.get("fit_done") else "")
            )

    def say(self, message: str) -> None:
        """A line in the job's log, once (rank 0)."""
        if self.leader:
            log(message)

    def report(self, **fields) -> None:
        if self.writer is not None:
            self.writer.write(record(generation=self.generation, replicas=self.replicas, **fields))

    def exit_stopped(self, why: str) -> None:
        since = self.stop.requested_at
        ago = f", {time.time() - since:.3f} s after the request" if since else ""
        self.say(f"stopping for the sidecar ({why}{ago}); exit {P.TRAINER_STOPPED}")
        exit_now(P.TRAINER_STOPPED)

    # -- adapter.Session ----------------------------------------------------------------------
    def on_stop_signal(self) -> None:
        """In the signal thread: outside ``fit`` nothing is unsaved; inside, every rank stops
        after the same step (``callback.py``)."""
        if self.stop.busy == 0:
            self.exit_stopped("no training step in flight")

    def wait_background(self) -> None:
        """Checkpoints are written in the training loop: nothing runs in the background."""

    def finalize(self) -> None:
        """Copy the last fit's final checkpoint to ``model.ckpt`` in the job dir (rank 0)."""
        if not self.leader:
            return
        if self.model_ckpt is None:
            log("the script never called Trainer.fit(): no model saved")
            return
        dest = self.job / MODEL_FILE
        save_atomically(dest, lambda tmp: shutil.copyfile(self.model_ckpt, tmp))
        log(f"final model saved to {dest}")

    # -- Trainer.fit --------------------------------------------------------------------------
    def fit(self, orig, trainer, *args, **kwargs):
        self.stop.busy += 1
        try:
            return self._fit(orig, trainer, *args, **kwargs)
        except Exception as e:
            if self.stop.requested and self.replicas > 1 and self._nothing_unsaved():
                # a rank that had not started training when the stop came left at once (see
                # on_stop_signal): the ranks waiting for it in a collective fail; that is the
                # stop, not an error of the script
                log(f"{type(e).__name__} in fit after the stop request (another rank left): {e}")
                self.exit_stopped("another rank stopped before training")
            raise
        finally:
            self.stop.busy -= 1

    def _nothing_unsaved(self) -> bool:
        return self._unsaved == 0

    def _fit(self, orig, trainer, *args, **kwargs):
        bound = inspect.signature(orig).bind(trainer, *args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        k = self.fit_count
        self.fit_count += 1
        m = self.resume.meta if self.resume is not None else None
        if m is not None and (k < m["fit_index"] or (k == m["fit_index"] and m.get("fit_done"))):
            return self._finished(k, a["model"])
        if self.stop.requested:
            self.exit_stopped(f"before fit {k}")
        resume = m if m is not None and k == m["fit_index"] else None
        if resume is not None:
            if a.get("ckpt_path"):
                self.say(
                    f"fit {k}: the job's checkpoint is resumed, not ckpt_path={a['ckpt_path']!r}"
                )
            a["ckpt_path"] = str(self.resume.file(CKPT_FILE))
            if "weights_only" in a:
                a["weights_only"] = False  # our own checkpoint: loop and sampler state too
        session = FitSession(self, trainer, k, resume)
        self.session = session
        trainer.callbacks.insert(0, session.callback)  # its batch start runs before any other
        try:
            orig(*bound.args, **bound.kwargs)
        finally:
            self._unsaved = session.steps_since_save
            self.session = None
            trainer.callbacks.remove(session.callback)
        ckpt = session.checkpoint("fit finished", fit_done=True)
        if ckpt is not None:  # rank 0
            self.done_fits[str(k)] = ckpt.name
            self.model_ckpt = str(ckpt.file(CKPT_FILE))
        if self.stop.requested:
            self.exit_stopped(f"after fit {k}")

    def _finished(self, k: int, model) -> None:
        """A fit that finished before the restart: its trained weights, without training."""
        m = self.resume.meta
        if k == m["fit_index"]:
            ckpt = self.resume
        else:
            name = self.done_fits.get(str(k))
            ckpt = self.store.get(name) if name else None
        if ckpt is None:
            self.say(f"fit {k} finished before the restart; its checkpoint is gone: skipped")
            return
        state = torch.load(ckpt.file(CKPT_FILE), map_location="cpu", weights_only=False)
        model.load_state_dict(state["state_dict"])
        self.done_fits[str(k)] = ckpt.name  # later checkpoints keep it (``references``)
        self.model_ckpt = str(ckpt.file(CKPT_FILE))
        self.say(f"fit {k} finished before the restart: its weights restored from {ckpt.name}")


def _quiet(message: str) -> None:
    """The store's lines from ranks other than 0 (rank 0 says the same)."""
