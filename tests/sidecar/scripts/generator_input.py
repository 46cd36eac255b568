"""Training from a Python generator: the input cannot be skipped, so a resumed epoch replays."""

import keras
import numpy as np

rng = np.random.default_rng(3)
x = rng.normal(size=(4096, 16)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")


def batches():
    while True:
        for i in range(0, len(x), 32):
            yield x[i : i + 32], y[i : i + 32]


model = keras.Sequential(
    [
        keras.Input((16,)),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(1),
    ]
)
model.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(batches(), steps_per_epoch=128, epochs=3, verbose=2)
