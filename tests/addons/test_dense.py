"""SerialDense against keras.layers.Dense: same kernel, same outputs and gradients (1e-5)."""
import numpy as np
import pytest
import keras
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError
from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras._src.conformance import tolerances as T

# (input shape, units, factor, dimension): the original's dense_test cases, plus batched.
CASES = [
    ((8, 16), 5, 2, "input_columns"),
    ((4, 21), 8, 3, "input_rows_kernel_columns"),
    ((4, 4), 8, 2, "kernel_rows"),
    ((3, 8, 16), 5, 4, "input_columns"),
    ((3, 4, 21), 8, 7, "input_rows_kernel_columns"),
    ((3, 4, 4), 8, 4, "kernel_rows"),
    ((4, 6), 3, 1, "kernel_rows"),
]


def _outputs_and_grads(layer, x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(y * y)
    grads = tape.gradient(loss, [x, layer.kernel, layer.bias])
    return [y.numpy()] + [g.numpy() for g in grads]


@pytest.mark.parametrize("shape, units, factor, dimension", CASES)
def test_serial_dense_equals_dense(shape, units, factor, dimension):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    serial = ipu_layers.SerialDense(units, factor, dimension, activation="relu")
    dense = keras.layers.Dense(units, activation="relu")
    serial.build(shape)
    dense.build(shape)
    serial.set_weights([w + 0.1 for w in dense.get_weights()])
    dense.set_weights(serial.get_weights())
    for got, want in zip(_outputs_and_grads(serial, x), _outputs_and_grads(dense, x)):
        T.FLOAT32_DENSE_GRAD_24.assert_close(got, want)


@pytest.mark.parametrize("kwargs, match", [
    ({"serialization_factor": 0}, "at least 1"),
    ({"serialization_dimension": "rows"}, "one of"),
    ({"serialization_factor": 3}, "divide"),
])
def test_bad_serialization_is_refused(kwargs, match):
    args = {"units": 4, "serialization_factor": 2, "serialization_dimension": "kernel_rows"}
    args.update(kwargs)
    layer = ipu_layers.SerialDense(**args)
    with pytest.raises(AddonsArgumentError, match=match):
        layer(np.zeros((2, 4), np.float32))


def test_serial_dense_config_round_trips():
    layer = ipu_layers.SerialDense(4, 2, "input_columns", activation="tanh", input_dim=3)
    clone = ipu_layers.SerialDense.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    assert clone.serialization_dimension == "input_columns"
