"""Devices and the ``tf.distribute`` strategy a trainer runs under, injected from outside.

The granted devices become visible to TensorFlow (or N logical CPU devices stand in for N
GPUs), a strategy over them is set globally, and a script that builds its own
``MirroredStrategy()`` is handed this one, so an unmodified script trains on the grant.
"""

from __future__ import annotations

import os

import tensorflow as tf

from ... import protocol as P
from ..tlog import log


def setup_strategy(gpus: list[str], simulated: bool) -> tf.distribute.Strategy:
    """Make the granted devices visible to TensorFlow and build the job's strategy.

    Must run before any TensorFlow op. A GPU id listed k times is split into k logical GPUs
    (to try multi-replica code on one physical GPU).
    """
    n = len(gpus)
    if simulated:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
        devices = [d.name for d in tf.config.list_logical_devices("CPU")][:n]
        kind = "simulated GPUs (logical CPU devices)"
    else:
        phys = tf.config.list_physical_devices("GPU")
        unique = list(dict.fromkeys(gpus))
        if len(phys) > len(unique):
            # CUDA_VISIBLE_DEVICES did not apply (CUDA was initialised before the grant was
            # known): restrict TensorFlow to the granted ordinals itself
            try:
                phys = [phys[int(P.device_index(g))] for g in unique]
            except (ValueError, IndexError):
                raise RuntimeError(
                    f"TensorFlow sees {len(phys)} GPUs and cannot restrict itself to the "
                    f"granted ids {','.join(unique)}"
                ) from None
            tf.config.set_visible_devices(phys, "GPU")
            log(f"restricted TensorFlow to the granted GPUs {','.join(unique)}")
        if len(phys) < len(unique):
            raise RuntimeError(
                f"granted GPUs {','.join(gpus)} but TensorFlow sees {len(phys)} GPU(s) "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
            )
        memory = int(os.environ.get(P.ENV_LOGICAL_MEMORY_MB, "4096"))
        for dev, gid in zip(phys, unique):
            if gpus.count(gid) > 1:
                tf.config.set_logical_device_configuration(
                    dev,
                    [tf.config.LogicalDeviceConfiguration(memory_limit=memory)] * gpus.count(gid),
                )
        devices = [d.name for d in tf.config.list_logical_devices("GPU")][:n]
        kind = "GPUs"
    if n > 1:
        strategy = tf.distribute.MirroredStrategy(devices=devices)
        tf.distribute.experimental_set_strategy(strategy)
        log(f"MirroredStrategy over {n} {kind}: {', '.join(devices)}")
    else:
        strategy = tf.distribute.get_strategy()
        log(f"default strategy on 1 device ({kind}: {', '.join(devices) or 'cpu'})")
    _hand_out(strategy, n)
    return strategy


def _hand_out(strategy: tf.distribute.Strategy, n: int) -> None:
    """``tf.distribute.MirroredStrategy()`` in the script returns the job's strategy.

    A second strategy would fail ("Mixing different tf.distribute.Strategy objects") or use
    devices the job was not granted; the metaclass intercepts construction and keeps
    ``isinstance`` checks working.
    """
    real = tf.distribute.MirroredStrategy
    said = []

    class _Meta(type(real)):
        def __call__(cls, *args, **kwargs):
            if not said:
                said.append(True)
                log(f"the script's MirroredStrategy() is the job's strategy ({n} replicas)")
            return strategy

        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real)

    tf.distribute.MirroredStrategy = _Meta(
        "MirroredStrategy", (real,), {"__module__": real.__module__, "__doc__": real.__doc__}
    )
