"""A subclassed model built under the script's own MirroredStrategy, trained by two fit calls
(NumPy, then tf.data), as a script written for a multi-GPU machine would do."""

import numpy as np
import tensorflow as tf
from elastic_models import Regressor

strategy = tf.distribute.MirroredStrategy()
print("replicas in sync:", strategy.num_replicas_in_sync)

rng = np.random.default_rng(2)
x = rng.normal(size=(8192, 16)).astype("float32")
y = (np.sin(x[:, :1]) + 0.5 * x[:, 1:2] ** 2).astype("float32")

with strategy.scope():
    model = Regressor(512)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="mse")

model.fit(x[:2048], y[:2048], batch_size=32, epochs=1, verbose=0)  # warm-up on arrays
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
history = model.fit(ds, epochs=2, verbose=2)
print("losses", history.history["loss"])
