"""Sequential model on a tf.data pipeline: an ordinary Keras script, unaware of the sidecar."""

import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(8192, 32)).astype("float32")
w = rng.normal(size=(32, 1)).astype("float32")
y = (x @ w + 0.1 * rng.normal(size=(8192, 1))).astype("float32")

ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8192, seed=1).batch(32)

model = keras.Sequential(
    [
        keras.Input((32,)),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(1),
    ]
)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse", metrics=["mae"])
history = model.fit(ds, epochs=3, verbose=2)
print("final loss", history.history["loss"][-1])
