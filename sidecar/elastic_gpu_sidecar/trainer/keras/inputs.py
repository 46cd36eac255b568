"""Turn a ``fit`` call's input into one that resumes at an exact batch.

Keras has no "start this epoch at batch b", so a resumed fit is split in two calls: the rest
of the interrupted epoch (input skipped by the batches already trained), then the remaining
epochs. How the skip is done depends on the input:

* ``tf.data.Dataset``: ``dataset.skip(b)``; the count is exact, and so are the samples when
  the pipeline is deterministic (an unseeded shuffle draws a new order after a restart).
* arrays (NumPy, tensors, nested dicts/lists of them): converted to a tf.data pipeline whose
  order for epoch e is a permutation seeded by (job seed, e), so the skip is exact to the
  sample, whatever the batch size of the new generation.
* anything else (Python generators, ``PyDataset``): cannot be skipped without replaying it;
  the interrupted epoch is replayed from its start, and the log says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from ... import protocol as P

KERAS_DEFAULT_BATCH = 32


@dataclass
class InputPlan:
    kind: str  # "arrays" | "dataset" | "replay"
    segments: list[dict]  # keyword arguments of each underlying fit() call
    first_offset: int  # batch index the first segment's first epoch starts at
    first_samples: int  # samples of that epoch already trained
    steps_per_epoch: int | None
    global_batch: int | None
    samples_per_epoch: int | None = None
    sample_batch: object = None  # one batch, to build the model before a restore
    notes: list[str] = field(default_factory=list)
    replayed: int = 0  # batches trained again because the input cannot be skipped
    # the numbering of an unresized run, which user callbacks see (callback.Numbering):
    script_batch: int | None = None  # the global batch the script asked for
    script_steps: int | None = None  # batches per epoch at that batch (Keras' params["steps"])


def classify(x) -> str:
    if isinstance(x, tf.data.Dataset):
        return "dataset"
    leaves = tf.nest.flatten(x) if isinstance(x, (list, tuple, dict)) else [x]
    if leaves and all(_is_array(a) for a in leaves):
        return "arrays"
    return "replay"


def _is_array(a) -> bool:
    return isinstance(a, (np.ndarray, tf.Tensor)) or (
        hasattr(a, "__array__") and hasattr(a, "shape") and not isinstance(a, tf.data.Dataset)
    )


def _tuples(obj):
    """Lists would be stacked into one tensor by tf.data; Keras reads tuples the same way."""
    if isinstance(obj, list):
        return tuple(_tuples(o) for o in obj)
    if isinstance(obj, tuple):
        return tuple(_tuples(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _tuples(v) for k, v in obj.items()}
    return obj


def _to_numpy(obj):
    if obj is None:
        return None
    return tf.nest.map_structure(np.asarray, _tuples(obj))


def policy_batch(batch: int, replicas: int, reference: int, policy: str) -> int:
    """The global batch of this generation under the batch policy."""
    if policy == P.BatchPolicy.KEEP_PER_REPLICA:
        return max(1, round(batch * replicas / reference))
    return batch


def plan(
    args: dict,
    *,
    start_epoch: int,
    start_batch: int,
    start_samples: int,
    epochs: int,
    replicas: int,
    reference_replicas: int,
    policy: str,
    seed: int,
) -> InputPlan:
    kind = classify(args["x"])
    if kind == "arrays":
        return _plan_arrays(
            args, start_epoch, start_samples, epochs, replicas, reference_replicas, policy, seed
        )
    if kind == "dataset":
        return _plan_dataset(
            args,
            start_epoch,
            start_batch,
            start_samples,
            epochs,
            replicas,
            reference_replicas,
            policy,
        )
    return _plan_replay(args, start_epoch, start_batch, epochs, policy)


def _segment(args: dict, **changes) -> dict:
    seg = dict(args)
    seg.update(changes)
    return seg


def _plan_arrays(args, e0, s0, epochs, replicas, ref, policy, seed) -> InputPlan:
    x, y, sw = _to_numpy(args["x"]), _to_numpy(args["y"]), _to_numpy(args["sample_weight"])
    val = args["validation_data"]
    split = args["validation_split"] or 0.0
    n = len(tf.nest.flatten(x)[0])
    if split and val is None:  # Keras' own rule: the last fraction, taken before shuffling
        cut = math.floor(n * (1.0 - split))
        take = lambda t, s: None if t is None else tf.nest.map_structure(lambda a: a[s], t)  # noqa: E731
        val = tuple(
            p
            for p in (
                take(x, slice(cut, None)),
                take(y, slice(cut, None)),
                take(sw, slice(cut, None)),
            )
            if p is not None
        )
        x, y, sw = take(x, slice(None, cut)), take(y, slice(None, cut)), take(sw, slice(None, cut))
        n = cut
    batch = args["batch_size"] or KERAS_DEFAULT_BATCH
    gb = policy_batch(batch, replicas, ref, policy)
    steps = math.ceil(n / gb)
    data = (x,) if y is None else (x, y) if sw is None else (x, y, sw)
    with tf.device("/cpu:0"):
        tensors = tf.nest.map_structure(tf.convert_to_tensor, data)
    shuffle = bool(args["shuffle"])
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

    common = dict(
        y=None,
        sample_weight=None,
        batch_size=None,
        shuffle=False,
        validation_data=val,
        validation_split=0.0,
        validation_batch_size=args["validation_batch_size"] or batch,
    )
    segments = []
    first = e0
    if s0 > 0 and e0 < epochs:
        part = with_data(index_batches(order(e0)[s0:], n - s0))
        segments.append(
            _segment(args, x=part, initial_epoch=e0, epochs=e0 + 1, steps_per_epoch=None, **common)
        )
        first = e0 + 1
    if first < epochs:
        rest = tf.data.Dataset.range(first, epochs).flat_map(lambda e: index_batches(order(e), n))
        segments.append(
            _segment(
                args,
                x=with_data(rest),
                initial_epoch=first,
                epochs=epochs,
                steps_per_epoch=steps,
                **common,
            )
        )
    sample = tf.nest.map_structure(lambda a: a[: min(gb, n)], tensors)
    offset = steps - math.ceil((n - s0) / gb) if s0 else 0  # the epoch still ends at `steps`
    notes = [f"arrays: {n} samples, epoch order seeded per epoch (exact resume)"]
    user_spe = args["steps_per_epoch"]
    if user_spe and user_spe < math.ceil(n / batch):  # Keras: epochs of part of a pass
        notes.append(
            f"steps_per_epoch={user_spe} is not applied to array input: every epoch is one "
            f"pass over the {n} samples ({math.ceil(n / batch)} batches of {batch})"
        )
    return InputPlan(
        "arrays",
        segments,
        offset,
        s0,
        steps,
        gb,
        n,
        sample,
        notes,
        script_batch=batch,
        script_steps=math.ceil(n / batch),
    )


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


def _plan_dataset(args, e0, b0, s0, epochs, replicas, ref, policy) -> InputPlan:
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
                _segment(args, x=view(0, 0), initial_epoch=e0, epochs=epochs, steps_per_epoch=steps)
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
                _segment(
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
                _segment(
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


def _plan_replay(args, e0, b0, epochs, policy) -> InputPlan:
    notes = []
    if b0 > 0:
        notes.append(
            f"input of type {type(args['x']).__name__} cannot be skipped exactly: epoch "
            f"{e0 + 1} is replayed from its start ({b0} batches run again)"
        )
    if policy == P.BatchPolicy.KEEP_PER_REPLICA:
        notes.append("keep-per-replica cannot re-batch this input; its batch size is kept")
    x, sample = args["x"], None
    if hasattr(x, "__getitem__") and hasattr(x, "__len__"):  # PyDataset / Sequence
        try:
            sample = x[0]
        except Exception:
            sample = None
    elif hasattr(x, "__next__"):  # a generator: peek one batch and put it back
        try:
            sample = next(x)
        except StopIteration:
            sample = None
        else:
            x = _chain(sample, x)
    steps = args["steps_per_epoch"]
    if steps is None and hasattr(x, "__len__"):
        try:
            steps = len(x)
        except TypeError:
            steps = None
    seg = _segment(args, x=x, initial_epoch=e0, epochs=epochs)
    segments = [seg] if e0 < epochs else []
    batch = args["batch_size"]
    if batch is None and sample is not None:
        leaves = tf.nest.flatten(sample)
        if leaves and getattr(leaves[0], "shape", None) is not None and len(leaves[0].shape):
            batch = int(leaves[0].shape[0])
    return InputPlan(
        "replay",
        segments,
        0,
        0,
        steps,
        batch,
        None,
        sample,
        notes,
        replayed=b0,
        script_batch=batch,  # never re-batched
        script_steps=steps,
    )


def _chain(first, rest):
    yield first
    yield from rest
