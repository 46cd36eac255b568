"""A cell that uses a variable defined only in the notebook: fails with NameError."""

import keras

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x_train, y_train, epochs=1)  # noqa: F821  (x_train lives in the notebook)
