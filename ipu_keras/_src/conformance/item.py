"""A catalogue item: one Keras feature exercised by a small model, and how to compare it.

Every item trains the same functional model for a few steps on the simulated IPU and
with Keras on TensorFlow's CPU, from the same initial weights and seed state, and
must give the same losses, metrics, predictions and final weights. Mixed-precision
items are compared with the same model in float32 instead (see `tolerances`). The data
helpers make the small datasets items train on; `on` makes the common regression item.
"""
import dataclasses

import keras
import numpy as np

from ipu_keras._src.conformance import tolerances


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


def binary_data(input_shape, outputs=1, samples=32, seed=0):
    """Inputs and 0/1 float targets, for sigmoid heads."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples,) + tuple(input_shape)).astype(np.float32)
    return x, rng.integers(0, 2, (samples, outputs)).astype(np.float32)


def onehot_data(input_shape, classes=4, samples=32, seed=0):
    """Inputs and one-hot float targets, for categorical losses and metrics."""
    x, labels = class_data(input_shape, classes, samples, seed)
    return x, np.eye(classes, dtype=np.float32)[labels]


def positive_data(input_shape, output_shape, samples=32, seed=0):
    """Inputs and strictly positive targets (Poisson, MSLE, MAPE, KL divergence)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples,) + tuple(input_shape)).astype(np.float32)
    y = rng.uniform(0.1, 2.0, (samples,) + tuple(output_shape)).astype(np.float32)
    return x, y


def _lengths(rng, samples, length):
    return rng.integers(1, length + 1, samples)


def padded_token_data(length, vocabulary=20, classes=2, samples=32, seed=0):
    """Token sequences of random lengths padded with trailing zeros (for mask_zero)."""
    x, y = token_data(length, vocabulary, classes, samples, seed)
    x = np.maximum(x, 1)
    rng = np.random.default_rng(seed + 1)
    x[np.arange(length) >= _lengths(rng, samples, length)[:, None]] = 0
    return x, y


def padded_sequence_data(input_shape, output_shape, samples=32, seed=0):
    """Float sequences whose trailing time steps are all zero (for the Masking layer)."""
    x, y = regression_data(input_shape, output_shape, samples, seed)
    rng = np.random.default_rng(seed + 1)
    x[np.arange(input_shape[0]) >= _lengths(rng, samples, input_shape[0])[:, None]] = 0
    return x, y


def dense_head(units=3):
    """A Dense regression head, flattening its input first when it has more than one axis."""
    return lambda h: keras.layers.Dense(units)(
        keras.layers.Flatten()(h) if len(h.shape) > 2 else h)


def on(shape, body, name, group, **kwargs):
    """A regression item: `body(inputs)` followed by `head` (default a small Dense head)."""
    head = kwargs.pop("head", dense_head())
    data = kwargs.pop("data", None) or (lambda: regression_data(shape, (3,)))
    return Item(name, group, lambda x: head(body(x)), data, shape, **kwargs)


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
        steps: Training steps of `BATCH` samples (on the IPU, executions of
            `steps_per_execution` steps, the last one partial).
        partial_batch: Whether the last step gets half a batch (its own program on the
            IPU: a second compile, so only a few items ask for it).
        tolerance: The row of `tolerances` the comparison uses (FLOAT32 unless the
            item's arithmetic calls for another).
        policy: A Keras mixed-precision policy name to run under, or None.
        reference_policy: The policy of the CPU twin the IPU run is compared with, when
            not `policy` itself: "float32" for mixed precision, whose float16 kernels on
            the CPU differ between instruction sets (see `tolerances`).
        cpu_xla: Whether the CPU runs compile with XLA (`jit_compile=True`): for items
            whose eager CPU kernels exist only on some processors (channels_first and
            dilated transposed convolutions are oneDNN kernels of AVX-512 machines; XLA's
            CPU convolution implements them on any x86-64).
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
    partial_batch: bool = False
    tolerance: tolerances.Tolerance = tolerances.FLOAT32
    policy: str = None
    reference_policy: str = None
    cpu_xla: bool = False
