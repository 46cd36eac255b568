"""A Keras script whose own callback writes down every event it sees, one JSON array a line.

Usage: batch_recorder.py EVENTS [--input arrays|generator] [--epochs N] [--verbose V]
                                [--hold STEPS ...] [--stop-after-epoch E]

Events: ["train_begin", epochs, steps], ["epoch_begin", e], ["begin", e, batch],
["end", e, batch, replicas, params_steps, params_epochs], ["epoch_end", e], ["train_end"].

``--hold STEPS`` (one per generation that is resized, in order): once this trainer process
has trained STEPS steps, the callback waits in ``on_train_batch_begin`` until the sidecar is
resizing (status.json), so the resize lands right there however fast or slow the machine is.
The test asks for the resize when live.step shows that step.
"""

import argparse
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("events")
parser.add_argument("--input", choices=("arrays", "generator"), default="arrays")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--verbose", type=int, default=2)
parser.add_argument("--hold", type=int, nargs="*", default=[])
parser.add_argument("--stop-after-epoch", type=int)
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
        self.held = HOLD is None

    def write(self, *event):
        self.f.write(json.dumps(event) + "\n")
        self.f.flush()  # a stop ends the process with os._exit

    def on_train_begin(self, logs=None):
        self.write("train_begin", self.params["epochs"], self.params["steps"])

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.write("epoch_begin", epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if not self.held and self.steps >= HOLD:
            self.hold()
        self.write("begin", self.epoch, batch)

    def hold(self):
        self.held = True
        deadline = time.monotonic() + 120
        while not resizing():
            if time.monotonic() > deadline:
                raise RuntimeError(f"generation {GENERATION}: no resize came")
            time.sleep(0.01)

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self.write("end", self.epoch, batch, replicas, self.params["steps"], self.params["epochs"])

    def on_epoch_end(self, epoch, logs=None):
        self.write("epoch_end", epoch)
        if epoch == args.stop_after_epoch:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self.write("train_end")


rng = np.random.default_rng(5)
x = rng.normal(size=(4800, 16)).astype("float32")  # 150 batches of 32
y = (x[:, :1] - x[:, 1:2] > 0).astype("float32")

model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(from_logits=True))

if args.input == "arrays":
    fit_args = dict(x=x, y=y, batch_size=32)
else:

    def batches():
        while True:
            for i in range(0, len(x), 32):
                yield x[i : i + 32], y[i : i + 32]

    fit_args = dict(x=batches(), steps_per_epoch=150)

model.fit(**fit_args, epochs=args.epochs, callbacks=[Recorder()], verbose=args.verbose)
