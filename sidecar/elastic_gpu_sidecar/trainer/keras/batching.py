"""Global batch policy on resize, and the learning-rate ramp that goes with it.

``keep-global`` keeps the script's global batch: each replica gets a slice of it, so the
optimisation is the same on any GPU count (only the per-replica batch changes).
``keep-per-replica`` keeps the per-replica batch the script had on its first grant: the
global batch grows with the GPU count, and the learning rate is scaled linearly with it
(Goyal et al.), ramped over a few steps after each resize so the optimiser is not jolted.
"""

from __future__ import annotations

import keras

from ... import protocol as P


def describe(policy: str, batch: int | None, global_batch: int | None, replicas: int) -> str:
    if global_batch is None:
        return f"batch policy {policy}: batch size unknown (input decides), {replicas} replicas"
    per = global_batch / replicas
    per_text = f"{per:g}" if per == int(per) else f"{per:.1f}"
    if policy == P.BatchPolicy.KEEP_GLOBAL or batch == global_batch:
        return (
            f"batch policy {policy}: global batch {global_batch} -> per-replica {per_text} on "
            f"{replicas} replicas"
        )
    return (
        f"batch policy {policy}: per-replica batch {per_text}; global batch {batch} -> "
        f"{global_batch} on {replicas} replicas"
    )


class LearningRateScale(keras.callbacks.Callback):
    """Move the optimiser's learning rate from ``start`` x to ``target`` x its base value.

    The base is what the script set; the factor in force is saved with every checkpoint, so
    the ramp after a resize starts from the factor the previous generation ended with.
    Learning-rate schedules are left alone (they are functions of the step, not a value).
    """

    def __init__(self, start: float, target: float, warmup_steps: int, log):
        super().__init__()
        self.applied = start
        self.start = start
        self.target = target
        self.warmup = max(0, warmup_steps)
        self.log = log
        self.step = 0
        self.active = start != target
        self._said = False

    def _lr(self):
        lr = getattr(self.model.optimizer, "learning_rate", None)
        return lr if hasattr(lr, "assign") else None

    def on_train_begin(self, logs=None):
        if self.active and self._lr() is None:
            self.log("learning-rate scaling skipped: the optimizer uses a schedule")
            self.active = False
        if self.active and not self._said:
            self._said = True
            self.log(
                f"learning rate x{self.target:g} of the script's value (from x{self.start:g}, "
                f"linear ramp over {self.warmup} steps)"
            )

    def on_train_batch_begin(self, batch, logs=None):
        if not self.active:
            return
        self.step += 1
        frac = 1.0 if self.warmup == 0 else min(1.0, self.step / self.warmup)
        scale = self.start + (self.target - self.start) * frac
        if scale != self.applied:
            var = self._lr()
            var.assign(float(var.numpy()) / self.applied * scale)
            self.applied = scale
        if frac >= 1.0:
            self.active = False
