"""`ipu_keras.Model`, `ipu_keras.Sequential` and the functional form.

Each is the Keras class with `IPUTrainerMixin` in front. Keras' `Model.__new__`
turns `Model(inputs, outputs)` into `Functional` only for `keras.Model` itself, and
`Model.__init__` would otherwise rewrite the bases of the class it was called on, so
`Model.__new__` here hands out our own `Functional` (an ipu_keras `Model` too). All
three are registered as Keras serializables, so saved models load back as ipu_keras
models. `LegacyModelArguments` (sdk21.py) takes SDK 2.1's constructor arguments.
"""
import keras
from keras.src.models.functional import Functional as KerasFunctional
from keras.src.models.model import functional_init_arguments

from ipu_keras._src.keras.sdk21 import LegacyModelArguments
from ipu_keras._src.keras.trainer import IPUTrainerMixin

_register = keras.saving.register_keras_serializable(package="ipu_keras")


@_register
class Model(LegacyModelArguments, IPUTrainerMixin, keras.Model):
    """A Keras model that trains and runs on the simulated IPU.

    Build it like `keras.Model`: functionally with `Model(inputs, outputs)`, or by
    subclassing and writing `call` (and optionally `train_step`/`test_step`/
    `predict_step`). `compile(steps_per_execution=N)` sets how many steps each device
    execution runs.
    """

    def __new__(cls, *args, **kwargs):
        if cls is Model and functional_init_arguments(args, kwargs):
            return Functional.__new__(Functional, *args, **kwargs)
        return super().__new__(cls, *args, **kwargs)


@_register
class Functional(Model, KerasFunctional):
    """The functional form of `ipu_keras.Model` (what `Model(inputs, outputs)` returns)."""


@_register
class Sequential(LegacyModelArguments, IPUTrainerMixin, keras.Sequential):
    """A `keras.Sequential` that trains and runs on the simulated IPU."""
