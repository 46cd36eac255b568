"""Turn a ``fit`` call's input into one that resumes at an exact batch.

Keras has no "start this epoch at batch b", so a resumed fit is split in two calls: the rest
of the interrupted epoch (input skipped by the batches already trained), then the remaining
epochs. How the skip is done depends on the input:

* ``tf.data.Dataset``: ``dataset.skip(b)``; the count is exact, and so are the samples when
  the pipeline is deterministic (an unseeded shuffle draws a new order after a restart).
* arrays (NumPy, tensors, nested dicts/lists of them): fed batch by batch in an order for
  epoch e that is a permutation seeded by (job seed, e), so the skip is exact to the sample,
  whatever the batch size of the new generation. The feed is the backend's: a tf.data
  pipeline on TensorFlow (``tfinputs``), NumPy batches elsewhere (``npinputs``).
* anything else (Python generators, ``PyDataset``): cannot be skipped without replaying it;
  the interrupted epoch is replayed from its start, and the log says so.

Nothing here imports TensorFlow: a ``tf.data.Dataset`` can only come from a script that did.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import keras
import numpy as np

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


@dataclass
class ArrayInput:
    """A backend's feed of an array input (``Backend.array_input``)."""

    part: object  # the rest of the interrupted epoch (None: none)
    part_steps: int | None  # its steps_per_epoch (None: until the input ends)
    rest: object  # the epochs after it, one after the other (None: none)
    sample: object  # one batch, to build the model before a restore


def is_dataset(x) -> bool:
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.data.Dataset)


def classify(x) -> str:
    if is_dataset(x):
        return "dataset"
    leaves = keras.tree.flatten(x) if isinstance(x, (list, tuple, dict)) else [x]
    if leaves and all(_is_array(a) for a in leaves):
        return "arrays"
    return "replay"


def _is_array(a) -> bool:
    return isinstance(a, np.ndarray) or (
        hasattr(a, "__array__") and hasattr(a, "shape") and not is_dataset(a)
    )


def tuples(obj):
    """Lists would be stacked into one tensor by tf.data; Keras reads tuples the same way."""
    if isinstance(obj, list):
        return tuple(tuples(o) for o in obj)
    if isinstance(obj, tuple):
        return tuple(tuples(o) for o in obj)
    if isinstance(obj, dict):
        return {k: tuples(v) for k, v in obj.items()}
    return obj


def _to_numpy(obj):
    if obj is None:
        return None
    return keras.tree.map_structure(np.asarray, tuples(obj))


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
        from .tfinputs import plan_dataset

        return plan_dataset(
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


def segment(args: dict, **changes) -> dict:
    seg = dict(args)
    seg.update(changes)
    return seg


def _plan_arrays(args, e0, s0, epochs, replicas, ref, policy, seed) -> InputPlan:
    from .backends import current

    x, y, sw = _to_numpy(args["x"]), _to_numpy(args["y"]), _to_numpy(args["sample_weight"])
    val = args["validation_data"]
    split = args["validation_split"] or 0.0
    n = len(keras.tree.flatten(x)[0])
    if split and val is None:  # Keras' own rule: the last fraction, taken before shuffling
        cut = math.floor(n * (1.0 - split))
        take = lambda t, s: None if t is None else keras.tree.map_structure(lambda a: a[s], t)  # noqa: E731
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
    backend = current()
    backend.check_split(gb, n % gb or gb, replicas)
    data = (x,) if y is None else (x, y) if sw is None else (x, y, sw)
    feed = backend.array_input(
        data,
        n=n,
        gb=gb,
        steps=steps,
        shuffle=bool(args["shuffle"]),
        seed=seed,
        e0=e0,
        s0=s0,
        epochs=epochs,
    )
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
    if feed.part is not None:
        segments.append(
            segment(
                args,
                x=feed.part,
                initial_epoch=e0,
                epochs=e0 + 1,
                steps_per_epoch=feed.part_steps,
                **common,
            )
        )
        first = e0 + 1
    if feed.rest is not None:
        segments.append(
            segment(
                args,
                x=feed.rest,
                initial_epoch=first,
                epochs=epochs,
                steps_per_epoch=steps,
                **common,
            )
        )
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
        feed.sample,
        notes,
        script_batch=batch,
        script_steps=math.ceil(n / batch),
    )


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
    seg = segment(args, x=x, initial_epoch=e0, epochs=epochs)
    segments = [seg] if e0 < epochs else []
    batch = args["batch_size"]
    if batch is None and sample is not None:
        leaves = keras.tree.flatten(sample)
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
