"""Keras on JAX: data parallel over the grant through Keras' own distribution API.

``keras.distribution.DataParallel`` over the grant's devices, set globally before the script
creates a variable, replicates the model on every device and splits each batch over them.
JAX fixes its device list when it first starts a backend, so the devices are configured
before Keras (and JAX) is imported: simulated GPUs are N JAX CPU devices
(``--xla_force_host_platform_device_count=N`` in ``XLA_FLAGS``), real ones are the grant's
``CUDA_VISIBLE_DEVICES``. A standby interpreter therefore imports nothing: it does not know N
before its grant. While ``fit`` runs, the model's state lives in JAX arrays outside the Keras
variables (``jax_state_sync`` writes it back), and every batch must split into equal shards.
"""

from __future__ import annotations

import os

from ..tlog import log
from .backends import Backend

COUNT_FLAG = "--xla_force_host_platform_device_count"


class JaxBackend(Backend):
    name = "jax"
    label = "JAX"

    def prepare(self, gpus: list[str], simulated: bool) -> None:
        if not simulated:
            return
        os.environ["JAX_PLATFORMS"] = "cpu"
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(COUNT_FLAG)]
        os.environ["XLA_FLAGS"] = " ".join([*flags, f"{COUNT_FLAG}={len(gpus)}"])

    def standby_import(self) -> str | None:
        return "nothing imported (JAX fixes its device count when it starts; no grant yet)"

    def setup(self, gpus: list[str], simulated: bool) -> int:
        import jax
        import keras

        if simulated:
            devices, want, kind = jax.devices("cpu"), len(gpus), "simulated GPUs (JAX CPU devices)"
        else:
            devices, kind = jax.devices(), "GPUs"
            want = len(dict.fromkeys(gpus))
            if want < len(gpus):
                log(
                    f"grant {','.join(gpus)} lists a GPU more than once: JAX cannot split a GPU "
                    f"into several devices, so it trains on {want}"
                )
        if len(devices) < want:
            raise RuntimeError(
                f"granted {want} devices but JAX sees {len(devices)} ({devices}): was JAX "
                "started before the grant was known?"
            )
        devices = devices[:want]
        names = ", ".join(str(d) for d in devices)
        if want > 1:
            keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
            log(f"keras.distribution.DataParallel over {want} {kind}: {names}")
        else:
            log(f"one device ({kind}: {names})")
        return want

    def sync(self, model) -> None:
        sync = getattr(model, "jax_state_sync", None)
        if sync is not None:
            sync()

    def check_split(self, global_batch: int, last_batch: int, replicas: int) -> None:
        uneven = [b for b in dict.fromkeys((global_batch, last_batch)) if b % replicas]
        if replicas > 1 and uneven:
            raise RuntimeError(
                f"Keras' JAX data parallel splits every batch into {replicas} equal shards, and "
                f"a batch of {uneven[0]} samples does not split so (global batch "
                f"{global_batch}, last batch of an epoch {last_batch}): use a batch size and a "
                "sample count that every GPU count the job may get divides"
            )
