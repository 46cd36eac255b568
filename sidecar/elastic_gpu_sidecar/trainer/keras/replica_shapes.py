"""Let Keras learn a model's shapes from one replica's slice of the first batch.

Keras 3 on TensorFlow, under a distribution strategy, reads the first batch of every
``fit``/``evaluate`` to build the model, its loss and metrics, and gets one batch out of the
per-replica values by averaging them (``strategy.reduce("MEAN", batch, axis=None)``). When the
global batch does not split evenly over the replicas (32 samples on 3 replicas: 11, 11, 10)
the average fails (``AddN ... must have the same size and shape``; keras-team/keras#19246),
so a job that trains on 2 or 4 GPUs would die when a resize gives it 3. The build only needs
the shapes, which the first replica's slice has; training itself splits uneven batches fine.

The model keeps Keras' own method; this wraps it on the instance to hand it that slice. Keras
versions without the method (or a batch that is not per-replica) are left as they are.
"""

from __future__ import annotations

import tensorflow as tf

_MARK = "_elastic_gpu_one_replica_build"


def _first_replica(value):
    if isinstance(value, tf.distribute.DistributedValues):
        return value.values[0]
    return value


def install(model) -> None:
    """Make ``model`` build from the first replica's slice (idempotent)."""
    original = getattr(model, "_maybe_symbolic_build", None)
    if original is None or getattr(original, _MARK, False):
        return

    def build(iterator=None, data_batch=None):
        if iterator is not None and data_batch is None:
            for _, _, batches in iterator:  # Keras' own way of taking one batch
                data_batch = tf.nest.map_structure(_first_replica, next(batches))
                break
        return original(data_batch=data_batch)

    setattr(build, _MARK, True)
    model._maybe_symbolic_build = build
