"""A subclassed Keras model, importable by the training script and by the test that loads it."""

import keras


@keras.saving.register_keras_serializable(package="elastic_tests")
class Regressor(keras.Model):
    def __init__(self, units=128, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden = keras.layers.Dense(units, activation="relu")
        self.hidden2 = keras.layers.Dense(units, activation="relu")
        self.out = keras.layers.Dense(1)

    def call(self, inputs):
        return self.out(self.hidden2(self.hidden(inputs)))

    def get_config(self):
        return {**super().get_config(), "units": self.units}
