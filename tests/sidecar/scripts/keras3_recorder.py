"""A Keras 3 script for any backend (no TensorFlow in it): a small Dense model on NumPy
arrays, whose own callback writes the epoch, batch and optimizer iterations of every
``on_train_batch_end`` to a file, one JSON array a line.

Usage: keras3_recorder.py EVENTS [--epochs N] [--hold STEPS ...]

``--hold STEPS`` (one per generation that is resized, in order): once this process has trained
STEPS steps, the callback waits in ``on_train_batch_begin`` until the sidecar is resizing
(status.json), so the resize lands mid-epoch however fast or slow the machine is.
"""

import argparse
import json
import os
import sys
import time

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("events")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--hold", type=int, nargs="*", default=[])
args = parser.parse_args()

JOB = os.environ["ELASTIC_GPU_JOB_DIR"]
GENERATION = int(os.environ["ELASTIC_GPU_GENERATION"])
HOLD = args.hold[GENERATION - 1] if len(args.hold) >= GENERATION else None


def resizing() -> bool:
    try:
        with open(os.path.join(JOB, "status.json")) as f:
            return json.load(f).get("state") == "resizing"
    except (FileNotFoundError, ValueError):
        return False


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.f = open(args.events, "a")  # noqa: SIM115
        self.epoch = None
        self.steps = 0  # trained by this process

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.steps == HOLD:
            deadline = time.monotonic() + 120
            while not resizing():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"generation {GENERATION}: no resize came")
                time.sleep(0.01)

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        iterations = int(self.model.optimizer.iterations.numpy())
        self.f.write(json.dumps([self.epoch, batch, iterations]) + "\n")
        self.f.flush()  # a stop ends the process with os._exit


rng = np.random.default_rng(3)
x = rng.normal(size=(4800, 16)).astype("float32")  # 150 batches of 32
y = (x[:, :1] - x[:, 1:2] > 0).astype("float32")

model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=args.epochs, callbacks=[Recorder()], verbose=0)
print(f"backend {keras.backend.backend()}", flush=True)
print(f"optimizer iterations {int(model.optimizer.iterations.numpy())}", flush=True)
print(f"tensorflow imported: {'tensorflow' in sys.modules}", flush=True)
