"""A catalogue item: one Keras feature exercised by a small model, and how to compare it.

Every item trains the same functional model for a few steps on the simulated IPU and
with Keras on TensorFlow's CPU, from the same initial weights and seed state, and
must give the same losses, metrics, predictions and final weights.
"""
import dataclasses

import keras
import numpy as np


def regression_data(input_shape, output_shape, samples=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples,) + tuple(input_shape)).astype(np.float32)
    y = rng.standard_normal((samples,) + tuple(output_shape)).astype(np.float32)
    return x, y


def class_data(input_shape, classes=4, samples=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples,) + tuple(input_shape)).astype(np.float32)
    return x, rng.integers(0, classes, samples).astype(np.int32)


def token_data(length, vocabulary=20, classes=2, samples=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, vocabulary, (samples, length)).astype(np.int32)
    return x, rng.integers(0, classes, samples).astype(np.int32)


@dataclasses.dataclass
class Item:
    """A catalogue item.

    Attributes:
        name: What the item exercises, as the catalogue names it (e.g. "Conv2D").
        group: The catalogue section ("core", "convolution", "losses", ...).
        build: `build(inputs) -> outputs` on a `keras.Input` of `input_shape`.
        data: `data() -> (x, y)` numpy arrays.
        input_shape: Shape of one sample, without the batch axis.
        input_dtype: dtype of the model input.
        loss: A Keras loss (name or object factory result).
        optimizer: A factory of the Keras optimizer.
        metrics: A factory of the metrics list.
        steps: Training steps (two executions of `steps_per_execution`, one partial).
        rtol: Relative tolerance of the comparison (1e-5 unless justified).
        atol: Absolute tolerance.
        policy: A Keras mixed-precision policy name to run under, or None.
    """

    name: str
    group: str
    build: object
    data: object
    input_shape: tuple
    input_dtype: str = "float32"
    loss: object = "mse"
    optimizer: object = lambda: keras.optimizers.SGD(0.05)
    metrics: object = lambda: []
    steps: int = 3
    rtol: float = 1e-5
    atol: float = 1e-6
    policy: str = None
