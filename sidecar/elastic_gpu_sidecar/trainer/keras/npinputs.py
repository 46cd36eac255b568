"""Array input fed as NumPy batches, for the backends that do not need tf.data (JAX, PyTorch).

The same contract as the tf.data feed (``tfinputs``): epoch e's order is a permutation seeded
by (job seed, e), batches of the global batch gathered from the arrays in that order, the rest
of an interrupted epoch starting at its exact sample. Python generators, which Keras reads on
every backend without TensorFlow; the one of the remaining epochs runs on across epochs
(``steps_per_epoch`` batches each), as Keras reads a generator.
"""

from __future__ import annotations

import math

import keras
import numpy as np

from .inputs import ArrayInput


def array_input(
    data, *, n: int, gb: int, steps: int, shuffle: bool, seed: int, e0: int, s0: int, epochs: int
) -> ArrayInput:
    def order(epoch: int) -> np.ndarray:
        if not shuffle:
            return np.arange(n)
        return np.random.default_rng([seed, epoch]).permutation(n)

    def batches(indices: np.ndarray):
        for i in range(0, len(indices), gb):
            yield keras.tree.map_structure(lambda a, c=indices[i : i + gb]: a[c], data)

    def epochs_from(first: int):
        for epoch in range(first, epochs):
            yield from batches(order(epoch))

    part = part_steps = rest = None
    first = e0
    if s0 > 0 and e0 < epochs:
        part, part_steps = batches(order(e0)[s0:]), math.ceil((n - s0) / gb)
        first = e0 + 1
    if first < epochs:
        rest = epochs_from(first)
    sample = keras.tree.map_structure(lambda a: a[: min(gb, n)], data)
    return ArrayInput(part, part_steps, rest, sample)
