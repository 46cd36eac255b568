"""The Keras callbacks the bootstrap adds to every ``fit``, and the view user callbacks get.

``ElasticCallback`` tracks the exact position (epoch, batch, samples, optimizer step), writes
progress records, takes periodic checkpoints, and acts on a stop request at the next step
boundary. It does its checks before every step, through ``StepGate``, which runs first of all
callbacks: after the previous step, before the next, where model and optimizer state are
consistent and the position is a whole number of batches, and before any other callback has
been told about a step that will not run in this process. It also publishes *safe points*
(``rt.safe``) for the thread that receives the stop signal: "clean" (nothing trained since the
last checkpoint: exit without saving) and "save" (between epochs: save, then exit). A stop
that arrives while Keras creates the next epoch's iterator, fills a shuffle buffer or traces
the first step then exits at once instead of waiting seconds for the next step boundary.

A resumed ``fit`` runs as two Keras calls (the rest of the interrupted epoch, then the
remaining epochs), and Keras numbers the batches of the first from 0. ``UserCallback`` gives
each user callback the view of the uninterrupted ``fit``: one ``on_train_begin`` and one
``on_train_end``, the real epoch, the ``params`` of the whole call, and batch indices in the
numbering of an unresized run (``Numbering``). ``ElasticProgbar`` is Keras' progress bar with
the same view, so a resumed epoch's bar starts where the epoch stands.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import keras


def _floats(logs: dict | None) -> dict:
    out = {}
    for k, v in (logs or {}).items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        out[k] = f if math.isfinite(f) else None
    return out


class ElasticCallback(keras.callbacks.Callback):
    def __init__(self, session):
        super().__init__()
        self.s = session
        rt = session.rt
        self.rt = rt
        plan = session.plan
        self.epoch = session.start_epoch
        self.batch_in_epoch = 0
        self.samples_in_epoch = 0
        self._first_epoch = True
        self._begin = 0
        self.global_step: int | None = None
        self.steps_since_save = 0
        self.gb = plan.global_batch
        self.samples_per_epoch = plan.samples_per_epoch
        self.next_periodic = time.monotonic() + rt.checkpoint_interval
        self._last_t = None
        self._last_samples = 0
        self._last_logs: dict = {}
        self.gate = StepGate(self)

    # -- position -------------------------------------------------------------------------------
    def position(self) -> dict:
        return {
            "epoch": self.epoch,
            "batch": self.batch_in_epoch,
            "samples_in_epoch": self.samples_in_epoch,
            "global_step": self.global_step,
        }

    def on_train_begin(self, logs=None):
        if self.global_step is None:
            self.global_step = int(self.model.optimizer.iterations.numpy())
            self.s.resumed_step = self.global_step
        if self.steps_since_save == 0:
            self.rt.safe = "clean"

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        if self._first_epoch and epoch == self.s.start_epoch:
            self.batch_in_epoch = self.s.plan.first_offset
            self.samples_in_epoch = self.s.plan.first_samples
            self.s.restore_metrics()  # Keras just reset them; a resumed epoch continues its means
        else:
            self.batch_in_epoch = 0
            self.samples_in_epoch = 0
        self._first_epoch = False

    def before_step(self, batch) -> None:
        """Called by ``StepGate`` before every step, ahead of every other callback."""
        self._begin = batch
        with self.rt.safe_lock:  # waits while the signal thread saves at a safe point
            self.rt.safe = None
        if self.rt.stop.requested:
            self.s.stop_now(self.steps_since_save > 0)
        if time.monotonic() >= self.next_periodic:
            if self.steps_since_save:
                self.s.checkpoint("periodic", background=True)
                self.steps_since_save = 0
            self.next_periodic = time.monotonic() + self.rt.checkpoint_interval
        if self.steps_since_save == 0:
            self.rt.safe = "clean"  # a stop during this step loses nothing: exit without saving

    def on_train_batch_end(self, batch, logs=None):
        self.rt.safe = None
        k = max(1, batch - self._begin + 1)
        self.batch_in_epoch += k
        self.global_step += k
        self.steps_since_save += k
        if self.gb:
            done = self.samples_in_epoch + k * self.gb
            if self.samples_per_epoch:
                done = min(done, self.samples_per_epoch)
            self.rt.samples += done - self.samples_in_epoch
            self.samples_in_epoch = done
        self.rt.live.update(self.rt.generation, self.global_step)
        self._last_logs = logs or {}
        if self._last_t is None and not self.rt.first_step_reported:
            self.rt.first_step_reported = True  # the sidecar times its resize pause on this
            self._report(
                logs,
                first=True,
                pid=self.rt.pid,
                resumed_from=self.s.resumed_step,
                replayed=self.s.plan.replayed,
                ready_at=self.rt.ready_at,
            )
        elif self._last_t is None or time.monotonic() - self._last_t >= self.rt.progress_interval:
            self._report(logs)

    def on_epoch_end(self, epoch, logs=None):
        self.s.add_history(epoch, _floats(logs))
        self._report(logs, epoch_end=True)
        self.epoch, self.batch_in_epoch, self.samples_in_epoch = epoch + 1, 0, 0
        if epoch + 1 < self.s.epochs and not self.model.stop_training:
            # until the next step, the state is exactly "before epoch + 1"
            self.rt.safe = "save" if self.steps_since_save else "clean"
            if self.rt.stop.requested:
                self.s.stop_now(self.steps_since_save > 0)

    def report(self, **extra) -> None:
        self._report(self._last_logs, **extra)

    def _report(self, logs, **extra) -> None:
        now = time.monotonic()
        rate = None
        if self._last_t is None:
            self._last_t, self._last_samples = now, self.rt.samples
        elif now - self._last_t >= min(0.5, self.rt.progress_interval / 2):
            # measured over at least half an interval: a rate over a few steps is noise
            if self.gb:
                rate = (self.rt.samples - self._last_samples) / (now - self._last_t)
            self._last_t, self._last_samples = now, self.rt.samples
        values = _floats(logs)
        loss = values.pop("loss", None)
        noise = self.s.noise.read(self.gb) if self.s.noise is not None else None
        if noise:
            extra = {**noise, **extra}
        self.rt.report(
            epoch=self.epoch,
            epochs=self.s.epochs,
            step_in_epoch=self.batch_in_epoch,
            steps_per_epoch=self.s.plan.steps_per_epoch,
            global_step=self.global_step,
            samples=self.rt.samples if self.gb else None,
            loss=loss,
            metrics=values,
            samples_per_s=rate,
            batch_size=self.gb,
            **extra,
        )


class StepGate(keras.callbacks.Callback):
    """First in the callback list: a stop lands before any other callback sees the step.

    Otherwise a user callback would see ``on_train_batch_begin`` for the step at which the
    process stops, and see it again in the next process, which trains that step.
    """

    def __init__(self, elastic: ElasticCallback):
        super().__init__()
        self.elastic = elastic

    def on_train_batch_begin(self, batch, logs=None):
        self.elastic.before_step(batch)


@dataclass(frozen=True)
class Numbering:
    """Batch indices and ``params`` as an unresized run of the same ``fit`` would have them.

    Keras numbers the batches of each call from 0: the rest of a resumed epoch starts at 0
    although ``offset`` batches of it were trained before the restart. Positions are kept in
    samples: index = samples of the epoch trained before the step / ``unit`` (the global batch
    the script asked for), an ``int`` whenever that is a whole number (always under
    keep-global), else a ``float`` (keep-per-replica with another global batch than the
    script's: a step of 16 samples in a script of batch 32 starts at batch 40.5). When the
    batch sizes are unknown (an input of unknown batch size) the index is counted in batches.
    """

    epoch: int | None  # the epoch resumed mid-way in this process (None: none)
    samples: int  # samples of that epoch trained before this process
    offset: int  # batches of it trained before (used when the batch sizes are unknown)
    step: int | None  # samples per step in this process (the global batch now)
    unit: int | None  # samples per batch of the unresized run (the script's global batch)
    steps: int | None  # batches per epoch of the unresized run: ``params["steps"]``
    epochs: int  # epochs of the whole call: ``params["epochs"]``

    @classmethod
    def of(cls, plan, start_epoch: int, epochs: int) -> Numbering:
        """The numbering for a fit call planned by ``inputs.plan`` from ``start_epoch``."""
        resumed = plan.first_offset > 0 or plan.first_samples > 0
        return cls(
            epoch=start_epoch if resumed else None,
            samples=plan.first_samples,
            offset=plan.first_offset,
            step=plan.global_batch,
            unit=plan.script_batch,
            steps=plan.script_steps,
            epochs=epochs,
        )

    @property
    def identity(self) -> bool:
        """Keras' own numbering is already the unresized one."""
        return self.epoch is None and (not self.step or not self.unit or self.step == self.unit)

    def index(self, epoch: int | None, batch: int):
        """The unresized index of Keras' batch ``batch`` of ``epoch`` in this process."""
        resumed = epoch is not None and epoch == self.epoch
        if self.step and self.unit:
            pos = (self.samples if resumed else 0) + batch * self.step
            whole, part = divmod(pos, self.unit)
            return whole if part == 0 else pos / self.unit
        return (self.offset if resumed else 0) + batch

    def params(self, params: dict) -> dict:
        return dict(params or {}, epochs=self.epochs, steps=self.steps)


class UserCallback(keras.callbacks.Callback):
    """A user callback as Keras calls it in one uninterrupted, unresized ``fit``.

    One ``on_train_begin`` (first segment) and one ``on_train_end`` (last segment, or the
    session's ``end_now`` when training stops early), the ``params`` of the whole call, and
    batch indices in the unresized numbering. Every other hook goes straight through.
    """

    _MAPPED = frozenset(
        {
            "on_train_begin",
            "on_train_end",
            "on_epoch_begin",
            "on_train_batch_begin",
            "on_train_batch_end",
            "on_batch_begin",
            "on_batch_end",
        }
    )

    def __init__(self, inner, numbering: Numbering, *, begin: bool, end: bool):
        super().__init__()
        self.inner = inner
        self.numbering = numbering
        self.begin = begin
        self.end = end
        self._epoch: int | None = None
        self._end_logs = None

    @classmethod
    def wrap(cls, inner, numbering: Numbering, *, begin: bool, end: bool) -> UserCallback:
        if isinstance(inner, keras.callbacks.ProgbarLogger):
            # Keras adds its own progress bar unless the list holds a ProgbarLogger
            return _UserProgbar(inner, numbering, begin=begin, end=end)
        return cls(inner, numbering, begin=begin, end=end)

    def set_model(self, model):
        super().set_model(model)
        self.inner.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        self.inner.set_params(self.numbering.params(params))

    def on_train_begin(self, logs=None):
        if self.begin:
            self.inner.on_train_begin(logs)

    def on_train_end(self, logs=None):
        if self.end:
            self.inner.on_train_end(logs)
        else:
            self._end_logs = logs

    def end_now(self) -> None:
        """Training stopped before the last segment: the user's one train end is now."""
        self.inner.on_train_end(self._end_logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self.inner.on_epoch_begin(epoch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        self.inner.on_train_batch_begin(self.numbering.index(self._epoch, batch), logs)

    def on_train_batch_end(self, batch, logs=None):
        self.inner.on_train_batch_end(self.numbering.index(self._epoch, batch), logs)

    def on_batch_begin(self, batch, logs=None):
        self.inner.on_batch_begin(self.numbering.index(self._epoch, batch), logs)

    def on_batch_end(self, batch, logs=None):
        self.inner.on_batch_end(self.numbering.index(self._epoch, batch), logs)

    def __getattribute__(self, name):
        # every other hook (epoch end, validation, ...) goes straight to the user's callback
        if name.startswith("on_") and name not in UserCallback._MAPPED:
            return getattr(object.__getattribute__(self, "inner"), name)
        return object.__getattribute__(self, name)


class _UserProgbar(UserCallback, keras.callbacks.ProgbarLogger):
    """A ProgbarLogger the script passed: still a ProgbarLogger for Keras' CallbackList."""


class _ResumedProgbar(keras.utils.Progbar):
    """Keras' Progbar for an epoch whose first ``base`` batches ran before this process: the
    time per step (and so the ETA) is measured over the steps this process ran."""

    def __init__(self, base, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.base = base

    def _estimate_step_duration(self, current, now):
        return super()._estimate_step_duration(current - self.base, now)


class ElasticProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar with the view user callbacks get: the real epoch count, and a
    resumed epoch's bar continuing where the epoch stands (``41/256``, not ``1/216``)."""

    def __init__(self, numbering: Numbering):
        super().__init__()
        self.numbering = numbering
        self._epoch: int | None = None
        self._base = 0

    def set_params(self, params):
        super().set_params(self.numbering.params(params))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._base = self.numbering.index(epoch, 0)
        super().on_epoch_begin(epoch, logs)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(self.numbering.index(self._epoch, batch), logs)

    def _maybe_init_progbar(self):
        if self.progbar is None:
            self.progbar = _ResumedProgbar(
                self._base,
                target=self.target,
                verbose=self.verbose,
                unit_name="step",
                stateless_metrics=set(),
            )
