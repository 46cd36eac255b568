"""The Trainer callback that makes each optimizer step a possible stopping point.

Added last to every Trainer, so the script's own callbacks have seen a step before the process
stops after it (and so do not see it again in the next generation, which starts after it). At
each step end: the live counter and the progress records (rank 0), then one collective per
question, so that every rank answers the same: is a stop asked for (``torchdist.agree``), is a
periodic checkpoint due. Either way every rank takes part in the checkpoint; after a stop,
every rank exits 75.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from transformers import TrainerCallback

from .. import ranks, torchdist

if TYPE_CHECKING:
    from .runtime import Runtime


class ElasticCallback(TrainerCallback):
    def __init__(self, rt: Runtime, trainer):
        self.rt = rt
        self.trainer = trainer
        self.steps_per_epoch: int | None = None
        self.resumed_from = 0
        self.next_periodic = 0.0
        self._last_t: float | None = None
        self._last_samples = 0

    # -- the Trainer's hooks ----------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        loader = kwargs.get("train_dataloader")
        try:
            batches = len(loader)
        except TypeError:
            batches = None
        acc = max(1, args.gradient_accumulation_steps)
        self.steps_per_epoch = max(1, math.ceil(batches / acc)) if batches else None
        self.resumed_from = state.global_step
        self.rt.train_began(state.global_step, self.steps_per_epoch)
        self.next_periodic = time.monotonic() + self.rt.checkpoint_interval

    def on_step_end(self, args, state, control, **kwargs):
        rt = self.rt
        step = state.global_step
        if rt.leader:
            rt.live.update(rt.generation, step)
            if not rt.first_reported:
                rt.first_reported = True  # the sidecar times its resize pause on this record
                self.report(
                    state,
                    first=True,
                    pid=ranks.trainer_pid(),
                    resumed_from=self.resumed_from,
                    replayed=0,
                    ready_at=rt.ready_at,
                )
            elif time.monotonic() - (self._last_t or 0.0) >= rt.progress_interval:
                self.report(state)
        if torchdist.agree(rt.stop.requested):
            rt.checkpoint(self.trainer, "stop requested")
            if rt.leader:
                self.report(state, stopped=True)
            rt.exit_stopped(f"after global step {step}")
        if torchdist.agree(time.monotonic() >= self.next_periodic):
            rt.checkpoint(self.trainer, "periodic")
            self.next_periodic = time.monotonic() + rt.checkpoint_interval

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.rt.leader and state.global_step > self.resumed_from:
            self.report(state, epoch_end=True)

    # -- progress ----------------------------------------------------------------------------
    def _loss(self, state) -> float | None:
        """Rank 0's mean loss since the Trainer last logged (what its next log line averages
        over all ranks), read without a collective; else the last logged loss."""
        tr = self.trainer
        total = getattr(tr, "_tr_loss", None)
        since = state.global_step - getattr(tr, "_globalstep_last_logged", state.global_step)
        if total is not None and since > 0:
            return round(float(total.item()) / since, 6)
        for entry in reversed(state.log_history):
            if "loss" in entry:
                return float(entry["loss"])
        return None

    def report(self, state, **extra) -> None:
        rt = self.rt
        step = state.global_step
        spe = self.steps_per_epoch
        epochs = int(state.num_train_epochs or 1)
        if spe:
            epoch = min(max(step - 1, 0) // spe, max(epochs - 1, 0))
            in_epoch = step - epoch * spe
        else:
            epoch, in_epoch = int(state.epoch or 0), step
        samples = rt.samples_at(step)
        now = time.monotonic()
        rate = None
        if self._last_t is not None and now > self._last_t:
            rate = (samples - self._last_samples) / (now - self._last_t)
        self._last_t, self._last_samples = now, samples
        metrics = {}
        scheduler = self.trainer.lr_scheduler
        if scheduler is not None and hasattr(scheduler, "get_last_lr"):
            metrics["learning_rate"] = float(scheduler.get_last_lr()[0])
        if rt.note:
            extra.setdefault("note", rt.note)
        rt.report(
            epoch=epoch,
            epochs=epochs,
            step_in_epoch=in_epoch,
            steps_per_epoch=spe,
            global_step=step,
            samples=samples,
            loss=self._loss(state),
            metrics=metrics,
            samples_per_s=rate,
            batch_size=rt.plan.global_batch if rt.plan else None,
            **extra,
        )
