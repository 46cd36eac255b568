"""The Keras adapter (Keras 3 on TensorFlow): ``keras.Model.fit`` made elastic (``bootstrap``,
``session``, ``callback``, ``inputs``, ``batching``) under a ``tf.distribute`` strategy set for
the grant (``strategy``), with the model's state kept independent of the replica count
(``tfstate``, ``replica_shapes``). Nothing here is imported before the adapter is used:
TensorFlow takes seconds to import."""

from __future__ import annotations

import time

from ..adapter import Session, TrainerContext
from ..tlog import log
from .tfquiet import startup_notices_hidden


class KerasAdapter:
    name = "keras"
    process_per_device = False

    def import_framework(self) -> None:
        with startup_notices_hidden():  # the job's log starts with the job, not TF's notices
            from . import bootstrap, strategy  # noqa: F401  (TensorFlow, Keras; no device)

    def start(self, context: TrainerContext) -> Session:
        self.import_framework()
        from . import bootstrap, strategy

        ready_at = round(time.time(), 3)  # from a ready standby: at once
        log("TensorFlow ready")
        strategy.setup_strategy(context.gpus, context.simulated)
        runtime = bootstrap.Runtime(
            context.job, context.config, context.generation, context.gpus, context.stop
        )
        runtime.ready_at = ready_at
        bootstrap.install(runtime)
        return runtime
