"""The Keras callbacks the bootstrap adds to every ``fit``.

``ElasticCallback`` tracks the exact position (epoch, batch, samples, optimizer step), writes
progress records, takes periodic checkpoints, and acts on a stop request at the next step
boundary. It does its checks in ``on_train_batch_begin``: after the previous step, before the
next, where model and optimizer state are consistent and the position is a whole number of
batches. It also publishes *safe points* (``rt.safe``) for the thread that receives the stop
signal: "clean" (nothing trained since the last checkpoint: exit without saving) and "save"
(between epochs: save, then exit). A stop that arrives while Keras creates the next epoch's
iterator, fills a shuffle buffer or traces the first step then exits at once instead of
waiting seconds for the next step boundary. ``SegmentProxy`` lets one user-visible ``fit`` run as two Keras calls (the rest of
an interrupted epoch, then the remaining epochs) while user callbacks still see one
``on_train_begin`` and one ``on_train_end``.
"""

from __future__ import annotations

import math
import time

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
        self.next_periodic = time.monotonic() + rt.checkpoint_every
        self._last_t = None
        self._last_samples = 0
        self._last_logs: dict = {}

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

    def on_train_batch_begin(self, batch, logs=None):
        self._begin = batch
        with self.rt.safe_lock:  # waits while the signal thread saves at a safe point
            self.rt.safe = None
        if self.rt.stop.requested:
            self.s.stop_now(self.steps_since_save > 0)
        if time.monotonic() >= self.next_periodic:
            if self.steps_since_save:
                self.s.checkpoint("periodic", background=True)
                self.steps_since_save = 0
            self.next_periodic = time.monotonic() + self.rt.checkpoint_every
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


class SegmentProxy(keras.callbacks.Callback):
    """Forward everything to a user callback, except a begin or an end it must not see twice."""

    def __init__(self, inner, *, begin: bool, end: bool):
        super().__init__()
        self.inner = inner
        self.begin = begin
        self.end = end

    def set_model(self, model):
        super().set_model(model)
        self.inner.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        self.inner.set_params(params)

    def on_train_begin(self, logs=None):
        if self.begin:
            self.inner.on_train_begin(logs)

    def on_train_end(self, logs=None):
        if self.end:
            self.inner.on_train_end(logs)

    def __getattribute__(self, name):
        # every other hook goes straight to the user's callback
        if name.startswith("on_") and name not in ("on_train_begin", "on_train_end"):
            return getattr(object.__getattribute__(self, "inner"), name)
        return object.__getattribute__(self, name)


class EpochsProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar told the real epoch count: a resumed epoch runs as its own call."""

    def __init__(self, epochs: int):
        super().__init__()
        self.total_epochs = epochs

    def set_params(self, params):
        super().set_params(dict(params, epochs=self.total_epochs))
