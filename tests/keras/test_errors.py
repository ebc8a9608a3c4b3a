"""Failures: unsupported ops, and fits interrupted in the middle of an execution.

An op the IPU cannot compile raises `UnsupportedOpError` naming the TensorFlow op and
the Keras layer before any step runs, with the weights untouched. A fit that fails or is
interrupted while an execution is staged or running leaves the weights (and the step
count) of the last completed execution, never half-written: they equal Keras' after
exactly that many steps.
"""
import numpy as np
import pytest
import tensorflow as tf
import keras

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import FeedError, UnsupportedOpError
from ipu_keras._src.keras import program as program_module
from tests.conftest import interrupt_on_call

from tests.keras.common import (
    BATCH, Recorder, assert_weights_equal, build_pair, compile_model, train_val,
)


class RealFFT(keras.layers.Layer):
    def call(self, inputs):
        return tf.abs(tf.signal.rfft(inputs))


class ComplexFFT(keras.layers.Layer):
    def call(self, inputs):
        return tf.math.real(tf.signal.fft(tf.cast(inputs, tf.complex64)))


def _spectral_model(layer_cls):
    keras.utils.set_random_seed(2)
    model = ipu.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                            keras.layers.Dense(16), layer_cls(name="spectrum"),
                            keras.layers.Dense(10, activation="softmax")])
    return compile_model(model)


@pytest.mark.parametrize("method", ["fit", "evaluate", "predict"])
def test_unsupported_op_names_the_op_and_the_layer(method):
    model = _spectral_model(RealFFT)
    initial = model.get_weights()
    (x, y), _ = train_val()
    rec = Recorder()
    args = (x,) if method == "predict" else (x, y)
    with pytest.raises(UnsupportedOpError) as info:
        getattr(model, method)(*args, batch_size=BATCH, callbacks=[rec], verbose=0)
    error = info.value
    assert isinstance(error, NotImplementedError)
    assert error.op_type == "RFFT" and error.layer == "spectrum"
    assert "'RFFT'" in str(error) and "'spectrum'" in str(error)
    assert not any(h.endswith("_batch_end") for h, _ in rec.names())  # no step ran
    assert_weights_equal(model.get_weights(), initial, tolerance=T.EXACT)
    assert int(model.optimizer.iterations.numpy()) == 0


def test_complex_fft_is_reported_in_its_layer():
    model = _spectral_model(ComplexFFT)
    initial = model.get_weights()
    (x, y), _ = train_val()
    with pytest.raises(UnsupportedOpError) as info:
        model.fit(x, y, batch_size=BATCH, verbose=0)
    assert info.value.layer == "spectrum"
    # The first op the IPU cannot take: the FFT itself, or the cast to complex64 it needs.
    assert "FFT" in str(info.value) or "complex64" in str(info.value)
    assert_weights_equal(model.get_weights(), initial, tolerance=T.EXACT)


def _after_four_steps():
    """Keras' weights after the first 4 steps (one execution) of the same fit."""
    (x, y), _ = train_val()
    _, on_cpu = build_pair()
    on_cpu.fit(x[:4 * BATCH], y[:4 * BATCH], batch_size=BATCH, shuffle=False, verbose=0)
    return on_cpu.get_weights()


@pytest.fixture(scope="module")
def after_four_steps():
    return _after_four_steps()


def test_interrupt_inside_an_execution_keeps_the_last_completed_one(
        monkeypatch, after_four_steps):
    """KeyboardInterrupt while the device pulls the sixth batch (step 2 of execution 2)."""
    interrupt_on_call(monkeypatch, program_module.StagedInfeed, "pull", 6)
    (x, y), _ = train_val()
    on_ipu, _ = build_pair()
    with pytest.raises(KeyboardInterrupt):
        on_ipu.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    assert int(on_ipu.optimizer.iterations.numpy()) == 4
    assert_weights_equal(on_ipu.get_weights(), after_four_steps)
    # Nothing is left half-done: the model trains on from there.
    monkeypatch.undo()
    on_ipu.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert int(on_ipu.optimizer.iterations.numpy()) == 4 + 7


def _failing_generator(x, y):
    for i in range(5):
        yield x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
    raise ValueError("the data source broke")


def _failing_dataset(x, y):
    """A tf.data pipeline whose map fails on the sixth batch (read by the raw-op path)."""
    x = x.copy()
    x[5 * BATCH, 0, 0, 0] = np.nan
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    return data.map(lambda a, b: (tf.debugging.check_numerics(a, "the data source broke"), b))


@pytest.mark.parametrize("source", [_failing_generator, _failing_dataset],
                         ids=["generator", "tf.data"])
def test_failing_input_pipeline_keeps_the_last_completed_execution(after_four_steps, source):
    (x, y), _ = train_val()
    on_ipu, _ = build_pair()
    with pytest.raises(FeedError, match="the data source broke") as info:
        on_ipu.fit(source(x, y), steps_per_epoch=7, verbose=0)
    assert "Received: error" in str(info.value)
    # The fifth batch was staged for the second execution, which never ran.
    assert int(on_ipu.optimizer.iterations.numpy()) == 4
    assert_weights_equal(on_ipu.get_weights(), after_four_steps)
