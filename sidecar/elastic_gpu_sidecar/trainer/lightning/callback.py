"""The callback every elastic ``fit`` gets: progress, the live step counter, and the stop.

It is the first callback of the ``Trainer``, and it acts before each batch
(``on_train_batch_start``): there the previous step is complete everywhere (optimizer and LR
scheduler stepped, every callback and the module's own ``on_train_batch_end`` told), and no
other callback has heard of the next one. A stop at that boundary is checkpointed as "these
batches done" and the next process starts with the next batch, so the script's callbacks see
each step once. The ranks agree on the stop there (``torchdist.agree``), so all of them stop
after the same step.

Lightning checks that a callback is its own ``Callback`` (``lightning.pytorch`` and the older
``pytorch_lightning`` are two packages): the class is made for the package of the trainer.
"""

from __future__ import annotations

import importlib
import math
import time

from .. import ranks


def _number(value) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return f if math.isfinite(f) else None


def _loss(outputs) -> float | None:
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    return (
        None
        if outputs is None
        else _number(outputs.detach() if hasattr(outputs, "detach") else outputs)
    )


class _Hooks:
    """The hooks; ``make_callback`` mixes them into the trainer's package's ``Callback``."""

    def __init__(self, session):
        super().__init__()
        self.s = session
        self._last_t: float | None = None
        self._last_samples = 0
        self._last_loss: float | None = None
        self._started = False

    def on_train_start(self, trainer, pl_module):
        s = self.s
        s.resumed_step = trainer.global_step
        s.keep_logger_step()  # before renumber(): as Lightning's own test sees the counters
        s.renumber()
        s.scale_learning_rate()
        if s.resume is not None:
            s.rt.say(
                f"fit {s.k}: resuming at epoch {trainer.current_epoch + 1}, batch "
                f"{trainer.fit_loop.epoch_loop.batch_progress.current.completed}, global step "
                f"{trainer.global_step}"
            )

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.s.at_boundary()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        s, rt = self.s, self.s.rt
        s.batch_done()
        if not rt.leader:
            return
        rt.live.update(rt.generation, trainer.global_step)
        self._last_loss = _loss(outputs)
        if not rt.first_step_reported:
            rt.first_step_reported = True  # the sidecar times its resize pause on this one
            self.report(
                first=True,
                pid=ranks.trainer_pid(),
                resumed_from=s.resumed_step,
                replayed=0,
                ready_at=rt.ready_at,
            )
        elif time.monotonic() - (self._last_t or 0) >= rt.progress_interval:
            self.report()

    def on_train_epoch_end(self, trainer, pl_module):
        if self.s.rt.leader:
            self.report(epoch_end=True)

    def report(self, **extra) -> None:
        s, rt = self.s, self.s.rt
        if not rt.leader:
            return
        trainer = s.trainer
        now = time.monotonic()
        rate = None
        if self._last_t is None:
            self._last_t, self._last_samples = now, rt.samples
        elif now - self._last_t >= min(0.5, rt.progress_interval / 2):
            rate = (rt.samples - self._last_samples) / (now - self._last_t)
            self._last_t, self._last_samples = now, rt.samples
        metrics = {}
        for key, value in trainer.callback_metrics.items():
            if key != "loss" and (f := _number(value)) is not None:
                metrics[key] = f
        epochs = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None
        steps = trainer.num_training_batches
        current = trainer.fit_loop.epoch_loop.batch_progress.current
        # after a batch its index + 1; before one (a stop) the batches done
        step_in_epoch = current.completed if extra.get("stopped") else current.ready
        if rt.notes or s.notes:
            extra.setdefault("note", "; ".join([*rt.notes, *s.notes]))
        rt.report(
            epoch=trainer.current_epoch,
            epochs=epochs,
            step_in_epoch=step_in_epoch,
            steps_per_epoch=int(steps) if math.isfinite(steps) else None,
            global_step=trainer.global_step,
            samples=rt.samples if s.plan else None,
            loss=self._last_loss,
            metrics=metrics,
            samples_per_s=rate,
            batch_size=s.plan.global_batch if s.plan else None,
            **extra,
        )


_CLASSES: dict[str, type] = {}


def make_callback(trainer_cls: type, session):
    """Our callback for a trainer of ``trainer_cls`` (``lightning.pytorch`` or
    ``pytorch_lightning``)."""
    older = any(c.__module__.startswith("pytorch_lightning.") for c in trainer_cls.__mro__)
    pkg = "pytorch_lightning" if older else "lightning.pytorch"
    if pkg not in _CLASSES:
        base = importlib.import_module(pkg).Callback
        _CLASSES[pkg] = type("ElasticCallback", (_Hooks, base), {"__module__": __name__})
    return _CLASSES[pkg](session)
