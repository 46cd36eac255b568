"""Functional model on NumPy arrays, with validation data and the script's own callbacks.

Usage: func_numpy.py EVENTS_FILE   (the callback appends one line per epoch end there)
"""

import sys

import keras
import numpy as np

events_path = sys.argv[1]


class EpochRecorder(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        with open(events_path, "a") as f:
            f.write("train_begin\n")

    def on_epoch_end(self, epoch, logs=None):
        with open(events_path, "a") as f:
            f.write(f"epoch_end {epoch} {logs['loss']:.6f} {logs['val_loss']:.6f}\n")

    def on_train_end(self, logs=None):
        with open(events_path, "a") as f:
            f.write("train_end\n")


rng = np.random.default_rng(1)
x = rng.normal(size=(8192, 32)).astype("float32")
w = rng.normal(size=(32, 4)).astype("float32")
y = np.argmax(x @ w, axis=1)
x_val, y_val = x[-1024:], y[-1024:]
x, y = x[:-1024], y[:-1024]

inputs = keras.Input((32,))
h = keras.layers.Dense(512, activation="relu")(inputs)
h = keras.layers.Dense(512, activation="relu")(h)
outputs = keras.layers.Dense(4)(h)
model = keras.Model(inputs, outputs)
model.compile(
    optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
history = model.fit(
    x,
    y,
    batch_size=32,
    epochs=3,
    validation_data=(x_val, y_val),
    callbacks=[EpochRecorder(), keras.callbacks.TerminateOnNaN()],
    verbose=2,
)
print("epochs in history:", history.epoch)
