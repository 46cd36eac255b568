"""The Keras adapter (Keras 3, on TensorFlow, JAX or PyTorch): ``keras.Model.fit`` made elastic
(``bootstrap``, ``session``, ``callback``, ``inputs``, ``batching``), with the model's state
kept independent of the replica count (``modelstate``). What differs between Keras' backends
(devices and data parallel, reading the state of a running fit, feeding arrays) is behind
``backends``: a ``tf.distribute`` strategy on TensorFlow (``tfbackend``), Keras' own
``DataParallel`` distribution on JAX (``jaxbackend``), one device on PyTorch
(``torchbackend``). Nothing here is imported before the adapter is used: every framework takes
seconds to import, and JAX must be configured before it is."""

from __future__ import annotations

import time

from ..adapter import Session, TrainerContext
from ..tlog import log
from . import backends


class KerasAdapter:
    name = "keras"
    process_per_device = False

    def import_framework(self) -> None:
        backend = backends.current()
        why_not = backend.standby_import()
        if why_not:
            log(f"Keras on {backend.label}: {why_not}")

    def start(self, context: TrainerContext) -> Session:
        backend = backends.current()
        backend.prepare(context.gpus, context.simulated)
        backend.import_framework()
        import keras

        from . import bootstrap

        ready_at = round(time.time(), 3)  # from a ready standby: at once
        if keras.backend.backend() != backend.name:
            raise RuntimeError(
                f"Keras runs on {keras.backend.backend()!r}, the trainer expected "
                f"{backend.name!r} (KERAS_BACKEND or keras.json)"
            )
        log(f"Keras on {backend.label} ready")
        replicas = backend.setup(context.gpus, context.simulated)
        runtime = bootstrap.Runtime(
            context.job, context.config, context.generation, context.gpus, context.stop, replicas
        )
        runtime.ready_at = ready_at
        bootstrap.install(runtime)
        return runtime
