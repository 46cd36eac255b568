"""The gradient noise scale of a Keras job on TensorFlow, measured from outside its code.

The noise scale phi = tr(Sigma) / |G|^2 (McCandlish et al. 2018; Pollux's statistical
efficiency is built on it) says how large a batch still makes full use of each sample: a step
at global batch B does (phi + B0) / (phi + B) of the progress per sample that a step at B0
does. Sigma is the per-sample gradient covariance, G the true gradient.

It is measured on the gradient the optimizer applies (after the replicas' all-reduce, so on
any replica count) with the differencing estimator: two consecutive minibatch gradients g1,
g2 of batch B are independent estimates of nearly the same G, so E[g1 . g2] = |G|^2 and
E[|g2 - g1|^2] / 2 = tr(Sigma) / B. One pair of steps in ``EVERY`` is measured (the gradient
is kept on the step before it); the pairs are smoothed (an exponential average over about
``1 / (1 - smoothing)`` pairs, bias-corrected) and read once a progress report. The cost: one
copy of the gradients (the size of the model's trainable weights) and passes over them on 2
steps in ``EVERY``; it runs only for jobs that ask for it (``--measure-noise``).

The hook is the optimizer's ``_all_reduce_sum_gradients`` (Keras 3 on TensorFlow), wrapped on
the one optimizer instance: the user's code and Keras are not modified. Where it is missing
(another backend, another Keras), ``install`` says why and nothing is measured.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

#: Steps between two measured pairs: the gradient is kept on the step before each measured
#: one, so the meter's passes over the gradients run on 2 steps of ``EVERY``.
EVERY = 8
#: The exponential average's weight on the past, per measured pair (about 50 pairs, 400 steps).
SMOOTHING = 0.98
_HOOK = "_all_reduce_sum_gradients"


class GradientNoise:
    """Measures the noise scale of one model's training; ``install`` before the first step is
    traced, ``read`` at any time after."""

    def __init__(self, model, smoothing: float = SMOOTHING, every: int = EVERY) -> None:
        self.model = model
        self.smoothing = float(smoothing)
        self.every = max(1, int(every))
        self._vars: dict | None = None

    def install(self) -> str | None:
        """Hook the model's optimizer; the reason it cannot be measured, or None."""
        if keras.backend.backend() != "tensorflow":
            return (
                "the gradient noise scale is measured on TensorFlow only "
                f"(not {keras.backend.backend()})"
            )
        opt = getattr(self.model, "optimizer", None)
        opt = getattr(opt, "inner_optimizer", opt)  # a LossScaleOptimizer applies its inner one's
        if opt is None or not callable(getattr(opt, _HOOK, None)):
            return (
                "the gradient noise scale is not measured: this optimizer has no gradient "
                "all-reduce to read"
            )
        if getattr(opt, "gradient_accumulation_steps", None):
            return "the gradient noise scale is not measured with gradient accumulation"
        weights = list(self.model.trainable_variables)
        if not weights:
            return "the gradient noise scale is not measured: the model has no trainable weights"
        strategy = getattr(self.model, "distribute_strategy", None) or tf.distribute.get_strategy()
        with strategy.scope():  # mirrored: each replica's step updates them once, not n times
            self._vars = self._make(weights)
        original = getattr(opt, _HOOK)
        noise = self

        def reduced(grads_and_vars):
            out = original(grads_and_vars)
            noise._update(out)
            return out

        setattr(opt, _HOOK, reduced)
        return None

    @staticmethod
    def _make(weights) -> dict:
        def var(value, shape=(), name="gns"):
            return tf.Variable(
                tf.zeros(shape, tf.float32) + value,
                trainable=False,
                name=name,
                # one copy per replica, updated without a merge (every replica computes the same
                # values from the same reduced gradient), the first replica's read
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )

        return {
            "prev": {
                id(w.value if hasattr(w, "value") else w): var(0.0, w.shape, "gns_prev")
                for w in weights
            },
            "have": var(0.0),
            "sqr": var(0.0),
            "var": var(0.0),
            "norm": var(0.0),
            "steps": var(0.0),
            "count": var(0.0),
        }

    def _update(self, grads_and_vars) -> None:
        """Traced into the train step: keep this gradient on the step before a measured one,
        measure the pair on the measured one (every ``every`` steps), do nothing otherwise."""
        v = self._vars
        pairs = [(g, v["prev"].get(id(w))) for g, w in grads_and_vars if g is not None]
        pairs = [
            (tf.cast(tf.convert_to_tensor(g), tf.float32), p) for g, p in pairs if p is not None
        ]
        if not pairs:
            return
        phase = tf.math.floormod(v["count"], float(self.every))
        keep = tf.equal(phase, float(self.every - 1)) if self.every > 1 else tf.constant(True)

        def measure():
            dot = tf.add_n([tf.reduce_sum(g * p) for g, p in pairs])
            diff = tf.add_n([tf.reduce_sum(tf.square(g - p)) for g, p in pairs]) / 2.0
            ok = tf.math.is_finite(dot) & tf.math.is_finite(diff)
            rate = tf.where(ok, 1.0 - self.smoothing, 0.0)
            dot, diff = tf.where(ok, dot, 0.0), tf.where(ok, diff, 0.0)
            return tf.group(
                v["sqr"].assign_add(rate * (dot - v["sqr"])),
                v["var"].assign_add(rate * (diff - v["var"])),
                v["norm"].assign_add(rate * (1.0 - v["norm"])),
                v["steps"].assign_add(tf.cast(ok, tf.float32)),
            )

        def store():
            return tf.group(*[p.assign(g) for g, p in pairs], v["have"].assign(1.0))

        # the pair is (the kept gradient, this one): measured where the last step kept one
        pair = tf.equal(phase, 0.0) & (v["have"] > 0) if self.every > 1 else v["have"] > 0
        tf.cond(pair, measure, tf.no_op)
        tf.cond(keep, store, tf.no_op)
        v["count"].assign_add(1.0)

    def read(self, batch: int | None) -> dict | None:
        """The estimates now, for a step of global ``batch`` samples: ``grad_sqr`` (|G|^2),
        ``grad_var`` (tr(Sigma), per sample), ``noise_scale`` (samples; None while |G|^2 reads
        zero or less), ``noise_steps`` (the step pairs measured); None before any pair."""
        if self._vars is None or not batch:
            return None
        v = self._vars
        norm = float(v["norm"].numpy())
        if norm <= 0:
            return None
        sqr = float(v["sqr"].numpy()) / norm
        var = float(v["var"].numpy()) / norm * batch
        if not (math.isfinite(sqr) and math.isfinite(var)):
            return None
        scale = var / sqr if sqr > 0 else None
        return {
            "grad_sqr": sqr,
            "grad_var": var,
            "noise_scale": scale,
            "noise_steps": int(v["steps"].numpy()),
        }
