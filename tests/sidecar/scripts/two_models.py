"""Two models, one after the other: an encoder trained first, then a head trained while the
first only predicts. A restart during the second fit must give the first back its trained
weights, read from its own checkpoint (a later checkpoint holds the other model)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(3)
x = rng.normal(size=(4096, 8)).astype("float32")
y = (x[:, :1] * 2 - x[:, 1:2]).astype("float32")

first = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(4)])
first.compile(optimizer="adam", loss="mse")
first.fit(x[:1024], x[:1024, :4], batch_size=32, epochs=1, verbose=0)
print("first model weights sum", float(sum(np.sum(w) for w in first.get_weights())))

second = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
second.compile(optimizer="adam", loss="mse")
features = first.predict(x, batch_size=256, verbose=0)
ds = tf.data.Dataset.from_tensor_slices((features, y)).batch(32)
second.fit(ds, epochs=2, verbose=2)
