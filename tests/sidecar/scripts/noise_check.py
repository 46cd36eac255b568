"""The gradient noise meter against the exact per-sample gradients, on N replicas.

Usage: noise_check.py REPLICAS   (prints one JSON object: the meter's reading and the exact
values at the model's weights; the learning rate is 0, so the true gradient stays put and the
differencing estimator's assumption holds exactly)
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

replicas = int(sys.argv[1])
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
)
import keras  # noqa: E402
from elastic_gpu_sidecar.trainer.keras.gradnoise import GradientNoise  # noqa: E402

keras.utils.set_random_seed(0)  # the shuffle too: the same reading every run
devices = [d.name for d in tf.config.list_logical_devices("CPU")][:replicas]
strategy = tf.distribute.MirroredStrategy(devices) if replicas > 1 else tf.distribute.get_strategy()
rng = np.random.default_rng(0)
n, d, batch = 16384, 64, 64
EPOCHS = 8
x = rng.normal(size=(n, d)).astype("float32")
y = (x @ rng.normal(size=(d, 1)) + 3.0 * rng.normal(size=(n, 1))).astype("float32")
with strategy.scope():
    model = keras.Sequential([keras.Input((d,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0), loss="mse")
meter = GradientNoise(model)
why = meter.install()
model.fit(x, y, batch_size=batch, epochs=EPOCHS, verbose=0)
kernel, bias = (v.numpy() for v in model.trainable_variables)
r = x @ kernel + bias - y  # the per-sample gradients of (w.x + b - y)^2
g = np.concatenate([2 * r * x, 2 * r], axis=1)
mean = g.mean(0)
exact = {"grad_sqr": float(mean @ mean), "grad_var": float(g.var(0).sum())}
exact["noise_scale"] = exact["grad_var"] / exact["grad_sqr"]
print(
    json.dumps(
        {
            "why": why,
            "read": meter.read(batch),
            "exact": exact,
            "steps": EPOCHS * n // batch,
            "every": meter.every,
        }
    )
)
