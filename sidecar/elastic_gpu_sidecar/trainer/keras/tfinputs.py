"""The tf.data side of resumable inputs (Keras on TensorFlow, or a ``tf.data.Dataset`` input).

Arrays become a tf.data pipeline whose order for epoch e is a permutation seeded by (job seed,
e), gathered batch by batch the way Keras' own array adapter does, so that a
``tf.distribute`` strategy splits each batch over the replicas. A ``tf.data.Dataset`` input is
resumed with ``dataset.skip`` (see ``inputs``). Imported only where TensorFlow is in use.
"""

from __future__ import annotations

import math

import tensorflow as tf

from ... import protocol as P
from .inputs import ArrayInput, InputPlan, policy_batch, segment


def array_input(
    data, *, n: int, gb: int, steps: int, shuffle: bool, seed: int, e0: int, s0: int, epochs: int
) -> ArrayInput:
    """The rest of epoch ``e0`` from sample ``s0`` (None when ``s0`` is 0), then the epochs
    after it, as tf.data pipelines of global batches of ``gb``."""
    with tf.device("/cpu:0"):
        tensors = tf.nest.map_structure(tf.convert_to_tensor, data)
    seed_t = tf.constant(seed, tf.int64)

    def order(epoch):
        if not shuffle:
            return tf.range(n, dtype=tf.int64)
        key = tf.stack([seed_t, tf.cast(epoch, tf.int64)])
        return tf.cast(tf.argsort(tf.random.stateless_uniform([n], seed=key)), tf.int64)

    def index_batches(indices, count: int) -> tf.data.Dataset:
        full = count // gb  # whole batches as one reshape: Keras' own, faster access pattern
        ds = tf.data.Dataset.from_tensor_slices(tf.reshape(indices[: full * gb], [full, gb]))
        if count % gb:
            ds = ds.concatenate(tf.data.Dataset.from_tensors(indices[full * gb :]))
        return ds

    def with_data(indices: tf.data.Dataset) -> tf.data.Dataset:
        """Gather each batch from the arrays, the way Keras' array adapter does."""
        ds = tf.data.Dataset.zip((indices, tf.data.Dataset.from_tensors(tensors).repeat()))
        ds = ds.map(
            lambda i, d: tf.nest.map_structure(lambda a: tf.gather(a, i), d),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        options = tf.data.Options()
        options.experimental_optimization.apply_default_optimizations = False
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return ds.with_options(options).prefetch(tf.data.AUTOTUNE)

    part = rest = None
    first = e0
    if s0 > 0 and e0 < epochs:
        part = with_data(index_batches(order(e0)[s0:], n - s0))
        first = e0 + 1
    if first < epochs:
        rest = with_data(
            tf.data.Dataset.range(first, epochs).flat_map(lambda e: index_batches(order(e), n))
        )
    sample = tf.nest.map_structure(lambda a: a[: min(gb, n)], tensors)
    return ArrayInput(part, None, rest, sample)


def dataset_batch(ds: tf.data.Dataset) -> int | None:
    """The dataset's batch size: static shape, else the nearest batch op, else one peek."""
    first = tf.nest.flatten(ds.element_spec)[0]
    if first.shape.rank and first.shape[0] is not None:
        return int(first.shape[0])
    node = ds
    for _ in range(64):
        size = getattr(node, "_batch_size", None)
        if size is not None:
            try:
                return int(size)
            except (TypeError, ValueError):
                break
        node = getattr(node, "_input_dataset", None)
        if node is None:
            break
    try:
        batch = next(iter(ds.take(1)))
        return int(tf.nest.flatten(batch)[0].shape[0])
    except (StopIteration, tf.errors.OutOfRangeError, TypeError, ValueError):
        return None


def plan_dataset(args, e0, b0, s0, epochs, replicas, ref, policy) -> InputPlan:
    ds: tf.data.Dataset = args["x"]
    user_spe = args["steps_per_epoch"]
    card = int(ds.cardinality())
    batch = dataset_batch(ds)
    gb = batch
    notes = ["tf.data input: a resumed epoch skips the batches already trained"]
    if policy == P.BatchPolicy.KEEP_PER_REPLICA and batch and replicas != ref:
        gb = policy_batch(batch, replicas, ref, policy)
        notes.append(f"dataset re-batched from {batch} to {gb} samples per step")
    rebatched = gb != batch
    if user_spe:
        steps = math.ceil(user_spe * batch / gb) if rebatched else user_spe
    else:
        steps = None if rebatched or card < 0 else card

    def view(batches: int, samples: int) -> tf.data.Dataset:
        """The dataset from a position, at the batch size of this generation.

        Positions are kept in samples, so a resume is exact even when the previous
        generation used another batch size (keep-per-replica)."""
        if batch is None:
            return ds.skip(batches) if batches else ds
        whole, part = divmod(samples, batch)
        base = ds.skip(whole) if whole else ds
        if part:
            return base.unbatch().skip(part).batch(gb)
        return base.rebatch(gb) if rebatched else base

    segments = []
    first = e0
    offset = s0 // gb if gb else b0
    replayed = 0
    if user_spe and card != tf.data.INFINITE_CARDINALITY:
        if b0 or s0:
            notes.append(
                "finite dataset with steps_per_epoch: the resume cannot be placed exactly; "
                f"epoch {e0 + 1} is replayed from its start ({b0} batches run again)"
            )
        offset, replayed = 0, b0
        if e0 < epochs:
            segments.append(
                segment(args, x=view(0, 0), initial_epoch=e0, epochs=epochs, steps_per_epoch=steps)
            )
    else:
        per_epoch_b = user_spe or 0  # an infinite stream continues across epochs
        per_epoch_s = (user_spe or 0) * (batch or 0)
        if (b0 or s0) and e0 < epochs:
            rest = None
            if steps and user_spe:
                # counted in samples: b0 is in the steps of the generation that wrote it
                rest = math.ceil((user_spe * batch - s0) / gb) if batch and gb else steps - b0
            segments.append(
                segment(
                    args,
                    x=view(e0 * per_epoch_b + b0, e0 * per_epoch_s + s0),
                    initial_epoch=e0,
                    epochs=e0 + 1,
                    steps_per_epoch=rest,
                )
            )
            first = e0 + 1
        if first < epochs:
            segments.append(
                segment(
                    args,
                    x=view(first * per_epoch_b, first * per_epoch_s),
                    initial_epoch=first,
                    epochs=epochs,
                    steps_per_epoch=steps if user_spe else None,
                )
            )
    return InputPlan(
        "dataset",
        segments,
        offset,
        0 if replayed else s0,
        steps,
        gb,
        None,
        _peek(ds),
        notes,
        replayed=replayed,
        script_batch=batch,
        script_steps=user_spe or (card if card >= 0 else None),
    )


def _peek(ds):
    try:
        return next(iter(ds.take(1)))
    except (StopIteration, tf.errors.OutOfRangeError):
        return None
