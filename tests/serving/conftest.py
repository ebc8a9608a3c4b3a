"""Exports shared by the `ipu.serving` tests, written once per module into temporary
directories (never committed), on a configured 1-IPU device."""
import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import configured_ipus

RNG = np.random.default_rng(31)


@pytest.fixture(scope="module")
def one_ipu():
    yield from configured_ipus(1)


class Dense:
    """x -> relu(x @ w + b) and its row sums: two outputs, variables frozen at export."""

    def __init__(self, inputs=6, units=4, batch=3):
        self.w = tf.Variable(RNG.normal(size=(inputs, units)).astype(np.float32))
        self.b = tf.Variable(RNG.normal(size=(units,)).astype(np.float32))
        self.signature = [tf.TensorSpec([batch, inputs], tf.float32)]

        @tf.function(input_signature=self.signature)
        def predict_step(x):
            y = tf.nn.relu(tf.matmul(x, self.w) + self.b)
            return y, tf.reduce_sum(y, axis=1)

        self.predict_step = predict_step

    def example(self, seed=0):
        shape = self.signature[0].shape.as_list()
        return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.fixture(scope="module")
def dense():
    return Dense()


@pytest.fixture(scope="module")
def dense_export(one_ipu, dense, tmp_path_factory):
    """(export dir, the runtime export_single_step returned) of `dense`."""
    from ipu_keras import serving

    path = str(tmp_path_factory.mktemp("serving") / "dense")
    runtime = serving.export_single_step(dense.predict_step, path, iterations=4)
    return path, runtime
