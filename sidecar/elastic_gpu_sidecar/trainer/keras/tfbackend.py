"""Keras on TensorFlow: a ``tf.distribute`` strategy over the grant (``strategy``), models
built in its scope and from one replica's slice of a batch (``replica_shapes``), arrays fed as
a tf.data pipeline (``tfinputs``), which the strategy splits over the replicas."""

from __future__ import annotations

import contextlib

from .backends import Backend
from .tfquiet import startup_notices_hidden


class TensorFlowBackend(Backend):
    name = "tensorflow"
    label = "TensorFlow"

    def import_framework(self) -> None:
        with startup_notices_hidden():  # the job's log starts with the job, not TF's notices
            from . import bootstrap, strategy  # noqa: F401  (TensorFlow, Keras; no device)

    def setup(self, gpus: list[str], simulated: bool) -> int:
        from . import strategy

        strategy.setup_strategy(gpus, simulated)
        return len(gpus)

    def saving(self):
        return contextlib.nullcontext()

    def build_scope(self, model):
        return model.distribute_strategy.scope()

    def install(self, model) -> None:
        from . import replica_shapes

        replica_shapes.install(model)

    def array_input(self, data, **plan):
        from . import tfinputs

        return tfinputs.array_input(data, **plan)
